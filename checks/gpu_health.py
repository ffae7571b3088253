"""GPU health from NVML and the kernel log: memory errors, row remapping, PCIe link, clocks,
persistence, compute mode, MIG, Xid events and the NVSwitch fabric."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from envdoctor.knowledge import errors, remedies

from ..kit import EVIDENCE_ITEMS, Remediation, evidence, fail, ok, skip, warn
from ..model import Facts, Finding
from ..registry import CheckResult, check
from ..views import VisibleDevices

XID_DOC = remedies.XID_DOC
DCGM_DIAG = remedies.DCGM_DIAG
ROW_REMAP_DOC = remedies.ROW_REMAP_DOC
FABRIC_GUIDE = remedies.FABRIC_GUIDE
MIG_GUIDE = remedies.MIG_GUIDE

# nvmlClocksEventReason* bits (nvml.h). Power cap and idle are normal; these mean the GPU is
# being slowed down by heat or by the board/system protecting itself.
CLOCK_REASONS = {
    0x4: "software power cap",
    0x8: "hardware slowdown (HW_SLOWDOWN: temperature or power brake asserted by the board)",
    0x20: "software thermal slowdown (GPU or memory above its maximum operating temperature)",
    0x40: "hardware thermal slowdown (temperature too high)",
    0x80: "hardware power brake slowdown (the external power brake assertion, e.g. the PSU)",
}
BAD_CLOCK_BITS = 0x8 | 0x20 | 0x40 | 0x80

# NVML_DEVICE_ARCH_*; brand 2 = Tesla, 14 = "NVIDIA" (datacenter parts report one of these).
DATACENTER_BRANDS = {2, 14}

# Xid codes that mean hardware or driver trouble rather than a bug in the application (which
# reports 13, 31, 43, 45 for its own faults). From NVIDIA's Xid catalogue.
XID_SEVERE = {
    48: "double-bit ECC error", 61: "internal micro-controller breakpoint/warning", 62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event", 64: "ECC page retirement or row remapper recording failure",
    74: "NVLink error", 79: "GPU has fallen off the bus", 92: "high single-bit ECC error rate",
    94: "contained ECC error", 95: "uncontained ECC error", 119: "GSP RPC timeout", 120: "GSP error",
    140: "ECC unrecovered error", 154: "GPU recovery action changed",
}
XID_APP = {13: "graphics engine exception (usually the application)", 31: "GPU memory page fault (usually the "
           "application)", 43: "GPU stopped processing (usually the application)", 45: "preemptive cleanup after "
           "an application error"}


def _gpus(facts: Facts) -> list[dict[str, Any]]:
    return [g for g in (facts.value("nvml.gpus") or []) if not g.get("error")]


def _label(g: dict[str, Any]) -> str:
    return f"GPU {g.get('index')} ({g.get('name', '?')}, {g.get('pci_bus_id', '?')})"


def _no_gpus(facts: Facts) -> Finding | None:
    """A skip finding when there are no NVML GPUs to judge (and why), else None."""
    reading = facts.get("nvml.gpus")
    if not reading.ok:
        return skip("No GPU data from NVML", detail=reading.describe(), evidence=evidence(facts, "nvml.gpus"))
    if not _gpus(facts):
        return skip("NVML lists no GPUs", evidence=evidence(facts, "nvml.gpus", "nvml.device_count"))
    return None


def _unsupported(gpus: Iterable[dict[str, Any]], fields: Iterable[str]) -> list[str]:
    out = []
    fields = list(fields)
    for g in gpus:
        for field in fields:
            info = (g.get("missing") or {}).get(field)
            if info:
                out.append(f"GPU {g.get('index')} {field}: {info.get('reason')} ({info.get('detail')})")
                break
    return out


def _unread(gpus: Iterable[dict[str, Any]], *fields: str) -> list[dict[str, Any]]:
    """The GPUs on which none of ``fields`` was read: absent (a paste that does not show it) or null
    (NVML could not read it). Unknown is not healthy: ``ecc_uncorrected_volatile: null`` is not 0."""
    return [g for g in gpus if all(g.get(f) is None for f in fields)]


def _gaps(gpus: list[dict[str, Any]], *fields: str) -> str:
    """`` Not read: ecc_uncorrected_volatile for GPU 1 (…).`` for each field some GPUs lack, else ""."""
    notes = []
    for field in fields:
        lacking = _unread(gpus, field)
        if lacking:
            why = _unsupported(lacking, (field,))
            notes.append(f"{field} for " + ", ".join(_label(g) for g in lacking)
                         + (f" ({'; '.join(why)})" if why else ""))
    return (" Not read: " + "; ".join(notes) + ".") if notes else ""


def _not_reported(gpus: list[dict[str, Any]], what: str, fields: tuple[str, ...], ev: dict[str, Any]) -> Finding | None:
    """A skip when no GPU has any of ``fields`` read (nothing to judge ``what`` by), else None."""
    if len(_unread(gpus, *fields)) < len(gpus):
        return None
    why = _unsupported(gpus, fields)
    return skip(f"{what} not reported", detail=("; ".join(why) if why else
                                               f"No GPU entry holds {' or '.join(fields)}: it was not read.").strip(),
                evidence=ev)


def _of(gpus: list[dict[str, Any]], *fields: str) -> str:
    """`` (3 of 4 GPUs reported)`` when some GPUs lack all of ``fields``, else ""."""
    lacking = len(_unread(gpus, *fields))
    return f" ({len(gpus) - lacking} of {len(gpus)} GPUs reported)" if lacking else ""


def _gpu_ev(gpus: Iterable[dict[str, Any]], *fields: str) -> dict[str, Any]:
    # The first EVIDENCE_ITEMS GPUs: evidence of a 20,000-GPU report must not repeat every GPU per check.
    out = {f"nvml.gpus[{g.get('index')}]": {f: g.get(f, (g.get("missing") or {}).get(f, {}).get("reason"))
                                           for f in ("name", "pci_bus_id", *fields)}
           for g in itertools.islice(gpus, EVIDENCE_ITEMS)}
    return out


def _resets(gpus: Iterable[dict[str, Any]], note: str = "") -> tuple[str, ...]:
    """A GPU reset per GPU, by NVML index."""
    return remedies.gpu_resets([g.get("index") for g in gpus], note)


def _each(template: str | Callable[..., str], gpus: Iterable[dict[str, Any]]) -> tuple[str, ...]:
    """``template`` with ``{i}`` (the NVML index) and ``{bus}`` (the PCI address as lspci writes it)
    filled in, once per GPU (or a remedy called with ``i=`` and ``bus=``): commands the user can
    paste as they are."""
    out = []
    for g in gpus:
        bus = str(g.get("pci_bus_id") or "")
        # NVML writes an 8-digit PCI domain (00000000:18:00.0); lspci -s wants 4 (0000:18:00.0).
        if bus.count(":") == 2 and len(bus.split(":", 1)[0]) == 8:
            bus = bus[4:]
        out.append(template(i=g.get("index"), bus=bus.lower()) if callable(template)
                   else template.format(i=g.get("index"), bus=bus.lower()))
    return tuple(dict.fromkeys(out))


def _per_gpu(facts: Facts, judge: Callable[[dict[str, Any]], str | None], fields: tuple[str, ...]) -> tuple[
        list[dict[str, Any]], list[str]]:
    bad, notes = [], []
    for g in _gpus(facts):
        note = judge(g)
        if note:
            bad.append(g)
            notes.append(f"{_label(g)}: {note}")
    return bad, notes


# -- gpu-ecc ----------------------------------------------------------------------------------------------
@check("gpu-ecc", "No uncorrectable ECC memory errors", healthcheck=True, needs=("nvml.gpus",))
def gpu_ecc(facts: Facts) -> CheckResult:
    none = _no_gpus(facts)
    if none:
        return none
    gpus = _gpus(facts)
    ev = _gpu_ev(gpus, "ecc_mode", "ecc_uncorrected_volatile", "ecc_uncorrected_aggregate")
    volatile = [g for g in gpus if (g.get("ecc_uncorrected_volatile") or 0) > 0]
    aggregate = [g for g in gpus if (g.get("ecc_uncorrected_aggregate") or 0) > 0 and g not in volatile]
    pending = [g for g in gpus if (g.get("ecc_mode") or {}).get("pending") not in (None, (g.get("ecc_mode") or {}).get("current"))]
    if volatile:
        return fail("Uncorrectable ECC errors since the driver loaded", detail="; ".join(
            f"{_label(g)}: {g['ecc_uncorrected_volatile']} uncorrectable error(s)" for g in volatile) +
            ". Work on these GPUs may have produced corrupt results or crashed (Xid 48/94/95).", evidence=ev,
            gpus=[g["index"] for g in volatile], remedy=Remediation(
                "Drain the GPU, reset it so the bad memory is retired/remapped, and run a diagnostic; if errors "
                "return, RMA it.",
                (*_each("nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER -i {i}", volatile),
                 *_resets(volatile, "when idle; or reboot"),
                 *_each("dcgmi diag -r 3 -i {i}   # if DCGM is installed", volatile)),
                (DCGM_DIAG, ROW_REMAP_DOC)))
    if pending:
        return warn("ECC mode change pending", detail="; ".join(f"{_label(g)}: ECC {g['ecc_mode']['current']} -> "
                    f"{g['ecc_mode']['pending']} after the next reset" for g in pending), evidence=ev,
                    gpus=[g["index"] for g in pending],
                    remedy=Remediation("Reset the GPU (no process may use it) or reboot to apply it.",
                                       (*_resets(pending), remedies.reboot("instead")),
                                       (remedies.NVIDIA_SMI_DOC,)))
    if aggregate:
        return warn("Uncorrectable ECC errors in the GPU's history", detail="; ".join(
            f"{_label(g)}: {g['ecc_uncorrected_aggregate']} over its lifetime, none since the driver loaded"
            for g in aggregate) + ".", evidence=ev, gpus=[g["index"] for g in aggregate],
            remedy=Remediation("Watch for new errors; check that the memory was retired/remapped.",
                               _each("nvidia-smi -q -d ECC,ROW_REMAPPER -i {i}", aggregate), (ROW_REMAP_DOC,)))
    counters = ("ecc_uncorrected_volatile", "ecc_uncorrected_aggregate")
    if (unknown := _not_reported(gpus, "Uncorrectable ECC error counts", counters, ev)) is not None:
        return unknown
    off = [g for g in gpus if (g.get("ecc_mode") or {}).get("current") == 0 and g.get("brand") in DATACENTER_BRANDS]
    unsupported = _unsupported(gpus, ("ecc_mode",))
    detail = ""
    if off:
        detail = "ECC is disabled on " + ", ".join(_label(g) for g in off) + " (datacenter GPU)."
    elif unsupported:
        detail = "ECC not reported for: " + "; ".join(unsupported)
    return ok("No uncorrectable ECC errors" + _of(gpus, *counters), detail=(detail + _gaps(gpus, *counters)).strip(),
              evidence=ev)


# -- gpu-row-remap -------------------------------------------------------------------------------------------
@check("gpu-row-remap", "No pending or failed memory row remapping / page retirement", healthcheck=True,
       needs=("nvml.gpus",))
def gpu_row_remap(facts: Facts) -> CheckResult:
    none = _no_gpus(facts)
    if none:
        return none
    gpus = _gpus(facts)
    ev = _gpu_ev(gpus, "remapped_rows", "retired_pages_pending")
    failed = [g for g in gpus if (g.get("remapped_rows") or {}).get("failure")]
    if failed:
        return fail("Row remapping failed: GPU memory cannot be repaired", detail="; ".join(
            f"{_label(g)}: remap failure ({g['remapped_rows']})" for g in failed) + ". The GPU ran out of spare rows "
            "(or remapping failed); it will keep producing memory errors.", evidence=ev, gpus=[g["index"] for g in failed],
            remedy=Remediation("Drain the GPU and RMA it.", (*_each("nvidia-smi -q -d ROW_REMAPPER -i {i}", failed),
                                                              *_each("dcgmi diag -r 3 -i {i}", failed)),
                               (ROW_REMAP_DOC, DCGM_DIAG)))
    pending = [g for g in gpus if (g.get("remapped_rows") or {}).get("pending") or g.get("retired_pages_pending")]
    if pending:
        return warn("Memory repair pending until the GPU is reset", detail="; ".join(
            f"{_label(g)}: " + ("row remap pending" if (g.get("remapped_rows") or {}).get("pending")
                                else "page retirement pending") for g in pending) +
            ". The faulty memory stays in use until the next GPU reset.", evidence=ev,
            gpus=[g["index"] for g in pending], remedy=Remediation(
                "Reset the GPU when it is idle (or reboot) so the remap/retirement takes effect.",
                (*_resets(pending, "needs no processes on the GPU"), remedies.reboot()),
                (ROW_REMAP_DOC,)))
    unc = [g for g in gpus if (g.get("remapped_rows") or {}).get("uncorrectable")]
    detail = "; ".join(f"{_label(g)}: {g['remapped_rows']['uncorrectable']} row(s) remapped for uncorrectable errors "
                       "(repaired)" for g in unc)
    repairs = ("remapped_rows", "retired_pages_pending")
    if not any(g.get(f) is not None for g in gpus for f in repairs):
        return skip("Neither row remapping nor page retirement is reported", detail="; ".join(
            _unsupported(gpus, repairs)) or "No GPU entry holds remapped_rows or retired_pages_pending: it was not read.",
            evidence=ev)
    lacking = _unread(gpus, *repairs)
    gaps = (" Not read for " + ", ".join(_label(g) for g in lacking) + ".") if lacking else ""
    return ok("No pending or failed memory repairs" + _of(gpus, *repairs), detail=(detail + gaps).strip(), evidence=ev)


# -- gpu-pcie-link -------------------------------------------------------------------------------------------
@check("gpu-pcie-link", "PCIe links run at their full width", needs=("nvml.gpus",))
def gpu_pcie_link(facts: Facts) -> CheckResult:
    none = _no_gpus(facts)
    if none:
        return none
    gpus = _gpus(facts)
    below = any((g.get("pcie") or {}).get("gen") and (g.get("pcie") or {}).get("max_gen")
                and g["pcie"]["gen"] < g["pcie"]["max_gen"] for g in gpus)
    # Utilisation matters only for a link below its generation: busy or idle.
    ev = _gpu_ev(gpus, "pcie", *(("utilization",) if below else ()))
    narrow = [g for g in gpus if (g.get("pcie") or {}).get("width") and (g.get("pcie") or {}).get("max_width")
              and g["pcie"]["width"] < g["pcie"]["max_width"]]
    if narrow:
        return warn("PCIe link narrower than the GPU supports", detail="; ".join(
            f"{_label(g)}: x{g['pcie']['width']} of x{g['pcie']['max_width']}" for g in narrow) +
            ". Host-device copies (DataLoader batches, checkpoints) run at a fraction of the bandwidth. Usual causes: "
            "a slot wired for fewer lanes, a riser, a badly seated card or a dirty connector.", evidence=ev,
            gpus=[g["index"] for g in narrow], remedy=Remediation(
                "Move the GPU to a full-width slot or reseat it; check riser cables and BIOS lane bifurcation.",
                (*_each("nvidia-smi -q -d PCIE -i {i}", narrow),
                 *_each(lambda i, bus: remedies.pcie_link(bus), [g for g in narrow if g.get("pci_bus_id")])),
                (remedies.NVIDIA_SMI_DOC,)))
    # The link generation drops at idle to save power and rises under load: only a slow link
    # on a busy GPU is worth mentioning.
    slow_busy = [g for g in gpus if (g.get("pcie") or {}).get("gen") and (g.get("pcie") or {}).get("max_gen")
                 and g["pcie"]["gen"] < g["pcie"]["max_gen"] and (g.get("utilization") or {}).get("gpu", 0) >= 50]
    if slow_busy:
        return warn("PCIe link below its maximum generation under load", detail="; ".join(
            f"{_label(g)}: Gen{g['pcie']['gen']} of Gen{g['pcie']['max_gen']} at {g['utilization']['gpu']}% "
            "utilisation" for g in slow_busy) + ".", evidence=ev, gpus=[g["index"] for g in slow_busy],
            remedy=Remediation("Check the slot's generation in the BIOS and the riser; compare with the other GPUs.",
                               (*_each("nvidia-smi -q -d PCIE -i {i}", slow_busy),
                                *_each(lambda i, bus: remedies.pcie_link(bus),
                                       [g for g in slow_busy if g.get("pci_bus_id")])),
                               (remedies.NVIDIA_SMI_DOC,)))
    if not any(g.get("pcie") for g in gpus):
        return skip("PCIe link not reported", detail="; ".join(_unsupported(gpus, ("pcie_width", "pcie_gen")))
                    or "No GPU entry holds its PCIe link: it was not read.", evidence=ev)
    idle = _unread([g for g in gpus if (g.get("pcie") or {}).get("gen") and (g.get("pcie") or {}).get("max_gen")
                    and g["pcie"]["gen"] < g["pcie"]["max_gen"]], "utilization")
    return ok("PCIe links run at full width" + _of(gpus, "pcie"), detail="Link generation below the maximum at idle is "
              "normal power saving." + _gaps(gpus, "pcie") + (" Utilisation not read for " + ", ".join(
                  _label(g) for g in idle) + ", whose link runs below its generation." if idle else ""), evidence=ev)


# -- gpu-throttle ----------------------------------------------------------------------------------------------
@check("gpu-throttle", "GPUs are not slowed by heat or power protection", needs=("nvml.gpus",))
def gpu_throttle(facts: Facts) -> CheckResult:
    none = _no_gpus(facts)
    if none:
        return none
    gpus = _gpus(facts)
    ev = _gpu_ev(gpus, "clocks_event_reasons", "temperature", "power_usage_mw", "power_limit_mw")
    bad = [g for g in gpus if (g.get("clocks_event_reasons") or 0) & BAD_CLOCK_BITS]
    if bad:
        def reasons(g: dict[str, Any]) -> str:
            bits = g["clocks_event_reasons"]
            words = [text for bit, text in CLOCK_REASONS.items() if bits & bit and bit & BAD_CLOCK_BITS]
            extra = f", {g['temperature']} °C" if g.get("temperature") is not None else ""
            if g.get("power_usage_mw") is not None and g.get("power_limit_mw"):
                extra += f", {g['power_usage_mw'] / 1000:.0f} W of {g['power_limit_mw'] / 1000:.0f} W"
            return f"{_label(g)}: {'; '.join(words)}{extra}"
        return warn("GPU clocks are being slowed down", detail=". ".join(reasons(g) for g in bad) + ".", evidence=ev,
                    gpus=[g["index"] for g in bad], remedy=Remediation(
                        "Improve cooling (airflow, fan curves, dust, ambient temperature) and check the power "
                        "supply and cables; hardware slowdowns that persist point at the board or PSU.",
                        (*_each("nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER -i {i}", bad),
                         "nvidia-smi dmon -s pct -i " + ",".join(str(g["index"]) for g in bad)
                         + "   # watch power/temperature/clocks live"),
                        (remedies.NVIDIA_SMI_DOC,)))
    capped = [g for g in gpus if (g.get("clocks_event_reasons") or 0) & 0x4]
    if (unknown := _not_reported(gpus, "Clock event reasons", ("clocks_event_reasons",), ev)) is not None:
        return unknown
    detail = ("Power-capped (normal under full load): " + ", ".join(_label(g) for g in capped)) if capped else ""
    return ok("No thermal or hardware slowdown" + _of(gpus, "clocks_event_reasons"),
              detail=(detail + _gaps(gpus, "clocks_event_reasons")).strip(), evidence=ev)


# -- gpu-persistence ----------------------------------------------------------------------------------------------
@check("gpu-persistence", "Persistence mode is on for datacenter GPUs", needs=("nvml.gpus",))
def gpu_persistence(facts: Facts) -> CheckResult:
    none = _no_gpus(facts)
    if none:
        return none
    gpus = _gpus(facts)
    ev = _gpu_ev(gpus, "persistence_mode", "brand")
    ev.update(evidence(facts, "host.container"))
    off = [g for g in gpus if g.get("persistence_mode") == 0 and g.get("brand") in DATACENTER_BRANDS]
    if not off:
        if (unknown := _not_reported(gpus, "Persistence mode", ("persistence_mode",), ev)) is not None:
            return unknown
        return ok("Persistence mode is on (or not needed on these GPUs)" + _of(gpus, "persistence_mode"),
                  detail=_gaps(gpus, "persistence_mode").strip(), evidence=ev)
    detail = (", ".join(_label(g) for g in off) + ": persistence mode is off. Without it the driver tears the GPU "
              "state down whenever no process uses it, so every new CUDA process pays seconds of initialisation "
              "and ECC/clock settings can reset.")
    container = facts.value("host.container")
    if container:
        return ok("Persistence mode is off (a host setting)", detail=detail + f" It is set on the host, not in this "
                  f"{container} container.", evidence=ev)
    return warn("Persistence mode is off", detail=detail, evidence=ev, gpus=[g["index"] for g in off],
                remedy=Remediation("Run the persistence daemon (preferred) or enable persistence mode.",
                                   (remedies.service_enable("nvidia-persistenced"), remedies.gpu_setting("-pm 1")),
                                   ("https://docs.nvidia.com/deploy/driver-persistence/index.html",)))


# -- gpu-compute-mode ----------------------------------------------------------------------------------------------
_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}


#: cudaErrorDevicesUnavailable / CUDA_ERROR_DEVICE_UNAVAILABLE: "all CUDA-capable devices are busy or unavailable".
_BUSY = 46


@check("gpu-compute-mode", "Compute mode lets this process use the GPUs", healthcheck=True, needs=("nvml.gpus",),
       owns=("cuda.init:46",))
def gpu_compute_mode(facts: Facts) -> CheckResult:
    init = facts.value("cuda.init") if facts.get("cuda.init").ok else None
    if isinstance(init, Mapping) and init.get("code") == _BUSY:
        return _busy(facts, init)
    none = _no_gpus(facts)
    if none:
        return none
    gpus = _gpus(facts)
    exclusive = [g for g in gpus if g.get("compute_mode") in (1, 3)]
    # The processes on a GPU matter only in an exclusive mode: one of them holds it.
    ev = _gpu_ev(gpus, "compute_mode", *(("compute_processes",) if exclusive else ()))
    if (unknown := _not_reported(gpus, "Compute mode", ("compute_mode",), ev)) is not None:
        return unknown
    prohibited = [g for g in gpus if g.get("compute_mode") == 2]
    taken = [g for g in gpus if g.get("compute_mode") in (1, 3) and (g.get("compute_processes") or 0) > 0]
    if prohibited or taken:
        remedy = Remediation("Use another GPU, stop the process holding it, or (if policy allows) set the default "
                             "compute mode.", ("nvidia-smi --query-compute-apps=pid,process_name,gpu_uuid --format=csv",
                                               *_each(lambda i, bus: remedies.gpu_setting(f"-i {i} -c DEFAULT"), prohibited + taken)),
                             (remedies.NVIDIA_SMI_DOC,))
        notes = [f"{_label(g)}: compute mode Prohibited" for g in prohibited]
        notes += [f"{_label(g)}: {_MODES[g['compute_mode']]} and already used by {g['compute_processes']} process(es) "
                  f"(pids {g.get('compute_pids')})" for g in taken]
        return fail("GPUs are unavailable to new CUDA processes", detail="; ".join(notes) + ". CUDA fails with "
                    "\"CUDA-capable device(s) is/are busy or unavailable\".", evidence=ev,
                    gpus=[g["index"] for g in prohibited + taken], remedy=remedy)
    if exclusive:
        if _unread(exclusive, "compute_processes"):
            # Whether another process holds the GPU decides the question, and it was not read.
            return skip("Exclusive-process compute mode; whether the GPU is free was not read",
                        detail=", ".join(_label(g) for g in exclusive) + ": only one process at a time can use each."
                        + _gaps(exclusive, "compute_processes"), evidence=ev)
        return ok("Exclusive-process compute mode, currently free",
                  detail=", ".join(_label(g) for g in exclusive) + ": only one process at a time can use each."
                  + _gaps(exclusive, "compute_processes") + _gaps(gpus, "compute_mode"), evidence=ev)
    return ok("Default compute mode" + _of(gpus, "compute_mode"), detail=_gaps(gpus, "compute_mode").strip(),
              evidence=ev)


def _busy(facts: Facts, init: Mapping[str, Any]) -> Finding:
    """CUDA found every GPU busy or unavailable (46): the compute mode is why when the facts show one that lets a
    process in only alone (Exclusive_Process, nvidia-smi's table "E. Process") or none (Prohibited)."""
    gpus = _gpus(facts)
    ev = {**_gpu_ev(gpus, "compute_mode", "compute_processes"), "cuda.init": dict(init)}
    said = f"{init.get('name') or 'error 46'}: \"{init.get('message') or 'all CUDA-capable devices are busy or unavailable'}\""
    locked = [g for g in gpus if g.get("compute_mode") in (1, 2, 3)]
    if locked:
        notes = "; ".join(f"{_label(g)}: compute mode {_MODES[g['compute_mode']]}" for g in locked)
        return fail(f"The GPUs' compute mode keeps this process out ({_MODES[locked[0]['compute_mode']]})",
                    detail=f"CUDA answered {said}. {notes}: an exclusive GPU takes one CUDA process at a time (the "
                           "next one is refused while the first holds it), a prohibited one none.", evidence=ev,
                    gpus=[g["index"] for g in locked], remedy=Remediation(
                        "Stop the process that holds the GPU, use another GPU, or (if the machine's policy allows) "
                        "set the default compute mode.",
                        (*remedies.gpu_holders(),
                         *_each(lambda i, bus: remedies.gpu_setting(f"-i {i} -c DEFAULT"), locked)),
                        (remedies.NVIDIA_SMI_DOC,)))
    title, text = errors.cuda_init_text(_BUSY) or ("GPUs are busy or unavailable", "")
    shown = ("; the compute mode the text shows is " + ", ".join(
        f"{_label(g)}: {_MODES.get(g['compute_mode'], g['compute_mode'])}" for g in gpus if g.get("compute_mode") is not None)
             if any(g.get("compute_mode") is not None for g in gpus) else "; the GPUs' compute mode is not in the text")
    if any(g.get("compute_mode") is not None for g in gpus):
        text = "Another process may hold the GPUs, or a GPU is in a bad state."  # not the compute mode: it was shown
    return fail(title, detail=f"CUDA answered {said}{shown}. {text}".strip(), evidence=ev, remedy=Remediation(
        "Find which process holds the GPUs and which compute mode they are in (an exclusive GPU takes one CUDA "
        "process at a time); a GPU in a bad state is reset by a reboot.", remedies.gpu_holders(),
        (remedies.NVIDIA_SMI_DOC,)))


# -- gpu-mig ---------------------------------------------------------------------------------------------------------
@check("gpu-mig", "MIG configuration exposes CUDA devices", healthcheck=True, needs=("nvml.gpus",))
def gpu_mig(facts: Facts) -> CheckResult:
    none = _no_gpus(facts)
    if none:
        return none
    gpus = _gpus(facts)
    ev = _gpu_ev(gpus, "mig_mode", "mig_devices")
    if (unknown := _not_reported(gpus, "MIG mode", ("mig_mode",), ev)) is not None:
        return unknown
    empty = [g for g in gpus if (g.get("mig_mode") or {}).get("current") == 1 and not g.get("mig_devices")
             and "mig_devices" not in (g.get("missing") or {})]
    if empty:
        return fail("MIG is enabled but no MIG instances exist", detail=", ".join(_label(g) for g in empty) + ": with "
                    "MIG on, CUDA only sees MIG instances, and there are none, so this GPU gives CUDA no device "
                    "(CUDA_ERROR_NO_DEVICE / torch.cuda.device_count() == 0).", evidence=ev,
                    gpus=[g["index"] for g in empty], remedy=Remediation(
                        "Create GPU and compute instances, or turn MIG off.",
                        (*_each(lambda i, bus: remedies.gpu_setting(f"mig -i {i} -lgip", "the instance profiles this GPU offers"),
                                empty),
                         # Profile 0 is the whole-GPU slice (7g on A100/H100, 4g on A30) on every MIG GPU.
                         *_each(lambda i, bus: remedies.gpu_setting(f"mig -i {i} -cgi 0 -C", "one whole-GPU instance; pick "
                                                                    "smaller profiles from -lgip to split it"), empty),
                         *_each(lambda i, bus: remedies.gpu_setting(f"-i {i} -mig 0", "or disable MIG (then reset the GPU)"),
                                empty)),
                        (MIG_GUIDE,)))
    pending = [g for g in gpus if (g.get("mig_mode") or {}).get("pending") not in
               (None, (g.get("mig_mode") or {}).get("current"))]
    if pending:
        return warn("MIG mode change pending", detail=", ".join(
            f"{_label(g)}: MIG {g['mig_mode']['current']} -> {g['mig_mode']['pending']}" for g in pending) +
            " after the GPU is reset.", evidence=ev, gpus=[g["index"] for g in pending],
            remedy=Remediation("Reset the GPU (no processes may use it) or reboot.",
                               (*_resets(pending), remedies.reboot("instead")), (MIG_GUIDE,)))
    many = [g for g in gpus if len(g.get("mig_devices") or []) > 1]
    py = facts.value("python.executable") or "python"
    if many and VisibleDevices.from_facts(facts).kind != "mig":
        return warn("Several MIG instances, but a CUDA process uses only one", detail=", ".join(
            f"{_label(g)}: {len(g['mig_devices'])} MIG instances" for g in many) + ". CUDA enumerates a single MIG "
            "instance per process; select one explicitly per process.", evidence=ev,
            gpus=[g["index"] for g in many],
            remedy=Remediation("Run one process per MIG instance, each with its MIG UUID (`nvidia-smi -L` lists them).",
                               ("nvidia-smi -L",
                                *(f"CUDA_VISIBLE_DEVICES={uuid} {py} train.py   # process {n} of "
                                  f"{len(many[0]['mig_devices'])} on {_label(many[0])}"
                                  for n, uuid in enumerate(many[0]["mig_devices"], 1))),
                               (MIG_GUIDE,)))
    enabled = [g for g in gpus if (g.get("mig_mode") or {}).get("current") == 1]
    if enabled:
        return ok("MIG instances are configured", detail=", ".join(
            f"{_label(g)}: {len(g.get('mig_devices') or [])} instance(s)" for g in enabled), evidence=ev)
    return ok("MIG is off" + _of(gpus, "mig_mode"), detail=_gaps(gpus, "mig_mode").strip(), evidence=ev)


# -- gpu-xid ------------------------------------------------------------------------------------------------------------
@check("gpu-xid", "No GPU hardware/driver errors (Xid) in the kernel log", needs=("driver.xid_events",),
       judges_failures=True)
def gpu_xid(facts: Facts) -> CheckResult:
    reading = facts.get("driver.xid_events")
    ev = evidence(facts, "driver.xid_events")
    if not reading.ok or reading.value is None:
        return skip("Kernel log not readable", detail=reading.describe() if not reading.ok else
                    "driver.xid_events is null: the kernel log was not read.", evidence=ev)
    events = list(reading.value)
    if not events:
        return ok("No Xid events in the kernel log", evidence=ev)
    severe = [e for e in events if e["code"] in XID_SEVERE]
    counts: dict[int, int] = {}
    for e in events:
        counts[e["code"]] = counts.get(e["code"], 0) + 1
    summary = ", ".join(f"Xid {c} x{n} ({XID_SEVERE.get(c) or XID_APP.get(c) or 'see the Xid catalogue'})"
                        for c, n in sorted(counts.items()))
    last = events[-1]["line"]
    if severe:
        fallen = any(e["code"] == 79 for e in severe)
        named = _xid_gpus(facts, severe)
        commands: list[str] = [remedies.kernel_log("xid", times=True, tail=20)]
        commands += ([f"nvidia-smi -q -d ECC,ROW_REMAPPER,PERFORMANCE -i {i}" for i in named] if named
                     else ["nvidia-smi -q -d ECC,ROW_REMAPPER,PERFORMANCE"])
        text = ("Check the GPUs named in the Xid lines: reset or reboot, and look at power, cooling and seating; if it "
                "recurs, run a diagnostic and RMA.")
        if fallen:
            text = ("Xid 79 (fallen off the bus): check PSU capacity and power cables, temperatures and seating, update "
                    "the system BIOS, then reboot; recurring means failing hardware (RMA).")
        return fail("GPU hardware or driver errors in the kernel log", detail=f"{summary}. Latest: {last}",
                    evidence=ev, gpus=named, remedy=Remediation(text, tuple(commands), (XID_DOC,)))
    return warn("Application-level GPU faults in the kernel log", detail=f"{summary}. Latest: {last}. These usually "
                "come from a crashing program (illegal memory access), not from the hardware.", evidence=ev,
                gpus=_xid_gpus(facts, events), remedy=Remediation("If they match your crashes, debug the program (CUDA_LAUNCH_BLOCKING=1, "
                                   "compute-sanitizer).",
                                   (f"compute-sanitizer {facts.value('python.executable') or 'python'} train.py",),
                                   (XID_DOC,)))


def _pci_key(text: Any) -> tuple[int, int] | None:
    """(bus, device) of a PCI address in any of the spellings NVML, sysfs and NVRM use
    (``00000000:18:00.0``, ``0000:18:00.0``, ``PCI:0000:18:00``)."""
    parts = str(text or "").removeprefix("PCI:").split(".", 1)[0].split(":")
    try:
        return int(parts[-2], 16), int(parts[-1], 16)
    except (IndexError, ValueError):
        return None


def _xid_gpus(facts: Facts, events: Iterable[dict[str, Any]]) -> list[int]:
    """NVML indices of the GPUs the Xid lines name (by PCI address)."""
    by_bus = {_pci_key(g.get("pci_bus_id")): g.get("index") for g in _gpus(facts) if g.get("pci_bus_id")}
    found = {by_bus.get(_pci_key(e.get("pci"))) for e in events}
    return sorted(i for i in found if isinstance(i, int))


# -- fabric-manager -------------------------------------------------------------------------------------------------------
_FABRIC_STATES = {0: "not supported", 1: "not started", 2: "in progress", 3: "completed"}


def _fabric_log(facts: Facts, mismatch: dict[str, str] | None, no_nvswitch: bool, ev: dict[str, Any],
                remedy: Remediation) -> CheckResult | None:
    """What the fabric manager's own log says: no NVSwitch to manage (its exit is then expected, and no
    fabric manager is needed), or a driver of another version than its own (it refuses to start)."""
    if no_nvswitch:
        ev = {**evidence(facts, "driver.nvswitch_present", "driver.fabricmanager_service"), **ev}
        return ok("No NVSwitch: the fabric manager has nothing to manage", detail="its log says NV_WARN_NOTHING_TO_DO "
                  "(no NVSwitch found); GPUs without NVSwitch (PCIe, NVLink bridges) need no fabric manager, so its "
                  "failing to start is expected there.", evidence=ev)
    if mismatch:
        ev.update(evidence(facts, "driver.fabricmanager_mismatch", "driver.fabricmanager_service"))
        return fail(f"The fabric manager ({mismatch.get('fabricmanager')}) does not match the driver "
                    f"({mismatch.get('driver')})", detail="the fabric manager refuses a driver of another version and "
                    "does not start; on NVSwitch systems (HGX/DGX) CUDA then fails with error 802 \"system not yet "
                    "initialized\".", evidence=ev, remedy=remedy)
    return None


@check("fabric-manager", "The NVSwitch fabric is ready (fabric manager)", healthcheck=True,
       needs=("nvml.gpus", "driver.nvswitch_present"), owns=("cuda.init:802",))
def fabric_manager(facts: Facts) -> CheckResult:
    cuda_802 = (facts.value("cuda.init") or {}).get("code") == 802
    service = facts.value("driver.fabricmanager_service") if facts.get("driver.fabricmanager_service").ok else None
    stopped = service in ("inactive", "failed", "not-found", "masked")
    mismatch = facts.value("driver.fabricmanager_mismatch") if facts.get("driver.fabricmanager_mismatch").ok else None
    no_nvswitch = facts.get("driver.nvswitch_present").ok and facts.value("driver.nvswitch_present") is False
    none = _no_gpus(facts)
    if none and not cuda_802 and not stopped and not mismatch and not no_nvswitch:
        return none
    gpus = _gpus(facts) if none is None else []
    ev = _gpu_ev(gpus, "fabric")
    ev.update(evidence(facts, "cuda.init", "nvml.driver_version"))
    driver = (facts.value("nvml.driver_version") or facts.value("driver.kernel_module_version")
              or (mismatch or {}).get("driver"))
    # Pinned to the driver's version (without one read, the shell asks the driver for it).
    remedy = Remediation(
        "Install nvidia-fabricmanager of exactly the driver's version and start it; CUDA works once the fabric state "
        "is 'completed'.",
        (remedies.fabric_manager_install(str(driver) if driver else None),
         remedies.service_enable("nvidia-fabricmanager"), "systemctl status nvidia-fabricmanager",
         "nvidia-smi -q | grep -A 3 -i fabric"), (FABRIC_GUIDE, remedies.FABRIC_PACKAGING))
    with_fabric = [g for g in gpus if (g.get("fabric") or {}).get("state", 0) != 0]
    not_started = [g for g in with_fabric if g["fabric"]["state"] == 1]
    failed = [g for g in with_fabric if g["fabric"]["state"] == 3 and g["fabric"].get("status")]
    in_progress = [g for g in with_fabric if g["fabric"]["state"] == 2]
    if not_started or failed:
        notes = [f"{_label(g)}: fabric not started" for g in not_started]
        notes += [f"{_label(g)}: fabric setup finished with error status {g['fabric']['status']}" for g in failed]
        return fail("The NVSwitch fabric is not set up", detail="; ".join(notes) + ". On NVSwitch systems CUDA fails "
                    "with error 802 \"system not yet initialized\" until the fabric manager has finished.",
                    evidence=ev, gpus=[g["index"] for g in not_started + failed], remedy=remedy)
    if in_progress:
        return warn("The NVSwitch fabric is still being set up", detail=", ".join(_label(g) for g in in_progress) +
                    ": fabric state 'in progress'. CUDA returns 802 until it completes (usually seconds after boot).",
                    evidence=ev, gpus=[g["index"] for g in in_progress], remedy=remedy)
    if (logged := _fabric_log(facts, mismatch, no_nvswitch and not cuda_802, ev, remedy)) is not None:
        return logged
    if stopped and not cuda_802:
        ev.update(evidence(facts, "driver.fabricmanager_service"))
        return fail(f"The fabric manager service is {service}", detail=f"systemd shows nvidia-fabricmanager "
                    f"{service}; on NVSwitch systems (HGX/DGX) CUDA fails with error 802 \"system not yet initialized\" "
                    "until it runs, with exactly the driver's version.", evidence=ev, remedy=remedy)
    if cuda_802:
        message = (facts.value("cuda.init") or {}).get("message") or "system not yet initialized"
        return fail("CUDA error 802: the fabric manager is not running", detail=f"cuInit returned 802 \"{message}\"; "
                    "on NVSwitch systems (HGX/DGX) this means nvidia-fabricmanager is not running or does not match "
                    "the driver.", evidence=ev, remedy=remedy)
    if (unknown := _not_reported(gpus, "The NVSwitch fabric state", ("fabric",), ev)) is not None:
        return unknown
    if with_fabric:
        return ok("NVSwitch fabric set up" + _of(gpus, "fabric"), detail=", ".join(_label(g) for g in with_fabric)
                  + _gaps(gpus, "fabric"), evidence=ev)
    return ok("No NVSwitch fabric on these GPUs" + _of(gpus, "fabric"), detail=_gaps(gpus, "fabric").strip(),
              evidence=ev)
