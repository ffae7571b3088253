"""Compatibility checks: do driver, GPU, torch wheel, its bundled libraries and companions fit together?

Each check judges facts (from a live probe or a parsed paste) against the table in
``envdoctor/data/compat.json`` through :mod:`envdoctor.compat`. What the installed torch says about
itself (``torch.arch_list``) wins over the table. When the table decided, the finding's detail
carries its ``as_of`` date; a version the table does not know yields a note, never a ``fail``, and a
table row marked unverified can at most ``warn``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import compat, messages
from packaging.version import Version

from ..compat import CC, ArchList
from ..kit import Remediation, evidence, fail, ok, skip, warn
from ..model import Facts, Finding, Status
from ..registry import check
from ._common import library_errors, outside_wheel, torch_variant

GET_STARTED = "https://pytorch.org/get-started/locally/"
PREVIOUS = "https://pytorch.org/get-started/previous-versions/"
DRIVERS = "https://www.nvidia.com/Download/index.aspx"
MVC = "https://docs.nvidia.com/deploy/cuda-compatibility/"


# ---------------------------------------------------------------------------------------------
# Reading the facts

@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    cc: CC | None
    cc_from: str  # "nvml", "torch" or "table"

    def label(self) -> str:
        return self.name or f"GPU {self.index}"


_GPUS: list[tuple[Facts, list[Gpu]]] = []  # the last answer, by Facts identity: several checks ask


def gpus(facts: Facts) -> list[Gpu]:
    """GPUs with their compute capability: NVML's, else torch's, else the table's by product name."""
    if _GPUS and _GPUS[0][0] is facts:
        return list(_GPUS[0][1])
    out = _read_gpus(facts)
    _GPUS[:] = [(facts, out)]
    return list(out)


def _read_gpus(facts: Facts) -> list[Gpu]:
    torch_devs = [d for d in (facts.value("torch.devices") or []) if isinstance(d, Mapping)]
    by_name = {str(d.get("name")): compat.parse_cc(d.get("capability")) for d in torch_devs if d.get("name")}
    out: list[Gpu] = []
    nvml = [g for g in (facts.value("nvml.gpus") or []) if isinstance(g, Mapping)]
    for pos, g in enumerate(nvml):
        name = str(g.get("name") or "")
        cc, origin = compat.parse_cc(g.get("compute_capability")), "nvml"
        if cc is None and by_name.get(name):
            cc, origin = by_name[name], "torch"
        if cc is None and name:
            cc, origin = compat.cc_for_gpu(name), "table"
        out.append(Gpu(_int(g.get("index"), pos), name, cc, origin))
    if out:
        return out
    for pos, d in enumerate(torch_devs):
        name = str(d.get("name") or "")
        cc, origin = compat.parse_cc(d.get("capability")), "torch"
        if cc is None and name:
            cc, origin = compat.cc_for_gpu(name), "table"
        out.append(Gpu(_int(d.get("index"), pos), name, cc, origin))
    return out


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


@dataclass(frozen=True)
class TorchBuild:
    version: str  # "2.6.0+cu126"
    public: str  # "2.6.0"
    variant: str | None  # "cu126", "cpu", None
    cuda: str | None  # "12.6"


def torch_build(facts: Facts) -> TorchBuild | None:
    ver = facts.value("torch.version")
    if not ver or compat.version(ver) is None:
        return None
    text = str(ver)
    cuda = facts.value("torch.cuda_version")
    if cuda is not None and compat.version(str(cuda)) is None:
        cuda = None  # a hand-edited or hostile report: not a version, so not used
    variant = torch_variant(facts)
    if not cuda and variant:
        cuda = compat.variant_cuda(variant)
    return TorchBuild(text, text.split("+", 1)[0], variant, str(cuda) if cuda else None)


def installed_arch(facts: Facts, build: TorchBuild) -> ArchList | None:
    """What the installed torch reports (``get_arch_list()``), else the table's list for its build.

    ``get_arch_list()`` is empty whenever CUDA is unavailable, so an empty list means "unknown"."""
    reported = facts.value("torch.arch_list")
    if reported:
        parsed = compat.parse_arch_list(reported)
        if parsed.targets:
            return parsed
    if build.variant:
        return compat.arch_list(build.public, build.variant, compat.platform_of(facts))
    return None


def _python(facts: Facts) -> str | None:
    return facts.value("python.version")


def _pip(facts: Facts, command: str) -> str:
    """``command`` with a leading ``pip`` run as the target interpreter's (``/opt/venv/bin/python -m pip``),
    so it installs where torch lives, not into whatever ``pip`` is first on PATH."""
    exe = facts.value("python.executable")
    if not exe:
        return command
    command = command.replace(" && pip ", f" && {exe} -m pip ")
    return f"{exe} -m {command}" if command.startswith("pip ") else command


_PACKAGES: list[tuple[Facts, dict[str, str]]] = []  # the last answer, by Facts identity: several checks ask


def _lower(name: str) -> str:
    return name if name.islower() else name.lower()  # lower() copies even a lower-case name


def _packages(facts: Facts) -> dict[str, str]:
    """Distribution name (lower-case) -> version. Shared between checks: read it, never change it."""
    if _PACKAGES and _PACKAGES[0][0] is facts:
        return _PACKAGES[0][1]
    pkgs = facts.value("python.packages") or {}
    out = _lowered(pkgs) if hasattr(pkgs, "items") else {}
    _PACKAGES[:] = [(facts, out)]
    return out


def _lowered(pkgs: Mapping[Any, Any]) -> dict[str, str]:
    try:
        # Names already lower-case and versions strings (what the probe writes): one copy in C.
        names = "\0".join(pkgs.keys())
        "".join(pkgs.values())
        if names == names.lower():
            out = pkgs.copy() if hasattr(pkgs, "copy") else dict(pkgs)
            return out if isinstance(out, dict) else dict(out)
    except TypeError:
        pass
    return {_lower(str(k)): str(v) for k, v in pkgs.items()}


def _companion_extras(facts: Facts) -> tuple[str, ...]:
    """Reinstall torchvision/torchaudio with torch (unpinned: their exact torch pin picks the match)."""
    pkgs = _packages(facts)
    return tuple(p for p in ("torchvision", "torchaudio") if p in pkgs)


def _as_of() -> str:
    return f"(compatibility table as of {compat.as_of()})"


def _driver_text(facts: Facts) -> str:
    drv = compat.driver_version(facts)
    cap = compat.driver_cuda(facts)
    if cap is None:
        return ""
    cuda = compat.cuda_from_int(cap)
    return f"your driver {drv} supports CUDA {cuda}" if drv else f"your driver supports CUDA {cuda}"


# ---------------------------------------------------------------------------------------------
# driver-too-old

def upgrade_text(minimum: str | None) -> str:
    return f"upgrade the NVIDIA driver to ≥ {minimum}" if minimum else "upgrade the NVIDIA driver"


def driver_upgrade_commands(facts: Facts, minimum: str | None) -> tuple[str, ...]:
    """The commands that install a driver ≥ ``minimum``: the branch to install (the newest verified
    branch at or above the minimum that still supports every GPU here) and how to confirm it."""
    if str(facts.value("host.os") or "") == "Windows":
        return ("nvidia-smi   # after installing the driver from nvidia.com: 'CUDA Version' must cover torch's CUDA",)
    need = compat.version(minimum) if minimum else None
    # Newer branches drop old GPUs (R470 was Kepler's last, R580 Maxwell/Pascal/Volta's): cap there.
    caps = [int(a["last_driver_branch"]) for g in gpus(facts)
            if g.cc and (a := compat.architecture(g.cc)) and a.get("last_driver_branch")]
    cap = min(caps) if caps else None
    rows = [r for r in compat.data()["driver_branches"]["rows"]
            if (need is None or Version(f"{r['branch']}.999") >= need) and (cap is None or r["branch"] <= cap)]
    if not rows:
        return ("nvidia-smi   # no driver branch both supports this GPU and is new enough: see gpu-eol",)
    pick = max((r for r in rows if r.get("verified")), key=lambda r: r["branch"], default=None) or \
        max(rows, key=lambda r: r["branch"])
    branch = pick["branch"]
    return (f"sudo apt install nvidia-driver-{branch}   # Ubuntu/Debian: branch R{branch}"
            + (f" (≥ {minimum})" if minimum else "")
            + ("" if pick.get("verified") else ", unverified table row")
            + (f"; R{cap} is the last branch for this GPU" if cap is not None else "; or: sudo ubuntu-drivers install"),
            "sudo reboot   # the new kernel module loads at boot",
            "nvidia-smi   # 'Driver Version' and the 'CUDA Version' it supports")


def _cuda_build(facts: Facts) -> TorchBuild | None:
    """torch's build, or, when its version was not read, a build known only by ``torch.cuda_version``
    (a paste that shows "CUDA used to build PyTorch" but no readable version): enough for the driver."""
    build = torch_build(facts)
    if build is not None:
        return build
    cuda = facts.value("torch.cuda_version")
    if cuda and compat.version(cuda) is not None:
        return TorchBuild("(version not read)", "", None, str(cuda))
    return None


def _cuda_unavailable(facts: Facts) -> bool:
    """torch itself reported that CUDA does not work (``torch.cuda.is_available()`` False)."""
    return facts.value("torch.cuda_available") is False


def _gpus_without_any_wheel(facts: Facts) -> list[Gpu]:
    """GPUs that no torch wheel in the table runs on (gpu-eol's fail): a driver upgrade cannot help them."""
    plat = compat.platform_of(facts)
    return [g for g in gpus(facts) if g.cc and compat.supported_by_newest(g.cc, plat) is False
            and compat.last_release_for(g.cc, plat) is None]


def _image_needs_newer_cuda(facts: Facts) -> Finding | None:
    """The NVIDIA container runtime refused an image: "unsatisfied condition: cuda>=12.4"."""
    need = facts.value("container.cuda_requirement")
    need_driver = facts.value("container.driver_requirement")
    if need_driver and compat.version(need_driver):
        drv = compat.driver_version(facts)
        ev = evidence(facts, "container.driver_requirement", "nvml.driver_version")
        return fail(f"The host driver {drv or ''} is older than the container image needs (≥ {need_driver})".replace("  ", " "),
                    detail=f"The image's start-up check: \"This container was built for NVIDIA Driver Release "
                           f"{need_driver} or later, but version {drv} was detected\" — its CUDA runtime needs that "
                           "driver (forward compatibility covers only data-center GPUs).", evidence=ev,
                    remedy=Remediation(f"Upgrade the host driver to ≥ {need_driver}, or use an older image release "
                                       "built for the installed driver (the NGC support matrix lists each release's "
                                       "driver).", ("nvidia-smi   # the driver version and the CUDA it supports",),
                                       ("https://docs.nvidia.com/deeplearning/frameworks/support-matrix/index.html",
                                        DRIVERS)))
    if not need or compat.version(need) is None:
        return None
    ev = evidence(facts, "container.cuda_requirement", "cuda.driver_version", "nvml.driver_version")
    driver = compat.min_driver(str(need))
    floor = driver.minimum or driver.floor
    cap = compat.driver_cuda(facts)
    have = f" (the host driver supports CUDA {compat.cuda_from_int(cap)})" if cap else ""
    return fail(f"The host driver is too old for this container image (it needs CUDA ≥ {need})",
                detail=f"The NVIDIA container runtime refused to start the container: its image declares "
                       f"cuda>={need}{have}. The image's CUDA runtime needs a driver that supports it"
                       + (f" (≥ {floor} on Linux{'' if driver.verified else ', unverified row'})" if floor else "")
                       + f". {_as_of()}", evidence=ev,
                remedy=Remediation(f"Upgrade the host driver" + (f" to ≥ {floor}" if floor else "") + ", or run an "
                                   "image tag built for the CUDA the driver supports (nvidia-smi's 'CUDA Version').",
                                   ("nvidia-smi   # 'CUDA Version' = the newest image CUDA this driver runs",
                                    "docker run --gpus all nvidia/cuda:<that version>-base-ubuntu22.04 nvidia-smi"),
                                   (DRIVERS,)))


def _runtime_says_driver_too_old(facts: Facts) -> Finding | None:
    """CUDA error 35, "CUDA driver version is insufficient for CUDA runtime version": the runtime the
    program loaded is newer than the driver supports."""
    init = facts.value("cuda.init")
    if not isinstance(init, Mapping) or init.get("code") != 35:
        return None
    if facts.value("container.gpus_requested") is False:
        return None  # a container started without GPUs gets no driver: container-gpu says so
    ev = evidence(facts, "cuda.init", "nvml.driver_version", "torch.version", "container.cuda_requirement")
    return fail("The NVIDIA driver is too old for the CUDA runtime in use (error 35)",
                detail="\"CUDA driver version is insufficient for CUDA runtime version\": the program (or container "
                       "image) brings a CUDA runtime newer than the driver supports. Compare nvidia-smi's 'CUDA "
                       f"Version' with the CUDA the program was built for. {_as_of()}", evidence=ev,
                remedy=Remediation("Upgrade the driver to one that supports the program's CUDA, or use a build of the "
                                   "program (torch wheel, container image) made for the CUDA the driver supports.",
                                   ("nvidia-smi   # 'CUDA Version' = the newest CUDA runtime this driver runs",),
                                   (DRIVERS, PREVIOUS)))


def _torch_says_driver_too_old(facts: Facts) -> Finding | None:
    """torch's own "The NVIDIA driver on your system is too old (found version 11040)" without the
    torch version around it: torch has compared its CUDA with the driver's and said no. The
    driver's CUDA is in the message, so the remedy can still name a wheel that runs on it."""
    texts = [str(t) for t in facts.value("torch.cuda_available_messages") or ()]
    if not any("driver on your system is too old" in t for t in texts):
        return None
    cap = facts.value("cuda.driver_version")
    if not isinstance(cap, int) or cap <= 0:
        return None
    have = compat.cuda_from_int(cap)
    ev = evidence(facts, "cuda.driver_version", "torch.cuda_available_messages", "python.packages")
    installed, _ = _torch_dist(facts)
    rec = compat.recommend([g.cc for g in gpus(facts) if g.cc], cap, _python(facts), compat.platform_of(facts),
                           current=installed, extras=_companion_extras(facts))
    alt = f"or install torch {rec.torch}+{rec.variant}, built for a CUDA this driver runs: {rec.reason}" if rec else ""
    return fail(f"The NVIDIA driver is too old for the installed torch (the driver supports CUDA {have})",
                detail=f"torch said so itself: \"The NVIDIA driver on your system is too old (found version {cap})\": the "
                       f"driver supports CUDA up to {have}, and this torch was built for a newer CUDA. {_as_of()}",
                evidence=ev, remedy=Remediation(
                    "Either upgrade the NVIDIA driver to one that supports torch's CUDA (nvidia-smi then shows a "
                    f"higher 'CUDA Version')" + (f", {alt}." if rec else "."),
                    ((_pip(facts, rec.command()),) if rec else ()) + driver_upgrade_commands(facts, None),
                    (DRIVERS, PREVIOUS)))


@check("driver-too-old", "The NVIDIA driver is new enough for the CUDA torch was built with",
       needs=("torch.version", "torch.cuda_version", "nvml.cuda_driver_version", "nvml.driver_version"))
def driver_too_old(facts: Facts) -> Finding | list[Finding]:
    found = _driver_too_old(facts)
    listed = [found] if isinstance(found, Finding) else list(found)
    # CUDA error 35 says it outright; cuda-init leaves it to this check, so it must not get lost.
    if not any(f.status is Status.FAIL for f in listed) and (said := _runtime_says_driver_too_old(facts)):
        return [*[f for f in listed if f.status is not Status.SKIP], said]
    return found


def _driver_too_old(facts: Facts) -> Finding | list[Finding]:
    ev = evidence(facts, "torch.version", "torch.cuda_version", "nvml.driver_version", "nvml.cuda_driver_version",
                  "cuda.driver_version", "torch.cuda_available")
    if image := _image_needs_newer_cuda(facts):
        return image
    build = _cuda_build(facts)
    if (build is None or not build.cuda) and (said := _torch_says_driver_too_old(facts)):
        return said
    if build is None or not build.cuda:
        return skip("Not a CUDA build of torch (or torch was not read)", evidence=ev)
    cap = compat.driver_cuda(facts)
    drv = compat.driver_version(facts)
    os_name = compat.driver_os(facts)
    if cap is None and not drv:
        return skip("No NVIDIA driver version was read", detail="Judged by the driver checks.", evidence=ev)
    from_table = not (isinstance(facts.value("nvml.cuda_driver_version"), int) or
                      isinstance(facts.value("cuda.driver_version"), int))
    need = compat.min_driver(build.cuda, os_name)
    minimum = need.minimum or need.floor
    if cap is None:
        # The driver is older than every toolkit in the table: compare its version with torch's need.
        ans = compat.highest_cuda_for_driver(drv or "", os_name)
        dv, mv = compat.version(drv), compat.version(minimum)
        if dv is None or mv is None or dv >= mv:
            return skip(f"Driver {drv}: its CUDA is unknown", detail=ans.note + "; not judged.", evidence=ev)
        how = None
        have = None
    else:
        have = compat.cuda_from_int(cap)
        how = compat.driver_runs(build.cuda, cap)
    table_note = " The driver's CUDA was derived from its version with the table." if from_table else ""
    if from_table and drv and how != "native" and compat.highest_cuda_for_driver(drv, os_name).at_least:
        return ok(f"Driver {drv} is newer than the table; not judged against CUDA {build.cuda}",
                  detail=compat.highest_cuda_for_driver(drv, os_name).note + ".", evidence=ev)
    findings: list[Finding] = []
    # A GPU generation can need more than the CUDA floor (Blackwell: R570+).
    for g in gpus(facts):
        if g.cc is None or not drv:
            continue
        req = compat.gpu_driver_requirement(g.cc, os_name)
        if req and (compat.version(drv) or Version("0")) < (compat.version(req[0]) or Version("0")):
            row = req[1]
            findings.append(fail(
                f"{g.label()} needs NVIDIA driver ≥ {req[0]}; this one is {drv}",
                detail=f"{row.get('architecture', 'This')} GPUs (CC {compat.cc_text(g.cc)}) need CUDA ≥ {row['min_cuda']} "
                       f"and a driver that knows them (≥ {req[0]} on {os_name}, {row['source']}). {_as_of()}",
                evidence=ev, gpus=[g.index],
                remedy=Remediation(f"Install an NVIDIA driver ≥ {req[0]} (R570 or newer).", (), (DRIVERS,))))
    if how == "native":
        findings.append(ok(f"Driver supports CUDA {have}; torch {build.version} needs CUDA {build.cuda}",
                           detail=table_note.strip(), evidence=ev))
        return findings
    if from_table and facts.value("torch.cuda_available") is True and how != "mvc":
        # torch initialised CUDA on this driver: the table's reading of the driver version is wrong, or
        # a forward-compatibility libcuda is in use. (Within one major, minor-version compatibility
        # explains it: the mvc warning below says what still needs a newer driver.) Never a fail against what torch observed; a warning
        # only when a verified minimum says the driver alone could not run it.
        vmin = compat.verified_minimum(build.cuda, os_name)
        below = bool(vmin and drv and (compat.version(drv) or Version("0")) < (compat.version(vmin[0]) or Version("0")))
        seen = (f"The table gives driver {drv} CUDA {have or 'older than ' + str(minimum)}, but "
                f"torch.cuda.is_available() is True, so CUDA {build.cuda} initialises on this machine")
        if below and vmin:
            findings.append(warn(f"torch {build.version} (CUDA {build.cuda}) runs although driver {drv} is below "
                                 f"its minimum", evidence=ev,
                                 detail=f"{seen}. NVIDIA's minimum for CUDA {build.cuda} is {vmin[0]} ({vmin[1]}): "
                                        f"a forward-compatibility libcuda (cuda-compat) is probably in use, which "
                                        f"works on data-center GPUs only. {_as_of()}",
                                 remedy=Remediation(f"For a supported setup {upgrade_text(minimum)}.", (),
                                                    (MVC, DRIVERS))))
        else:
            findings.append(ok(f"torch {build.version} (CUDA {build.cuda}) runs on driver {drv}",
                               detail=f"{seen}; the table rows are unverified, so not judged {_as_of()}.",
                               evidence=ev))
        return findings
    rec = compat.recommend([g.cc for g in gpus(facts) if g.cc], cap, _python(facts), compat.platform_of(facts),
                           current=build.public or None, extras=_companion_extras(facts))
    upgrade = (f"upgrade the NVIDIA driver to ≥ {minimum}" + (f" (CUDA {build.cuda} natively; the CUDA "
               f"{build.cuda.split('.')[0]}.x floor is {need.floor})" if need.minimum and need.floor else "")) \
        if minimum else "upgrade the NVIDIA driver"
    row_note = "" if need.verified or not need.source else f" (table row from {need.source}, unverified)"
    # The wheel first: it needs no root and no reboot; then the driver upgrade.
    commands = ((_pip(facts, rec.command()),) if rec else ()) + driver_upgrade_commands(facts, minimum)
    alt = (f"or install torch {rec.torch}+{rec.variant}, built for a CUDA this driver supports: {rec.reason}"
           if rec else "")
    fix_text = (f"Either {alt[3:]}, or {upgrade}." if rec else
                f"{upgrade[0].upper()}{upgrade[1:]} (no torch wheel in the table is built for a CUDA this driver runs).")
    drv_text = f"driver {drv}" if drv else "the driver"
    if how == "mvc":
        findings.append(warn(
            f"Driver supports CUDA {have}; torch {build.version} is built with CUDA {build.cuda}",
            detail=f"{drv_text} supports CUDA {have}. torch's CUDA {build.cuda} runtime runs on it through CUDA "
                   f"minor-version compatibility (same major, driver ≥ {need.floor or 'the major floor'}); features "
                   f"that need a newer driver fail with cudaErrorCallRequiresNewerDriver or an unsupported-PTX error. "
                   f"{table_note} {_as_of()}".strip(),
            evidence=ev, remedy=Remediation(f"For full support {upgrade}" + (f"; {alt}." if rec else "."), commands,
                                            (MVC, DRIVERS))))
        return findings
    major = int(build.cuda.split(".")[0])
    floor, floor_row = compat.driver_floor(major, os_name) if major >= compat.mvc_from_major() else (None, None)
    floor_note = "" if not floor_row or floor_row["verified"] else f" (table row from {floor_row['source']}, unverified)"
    if have is None:
        why = (f"{drv_text} is older than every toolkit in the table, and CUDA {build.cuda} needs ≥ {minimum} on "
               f"{os_name}{row_note}")
    elif have.split(".")[0] != build.cuda.split(".")[0]:
        why = (f"{drv_text} supports CUDA up to {have}; torch {build.version} is built with CUDA {build.cuda}, a newer "
               f"major. " + (f"CUDA {major}.x needs driver ≥ {floor} on {os_name}{floor_note}" if floor else
                             f"CUDA {build.cuda} needs driver ≥ {need.minimum or '?'} on {os_name}{row_note}"))
    else:
        why = (f"{drv_text} supports CUDA up to {have}; torch {build.version} is built with CUDA {build.cuda}, a newer "
               f"minor, and before CUDA {compat.mvc_from_major()} there is no minor-version compatibility (NVIDIA): "
               f"CUDA {build.cuda} needs driver ≥ {minimum or '?'} on {os_name}{row_note}")
    detail = (f"{why}. CUDA initialisation fails (\"The NVIDIA driver on your system is too old"
              + (f" (found version {cap})" if cap and not from_table else "") + "\" / \"CUDA driver version is insufficient for CUDA "
              f"runtime version\").{table_note} {_as_of()}")
    # How sure: a driver CUDA read from the driver itself, or a verified minimum, decides; a reading
    # derived from unverified rows only warns unless torch confirms CUDA does not initialise.
    certain = not from_table
    if not certain and drv:
        vmin = compat.verified_minimum(build.cuda, os_name)
        certain = bool(vmin and (compat.version(drv) or Version("0")) < (compat.version(vmin[0]) or Version("0")))
    if not certain and _cuda_unavailable(facts):
        certain = True
        detail += (" The table rows behind this are unverified, but torch.cuda.is_available() is False here, as "
                   "they predict.")
    elif not certain:
        detail += " The table rows behind this are unverified and torch did not report whether CUDA works."
    title = f"NVIDIA driver is too old for torch {build.version} (CUDA {build.cuda})"
    hopeless = _gpus_without_any_wheel(facts)
    if hopeless:
        names = ", ".join(f"{g.label()} ({compat.sm(g.cc)})" for g in hopeless if g.cc)
        findings.append(warn(title, detail=detail + f" A newer driver would not make torch work here: no torch wheel "
                             f"runs on {names} (see gpu-eol).", evidence=ev,
                             remedy=Remediation(fix_text, commands, (DRIVERS, PREVIOUS))))
        return findings
    make = fail if certain else warn
    findings.append(make(title, detail=detail, evidence=ev,
                         remedy=Remediation(fix_text, commands, (DRIVERS, PREVIOUS))))
    return findings


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
    cc_s = compat.sm(first.cc)
    newer = first.cc > hi
    who = ", ".join(f"{g.label()} is {compat.sm(g.cc)}" for g in bad if g.cc)
    row_src = f"{row['source']}{'' if row['verified'] else ', unverified'}"
    why = (f"CUDA {build.cuda} compiles SASS for {compat.sm(lo)}…{compat.sm(hi)} only (toolkit targets: {row_src}), "
           f"so no build of torch {build.version} can carry kernels for {cc_s}"
           + (" — the GPU's architecture is newer than the toolkit; a PTX fallback, if the build has one, is only "
              "JIT-compiled and torch reports the GPU as not compatible" if newer else
              " — the toolkit dropped this architecture"))
    ccs = [g.cc for g in devices if g.cc]
    rec = compat.recommend(ccs, compat.driver_cuda(facts), _python(facts), compat.platform_of(facts),
                           current=build.public or None, exclude={(build.public, build.variant or "")},
                           extras=_companion_extras(facts))
    if rec:
        drv = _driver_text(facts)
        drv = drv or rec.driver_note
        arrow = f" → {_pip(facts, rec.command())}" + (f" ({drv})" if drv else "")
        remedy = Remediation(f"Reinstall torch from the {rec.variant} index: {rec.reason}."
                             + ("" if rec.verified else f" That table row is unverified {_as_of()}; check "
                                "torch.cuda.get_arch_list() after installing."), (_pip(facts, rec.command()),), (PREVIOUS,))
    else:
        arrow = ""
        remedy = Remediation(f"Install a torch build made with a CUDA toolkit that targets {cc_s} (see the previous "
                             f"versions page), or build torch from source with TORCH_CUDA_ARCH_LIST="
                             f"{compat.cc_text(first.cc)}.", (), (PREVIOUS,))
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
    rec = compat.recommend(ccs, compat.driver_cuda(facts), _python(facts), compat.platform_of(facts),
                           current=_torch_dist(facts)[0], extras=_companion_extras(facts))
    who = ", ".join(f"{g.label()} is {compat.sm(g.cc)}" for g in devices if g.cc)
    drv = _driver_text(facts) or (rec.driver_note if rec else "")
    arrow = f" → {_pip(facts, rec.command())}" + (f" ({drv})" if drv else "") if rec else ""
    said = (f"torch said \"{_TOO_OLD_FOR_BUILD} because it is too old\": this build's lowest architecture is above "
            "the GPU's" if too_old else f"CUDA reported \"{_NO_KERNEL_IMAGE}\": the build carries neither SASS nor PTX "
            "that runs on this architecture")
    return fail(f"The installed torch has no kernels for {devices[0].label()} ({compat.sm(devices[0].cc)})",  # type: ignore[arg-type]
                detail=f"{who}; {said}{arrow}. Other wheels still carry it (see gpu-eol). {_as_of()}",
                evidence=ev, gpus=[g.index for g in devices],
                remedy=Remediation(f"Reinstall torch from the {rec.variant} index: {rec.reason}." if rec else
                                   "Install a torch build whose get_arch_list() includes this GPU's sm_XY.",
                                   (_pip(facts, rec.command()),) if rec else (), (PREVIOUS,)))


@check("torch-arch-support", "The installed torch has kernels for every GPU",
       needs=("torch.version", "torch.arch_list", "nvml.gpus", "torch.devices"))
def torch_arch_support(facts: Facts) -> Finding | list[Finding]:
    ev = evidence(facts, "torch.version", "torch.arch_list", "nvml.gpus", "torch.devices")
    build = torch_build(facts)
    reported = compat.parse_arch_list(facts.value("torch.arch_list") or [])
    if (build is None or not build.cuda) and reported.targets:
        # torch's own "supports CUDA capabilities sm_…" list is enough to judge, with no version read
        # (a CUDA build: only CUDA builds print it).
        cuda = facts.value("torch.cuda_version")
        build = (TorchBuild(build.version, build.public, build.variant, str(cuda) if cuda else None) if build
                 else TorchBuild("(version not read)", "", None, str(cuda) if cuda else None))
    elif build is None and (said := _cuda_says_no_kernel_image(facts)):
        return said
    elif build is None or not build.cuda:
        return skip("Not a CUDA build of torch (or torch was not read)", evidence=ev)
    devices = gpus(facts)
    if not devices:
        return skip("No GPU was read", evidence=ev)
    arch = installed_arch(facts, build)
    if arch is None:
        proof = _toolkit_cannot_target(facts, build, devices)
        if proof is not None:
            return proof
        return skip(f"Architectures of torch {build.version} unknown",
                    detail=compat.not_in_table(f"torch {build.version} ({compat.platform_of(facts)})")
                    + " and torch did not report get_arch_list().", evidence=ev)
    origin = ("torch.cuda.get_arch_list()" if arch.origin == "torch"
              else f"the table ({arch.source}{'' if arch.verified else ', unverified'}) {_as_of()}")
    unknown = [g for g in devices if g.cc is None]
    bad: list[Gpu] = []
    jit: list[str] = []
    beyond: list[str] = []
    for g in devices:
        if g.cc is None:
            continue
        sup = compat.runs_on(arch, g.cc, compat.reach_of(arch, build.cuda))
        if not sup.runs:
            bad.append(g)
            if sup.reach:
                beyond.append(f"{g.label()}: {sup.explain(g.cc)}")
        elif sup.how == "ptx":
            jit.append(f"{g.label()}: {sup.explain(g.cc)}")
    eol = {g.index for g in _gpus_without_any_wheel(facts)}
    if bad and all(g.index in eol for g in bad):
        # No wheel of any release runs there: a reinstall cannot help, and gpu-eol says so.
        return skip(f"{', '.join(g.label() for g in bad)}: no torch wheel runs on it; judged by gpu-eol",
                    detail=f"torch {build.version} carries {arch.span()}.", evidence=ev)
    bad = [g for g in bad if g.index not in eol]
    if not bad:
        note = f" Unknown compute capability for: {', '.join(g.label() for g in unknown)} " \
               f"({compat.not_in_table('their product names')})." if unknown else ""
        if jit:
            return warn(f"torch {build.version} runs on the GPU only through PTX JIT",
                        detail="; ".join(jit) + f". The first CUDA call compiles kernels (minutes), cached in "
                        f"~/.nv/ComputeCache; a wheel with SASS for the GPU avoids it. Source: {origin}.{note}",
                        evidence=ev)
        return ok(f"torch {build.version} has kernels for every GPU ({arch.span()})",
                  detail=f"Source: {origin}.{note}".strip(), evidence=ev)
    ccs = [g.cc for g in devices if g.cc]
    cap = compat.driver_cuda(facts)
    plat = compat.platform_of(facts)
    rec = compat.recommend(ccs, cap, _python(facts), plat, current=build.public or None,
                           exclude={(build.public, build.variant or "")}, extras=_companion_extras(facts))
    first = bad[0]
    assert first.cc is not None
    cc_s = compat.sm(first.cc)
    newest_sass = max(arch.sass) if arch.sass else None
    direction = ("newer than anything in this wheel" if newest_sass and first.cc > newest_sass
                 else "dropped from (or never in) this wheel")
    who = ", ".join(f"{g.label()} is {compat.sm(g.cc)}" for g in bad if g.cc)
    head = (f"{who}; torch {build.version} carries {arch.span()} and no PTX that can run on it"
            if not arch.ptx else f"{who}; torch {build.version} carries {arch.describe()}")
    integrated = any(compat.is_integrated(g.cc, g.name) for g in bad if g.cc)
    if rec:
        drv = _driver_text(facts)
        drv = drv or rec.driver_note
        arrow = f" → {_pip(facts, rec.command())}" + (f" ({drv})" if drv else "")
        text = (f"Reinstall torch from the {rec.variant} index: {rec.reason}."
                + ("" if rec.verified else f" That table row is unverified {_as_of()}; check "
                   "torch.cuda.get_arch_list() after installing."))
        remedy = Remediation(text, (_pip(facts, rec.command()),), (PREVIOUS,))
    else:
        last = compat.last_release_for(first.cc, plat)
        arrow = ""
        if last:
            text = (f"No wheel that fits this driver and Python carries {cc_s}; the newest release with wheels for it "
                    f"is torch {last[0]}+{last[1]} (see gpu-eol), or build torch from source with "
                    f"TORCH_CUDA_ARCH_LIST={compat.cc_text(first.cc)}.")
            remedy = Remediation(text, (_pip(facts, compat.Recommendation(last[0], last[1], "", True).command()),), (PREVIOUS,))
        else:
            text = (f"{compat.not_in_table(f'a wheel for {cc_s}')}; build torch from source with "
                    f"TORCH_CUDA_ARCH_LIST={compat.cc_text(first.cc)}, or try the newest release's highest CUDA index.")
            remedy = Remediation(text, (), ("https://github.com/pytorch/pytorch#from-source",))
    detail = (f"{head}{arrow}. " + (f"{'; '.join(beyond)}. " if beyond else "") +
              f"The GPU's architecture is {direction}: CUDA kernels fail with \"no kernel image is "
              f"available for execution on the device\" although torch.cuda.is_available() is True. "
              f"Arch list from {origin}.")
    if integrated:
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

@check("gpu-eol", "Current torch releases still ship wheels for the GPU", needs=("nvml.gpus", "torch.devices"))
def gpu_eol(facts: Facts) -> Finding | list[Finding]:
    ev = evidence(facts, "nvml.gpus", "torch.devices", "torch.version")
    devices = [g for g in gpus(facts) if g.cc]
    if not devices:
        return skip("No GPU compute capability was read", evidence=ev)
    plat = compat.platform_of(facts)
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
            out.append(ok(f"torch {current} still ships wheels for {g.label()} ({compat.sm(g.cc)})",
                          detail=_as_of(), evidence=ev, gpus=same))
            continue
        last = compat.last_release_for(g.cc, plat)
        branch = arch.get("last_driver_branch") if arch else None
        drv_note = (f" NVIDIA's last driver branch for {arch_name} is R{branch}"
                    + ("" if arch and arch.get("verified") else f" ({arch.get('source') if arch else '?'}, unverified)")
                    + "." if branch else "")
        if last is None:
            info = compat.gpu_by_name(g.name) if g.cc_from == "table" and g.name else None
            unverified = info is not None and not info.verified
            make = warn if unverified and not _cuda_unavailable(facts) else fail
            last_cuda = arch.get("last_cuda") if arch else None
            cur_arch = [a for v in compat.release_variants(current or "", plat) if compat.variant_cuda(v)
                        and (a := compat.arch_list(current or "", v, plat)) is not None]
            lowest = min((cc for a in cur_arch for cc in a.sass), default=None)
            out.append(make(
                f"No torch wheel runs on {g.label()} ({arch_name}, {compat.sm(g.cc)})",
                detail=f"No current torch wheel supports {g.label()}: torch {current} carries "
                       f"{compat.sm(lowest) + ' and newer' if lowest else 'newer architectures only'}, and no release "
                       f"in the table ever carried {compat.sm(g.cc)} (CC {compat.cc_text(g.cc)}), so there is no older "
                       f"release to pin either."
                       + (f" The last CUDA toolkit able to target {arch_name} is {last_cuda}." if last_cuda else "")
                       + drv_note
                       + (f" The GPU's compute capability comes from the table ({info.source}, unverified)"
                          + ("; torch.cuda.is_available() is False here, consistent with it." if make is fail else ".")
                          if unverified else "")
                       + f" {_as_of()}",
                evidence=ev, gpus=same,
                remedy=Remediation(f"Build torch from source with TORCH_CUDA_ARCH_LIST={compat.cc_text(g.cc)} and a "
                                   "CUDA toolkit that still targets it"
                                   + (f" (CUDA {last_cuda} or older)" if last_cuda else "") + ", or use a newer GPU.",
                                   ("git clone --recursive https://github.com/pytorch/pytorch && cd pytorch",
                                    f"export TORCH_CUDA_ARCH_LIST={compat.cc_text(g.cc)} CUDA_HOME=/usr/local/cuda"
                                    + (f"-{last_cuda}" if last_cuda else "") + "   # a toolkit that targets it",
                                    "pip install -r requirements.txt && python setup.py develop"),
                                   ("https://github.com/pytorch/pytorch#from-source",))))
            continue
        version, variant = last
        cmd = _pip(facts, compat.Recommendation(version, variant, "", True, extras=_companion_extras(facts)).command())
        out.append(warn(
            f"{g.label()} ({arch_name}, {compat.sm(g.cc)}) is end of life for torch: last wheels in torch {version}",
            detail=f"No wheel of torch {current} carries {compat.sm(g.cc)}; the newest release that does is torch "
                   f"{version} ({variant}). Pin it so upgrades do not break this machine.{drv_note} {_as_of()}",
            evidence=ev, gpus=same,
            remedy=Remediation(f"Stay on torch {version}+{variant} (pin torch=={version} in a constraints file).",
                               (cmd,), (PREVIOUS,))))
    return out


# ---------------------------------------------------------------------------------------------
# cudnn-mismatch

def _pkg_version(pkgs: dict[str, str], stem: str) -> tuple[str, str] | None:
    """The installed ``nvidia-<stem>-cuNN`` (or unsuffixed) distribution and its version."""
    prefix = f"nvidia-{stem}"
    for name in sorted(n for n in pkgs if n.startswith(prefix)):
        if re.fullmatch(rf"nvidia-{stem}(-cu\d+)?", name):
            return name, pkgs[name]
    return None


def _outside_wheel(paths: Iterable[str]) -> list[str]:
    """Mapped libraries that are not a pip wheel's copy (site-packages/nvidia/… or torch/lib)."""
    return [str(p) for p in paths if outside_wheel(str(p))]


@dataclass(frozen=True)
class _Bundled:
    """What cudnn-mismatch and nccl-mismatch both start from: torch's build, the table's row for
    the library it bundles, the installed wheel, what torch reported at run time and what it mapped."""

    build: Any
    row: Mapping[str, Any] | None
    pkg: tuple[str, str] | None
    loaded: list[str]
    foreign: list[str]
    py: str
    variant: str


def _bundled(facts: Facts, family: str) -> _Bundled | None:
    build = torch_build(facts)
    if build is None or not build.cuda:
        return None
    loaded = list((facts.value("torch.loaded_libraries") or {}).get(family, []) or [])
    return _Bundled(build, compat.bundled_libs(build.public, build.variant or ""), _pkg_version(_packages(facts), family),
                    loaded, _outside_wheel(loaded), facts.value("python.executable") or "python",
                    build.variant or "cu" + build.cuda.replace(".", ""))


def _cudnn_facts(facts: Facts) -> tuple[tuple[int, int, int] | None, tuple[int, int, int] | None]:
    """(compiled, runtime) cuDNN as torch itself states them: torch.cudnn_build_version and
    torch.cudnn_version, or both from its "cuDNN version incompatibility" error when reading the
    runtime version raised it."""
    compiled = compat.cudnn_tuple(facts.value("torch.cudnn_build_version"))
    runtime = compat.cudnn_tuple(facts.value("torch.cudnn_version"))
    reading = facts.get("torch.cudnn_version")
    if runtime is None and not reading.ok and reading.detail:
        found = messages.cudnn_incompatibility(reading.detail)
        if found:
            compiled, runtime = compiled or found[0], found[1]
    return compiled, runtime


def _cudnn_loader_error(facts: Facts, ev: dict[str, Any]) -> Finding | None:
    """A cuDNN sub-library failed to load ("Could not load library libcudnn_cnn_train.so.8 …
    undefined symbol"): two cuDNN copies are mixed, typically a system one shadowing torch's."""
    errs = [e for e in library_errors(facts) if "cudnn" in (e["provider"], e["family"])]
    if not errs:
        return None
    ev["library_errors"] = [f"{x['path']}: {x['kind']} {x['symbol'] or ''}".strip()[:300] for x in errs]
    foreign = sorted({str(x["path"]).rsplit("/", 1)[0] for x in errs if outside_wheel(x["path"])})
    version, variant = _torch_dist(facts)
    commands = []
    if foreign:
        commands.append(f"echo $LD_LIBRARY_PATH   # remove {', '.join(foreign)} from it, or: unset LD_LIBRARY_PATH")
    else:
        commands.append("unset LD_LIBRARY_PATH   # or drop the cuDNN/CUDA directories from it")
    if version:
        commands.append(_pip(facts, f"pip install --force-reinstall torch=={version} --index-url "
                                    f"{compat.index_url(variant or 'cu121')}"))
    e = errs[0]
    what = (f"{e['library']} could not be loaded: it lacks {e['symbol'][:80]}" + (f" ({e['version_node']})"
                                                                               if e["version_node"] else "")
            if e["kind"] == "undefined-symbol" else f"{e['library']} cannot be found")
    where = f" It was loaded from {', '.join(foreign)}, not from torch's nvidia-cudnn wheel." if foreign else ""
    return fail("cuDNN libraries from two different copies are mixed",
                detail=f"{what}.{where} cuDNN's sub-libraries must all come from one release: a system or toolkit "
                       "cuDNN on LD_LIBRARY_PATH shadows part of the one torch ships.", evidence=ev,
                remedy=Remediation("Let torch load only the cuDNN it ships: take other cuDNN folders off "
                                   "LD_LIBRARY_PATH (or remove the system copy), and reinstall torch if its wheel was "
                                   "replaced.", tuple(commands),
                                   ("https://docs.nvidia.com/deeplearning/cudnn/latest/reference/support-matrix.html",)))


def _cudnn_refused(facts: Facts, ev: dict[str, Any], compiled: tuple[int, int, int],
                   runtime: tuple[int, int, int]) -> Finding:
    exp, obs = ".".join(map(str, compiled)), ".".join(map(str, runtime))
    version, variant = _torch_dist(facts)
    commands = ["echo $LD_LIBRARY_PATH   # remove the cuDNN/CUDA folders from it, or: unset LD_LIBRARY_PATH",
                "ldconfig -p | grep libcudnn   # system copies the loader can find"]
    if version:
        commands.append(_pip(facts, f"pip install --force-reinstall torch=={version} --index-url "
                                    f"{compat.index_url(variant or 'cu121')}"))
    return fail(f"cuDNN {obs} is loaded; torch was built with cuDNN {exp}",
                detail=f"torch says \"cuDNN version incompatibility: PyTorch was compiled against {compiled} but found "
                       f"runtime version {runtime}\": another cuDNN (usually from LD_LIBRARY_PATH or a system/toolkit "
                       "install) is found before the one torch ships, and torch refuses a different major or an older "
                       "minor.", evidence=ev,
                remedy=Remediation(f"Let torch load the cuDNN it ships ({exp}): take other cuDNN folders off "
                                   f"LD_LIBRARY_PATH, or install cuDNN {exp} where they point.", tuple(commands),
                                   ("https://docs.nvidia.com/deeplearning/cudnn/latest/reference/support-matrix.html",)))


@check("cudnn-mismatch", "The cuDNN torch loads is the one it was built with",
       needs=("torch.version", "torch.cudnn_version"))
def cudnn_mismatch(facts: Facts) -> Finding:
    ev = evidence(facts, "torch.version", "torch.cudnn_version", "torch.cudnn_build_version", "libs.cudnn_copies",
                  "torch.loaded_libraries")
    broken = _cudnn_loader_error(facts, ev)
    if broken is not None:
        return broken
    b = _bundled(facts, "cudnn")
    if b is None:
        said = _cudnn_facts(facts)
        if said[0] and said[1]:
            # torch's own "cuDNN version incompatibility" with no torch version around it: still proof.
            return _cudnn_refused(facts, ev, *said)  # type: ignore[arg-type]
        return skip("Not a CUDA build of torch (or torch was not read)", evidence=ev)
    build, row, pkg, loaded, foreign, py, variant = b.build, b.row, b.pkg, b.loaded, b.foreign, b.py, b.variant
    compiled, runtime = _cudnn_facts(facts)
    # torch's own compile-time version is proof; the table's row is the fallback.
    expected = compiled or (compat.cudnn_tuple(row["cudnn"]) if row and row.get("cudnn") else None)
    proven = compiled is not None
    ev["expected_cudnn"] = ".".join(map(str, compiled)) if compiled else (row["cudnn"] if row and row.get("cudnn") else None)
    fix = Remediation(
        "Let torch load the cuDNN it ships: remove other cuDNN directories from LD_LIBRARY_PATH and reinstall "
        "torch with its pinned nvidia-cudnn wheel.",
        ("unset LD_LIBRARY_PATH   # or drop the cuDNN/CUDA directories from it",
         f"{py} -m pip install --force-reinstall torch=={build.public} --index-url {compat.index_url(variant)}"),
        ("https://docs.nvidia.com/deeplearning/cudnn/latest/reference/support-matrix.html",))
    observed, what = (runtime, "torch.backends.cudnn.version()") if runtime else \
        ((compat.cudnn_tuple(pkg[1]), f"the installed {pkg[0]}") if pkg else (None, ""))
    table_row = f"{row['source']}{'' if row['verified'] else ', unverified'}" if row else ""
    if observed and expected:
        obs, exp = ".".join(map(str, observed)), ".".join(map(str, expected))
        if observed[0] != expected[0] or observed[1] < expected[1]:
            verdict = fail if proven or (row and row["verified"]) else warn
            origin = "torch says it was compiled against" if proven else \
                f"torch {build.version} ships cuDNN {row['cudnn'] if row else exp} ({table_row}):"
            return verdict(f"cuDNN {obs} is loaded; torch {build.version} was built with cuDNN {exp}",
                           detail=f"{what} is {obs} but {origin} {exp}. "
                                  "torch refuses a different major or an older minor (\"cuDNN version "
                                  f"incompatibility: PyTorch was compiled against {expected[:3]} but found runtime "
                                  f"version {observed[:3]}\")."
                                  + (f" Loaded from outside the wheel: {', '.join(foreign)}." if foreign else "")
                                  + f" {_as_of()}", evidence=ev, remedy=fix)
    if foreign:
        return warn("torch loaded cuDNN from outside its wheel",
                    detail=f"Mapped: {', '.join(foreign)}. A system or LD_LIBRARY_PATH copy shadows the nvidia-cudnn "
                           "wheel torch pins; it works only while its version happens to fit.", evidence=ev, remedy=fix)
    majors = {m.group(1) for p in loaded if (m := re.search(r"libcudnn[a-z_]*\.so\.(\d+)", str(p)))}
    if len(majors) > 1:
        return warn("Two cuDNN majors are loaded in one process", detail=f"Loaded: {', '.join(loaded)}.",
                    evidence=ev, remedy=fix)
    if observed is None:
        if expected is None:
            return skip("cuDNN version not read", detail=compat.not_in_table(f"torch {build.version}"), evidence=ev)
        return skip("cuDNN version not read", detail=f"torch {build.version} ships cuDNN {'.'.join(map(str, expected))}; "
                    "the loaded version was not collected.", evidence=ev)
    obs = ".".join(map(str, observed))
    if expected is None:
        return ok(f"cuDNN {obs}", detail=compat.not_in_table(f"torch {build.version} ({build.variant})") +
                  "; not compared.", evidence=ev)
    return ok(f"cuDNN {obs} fits torch {build.version} (built with {'.'.join(map(str, expected))})",
              detail=f"Table row: {table_row} {_as_of()}", evidence=ev)


# ---------------------------------------------------------------------------------------------
# nccl-mismatch

def _torch_dist(facts: Facts) -> tuple[str | None, str | None]:
    """(public version, variant) of torch, from torch itself or, when its import failed, its
    distribution's metadata in the package list."""
    build = torch_build(facts)
    if build is not None:
        return build.public, build.variant
    dist = _packages(facts).get("torch")
    if not dist or compat.version(str(dist).split("+")[0]) is None:
        return None, None
    return str(dist).split("+")[0], torch_variant(facts)


def _nccl_loader_error(facts: Facts, ev: dict[str, Any]) -> Finding | None:
    """torch (libtorch_cuda.so) needs an NCCL symbol the loaded libnccl lacks, or libnccl is missing."""
    errs = [e for e in library_errors(facts) if "nccl" in (e["provider"], e["family"])]
    if not errs:
        return None
    e = errs[0]
    ev["library_errors"] = [f"{x['path']}: {x['kind']} {x['symbol'] or ''}".strip() for x in errs]
    pkgs = _packages(facts)
    nccl_wheels = sorted(n for n in pkgs if re.fullmatch(r"nvidia-nccl(-cu\d+)?", n))
    version, variant = _torch_dist(facts)
    cuda = compat.variant_cuda(variant) if variant else None
    major = cuda.split(".")[0] if cuda else None
    keep = f"nvidia-nccl-cu{major}" if major else None  # NCCL wheels keep the -cuNN suffix for CUDA 13 too
    extra = [n for n in nccl_wheels if keep and n != keep]
    commands = [_pip(facts, "pip list") + " | grep -i nccl   # more than one nvidia-nccl wheel is the usual cause"]
    if extra:
        commands.append(_pip(facts, "pip uninstall -y " + " ".join(extra)))
    if version:
        commands.append(_pip(facts, f"pip install --force-reinstall torch=={version} --index-url "
                                    f"{compat.index_url(variant or 'cu' + (major or '12') + '6')}"))
    commands.append("echo $LD_LIBRARY_PATH $LD_PRELOAD   # a system libnccl here overrides the wheel's")
    what = (f"{e['library']} needs {e['symbol']}, which the libnccl.so.2 the loader found does not define"
            if e["kind"] == "undefined-symbol" else f"{e['library']} cannot be loaded")
    return fail("torch and the NCCL it loads do not fit" if e["kind"] == "undefined-symbol" else "libnccl cannot be loaded",
                detail=f"{what}: an older NCCL, or another CUDA major's nvidia-nccl wheel, is loaded in place of the "
                       f"one torch pins." + (f" Installed NCCL wheels: {', '.join(f'{n} {pkgs[n]}' for n in nccl_wheels)}."
                                             if nccl_wheels else ""),
                evidence=ev, remedy=Remediation("Keep only the NCCL wheel torch depends on (and no system libnccl on "
                                                "LD_LIBRARY_PATH/LD_PRELOAD), then reinstall torch so pip restores its pin.",
                                                tuple(commands),
                                                ("https://docs.nvidia.com/deeplearning/nccl/release-notes/index.html",)))


@check("nccl-mismatch", "The NCCL torch uses is the one it was built with",
       needs=("torch.version", "torch.nccl_version"))
def nccl_mismatch(facts: Facts) -> Finding:
    ev = evidence(facts, "torch.version", "torch.nccl_version", "libs.nccl_copies", "torch.loaded_libraries")
    broken = _nccl_loader_error(facts, ev)
    if broken is not None:
        return broken
    b = _bundled(facts, "nccl")
    if b is None:
        return skip("Not a CUDA build of torch (or torch was not read)", evidence=ev)
    build, row, pkg, foreign, py, variant = b.build, b.row, b.pkg, b.foreign, b.py, b.variant
    if build.variant and facts.value("host.os") == "Windows":
        return skip("Windows builds of torch do not use NCCL", evidence=ev)
    expected = compat.version(row["nccl"]) if row and row.get("nccl") else None
    runtime = compat.version(facts.value("torch.nccl_version"))
    ev["expected_nccl"] = row["nccl"] if row else None
    pin = f"nvidia-nccl-cu{build.cuda.split('.')[0]}"
    pkg_v = compat.version(pkg[1]) if pkg else None
    fix_cmds = ((f"{py} -m pip install --force-reinstall {pin}=={row['nccl']}",) if row and row.get("nccl") else ()) + \
        (f"{py} -m pip install --force-reinstall torch=={build.public} --index-url {compat.index_url(variant)}",)
    fix = Remediation("Restore the NCCL torch pins (another package or LD_LIBRARY_PATH/LD_PRELOAD replaced it).",
                      fix_cmds, ("https://docs.nvidia.com/deeplearning/nccl/release-notes/index.html",))
    if runtime and pkg_v and (runtime.release[:2] != pkg_v.release[:2]):
        return warn(f"torch uses NCCL {runtime} but {pkg[0]} {pkg[1]} is installed",  # type: ignore[index]
                    detail="torch loaded a different NCCL than the pip wheel (a system libnccl via LD_LIBRARY_PATH "
                           "or LD_PRELOAD?)." + (f" Mapped: {', '.join(foreign)}." if foreign else ""),
                    evidence=ev, remedy=fix)
    observed = runtime or pkg_v
    if observed and expected and observed < expected and observed.release[:2] != expected.release[:2]:
        verdict = fail if row and row["verified"] else warn
        return verdict(f"NCCL {observed} is older than the {expected} torch {build.version} was built with",
                       detail=f"torch {build.version} pins NCCL {expected} ({row['source'] if row else ''}"
                              f"{'' if row and row['verified'] else ', unverified'}); an older NCCL lacks symbols it "
                              f"uses (\"undefined symbol: nccl…\" at import) or behaves differently in collectives. "
                              f"{_as_of()}", evidence=ev, remedy=fix)
    if foreign:
        return warn("torch loaded NCCL from outside its wheel", detail=f"Mapped: {', '.join(foreign)}.",
                    evidence=ev, remedy=fix)
    if observed is None:
        return skip("NCCL version not read", evidence=ev)
    if expected is None:
        return ok(f"NCCL {observed}", detail=compat.not_in_table(f"NCCL of torch {build.version}") + "; not compared.",
                  evidence=ev)
    return ok(f"NCCL {observed} fits torch {build.version} (built with {expected})", detail=_as_of(), evidence=ev)


# ---------------------------------------------------------------------------------------------
# toolkit-mismatch

_BUILDS_EXTENSIONS = ("deepspeed", "flash-attn", "apex", "mmcv", "mmcv-full", "torch-scatter", "torch-sparse",
                      "torch-cluster", "pytorch3d", "detectron2")


@check("toolkit-mismatch", "The CUDA toolkit (nvcc) matches torch's CUDA for building extensions",
       needs=("toolkit.nvcc_version", "torch.cuda_version"))
def toolkit_mismatch(facts: Facts) -> Finding:
    ev = evidence(facts, "toolkit.nvcc_version", "torch.cuda_version", "env.vars")
    build = torch_build(facts)
    nvcc = facts.value("toolkit.nvcc_version")
    if build is None or not build.cuda:
        return skip("Not a CUDA build of torch (or torch was not read)", evidence=ev)
    nv = compat.version(nvcc)
    if nv is None:
        return skip("No CUDA toolkit (nvcc) found", detail="Only needed to build CUDA extensions; pip wheels bring "
                    "their own CUDA runtime.", evidence=ev)
    tv = compat.version(build.cuda)
    assert tv is not None
    env = dict(facts.value("env.vars") or {})
    pkgs = _packages(facts)
    hints = [k for k in ("CUDA_HOME", "TORCH_CUDA_ARCH_LIST") if env.get(k)] + [p for p in _BUILDS_EXTENSIONS if p in pkgs]
    nvs = ".".join(map(str, nv.release[:2]))
    if nv.release[0] == tv.release[0]:
        return ok(f"nvcc {nvs} and torch's CUDA {build.cuda} share a major",
                  detail="Extensions build (torch.utils.cpp_extension only warns about a minor difference); running "
                         "torch does not use the toolkit.", evidence=ev)
    detail = (f"nvcc is CUDA {nvs}, torch {build.version} is built with CUDA {build.cuda}. Running torch does not use "
              "the toolkit (the wheel brings its runtime), but building a CUDA extension stops with \"The detected "
              f"CUDA version ({nvs}) mismatches the version that was used to compile PyTorch ({build.cuda})\".")
    remedy = Remediation(f"When building extensions, point CUDA_HOME at a CUDA {build.cuda.split('.')[0]}.x toolkit "
                         f"(ideally {build.cuda}), e.g. from pip or conda.",
                         (_pip(facts, f"pip install 'nvidia-cuda-nvcc-cu{build.cuda.split('.')[0]}=={build.cuda}.*'"
                               if tv.release[0] <= 12 else f"pip install 'nvidia-cuda-nvcc=={build.cuda}.*'"),
                          f"conda install -c nvidia cuda-nvcc={build.cuda}"),
                         ("https://pytorch.org/docs/stable/cpp_extension.html",))
    if hints:
        return warn(f"nvcc {nvs} ≠ torch's CUDA {build.cuda} while extensions are likely built",
                    detail=detail + f" Signals: {', '.join(hints)}.", evidence=ev, remedy=remedy)
    return ok(f"nvcc {nvs} ≠ torch's CUDA {build.cuda} (informational)", detail=detail, evidence=ev)


# ---------------------------------------------------------------------------------------------
# torch-companions

def _tag(version: str) -> str | None:
    return version.split("+", 1)[1] if "+" in version else None


def _tag_major(tag: str | None) -> str | None:
    if tag is None:
        return None
    if tag == "cpu":
        return "cpu"
    cuda = compat.variant_cuda(tag)
    return cuda.split(".")[0] if cuda else tag


def _beyond_table(minor: str | None) -> bool:
    """True for a torch release newer than every release the table knows."""
    newest = compat.newest_release()
    v, n = compat.version(minor or ""), compat.version(newest or "")
    return bool(v and n and v > n)


def _nightly_date(version: str) -> "date | None":
    """The build date of a nightly (``2.5.0.dev20240720+cu124`` -> 2024-07-20), else None."""
    from datetime import date

    m = re.search(r"\.dev(\d{4})(\d{2})(\d{2})", str(version))
    if not m:
        return None
    try:
        return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return None


def _companion_extension_broken(facts: Facts, ev: dict[str, Any]) -> Finding | None:
    """torchvision's/torchaudio's C++ extension misses a torch symbol: built against another torch."""
    errs = [e for e in library_errors(facts) if e["kind"] == "undefined-symbol"
            and any(f"/{n}/" in str(e["path"]) or str(e["library"]).startswith(f"lib{n}") for n in ("torchvision", "torchaudio"))]
    if not errs:
        return None
    e = errs[0]
    name = "torchaudio" if "torchaudio" in str(e["path"]) else "torchvision"
    version, variant = _torch_dist(facts)
    pkgs = _packages(facts)
    ev["library_errors"] = [f"{x['path']}: undefined symbol {x['symbol']}" for x in errs]
    spec = f"torch=={version}" if version else "torch"
    cmd = _pip(facts, f"pip install --force-reinstall {spec} {name}"
                      + (f" --index-url {compat.index_url(variant)}" if variant else ""))
    have = f" (installed: torch {pkgs.get('torch', '?')}, {name} {pkgs[name]})" if name in pkgs else ""
    return fail(f"{name} was built against another torch", detail=f"{e['library']} lacks {e['symbol'][:90]}, a symbol of "
                f"the installed torch: its C++ extension was compiled for a different torch release{have}. {_as_of()}",
                evidence=ev, remedy=Remediation(f"Install torch and {name} together so pip picks the {name} release "
                                                "built for that torch.", (cmd,), (PREVIOUS,)))


def _companion_refused(facts: Facts, ev: dict[str, Any]) -> Finding | None:
    """torchvision/torchaudio said themselves that torch was built for another CUDA."""
    said = dict(facts.value("torch.companion_cuda") or {})
    torch_cuda = facts.value("torch.cuda_version")
    if not said or not torch_cuda:
        return None
    ev["torch.companion_cuda"] = said
    wrong = {name: cuda for name, cuda in said.items() if str(cuda) != str(torch_cuda)}
    if not wrong:
        return None
    version, variant = _torch_dist(facts)
    variant = variant or compat.variant_for_cuda(str(torch_cuda))
    names = " ".join(sorted(wrong))
    # torch itself goes into the same command: pip then resolves companions that pair with it.
    spec = f"torch=={version}" if version else "torch"
    cmd = _pip(facts, f"pip install --force-reinstall {spec} {names} --index-url {compat.index_url(variant)}")
    listing = ", ".join(f"{n} is built for CUDA {c}" for n, c in sorted(wrong.items()))
    return fail(f"{names.replace(' ', '/')} and torch are built for different CUDA versions",
                detail=f"torch is built for CUDA {torch_cuda}; {listing} — the library refuses to load (\"Detected that "
                       "PyTorch and … were compiled with different CUDA versions\"). Each domain library must come from "
                       f"the same variant index as torch. {_as_of()}",
                evidence=ev, remedy=Remediation(f"Reinstall torch and {names} together from one index ({variant}), so "
                                                "pip picks releases and builds that pair.", (cmd,), (PREVIOUS,)))


@check("torch-companions", "torchvision/torchaudio match the installed torch", needs=("python.packages", "torch.version"))
def torch_companions(facts: Facts) -> Finding | list[Finding]:
    ev = evidence(facts, "torch.version", "python.packages")
    refused = _companion_refused(facts, ev) or _companion_extension_broken(facts, ev)
    if refused is not None:
        return refused
    build = torch_build(facts)
    pkgs = _packages(facts)
    present = [p for p in ("torchvision", "torchaudio") if p in pkgs]
    if build is None:
        return skip("torch was not read", evidence=ev)
    if not present:
        return skip("No torchvision/torchaudio installed", evidence=ev)
    torch_minor = compat.minor_of(build.public)
    torch_tag = _tag(build.version)
    problems: list[str] = []
    severe = False
    notes: list[str] = []
    row = compat.companions(build.public)
    judged: list[str] = []
    torch_night = _nightly_date(build.version)
    for name in present:
        ver = pkgs[name]
        built_for = compat.companion_torch(name, ver)
        expected = row.get(name) if row else None
        abi_from = compat.stable_abi_from(name)
        pv, tv = compat.version(ver), compat.version(torch_minor or "")
        night = _nightly_date(ver)
        if torch_night or night:
            # Nightlies pair by build date, not by the release table (their version numbers run ahead).
            if torch_night and night and abs((torch_night - night).days) > 1:
                problems.append(f"{name} {ver} is a nightly of {night}, torch {build.version} one of {torch_night}: "
                                "nightlies must come from the same day")
            elif not (torch_night and night):
                notes.append(f"{name} {ver} and torch {build.version}: a nightly next to a release, not judged")
            else:
                judged.append(name)
        elif abi_from and pv is not None and tv is not None and pv >= Version(abi_from):
            # Built against torch's stable ABI: any torch at or above its own release works.
            if tv >= Version(compat.minor_of(ver) or abi_from):
                judged.append(name)
                notes.append(f"{name} {ver} uses torch's stable ABI (works with torch ≥ {compat.minor_of(ver)})")
            else:
                problems.append(f"{name} {ver} needs torch ≥ {compat.minor_of(ver)}, not {build.public}")
                severe = True
        elif built_for is None:
            if expected and row and row.get("verified") and compat.minor_of(ver) != expected and pv is not None:
                # The table knows what this torch pairs with; a release the table lacks is not it. An
                # older one is a plain mismatch; a newer one is beyond the table, so it only warns.
                newer = pv > (compat.version(expected) or pv)
                problems.append(f"{name} {ver} is not the {name} built for torch {torch_minor} "
                                f"(torch {torch_minor} pairs with {name} {expected})"
                                + (f"; {compat.not_in_table(f'{name} {ver}')}" if newer else ""))
                severe = severe or not newer
            else:
                notes.append(compat.not_in_table(f"{name} {ver}"))
        elif built_for != torch_minor:
            if row is None and _beyond_table(torch_minor):
                # torch newer than the table: which companion pairs with it is not known yet.
                problems.append(f"{name} {ver} is built for torch {built_for}, and "
                                + compat.not_in_table(f"torch {build.public}"))
            elif name == "torchaudio" and row and row.get("torchaudio") is None:
                notes.append(f"no torchaudio release is pinned to torch {torch_minor} (PyPI as of {compat.as_of()}); "
                             f"{name} {ver} not judged")
            else:
                problems.append(f"{name} {ver} is built for torch {built_for}, not {build.public}"
                                + (f" (torch {torch_minor} pairs with {name} {expected})" if expected else ""))
                severe = True
        else:
            judged.append(name)
        tag = _tag(ver)
        if tag and torch_tag and tag != torch_tag:
            if _tag_major(tag) != _tag_major(torch_tag):
                problems.append(f"{name} {ver} is a {tag} build but torch is {torch_tag}")
                severe = True
            else:
                problems.append(f"{name} {ver} is a {tag} build, torch is {torch_tag} (same CUDA major)")
        elif tag is None and torch_tag and name in judged:
            # An untagged companion came from PyPI, whose build depends on the platform: Linux wheels
            # are the release's default CUDA variant, Windows and macOS wheels are CPU builds.
            os_name = facts.value("host.os")
            pypi = {"Windows": "cpu", "Darwin": "cpu"}.get(str(os_name)) if os_name else None
            if os_name == "Linux":
                pypi = compat.release_default_variant(built_for or torch_minor)
            if pypi and _tag_major(pypi) != _tag_major(torch_tag):
                problems.append(f"{name} {ver} is PyPI's {os_name} build ({pypi}) but torch is {torch_tag}")
                severe = True
            elif pypi is None and os_name is None and (torch_tag == "cpu" or torch_tag.startswith("cu")):
                problems.append(f"{name} {ver} carries no variant tag: it came from PyPI, where Linux wheels are "
                                f"CUDA builds and Windows/macOS wheels CPU builds, while torch is {torch_tag} — the "
                                "platform is not in the report, so check `pip show " + name + "` and reinstall it from "
                                "torch's index")
    variant = build.variant or "cpu"
    cmd = _pip(facts, f"pip install --force-reinstall torch=={build.public} {' '.join(present)} "
                      f"--index-url {compat.index_url(variant)}")
    if problems:
        make = fail if severe else warn
        return make("torchvision/torchaudio do not match torch",
                    detail="; ".join(problems) + ". Each domain library pins one torch release and is compiled for its "
                    "CUDA variant: a mismatch fails at import (\"undefined symbol\", \"operator torchvision::nms does "
                    f"not exist\", \"compiled with different CUDA major versions\"). {_as_of()}",
                    evidence=ev, remedy=Remediation("Reinstall them together from torch's index (pip picks the "
                                                    "companions whose pin matches).", (cmd,), (PREVIOUS,)))
    if not judged:
        return skip(f"{', '.join(f'{p} {pkgs[p]}' for p in present)} not judged against torch {build.version}",
                    detail="; ".join(notes), evidence=ev)
    return ok(f"{', '.join(f'{p} {pkgs[p]}' for p in judged)} match torch {build.version}",
              detail="; ".join(notes), evidence=ev)


# ---------------------------------------------------------------------------------------------
# cuda-major-mix

def _package_cuda_major(name: str, ver: str) -> str | None:
    if "cu" not in name:  # every pattern below names CUDA; a 600,000-package list is mostly other names
        return None
    for rx in (r"nvidia-.+-cu(\d+)", r"cupy-cuda(\d+)x", r"jax-cuda(\d+)-(?:plugin|pjrt)", r"jaxlib-cuda(\d+)"):
        m = re.fullmatch(rx, name)
        if m:
            return m.group(1)
    m = re.fullmatch(r"cupy-cuda(\d\d)\d", name)  # cupy-cuda117, cupy-cuda102
    if m:
        return str(int(m.group(1)))
    if name in ("cuda-toolkit", "nvidia-cuda-runtime", "cuda-bindings", "cuda-python"):
        v = compat.version(ver)
        return str(v.release[0]) if v else None
    return None


@check("cuda-major-mix", "Installed CUDA packages target one CUDA major", needs=("python.packages",))
def cuda_major_mix(facts: Facts) -> Finding:
    ev = evidence(facts, "python.packages", "torch.cuda_version")
    pkgs = _packages(facts)
    if not pkgs:
        return skip("No package list was read", evidence=ev)
    by_major: dict[str, list[str]] = {}
    for name, ver in sorted((n, v) for n, v in pkgs.items() if "cu" in n):  # the only names it can judge
        major = _package_cuda_major(name, ver)
        if major:
            by_major.setdefault(major, []).append(name)
    build = torch_build(facts)
    torch_major = build.cuda.split(".")[0] if build and build.cuda else None
    if len(by_major) <= 1 and (torch_major is None or not by_major or torch_major in by_major):
        return ok("CUDA packages target one CUDA major" if by_major else "No CUDA packages besides torch",
                  detail=", ".join(f"CUDA {m}: {len(v)} package(s)" for m, v in by_major.items()), evidence=ev)
    keep = torch_major or max(by_major, key=lambda m: len(by_major[m]))
    others = {m: v for m, v in by_major.items() if m != keep}
    listing = "; ".join(f"CUDA {m}: {', '.join(v)}" for m, v in sorted(others.items()))
    commands: list[str] = []
    leftovers: list[str] = []
    for m, names in sorted(others.items()):
        for n in names:
            if n.startswith("cupy-cuda"):
                commands.append(_pip(facts, f"pip uninstall -y {n} && pip install cupy-cuda{keep}x"))
            elif n.startswith(("jax-cuda", "jaxlib-cuda")):
                commands.append(_pip(facts, f"pip uninstall -y {n} && pip install -U 'jax[cuda{keep}]'"))
            else:
                leftovers.append(n)
    if leftovers:
        commands.insert(0, _pip(facts, "pip show " + " ".join(leftovers)) + "   # Required-by: what still needs them")
        commands.insert(1, _pip(facts, "pip uninstall -y " + " ".join(leftovers)))
    who = f"torch is built for CUDA {torch_major}" if torch_major else f"most CUDA packages target CUDA {keep}"
    return warn(f"CUDA packages for another major next to CUDA {keep}",
                detail=f"{who}, but these target another CUDA major: {listing}. Two majors of the same library "
                       "(libcublas.so.12 and .so.13, libcudnn from -cu12 and -cu13) can be loaded into one process, and "
                       "a package built for the other major needs its own runtime and a driver for it.",
                evidence=ev, remedy=Remediation("Keep one CUDA major: remove leftovers, or install the variants built "
                                                f"for CUDA {keep}.", tuple(commands)))


# ---------------------------------------------------------------------------------------------
# python-supported

@check("python-supported", "The Python version is supported by the torch release", needs=("python.version", "torch.version"),
       judges_failures=False)
def python_supported(facts: Facts) -> Finding:
    ev = evidence(facts, "python.version", "torch.version")
    py = facts.value("python.version")
    if not py or compat.minor_of(py) is None:
        return skip("Python version not read", evidence=ev)
    pym = compat.minor_of(py)
    build = torch_build(facts)
    torch_reading = facts.get("torch.version")
    good = [m for m in compat.releases_newest_first() if pym in compat.releases()[m]["python"]]
    if build is None:
        dist = _packages(facts).get("torch")
        if torch_reading.reason is not None and torch_reading.reason.value == "failed" and compat.version(dist):
            build = TorchBuild(str(dist), str(dist).split("+", 1)[0], torch_variant(facts), None)
        elif torch_reading.reason is not None and torch_reading.reason.value in ("absent", "failed"):
            if good:
                return ok(f"torch wheels exist for Python {pym} (newest: torch {compat.latest_patch(good[0])})",
                          detail=_as_of(), evidence=ev)
            newest = compat.newest_release()
            pys = compat.releases()[newest]["python"] if newest else []
            return warn(f"No torch wheel in the table supports Python {pym}",
                        detail=f"torch {newest} has wheels for Python {', '.join(pys)}; `pip install torch` answers "
                               f"\"No matching distribution found for torch\". {compat.not_in_table(f'Python {pym}')}.",
                        evidence=ev, remedy=Remediation(f"Use Python {pys[-1] if pys else '3.12'} (e.g. a venv or "
                                                        "conda env) for torch.", ()))
        else:
            return skip("torch was not read", evidence=ev)
    ans = compat.python_supported(build.public, py)
    if ans.value is None:
        return ok(f"Python {pym}", detail=ans.note + "; not judged.", evidence=ev)
    if ans.value:
        return ok(f"torch {build.public} ships wheels for Python {pym}", detail=_as_of(), evidence=ev)
    minor = compat.minor_of(build.public) or ""
    pys = compat.releases()[minor]["python"]
    cur = Version(minor)
    newer = sorted((m for m in good if Version(m) >= cur), key=Version)
    older = sorted((m for m in good if Version(m) < cur), key=Version, reverse=True)
    near = (newer + older)[0] if (newer or older) else None
    variant = build.variant if build.variant and build.variant in compat.release_variants(near or "", compat.platform_of(facts)) else None
    commands: tuple[str, ...] = ()
    if near:
        patch = compat.latest_patch(near)
        commands = (_pip(facts, f"pip install torch=={patch} --index-url {compat.index_url(variant)}" if variant
                         else f"pip install torch=={patch}"),)
    text = (f"Install torch {near} (wheels for Python {pym}), or use Python {pys[-1]}." if near
            else f"Use Python {pys[-1]} for torch {minor}.")
    detail = (f"torch {build.public} ships wheels for Python {', '.join(pys)} only; this is Python {py}. "
              f"{_as_of()}")
    if torch_reading.ok:
        return warn(f"Python {pym} is not supported by torch {build.public}",
                    detail=detail + " It imports, so it came from a source build or another channel; expect "
                    "untested combinations.", evidence=ev, remedy=Remediation(text, commands, (GET_STARTED,)))
    return fail(f"Python {pym} is not supported by torch {build.public}", detail=detail, evidence=ev,
                remedy=Remediation(text, commands, (GET_STARTED,)))


CHECKS = [driver_too_old, torch_arch_support, cudnn_mismatch, nccl_mismatch, toolkit_mismatch, torch_companions,
          cuda_major_mix, python_supported, gpu_eol]
