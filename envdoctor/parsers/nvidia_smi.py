"""Parse plain ``nvidia-smi`` output (the summary table, ``-L`` lines, ``-q`` fields and its
failure messages) into ``nvml.*`` facts, the same keys the NVML probe writes."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .. import errors
from ..model import Reading, Reason, missing, ok
from ..versions import cuda_to_int

SOURCE = "nvidia-smi"

KEYS = ("nvml.driver_version", "nvml.cuda_driver_version", "nvml.device_count", "nvml.gpus")
#: Written only when the text shows it (NVML's init result); a paste without it leaves it unset,
#: not ``not_in_report`` like KEYS.
WRITES_WHEN_SHOWN = ("nvml.init",)

_HEADER_RE = re.compile(r"NVIDIA-SMI\s+\d+(?:\.\d+)+")
_DRIVER_RE = re.compile(r"Driver Version\s*:\s*(\d+(?:\.\d+)+)")
# The summary header always has "CUDA Version: 12.8"; ``-q`` pads the colon ("CUDA Version : 12.8").
_CUDA_RE = re.compile(r"CUDA Version\s*:\s*(\d+\.\d+)")
_BUS_RE = re.compile(r"\b([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\b")
# First cell of a GPU row: index, name, then persistence mode (Linux) or driver model (Windows).
_GPU_CELL_RE = re.compile(r"^\s*(\d{1,3})\s+(.*?\S)\s+(On|Off|WDDM|TCC|MCDM|N/A)\s*$")
_MEM_RE = re.compile(r"(\d+)\s*MiB\s*/\s*(\d+)\s*MiB")
_LIST_RE = re.compile(r"^GPU\s+(\d+):\s*(.+?)\s*\(UUID:\s*(GPU-[0-9a-fA-F-]+)\)")
_PRODUCT_RE = re.compile(r"^Product Name\s*:\s*(.*\S)")
_PROC_RE = re.compile(
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
    """True when the text holds nvidia-smi output (a table header, ``-L`` lines or an error)."""
    for line in lines:
        if _HEADER_RE.search(line) and "Driver Version" in line:
            return True
        if _LIST_RE.match(line) or any(f in line for f in _FAILURES) or any(n in line for n in _NOT_FOUND):
            return True
    return False


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

    if driver:
        out["nvml.driver_version"] = ok(driver, SOURCE)
    elif failure or not_found:
        detail = failure or not_found or ""
        # "Driver/library version mismatch" is followed by the user-space library's version.
        lib = next((ln.strip() for ln in lines if ln.strip().startswith("NVML library version")), None)
        out["nvml.driver_version"] = missing(Reason.FAILED, SOURCE, f"{detail} {lib}" if lib else detail)
    if driver:
        out["nvml.init"] = ok({"code": 0, "name": "NVML_SUCCESS", "reason": None, "message": "Success"}, SOURCE)
    elif failure:
        for words, code, name in errors.nvml_printed():
            if words.lower() in failure.lower():
                reason = {9: "absent", 12: "absent", 4: "denied"}.get(code, "failed")
                out["nvml.init"] = ok({"code": code, "name": name, "reason": reason, "message": words}, SOURCE,
                                      failure)
                break
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
    names = [m.group(1) for ln in lines if (m := _PRODUCT_RE.match(ln.strip()))]
    return [{"index": i, "name": n} for i, n in enumerate(names)]
