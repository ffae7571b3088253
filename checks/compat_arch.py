"""torch-arch-support and gpu-eol: does the installed torch, or any current torch, carry kernels for each GPU?"""

from __future__ import annotations

import dataclasses
from typing import Any

from envdoctor import views
from envdoctor.knowledge import compat, recommend, remedies, versions
from envdoctor.knowledge.compat import CC, ArchList

from ..kit import Remediation, evidence, fail, ok, read_first, skip, warn
from ..model import Facts, Finding
from ..registry import check, owner_of
from ._torch import (
    PREVIOUS,
    Gpu,
    TorchBuild,
    _as_of,
    _companion_extras,
    _cuda_unavailable,
    _driver_text,
    _exe,
    _gpus_without_any_wheel,
    _python,
    _torch_dist,
    gpus,
    installed_arch,
    torch_build,
)

# ---------------------------------------------------------------------------------------------
# torch-arch-support

def _certain_absent(build: TorchBuild, arch: ArchList, cc: CC) -> bool:
    """True when no variant of this CUDA could carry code for ``cc`` (measured toolkit targets), or
    when the list came from torch itself or a verified row."""
    if arch.origin == "torch" or arch.verified:
        return True
    rng = compat.toolkit_range(build.cuda or "")
    if rng is None:
        return False
    lo, hi = rng
    return (cc < lo) or (cc > hi and not arch.ptx)


def _toolkit_cannot_target(facts: Facts, build: TorchBuild, devices: list[Gpu]) -> Finding | None:
    """With no arch list for this torch (release not in the table, get_arch_list() not read), the CUDA
    it was built with can still prove the point: a toolkit that cannot compile SASS for a GPU's CC
    (newer than its highest target, or dropped below its lowest) cannot have put kernels for it in
    any build. That is proof, so it may ``fail``; None when no GPU is outside the toolkit's range."""
    row = compat.toolkit_row(build.cuda or "")
    rng = compat.toolkit_range(build.cuda or "")
    if row is None or rng is None:
        return None
    lo, hi = rng
    eol = {g.index for g in _gpus_without_any_wheel(facts)}  # gpu-eol fails these: no wheel at all runs there
    bad = [g for g in devices if g.cc and (g.cc > hi or g.cc < lo) and g.index not in eol]
    if not bad:
        return None
    ev = evidence(facts, "torch.version", "torch.cuda_version", "nvml.gpus", "torch.devices")
    first = bad[0]
    assert first.cc is not None
    cc_s = versions.sm(first.cc)
    newer = first.cc > hi
    who = ", ".join(f"{g.label()} is {versions.sm(g.cc)}" for g in bad if g.cc)
    row_src = compat.said(row["source"], bool(row["verified"]))
    why = (f"CUDA {build.cuda} compiles SASS for {versions.sm(lo)}…{versions.sm(hi)} only (toolkit targets: {row_src}), "
           f"so no build of torch {build.version} can carry kernels for {cc_s}"
           + (" — the GPU's architecture is newer than the toolkit; a PTX fallback, if the build has one, is only "
              "JIT-compiled and torch reports the GPU as not compatible" if newer else
              " — the toolkit dropped this architecture"))
    ccs = [g.cc for g in devices if g.cc]
    rec = recommend.recommend(ccs, views.driver_cuda(facts), _python(facts), views.platform_of(facts),
                           current=build.public or None, exclude={(build.public, build.variant or "")},
                           extras=_companion_extras(facts))
    if rec:
        drv = _driver_text(facts)
        drv = drv or rec.driver_note
        arrow = f" → {rec.command(_exe(facts))}" + (f" ({drv})" if drv else "")
        remedy = Remediation(f"Reinstall torch from the {rec.variant} index: {rec.reason}."
                             + ("" if rec.verified else f" Not confirmed {_as_of()}: check "
                                "torch.cuda.get_arch_list() after installing."), (rec.command(_exe(facts)),), (PREVIOUS,),
                             sources=rec.sources())
    else:
        arrow = ""
        remedy = Remediation(f"Install a torch build made with a CUDA toolkit that targets {cc_s} (see the previous "
                             f"versions page), or build torch from source with TORCH_CUDA_ARCH_LIST="
                             f"{versions.cc_text(first.cc)}.", (), (PREVIOUS,))
    detail = (f"{who}; {why}{arrow}. CUDA kernels fail with \"no kernel image is available for execution on the "
              f"device\" although torch.cuda.is_available() is True. torch {build.version}'s own arch list was not "
              f"read and {compat.not_in_table(f'torch {build.version}')}. {_as_of()}")
    return fail(f"torch {build.version} (CUDA {build.cuda}) has no kernels for {first.label()} ({cc_s})",
                detail=detail, evidence=ev, gpus=[g.index for g in bad], remedy=remedy)


_NO_KERNEL_IMAGE = "no kernel image is available for execution on the device"
#: torch's _check_capability: "Found GPU0 … which is of cuda capability 5.0. PyTorch no longer supports
#: this GPU because it is too old." — the installed build's lowest target is above the GPU.
_TOO_OLD_FOR_BUILD = "PyTorch no longer supports this GPU"


def _cuda_says_no_kernel_image(facts: Facts) -> Finding | None:
    """CUDA's own "no kernel image is available for execution on the device" (cudaErrorNoKernelImageForDevice)
    next to a GPU of known capability, with no arch list or torch version to compare: the binary has
    no code for that GPU, and the table can still name a wheel that has."""
    texts = [str(t) for t in facts.value("torch.cuda_available_messages") or ()]
    too_old = any(_TOO_OLD_FOR_BUILD in t for t in texts)
    if not any(_NO_KERNEL_IMAGE in t for t in texts) and not too_old:
        return None
    eol = {g.index for g in _gpus_without_any_wheel(facts)}  # gpu-eol owns those: no wheel to install
    devices = [g for g in gpus(facts) if g.cc and g.index not in eol]
    if not devices:
        return None
    ev = evidence(facts, "torch.cuda_available_messages", "torch.devices", "nvml.gpus", "torch.version")
    ccs = [g.cc for g in devices if g.cc]
    rec = recommend.recommend(ccs, views.driver_cuda(facts), _python(facts), views.platform_of(facts),
                           current=_torch_dist(facts)[0], extras=_companion_extras(facts))
    who = ", ".join(f"{g.label()} is {versions.sm(g.cc)}" for g in devices if g.cc)
    drv = _driver_text(facts) or (rec.driver_note if rec else "")
    arrow = f" → {rec.command(_exe(facts))}" + (f" ({drv})" if drv else "") if rec else ""
    said = (f"torch said \"{_TOO_OLD_FOR_BUILD} because it is too old\": this build's lowest architecture is above "
            "the GPU's" if too_old else f"CUDA reported \"{_NO_KERNEL_IMAGE}\": the build carries neither SASS nor PTX "
            "that runs on this architecture")
    return fail(f"The installed torch has no kernels for {devices[0].label()} ({versions.sm(devices[0].cc)})",  # type: ignore[arg-type]
                detail=f"{who}; {said}{arrow}. Other wheels still carry it (see gpu-eol). {_as_of()}",
                evidence=ev, gpus=[g.index for g in devices],
                remedy=Remediation(f"Reinstall torch from the {rec.variant} index: {rec.reason}." if rec else
                                   "Install a torch build whose get_arch_list() includes this GPU's sm_XY.",
                                   (rec.command(_exe(facts)),) if rec else (), (PREVIOUS,)))


def _build_to_judge(facts: Facts, ev: dict[str, Any]) -> TorchBuild | Finding:
    """torch's build; or, with no version read, torch's own "supports CUDA capabilities sm_…" list is
    enough to judge (only CUDA builds print it); or the finding that ends the judgement."""
    build = torch_build(facts)
    reported = compat.parse_arch_list(facts.value("torch.arch_list") or [])
    if (build is None or not build.cuda) and reported.targets:
        cuda = facts.value("torch.cuda_version")
        return (TorchBuild(build.version, build.public, build.variant, str(cuda) if cuda else None) if build
                else TorchBuild(_unversioned(cuda), "", None, str(cuda) if cuda else None))
    if build is None and (said := _cuda_says_no_kernel_image(facts)):
        return said
    if build is None or not build.cuda:
        return skip("Not a CUDA build of torch (or torch was not read)", evidence=ev)
    return build


def _classify(arch: ArchList, devices: list[Gpu], cuda: str | None) -> tuple[list[Gpu], list[str], list[str]]:
    """(GPUs the build cannot run on, GPUs it runs on only through PTX JIT, why the PTX cannot reach)."""
    bad: list[Gpu] = []
    jit: list[str] = []
    beyond: list[str] = []
    for g in devices:
        if g.cc is None:
            continue
        sup = compat.runs_on(arch, g.cc, compat.reach_of(arch, cuda))
        if not sup.runs:
            bad.append(g)
            if sup.reach:
                beyond.append(f"{g.label()}: {sup.explain(g.cc)}")
        elif sup.how == "ptx":
            jit.append(f"{g.label()}: {sup.explain(g.cc)}")
    return bad, jit, beyond


def _runs_everywhere(build: TorchBuild, arch: ArchList, devices: list[Gpu], jit: list[str], origin: str,
                     ev: dict[str, Any]) -> Finding:
    unknown = [g for g in devices if g.cc is None]  # a GPU whose architecture was not read
    note = f" Unknown compute capability for: {', '.join(g.label() for g in unknown)} " \
           f"({compat.not_in_table('their product names')})." if unknown else ""
    if unknown and len(unknown) == len(devices):
        # No GPU's architecture is known: there is nothing to hold the arch list against.
        return skip(f"The GPUs' compute capability is not known (torch {build.version} carries {arch.span()})",
                    detail=note.strip(), evidence=ev)
    if jit:
        return warn(f"torch {build.version} runs on the GPU only through PTX JIT",
                    detail="; ".join(jit) + f". The first CUDA call compiles kernels (minutes), cached in "
                    f"~/.nv/ComputeCache; a wheel with SASS for the GPU avoids it. Source: {origin}.{note}",
                    evidence=ev)
    return ok(f"torch {build.version} has kernels for every GPU ({arch.span()})",
              detail=f"Source: {origin}.{note}".strip(), evidence=ev)


def _reinstall(facts: Facts, build: TorchBuild, devices: list[Gpu], first: Gpu) -> tuple[str, Remediation]:
    """(the "→ command" for the detail, the remedy): the nearest wheel that carries every GPU, else the
    last release that did, else a source build."""
    assert first.cc is not None
    cc_s = versions.sm(first.cc)
    plat = views.platform_of(facts)
    rec = recommend.recommend([g.cc for g in devices if g.cc], views.driver_cuda(facts), _python(facts), plat,
                              current=build.public or None, exclude={(build.public, build.variant or "")},
                              extras=_companion_extras(facts))
    if rec:
        drv = _driver_text(facts) or rec.driver_note
        arrow = f" → {rec.command(_exe(facts))}" + (f" ({drv})" if drv else "")
        text = (f"Reinstall torch from the {rec.variant} index: {rec.reason}."
                + ("" if rec.verified else f" Not confirmed {_as_of()}: check "
                   "torch.cuda.get_arch_list() after installing."))
        return arrow, Remediation(text, (rec.command(_exe(facts)),), (PREVIOUS,), sources=rec.sources())
    last = compat.last_release_for(first.cc, plat)
    if last:
        text = (f"No wheel that fits this driver and Python carries {cc_s}; the newest release with wheels for it "
                f"is torch {last[0]}+{last[1]} (see gpu-eol), or build torch from source with "
                f"TORCH_CUDA_ARCH_LIST={versions.cc_text(first.cc)}.")
        return "", Remediation(text, (recommend.Recommendation(last[0], last[1], "", True).command(_exe(facts)),),
                               (PREVIOUS,))
    text = (f"{compat.not_in_table(f'a wheel for {cc_s}')}; build torch from source with "
            f"TORCH_CUDA_ARCH_LIST={versions.cc_text(first.cc)}, or try the newest release's highest CUDA index.")
    return "", Remediation(text, (), (remedies.TORCH_FROM_SOURCE,))


@check("torch-arch-support", "The installed torch has kernels for every GPU",
       needs=("torch.version", "torch.arch_list", "nvml.gpus", "torch.devices"))
def torch_arch_support(facts: Facts) -> Finding | list[Finding]:
    # torch's own arch list decides, else the table's row for its version; NVML's GPUs, else torch's.
    ev = read_first(facts, evidence(facts, "torch.arch_list", "nvml.gpus", "torch.version", "torch.devices"))
    build = _build_to_judge(facts, ev)
    if isinstance(build, Finding):
        return build
    devices = gpus(facts)
    if not devices:
        return skip("No GPU was read", evidence=ev)
    arch = installed_arch(facts, build)
    if arch is None:
        proof = _toolkit_cannot_target(facts, build, devices)
        if proof is not None:
            return proof
        return skip(f"Architectures of torch {build.version} unknown",
                    detail=compat.not_in_table(f"torch {build.version} ({views.platform_of(facts)})")
                    + " and torch did not report get_arch_list().", evidence=ev)
    origin = ("torch.cuda.get_arch_list()" if arch.origin == "torch"
              else f"the table ({compat.said(arch.source, arch.verified)}) {_as_of()}")
    bad, jit, beyond = _classify(arch, devices, build.cuda)
    eol = {g.index for g in _gpus_without_any_wheel(facts)}
    if bad and all(g.index in eol for g in bad):
        # No wheel of any release runs there: a reinstall cannot help, and gpu-eol says so.
        return skip(f"{', '.join(g.label() for g in bad)}: no torch wheel runs on it; judged by "
                    f"{owner_of('nvml.gpus:no-torch-wheel')}",
                    detail=f"torch {build.version} carries {arch.span()}.", evidence=ev)
    bad = [g for g in bad if g.index not in eol]
    if not bad:
        return _runs_everywhere(build, arch, devices, jit, origin, ev)
    first = bad[0]
    assert first.cc is not None
    cc_s = versions.sm(first.cc)
    newest_sass = max(arch.sass) if arch.sass else None
    direction = ("newer than anything in this wheel" if newest_sass and first.cc > newest_sass
                 else "dropped from (or never in) this wheel")
    who = ", ".join(f"{g.label()} is {versions.sm(g.cc)}" for g in bad if g.cc)
    head = (f"{who}; torch {build.version} carries {arch.span()} and no PTX that can run on it"
            if not arch.ptx else f"{who}; torch {build.version} carries {arch.describe()}")
    arrow, remedy = _reinstall(facts, build, devices, first)
    detail = (f"{head}{arrow}. " + (f"{'; '.join(beyond)}. " if beyond else "") +
              f"The GPU's architecture is {direction}: CUDA kernels fail with \"no kernel image is "
              f"available for execution on the device\" although torch.cuda.is_available() is True. "
              f"Arch list from {origin}.")
    if any(compat.is_integrated(g.cc, g.name) for g in bad if g.cc):
        return warn(f"torch {build.version} has no kernels for {first.label()} (Jetson/integrated GPU)",
                    detail=detail + " Jetson modules need NVIDIA's JetPack builds of torch, not the "
                    "download.pytorch.org wheels.", evidence=ev, gpus=[g.index for g in bad],
                    remedy=Remediation("Install the torch wheel NVIDIA publishes for your JetPack release.", (),
                                       ("https://docs.nvidia.com/deeplearning/frameworks/install-pytorch-jetson-platform/index.html",)))
    certain = all(_certain_absent(build, arch, g.cc) for g in bad if g.cc)
    make = fail if certain else warn
    return make(f"torch {build.version} has no kernels for {first.label()} ({cc_s})", detail=detail, evidence=ev,
                gpus=[g.index for g in bad], remedy=remedy)


# ---------------------------------------------------------------------------------------------
# gpu-eol

_OTHER_OS: dict[str, compat.Platform] = {"windows_x86_64": "linux_x86_64", "linux_x86_64": "windows_x86_64"}
_OS_NAME = {"windows_x86_64": "Windows", "linux_x86_64": "Linux", "linux_aarch64": "Linux on ARM"}


def _no_wheel_remedy(facts: Facts, g: Gpu, arch_name: str, lowest: CC | None) -> Remediation:
    """What is still possible for a GPU no wheel of this OS ever carried: the last torch whose wheels
    for another OS do, a source build where a torch release was built with a toolkit that still
    targets the GPU, and always the CPU. Never a source build no toolkit can do (a GeForce 210)."""
    assert g.cc is not None
    plat = views.platform_of(facts)
    py = _exe(facts)
    newer = f"a GPU of {versions.sm(lowest)} or newer" if lowest else "a newer GPU"
    cpu = Remediation(f"Run torch on the CPU (the CPU build below), or use {newer}.",
                      (remedies.torch_install(py, recommend.cpu_build(None, _python(facts), plat), "cpu", force=False),),
                      (remedies.PYTORCH_GET_STARTED,))
    ways: list[Remediation] = []
    other = _OTHER_OS.get(plat)
    if other and (elsewhere := compat.last_release_for(g.cc, other)):
        version, variant = elsewhere
        ways.append(Remediation(f"Run it under {_OS_NAME[other]}: torch {version}+{variant} is the last release whose "
                                f"{_OS_NAME[other]} wheels carry {versions.sm(g.cc)} (none for {_OS_NAME.get(plat, plat)}).",
                                (remedies.elsewhere(f"on {_OS_NAME[other]}", remedies.torch_install(None, version, variant)),),
                                (PREVIOUS,)))
    build = compat.source_build_for(g.cc, plat)
    if build is not None:
        release, cuda = build
        ways.append(Remediation(f"Build torch {release} from source for {versions.sm(g.cc)} with the CUDA {cuda} toolkit "
                                f"(the newest release built with a CUDA that still targets {arch_name}).",
                                remedies.torch_source_build(versions.cc_text(g.cc), cuda, release,
                                                            windows=plat.startswith("windows")),
                                (remedies.TORCH_FROM_SOURCE,)))
    if not ways:
        oldest = compat.oldest_torch_cuda(plat)
        return dataclasses.replace(cpu, text=f"No torch build can use this GPU, not even one built from source: no "
                                   f"torch release was built with a CUDA toolkit that still targets {arch_name}"
                                   + (f" (the oldest CUDA torch was built with is {oldest})" if oldest else "")
                                   + f". {cpu.text}")
    return Remediation(alternatives=(*ways, cpu))

@check("gpu-eol", "Current torch releases still ship wheels for the GPU", needs=("nvml.gpus", "torch.devices"),
       owns=("nvml.gpus:no-torch-wheel",))
def gpu_eol(facts: Facts) -> Finding | list[Finding]:
    ev = read_first(facts, evidence(facts, "nvml.gpus", "torch.devices", "torch.version"))
    devices = [g for g in gpus(facts) if g.cc]
    if not devices:
        return skip("No GPU compute capability was read", evidence=ev)
    plat = views.platform_of(facts)
    current = compat.current_release()
    out: list[Finding] = []
    seen: set[CC] = set()
    for g in devices:
        assert g.cc is not None
        if g.cc in seen:
            continue
        seen.add(g.cc)
        same = [d.index for d in devices if d.cc == g.cc]
        newest = compat.supported_by_newest(g.cc, plat)
        arch = compat.architecture(g.cc)
        arch_name = arch["name"] if arch else "this architecture"
        if newest is None:
            out.append(skip(f"Support for {g.label()} unknown", detail=compat.not_in_table(f"torch {current} ({plat})"),
                            evidence=ev))
            continue
        if newest:
            out.append(ok(f"torch {current} still ships wheels for {g.label()} ({versions.sm(g.cc)})",
                          detail=_as_of(), evidence=ev, gpus=same))
            continue
        last = compat.last_release_for(g.cc, plat)
        branch = arch.get("last_driver_branch") if arch else None
        drv_note = (f" NVIDIA's last driver branch for {arch_name} is R{branch}"
                    + ("" if arch and arch.get("verified") else f" ({compat.said(str(arch.get('source', '')), False)})"
                       if arch else "") + "." if branch else "")
        if last is None:
            info = compat.gpu_by_name(g.name) if g.cc_from == "table" and g.name else None
            unverified = bool(info is not None and not info.verified)
            make = warn if unverified and not _cuda_unavailable(facts) else fail
            last_cuda = arch.get("last_cuda") if arch else None
            cur_arch = [a for v in compat.release_variants(current or "", plat) if versions.variant_cuda(v)
                        and (a := compat.arch_list(current or "", v, plat)) is not None]
            lowest = min((cc for a in cur_arch for cc in a.sass), default=None)
            out.append(make(
                f"No torch wheel runs on {g.label()} ({arch_name}, {versions.sm(g.cc)})",
                detail=f"No current torch wheel supports {g.label()}: torch {current} carries "
                       f"{versions.sm(lowest) + ' and newer' if lowest else 'newer architectures only'}, and no release "
                       f"in the table ever carried {versions.sm(g.cc)} (CC {versions.cc_text(g.cc)}), so there is no older "
                       f"release to pin either."
                       + (f" The last CUDA toolkit able to target {arch_name} is {last_cuda}." if last_cuda else "")
                       + drv_note
                       + (f" The GPU's compute capability comes from the table ({compat.said(info.source, False) if info else ''})"
                          + ("; torch.cuda.is_available() is False here, consistent with it." if make is fail else ".")
                          if unverified else "")
                       + f" {_as_of()}",
                evidence=ev, gpus=same, remedy=_no_wheel_remedy(facts, g, arch_name, lowest)))
            continue
        version, variant = last
        cmd = recommend.Recommendation(version, variant, "", True, extras=_companion_extras(facts)).command(_exe(facts))
        out.append(warn(
            f"{g.label()} ({arch_name}, {versions.sm(g.cc)}) is end of life for torch: last wheels in torch {version}",
            detail=f"No wheel of torch {current} carries {versions.sm(g.cc)}; the newest release that does is torch "
                   f"{version} ({variant}). Pin it so upgrades do not break this machine.{drv_note} {_as_of()}",
            evidence=ev, gpus=same,
            remedy=Remediation(f"Stay on torch {version}+{variant} (pin torch=={version} in a constraints file).",
                               (cmd,), (PREVIOUS,))))
    return out


def _unversioned(cuda: object) -> str:
    """How a title names a torch whose version the text does not show (its CUDA was): never "(version not read)",
    an unknown is never a word of a finding."""
    return f"built for CUDA {cuda}" if cuda else "(this build)"
