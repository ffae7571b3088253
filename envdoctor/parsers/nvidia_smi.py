"""Parse plain ``nvidia-smi`` output (the summary table, ``-L`` lines, ``-q`` fields and its
failure messages) into ``nvml.*`` facts, the same keys the NVML probe writes."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from envdoctor.knowledge import errors
from envdoctor.knowledge.versions import cuda_to_int

from ..lazyre import lazy_re
from ..model import Reading, Reason, missing, ok

SOURCE = "nvidia-smi"

KEYS = ("nvml.driver_version", "nvml.cuda_driver_version", "nvml.device_count", "nvml.gpus")
#: Written only when the text shows it (NVML's init result); a paste without it leaves it unset,
#: not ``not_in_report`` like KEYS.
WRITES_WHEN_SHOWN = ("nvml.init", "nvml.smi_not_found")

_HEADER_RE = lazy_re(r"NVIDIA-SMI\s+\d+(?:\.\d+)+")
_DRIVER_RE = lazy_re(r"Driver Version\s*:\s*(\d+(?:\.\d+)+)")
# The summary header always has "CUDA Version: 12.8"; ``-q`` pads the colon ("CUDA Version : 12.8").
_CUDA_RE = lazy_re(r"CUDA Version\s*:\s*(\d+\.\d+)")
_BUS_RE = lazy_re(r"\b([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\b")
# First cell of a GPU row: index, name, then persistence mode (Linux) or driver model (Windows).
_GPU_CELL_RE = lazy_re(r"^\s*(\d{1,3})\s+(.*?\S)\s+(On|Off|WDDM|TCC|MCDM|N/A)\s*$")
_MEM_RE = lazy_re(r"(\d+)\s*MiB\s*/\s*(\d+)\s*MiB")
_LIST_RE = lazy_re(r"^GPU\s+(\d+):\s*(.+?)\s*\(UUID:\s*(GPU-[0-9a-fA-F-]+)\)")
_PRODUCT_RE = lazy_re(r"^Product Name\s*:\s*(.*\S)")
_PROC_RE = lazy_re(
    r"^\|\s*(\d+)\s+(?:(?:N/A|\d+)\s+(?:N/A|\d+)\s+)?(\d+)\s+(C\+G|C|G|M\+C|M)\s+(.+?)\s+(\d+MiB|N/A)\s*\|$")
_FAILURES = (
    "NVIDIA-SMI has failed",
    "Failed to initialize NVML",
    "couldn't communicate with the NVIDIA driver",
    "Unable to determine the device handle",
    # libnvidia-container (nvidia-container-cli, the docker / containerd hook) when NVML fails on the host:
    # "nvidia-container-cli: initialization error: nvml error: driver/library version mismatch: unknown".
    "nvidia-container-cli: initialization error: nvml error",
)
# What nvidia-smi prints after "Failed to initialize NVML: " (or instead of it) and the NVML
# return code behind it come from envdoctor/data/errors.json (errors.nvml_printed), so a pasted
# failure feeds the same nvml-init / driver-version-mismatch checks as a live probe.
_NOT_FOUND = ("nvidia-smi: command not found", "'nvidia-smi' is not recognized", "nvidia-smi: not found")
_MIB = 1 << 20


def looks_like(lines: Sequence[str]) -> bool:
    """True when the text holds nvidia-smi output (a table header, ``-q`` blocks, ``-L`` lines or an error)."""
    for line in lines:
        if _HEADER_RE.search(line) and "Driver Version" in line:
            return True
        # `nvidia-smi -q` / `-a`: its banner, or a GPU block line ("GPU 00000000:01:00.0").
        if "NVSMI LOG" in line or _QUERY_GPU_RE.match(line.strip()):
            return True
        if _LIST_RE.match(line) or any(f in line for f in _FAILURES) or any(n in line for n in _NOT_FOUND):
            return True
    return False


def explained_lines(lines: Sequence[str]) -> set[str]:
    """The failure lines :func:`parse` reads into facts (NVML's init failure, a shell that cannot find
    nvidia-smi), stripped: the checks judge them, so they are no unexplained errors."""
    return {ln.strip() for ln in lines if any(n in ln for n in _NOT_FOUND)
            or (any(f in ln for f in _FAILURES) and _init_failure(ln.strip()) is not None)}


def parse(lines: Sequence[str]) -> dict[str, Reading]:
    """nvml.* readings from the nvidia-smi parts of ``lines``; keys it cannot see are left out."""
    out: dict[str, Reading] = {}
    failure = next((ln.strip() for ln in lines if any(f in ln for f in _FAILURES)), None)
    not_found = next((ln.strip() for ln in lines if any(n in ln for n in _NOT_FOUND)), None)
    driver = cuda = None
    for line in lines:
        if driver is None and (m := _DRIVER_RE.search(line)):
            driver = m.group(1)
        if cuda is None and (m := _CUDA_RE.search(line)):
            cuda = m.group(1)

    gpus = _table_gpus(lines) or _list_gpus(lines) or _query_gpus(lines)
    no_devices = any(ln.strip() == "No devices were found" for ln in lines)

    if not_found:
        out["nvml.smi_not_found"] = ok(not_found, SOURCE)
    if driver:
        out["nvml.driver_version"] = ok(driver, SOURCE)
    elif failure or not_found:
        detail = failure or not_found or ""
        # "Driver/library version mismatch" is followed by the user-space library's version.
        lib = next((ln.strip() for ln in lines if ln.strip().startswith("NVML library version")), None)
        out["nvml.driver_version"] = missing(Reason.FAILED, SOURCE, f"{detail} {lib}" if lib else detail)
    if driver:
        out["nvml.init"] = ok({"code": 0, "name": "NVML_SUCCESS", "reason": None, "message": "Success"}, SOURCE)
    elif failure and (init := _init_failure(failure)):
        out["nvml.init"] = init
    if cuda:
        out["nvml.cuda_driver_version"] = ok(cuda_to_int(cuda), SOURCE, f"CUDA Version: {cuda}")
    elif "nvml.driver_version" in out and not out["nvml.driver_version"].ok:
        out["nvml.cuda_driver_version"] = out["nvml.driver_version"]
    if gpus:
        out["nvml.gpus"] = ok(gpus, SOURCE)
        out["nvml.device_count"] = ok(len(gpus), SOURCE)
    elif no_devices:
        out["nvml.gpus"] = ok([], SOURCE, "No devices were found")
        out["nvml.device_count"] = ok(0, SOURCE, "No devices were found")
    elif (failure or not_found) and not out["nvml.driver_version"].ok:
        out["nvml.gpus"] = out["nvml.driver_version"]
        out["nvml.device_count"] = out["nvml.driver_version"]
    return out


def _init_failure(failure: str) -> Reading | None:
    """NVML's init result behind the words nvidia-smi printed (errors.json's table), or None."""
    for words, code, name in errors.nvml_printed():
        if words.lower() in failure.lower():
            info = errors.nvml().get(code)
            reason = (info.reason if info else None) or "failed"
            return ok({"code": code, "name": name, "reason": reason, "message": words}, SOURCE, failure)
    return None


def _cells(line: str) -> list[str]:
    return line.strip().strip("|").split("|")


def _table_gpus(lines: Sequence[str]) -> list[dict[str, Any]]:
    gpus: list[dict[str, Any]] = []
    by_index: dict[int, dict[str, Any]] = {}
    for i, line in enumerate(lines):
        if not line.startswith("|"):
            continue
        cells = _cells(line)
        if len(cells) >= 2 and (m := _GPU_CELL_RE.match(cells[0])) and (bus := _BUS_RE.search(cells[1])):
            gpu: dict[str, Any] = {"index": int(m.group(1)), "name": m.group(2), "pci_bus_id": bus.group(1)}
            # Memory sits on the row below the name row (same GPU block).
            if i + 1 < len(lines) and (mem := _MEM_RE.search(lines[i + 1])):
                gpu["memory_used"] = int(mem.group(1)) * _MIB
                gpu["memory_total"] = int(mem.group(2)) * _MIB
            gpus.append(gpu)
            by_index[gpu["index"]] = gpu
        elif (p := _PROC_RE.match(line.strip())) and int(p.group(1)) in by_index:
            used = p.group(5)
            by_index[int(p.group(1))].setdefault("processes", []).append(
                {"pid": int(p.group(2)), "type": p.group(3), "name": p.group(4),
                 "memory_used": int(used[:-3]) * _MIB if used.endswith("MiB") else None})
    return gpus


def _list_gpus(lines: Sequence[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for line in lines:
        # A paste of a loop (`watch nvidia-smi -L`, a pod's repeated logs) lists each GPU many times.
        if (m := _LIST_RE.match(line.strip())) and m.group(3) not in seen:
            seen.add(m.group(3))
            out.append({"index": int(m.group(1)), "name": m.group(2), "uuid": m.group(3)})
    return out


def _query_gpus(lines: Sequence[str]) -> list[dict[str, Any]]:
    """The GPUs of ``nvidia-smi -q`` (or ``-a``): one block per ``GPU 00000000:01:00.0`` line, its fields
    in the per-GPU shape the NVML probe writes (:func:`_query_fields`). Pastes lose the indentation,
    so a field is placed by the section header above it, not by its depth."""
    blocks: list[dict[str, Any]] = []
    for line in lines:
        text = line.strip()
        if (m := _QUERY_GPU_RE.match(text)) is not None:
            blocks.append({"pci_bus_id": m.group(1), "_rows": []})
        elif blocks and text:
            blocks[-1]["_rows"].append(text)
    if not blocks:  # a fragment without its GPU line: its product names still count
        names = [m.group(1) for ln in lines if (m := _PRODUCT_RE.match(ln.strip()))]
        return [{"index": i, "name": n} for i, n in enumerate(names)]
    gpus = []
    for index, block in enumerate(blocks):
        gpu: dict[str, Any] = {"index": index, "pci_bus_id": block["pci_bus_id"]}
        gpu.update(_query_fields(block["_rows"]))
        gpus.append(gpu)
    return gpus


_QUERY_GPU_RE = lazy_re(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])$")
_FIELD_RE = lazy_re(r"^(\S.*?)\s*:\s*(.*)$")
_ON = {"enabled": 1, "disabled": 0}
_YES = {"yes": True, "no": False}
_COMPUTE_MODES = {"default": 0, "exclusive_thread": 1, "prohibited": 2, "exclusive_process": 3}
# nvidia-smi's words for the nvmlClocksEventReason* bits (nvml.h: GpuIdle 0x1, ApplicationsClocksSetting 0x2,
# SwPowerCap 0x4, HwSlowdown 0x8, SyncBoost 0x10, SwThermalSlowdown 0x20, HwThermalSlowdown 0x40,
# HwPowerBrakeSlowdown 0x80, DisplayClockSetting 0x100), printed under "Clocks Throttle Reasons" (drivers
# before 535) or "Clocks Event Reasons".
_CLOCK_BITS = {"idle": 0x1, "applications clocks setting": 0x2, "sw power cap": 0x4, "hw slowdown": 0x8,
               "sync boost": 0x10, "sw thermal slowdown": 0x20, "hw thermal slowdown": 0x40,
               "hw power brake slowdown": 0x80, "display clock setting": 0x100}
_FABRIC_STATES = {"not started": 1, "in progress": 2, "completed": 3}


def _int(value: str) -> int | None:
    m = re.match(r"^(\d+)", value)
    return int(m.group(1)) if m else None


def _query_fields(rows: Sequence[str]) -> dict[str, Any]:  # noqa: C901 - one flat table of nvidia-smi's fields
    """One GPU block's fields: each ``Key : Value`` row read under the nearest section header above it."""
    out: dict[str, Any] = {}
    section = scope = ""
    ecc: dict[str, list[int]] = {"volatile": [], "aggregate": []}
    clocks: int | None = None
    for text in rows:
        m = _FIELD_RE.match(text)
        if m is None:
            header = text.lower()
            if header in ("volatile", "aggregate"):
                scope = header
            elif header in ("single bit", "double bit"):
                section = f"ecc errors/{header}"
            else:
                section, scope = header, ""
            continue
        key, value = m.group(1).lower(), m.group(2).strip()
        low = value.lower()
        if key == "product name":
            out["name"] = value
        elif key == "gpu uuid" and value.startswith("GPU-"):
            out["uuid"] = value
        elif key == "persistence mode" and low in _ON:
            out["persistence_mode"] = _ON[low]
        elif key == "compute mode" and low in _COMPUTE_MODES:
            out["compute_mode"] = _COMPUTE_MODES[low]
        elif section in ("mig mode", "ecc mode") and key in ("current", "pending") and low in _ON:
            out.setdefault(section.replace(" ", "_"), {})[key] = _ON[low]
        elif section in ("pcie generation", "link width") and key in ("current", "max") and _int(value) is not None:
            name = ("gen" if section == "pcie generation" else "width") if key == "current" else \
                ("max_gen" if section == "pcie generation" else "max_width")
            out.setdefault("pcie", {})[name] = _int(value)
        elif section in ("clocks throttle reasons", "clocks event reasons") and key in _CLOCK_BITS and \
                low in ("active", "not active"):
            clocks = (clocks or 0) | (_CLOCK_BITS[key] if low == "active" else 0)
        elif section == "remapped rows" and (field := {"correctable error": "correctable", "uncorrectable error":
                                                       "uncorrectable", "pending": "pending",
                                                       "remapping failure occurred": "failure"}.get(key)):
            parsed = _YES.get(low) if field in ("pending", "failure") else _int(value)
            if parsed is not None:
                out.setdefault("remapped_rows", {})[field] = parsed
        elif section == "retired pages" and key in ("pending page blacklist", "pending page retirement", "pending") \
                and low in _YES:
            out["retired_pages_pending"] = int(_YES[low])
        elif scope and (key == "total" and section == "ecc errors/double bit" or "uncorrectable" in key
                        and section == "ecc errors") and _int(value) is not None:
            ecc[scope].append(_int(value) or 0)
        elif section == "temperature" and key == "gpu current temp" and _int(value) is not None:
            out["temperature"] = _int(value)
        elif section == "fabric" and key == "state" and low in _FABRIC_STATES:
            out.setdefault("fabric", {})["state"] = _FABRIC_STATES[low]
    if clocks is not None:
        out["clocks_event_reasons"] = clocks
    if (out.get("ecc_mode") or {}).get("current") == 1:
        for scope_name, key in (("volatile", "ecc_uncorrected_volatile"), ("aggregate", "ecc_uncorrected_aggregate")):
            if ecc[scope_name]:
                out[key] = sum(ecc[scope_name])
    if (out.get("mig_mode") or {}).get("current") == 1:
        # -q does not list the MIG instances; mig-devices is judged from `nvidia-smi -L` or a live probe.
        out["missing"] = {"mig_devices": {"reason": "absent", "detail": "nvidia-smi -q does not list MIG instances"}}
    return out
