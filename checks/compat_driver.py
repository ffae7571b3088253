"""driver-too-old: is the NVIDIA driver new enough for the CUDA that torch (or a container image) was built with?"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from envdoctor import views
from envdoctor.knowledge import compat, recommend, remedies, versions

from ..kit import Remediation, evidence, fail, ok, read_first, skip, warn
from ..model import Facts, Finding, Status
from ..registry import check
from ._torch import (
    DRIVERS,
    MVC,
    PREVIOUS,
    TorchBuild,
    _as_of,
    _companion_extras,
    _cuda_unavailable,
    _exe,
    _gpus_without_any_wheel,
    _python,
    _torch_dist,
    gpus,
    torch_build,
)

# ---------------------------------------------------------------------------------------------
# driver-too-old

def upgrade_text(minimum: str | None) -> str:
    return f"upgrade the NVIDIA driver to ≥ {minimum}" if minimum else "upgrade the NVIDIA driver"


def driver_upgrade_commands(facts: Facts, minimum: str | None) -> tuple[str, ...]:
    """The commands that install a driver ≥ ``minimum``: the branch to install (the newest verified
    branch at or above the minimum that still supports every GPU here) and how to confirm it."""
    if str(facts.value("host.os") or "") == "Windows":
        return (remedies.driver_install_windows(),)
    need = versions.parse(minimum) if minimum else None
    # Newer branches drop old GPUs (R470 was Kepler's last, R580 Maxwell/Pascal/Volta's): cap there.
    caps = [int(a["last_driver_branch"]) for g in gpus(facts)
            if g.cc and (a := compat.architecture(g.cc)) and a.get("last_driver_branch")]
    cap = min(caps) if caps else None
    table = compat.data()["driver_branches"]["rows"]
    new_enough = [r for r in table if need is None or Version(f"{r['branch']}.999") >= need]
    # A GPU whose compute capability is not known may be one a newer branch dropped: stop at the
    # first branch that is the last for some architecture (R470 for Kepler), never the newest.
    unknown = [g.name or f"GPU {g.index}" for g in gpus(facts) if g.cc is None]
    if unknown and cap is None:
        cap = min((r["branch"] for r in new_enough if r.get("last_for")), default=None)
    rows = [r for r in new_enough if cap is None or r["branch"] <= cap]
    if not rows:
        return ("nvidia-smi   # no driver branch both supports this GPU and is new enough: see gpu-eol",)
    pick = max((r for r in rows if r.get("verified")), key=lambda r: r["branch"], default=None) or \
        max(rows, key=lambda r: r["branch"])
    branch = pick["branch"]
    if unknown and not caps:
        tail = (f"; {unknown[0]} is not in envdoctor's GPU table and newer branches drop old GPUs"
                + (f" (R{cap} is the last for {', '.join(pick.get('last_for', []))})" if pick.get("last_for") else "")
                + f"; or: {remedies.ubuntu_drivers_install()} (picks a branch for this GPU)")
    elif cap is not None:
        tail = f"; R{cap} is the last branch for this GPU"
    else:
        tail = f"; or: {remedies.ubuntu_drivers_install()}"
    note = (f"Ubuntu/Debian: branch R{branch}" + (f" (≥ {minimum})" if minimum else "")
            + ("" if pick.get("verified") else f", {compat.said(str(pick.get('source', '')), False)}") + tail)
    return (remedies.driver_install(branch, note=note),
            remedies.reboot("the new kernel module loads at boot"),
            "nvidia-smi   # 'Driver Version' and the 'CUDA Version' it supports")


def _cuda_build(facts: Facts) -> TorchBuild | None:
    """torch's build, or, when its version was not read, a build known only by ``torch.cuda_version``
    (a paste that shows "CUDA used to build PyTorch" but no readable version): enough for the driver."""
    build = torch_build(facts)
    if build is not None:
        return build
    cuda = facts.value("torch.cuda_version")
    if cuda and versions.parse(cuda) is not None:
        return TorchBuild(f"built for CUDA {cuda}", "", None, str(cuda))  # its version is not in the text
    return None


def _image_needs_newer_cuda(facts: Facts) -> Finding | None:
    """The NVIDIA container runtime refused an image: "unsatisfied condition: cuda>=12.4"."""
    need = facts.value("container.cuda_requirement")
    need_driver = facts.value("container.driver_requirement")
    if need_driver and versions.parse(need_driver):
        drv = views.driver_version(facts)
        ev = evidence(facts, "container.driver_requirement", "nvml.driver_version")
        return fail(f"The host driver {drv or ''} is older than the container image needs (≥ {need_driver})".replace("  ", " "),
                    detail=f"The image's start-up check: \"This container was built for NVIDIA Driver Release "
                           f"{need_driver} or later, but version {drv} was detected\" — its CUDA runtime needs that "
                           "driver (forward compatibility covers only data-center GPUs).", evidence=ev,
                    remedy=Remediation(f"Upgrade the host driver to ≥ {need_driver}, or use an older image release "
                                       "built for the installed driver (the NGC support matrix lists each release's "
                                       "driver).", ("nvidia-smi   # the driver version and the CUDA it supports",),
                                       (remedies.NGC_SUPPORT_MATRIX,
                                        DRIVERS)))
    if not need or versions.parse(need) is None:
        return None
    ev = evidence(facts, "container.cuda_requirement", "cuda.driver_version", "nvml.driver_version")
    driver = compat.min_driver(str(need))
    floor = driver.minimum or driver.floor
    cap = views.driver_cuda(facts)
    have = f" (the host driver supports CUDA {versions.cuda_from_int(cap)})" if cap else ""
    return fail(f"The host driver is too old for this container image (it needs CUDA ≥ {need})",
                detail=f"The NVIDIA container runtime refused to start the container: its image declares "
                       f"cuda>={need}{have}. The image's CUDA runtime needs a driver that supports it"
                       + (f" (≥ {floor} on Linux{'' if driver.verified else ', ' + compat.said(driver.source, False)})"
                          if floor else "")
                       + f". {_as_of()}", evidence=ev,
                remedy=Remediation("Upgrade the host driver" + (f" to ≥ {floor}" if floor else "") + ", or run an "
                                   "image tag built for the CUDA the driver supports (nvidia-smi's 'CUDA Version').",
                                   ("nvidia-smi   # 'CUDA Version' = the newest image CUDA this driver runs",
                                    remedies.container_run("--gpus all", image="nvidia/cuda:<that version>-base-ubuntu22.04",
                                                           argv="nvidia-smi")),
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
    said = next((t.strip() for t in texts if "driver on your system is too old" in t), None)
    if said is None:
        return None
    cap = facts.value("cuda.driver_version")
    if not isinstance(cap, int) or cap <= 0:
        return None
    have = versions.cuda_from_int(cap)
    ev = evidence(facts, "cuda.driver_version", "torch.cuda_available_messages", "python.packages")
    installed, _ = _torch_dist(facts)
    rec = recommend.recommend([g.cc for g in gpus(facts) if g.cc], cap, _python(facts), views.platform_of(facts),
                           current=installed, extras=_companion_extras(facts))
    alt = f"or install torch {rec.torch}+{rec.variant}, built for a CUDA this driver runs: {rec.reason}" if rec else ""
    return fail(f"The NVIDIA driver is too old for the installed torch (the driver supports CUDA {have})",
                detail=f"torch said so itself: \"{said[:200]}\": the "
                       f"driver supports CUDA up to {have}, and this torch was built for a newer CUDA. {_as_of()}",
                evidence=ev, remedy=Remediation(
                    "Either upgrade the NVIDIA driver to one that supports torch's CUDA (nvidia-smi then shows a "
                    "higher 'CUDA Version')" + (f", {alt}." if rec else "."),
                    ((rec.command(_exe(facts)),) if rec else ()) + driver_upgrade_commands(facts, None),
                    (DRIVERS, PREVIOUS)))


@check("driver-too-old", "The NVIDIA driver is new enough for the CUDA torch was built with",
       needs=("torch.version", "torch.cuda_version", "nvml.cuda_driver_version", "nvml.driver_version"),
       owns=("cuda.init:35",))
def driver_too_old(facts: Facts) -> Finding | list[Finding]:
    found = _driver_too_old(facts)
    listed = [found] if isinstance(found, Finding) else list(found)
    # CUDA error 35 says it outright; cuda-init leaves it to this check, so it must not get lost.
    if not any(f.status is Status.FAIL for f in listed) and (said := _runtime_says_driver_too_old(facts)):
        return [*[f for f in listed if f.status is not Status.SKIP], said]
    return found


@dataclass(frozen=True)
class _Driver:
    """What the facts say about the driver, against what torch's CUDA needs."""

    build: TorchBuild
    cuda: str  # torch's CUDA, "12.6"
    cap: int | None  # the driver's CUDA, API-encoded
    drv: str | None  # the driver version
    os_name: str
    from_table: bool  # the driver's CUDA was derived from its version with the table
    need: compat.DriverNeed
    have: str | None  # the driver's CUDA, "12.4"
    how: str | None  # compat.driver_runs(): "native", "mvc", or None (cannot run)

    @property
    def minimum(self) -> str | None:
        return self.need.minimum or self.need.floor

    @property
    def table_note(self) -> str:
        return " The driver's CUDA was derived from its version with the table." if self.from_table else ""

    @property
    def drv_text(self) -> str:
        return f"driver {self.drv}" if self.drv else "the driver"


def _driver_too_old(facts: Facts) -> Finding | list[Finding]:
    ev = read_first(facts, evidence(facts, "torch.version", "torch.cuda_version", "nvml.driver_version",
                                    "nvml.cuda_driver_version", "cuda.driver_version", "torch.cuda_available"))
    if image := _image_needs_newer_cuda(facts):
        return image
    build = _cuda_build(facts)
    if (build is None or not build.cuda) and (said := _torch_says_driver_too_old(facts)):
        return said
    if build is None or not build.cuda:
        return skip("Not a CUDA build of torch (or torch was not read)", evidence=ev)
    d = _read_driver(facts, build, build.cuda, ev)
    if isinstance(d, Finding):
        return d
    findings = _generation_needs(facts, d, ev)
    if d.how == "native":
        findings.append(ok(f"Driver supports CUDA {d.have}; torch {build.version} needs CUDA {d.cuda}",
                           detail=d.table_note.strip(), evidence=ev))
        return findings
    if d.from_table and facts.value("torch.cuda_available") is True and d.how != "mvc":
        findings.append(_runs_anyway(d, ev))
        return findings
    findings.append(_mvc_warning(facts, d, ev) if d.how == "mvc" else _too_old(facts, d, ev))
    return findings


def _read_driver(facts: Facts, build: TorchBuild, cuda: str, ev: dict[str, Any]) -> _Driver | Finding:
    """The driver's reading, or the finding that ends the judgement (nothing read, a driver the table
    cannot place)."""
    cap = views.driver_cuda(facts)
    drv = views.driver_version(facts)
    os_name = views.driver_os(facts)
    if cap is None and not drv:
        return skip("No NVIDIA driver version was read", detail="Judged by the driver checks.", evidence=ev)
    from_table = not (isinstance(facts.value("nvml.cuda_driver_version"), int) or
                      isinstance(facts.value("cuda.driver_version"), int))
    need = compat.min_driver(cuda, os_name)
    minimum = need.minimum or need.floor
    have: str | None = None
    how: str | None = None
    if cap is None:
        # The driver is older than every toolkit in the table: compare its version with torch's need.
        ans = compat.highest_cuda_for_driver(drv or "", os_name)
        dv, mv = versions.parse(drv), versions.parse(minimum)
        if dv is None or mv is None or dv >= mv:
            return skip(f"Driver {drv}: its CUDA is unknown", detail=ans.note + "; not judged.", evidence=ev)
    else:
        have = versions.cuda_from_int(cap)
        how = compat.driver_runs(cuda, cap)
    if from_table and drv and how != "native" and compat.highest_cuda_for_driver(drv, os_name).at_least:
        return ok(f"Driver {drv} is newer than the table; not judged against CUDA {cuda}",
                  detail=compat.highest_cuda_for_driver(drv, os_name).note + ".", evidence=ev)
    return _Driver(build, cuda, cap, drv, os_name, from_table, need, have, how)


def _below(drv: str | None, minimum: str) -> bool:
    return bool(drv) and (versions.parse(drv) or Version("0")) < (versions.parse(minimum) or Version("0"))


def _generation_needs(facts: Facts, d: _Driver, ev: dict[str, Any]) -> list[Finding]:
    """A GPU generation can need more than the CUDA floor (Blackwell: R570+)."""
    findings: list[Finding] = []
    for g in gpus(facts):
        if g.cc is None or not d.drv:
            continue
        req = compat.gpu_driver_requirement(g.cc, d.os_name)
        if req and _below(d.drv, req[0]):
            row = req[1]
            findings.append(fail(
                f"{g.label()} needs NVIDIA driver ≥ {req[0]}; this one is {d.drv}",
                detail=f"{row.get('architecture', 'This')} GPUs (CC {versions.cc_text(g.cc)}) need CUDA ≥ {row['min_cuda']} "
                       f"and a driver that knows them (≥ {req[0]} on {d.os_name}, {row['source']}). {_as_of()}",
                evidence=ev, gpus=[g.index],
                remedy=Remediation(f"Install an NVIDIA driver ≥ {req[0]} (R570 or newer).", (), (DRIVERS,))))
    return findings


def _runs_anyway(d: _Driver, ev: dict[str, Any]) -> Finding:
    """torch initialised CUDA on this driver although the table says it cannot: the table's reading of
    the driver version is wrong, or a forward-compatibility libcuda is in use. (Within one major,
    minor-version compatibility explains it: the mvc warning says what still needs a newer driver.)
    Never a fail against what torch observed; a warning only when a verified minimum says the driver
    alone could not run it."""
    vmin = compat.verified_minimum(d.cuda, d.os_name)
    seen = (f"The table gives driver {d.drv} CUDA {d.have or 'older than ' + str(d.minimum)}, but "
            f"torch.cuda.is_available() is True, so CUDA {d.cuda} initialises on this machine")
    if vmin and _below(d.drv, vmin[0]):
        return warn(f"torch {d.build.version} (CUDA {d.cuda}) runs although driver {d.drv} is below its minimum",
                    evidence=ev,
                    detail=f"{seen}. NVIDIA's minimum for CUDA {d.cuda} is {vmin[0]} ({vmin[1]}): "
                           f"a forward-compatibility libcuda (cuda-compat) is probably in use, which "
                           f"works on data-center GPUs only. {_as_of()}",
                    remedy=Remediation(f"For a supported setup {upgrade_text(d.minimum)}.", (), (MVC, DRIVERS)))
    return ok(f"torch {d.build.version} (CUDA {d.cuda}) runs on driver {d.drv}",
              detail=f"{seen}; the table rows are unconfirmed, so not judged {_as_of()}.", evidence=ev)


@dataclass(frozen=True)
class _Fix:
    upgrade: str  # "upgrade the NVIDIA driver to ≥ …"
    commands: tuple[str, ...]
    alt: str  # "or install torch …" when a wheel for this driver exists
    text: str
    wheel: Remediation | None = None  # the torch build for this driver, when there is one
    driver: Remediation = Remediation()  # the driver upgrade

    def remedy(self, links: tuple[str, ...], text: str = "") -> Remediation:
        """Either the wheel or the driver, as alternatives (the wheel first: no root, no reboot)."""
        if self.wheel is None:
            return Remediation(text or self.text, self.driver.commands, links + self.driver.links)
        return Remediation(text, (), links, (self.wheel, self.driver))


def _fix(facts: Facts, d: _Driver) -> _Fix:
    """The wheel first (it needs no root and no reboot), then the driver upgrade."""
    rec = recommend.recommend([g.cc for g in gpus(facts) if g.cc], d.cap, _python(facts), views.platform_of(facts),
                              current=d.build.public or None, extras=_companion_extras(facts))
    minimum = d.minimum
    upgrade = (f"upgrade the NVIDIA driver to ≥ {minimum}" + (f" (CUDA {d.cuda} natively; the CUDA "
               f"{d.cuda.split('.')[0]}.x floor is {d.need.floor})" if d.need.minimum and d.need.floor else "")) \
        if minimum else "upgrade the NVIDIA driver"
    commands = ((rec.command(_exe(facts)),) if rec else ()) + driver_upgrade_commands(facts, minimum)
    alt = (f"or install torch {rec.torch}+{rec.variant}, built for a CUDA this driver supports: {rec.reason}"
           if rec else "")
    text = (f"Either {alt[3:]}, or {upgrade}." if rec else
            f"{upgrade[0].upper()}{upgrade[1:]} (no torch wheel in the table is built for a CUDA this driver runs).")
    wheel = (Remediation(f"Install torch {rec.torch}+{rec.variant}, built for a CUDA this driver supports: "
                         f"{rec.reason}.", (rec.command(_exe(facts)),), (PREVIOUS,), sources=rec.sources())
             if rec else None)
    driver = Remediation(f"{upgrade[0].upper()}{upgrade[1:]}.", driver_upgrade_commands(facts, minimum), (DRIVERS,))
    return _Fix(upgrade, commands, alt, text, wheel, driver)


def _mvc_warning(facts: Facts, d: _Driver, ev: dict[str, Any]) -> Finding:
    fix = _fix(facts, d)
    return warn(
        f"Driver supports CUDA {d.have}; torch {d.build.version} is built with CUDA {d.cuda}",
        detail=f"{d.drv_text} supports CUDA {d.have}. torch's CUDA {d.cuda} runtime runs on it through CUDA "
               f"minor-version compatibility (same major, driver ≥ {d.need.floor or 'the major floor'}); features "
               f"that need a newer driver fail with cudaErrorCallRequiresNewerDriver or an unsupported-PTX error. "
               f"{d.table_note} {_as_of()}".strip(),
        evidence=ev, remedy=fix.remedy((MVC,), "For full support, either:" if fix.wheel else
                                       f"For full support {fix.upgrade}."))


def _why_too_old(d: _Driver) -> str:
    row_note = "" if d.need.verified or not d.need.source else f" ({compat.said(d.need.source, False)})"
    major = int(d.cuda.split(".")[0])
    floor, floor_row = compat.driver_floor(major, d.os_name) if major >= compat.mvc_from_major() else (None, None)
    floor_note = "" if not floor_row or floor_row["verified"] else f" ({compat.said(floor_row['source'], False)})"
    if d.have is None:
        return (f"{d.drv_text} is older than every toolkit in the table, and CUDA {d.cuda} needs ≥ {d.minimum} on "
                f"{d.os_name}{row_note}")
    if d.have.split(".")[0] != d.cuda.split(".")[0]:
        return (f"{d.drv_text} supports CUDA up to {d.have}; torch {d.build.version} is built with CUDA {d.cuda}, a newer "
                f"major. " + (f"CUDA {major}.x needs driver ≥ {floor} on {d.os_name}{floor_note}" if floor else
                              f"CUDA {d.cuda} needs driver ≥ {d.need.minimum or '?'} on {d.os_name}{row_note}"))
    return (f"{d.drv_text} supports CUDA up to {d.have}; torch {d.build.version} is built with CUDA {d.cuda}, a newer "
            f"minor, and before CUDA {compat.mvc_from_major()} there is no minor-version compatibility (NVIDIA): "
            f"CUDA {d.cuda} needs driver ≥ {d.minimum or '?'} on {d.os_name}{row_note}")


def _too_old(facts: Facts, d: _Driver, ev: dict[str, Any]) -> Finding:
    """The driver cannot run torch's CUDA. How sure: a driver CUDA read from the driver itself, or a
    verified minimum, decides; a reading derived from unverified rows only warns unless torch
    confirms CUDA does not initialise."""
    fix = _fix(facts, d)
    detail = (f"{_why_too_old(d)}. CUDA initialisation fails (\"The NVIDIA driver on your system is too old"
              + (f" (found version {d.cap})" if d.cap and not d.from_table else "") + "\" / \"CUDA driver version is "
              f"insufficient for CUDA runtime version\").{d.table_note} {_as_of()}")
    certain = not d.from_table
    if not certain and d.drv:
        vmin = compat.verified_minimum(d.cuda, d.os_name)
        certain = bool(vmin and _below(d.drv, vmin[0]))
    if not certain and _cuda_unavailable(facts):
        certain = True
        detail += (" The table rows behind this are unconfirmed, but torch.cuda.is_available() is False here, as "
                   "they predict.")
    elif not certain:
        detail += " The table rows behind this are unconfirmed and torch did not report whether CUDA works."
    title = f"NVIDIA driver is too old for torch {d.build.version} (CUDA {d.cuda})"
    remedy = fix.remedy(())
    hopeless = _gpus_without_any_wheel(facts)
    if hopeless:
        names = ", ".join(f"{g.label()} ({versions.sm(g.cc)})" for g in hopeless if g.cc)
        return warn(title, detail=detail + f" A newer driver would not make torch work here: no torch wheel "
                    f"runs on {names} (see gpu-eol).", evidence=ev, remedy=remedy)
    return (fail if certain else warn)(title, detail=detail, evidence=ev, remedy=remedy)
