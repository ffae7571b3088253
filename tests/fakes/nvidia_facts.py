"""Healthy NVIDIA-stack facts for the driver and GPU-health checks: the core healthy node plus
every driver.*/nvml.*/cuda.*/visibility.* key, as the probes would write them on a working
8-GPU-style node (two A100s here). Tests change one thing and judge."""

from __future__ import annotations

import copy
from typing import Any

from envdoctor.model import Facts, Reading, ok

from ..builders import changed, healthy_readings


def healthy_gpu(index: int = 0, **changes: Any) -> dict[str, Any]:
    gpu: dict[str, Any] = {
        "index": index, "name": "NVIDIA A100-SXM4-80GB", "uuid": f"GPU-{index:08d}-1111-2222-3333-444444444444",
        "pci_bus_id": f"00000000:{7 + index:02X}:00.0", "compute_capability": "8.0", "memory_total": 85899345920,
        "memory_used": 4194304, "architecture": 7, "brand": 14, "persistence_mode": 1, "compute_mode": 0,
        "mig_mode": {"current": 0, "pending": 0}, "ecc_mode": {"current": 1, "pending": 1},
        "ecc_uncorrected_volatile": 0, "ecc_uncorrected_aggregate": 0,
        "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": 0, "failure": 0},
        "pcie": {"gen": 4, "max_gen": 4, "width": 16, "max_width": 16}, "clocks_event_reasons": 0,
        "temperature": 35, "power_usage_mw": 90000, "power_limit_mw": 400000, "utilization": {"gpu": 0, "memory": 0},
        "compute_processes": 0, "compute_pids": [], "fabric": {"state": 0, "status": 0},
        "missing": {"retired_pages_pending": {"reason": "unsupported", "name": "NVML_ERROR_NOT_SUPPORTED",
                                              "detail": "NVML_ERROR_NOT_SUPPORTED: Not Supported"}},
    }
    gpu.update(changes)
    return gpu


def healthy_nvidia_readings(gpus: list[dict[str, Any]] | None = None) -> dict[str, Reading]:
    gpus = gpus if gpus is not None else [healthy_gpu(0), healthy_gpu(1)]
    data = healthy_readings()
    data.update({
        "driver.kernel_module_version": ok("570.124.06"),
        "driver.modules": ok({"nvidia": True, "nvidia_uvm": True, "nvidia_modeset": True, "nvidia_drm": True,
                              "nvidia_peermem": False, "nouveau": False}),
        "driver.device_nodes": ok({"/dev/nvidia-uvm": "ok", "/dev/nvidia-uvm-tools": "ok", "/dev/nvidia0": "ok",
                                   "/dev/nvidia1": "ok", "/dev/nvidiactl": "ok"}),
        "driver.pci_gpus": ok([{"address": f"0000:{7 + g['index']:02x}:00.0", "vendor": "0x10de", "device": "0x20b2",
                                "class": "0x030200", "driver": "nvidia"} for g in gpus]),
        "driver.pci_scanned": ok(40),
        "driver.xid_events": ok([]),
        "nvml.init": ok({"code": 0, "name": "NVML_SUCCESS", "reason": None, "message": ""}),
        "nvml.library_path": ok("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.124.06"),
        "nvml.driver_version": ok("570.124.06"), "nvml.cuda_driver_version": ok(12080),
        "nvml.device_count": ok(len(gpus)), "nvml.gpus": ok(gpus),
        "cuda.init": ok({"code": 0, "name": "CUDA_SUCCESS", "message": "no error"}),
        "cuda.driver_version": ok(12080), "cuda.device_count": ok(len(gpus)),
        "cuda.library_path": ok("/usr/lib/x86_64-linux-gnu/libcuda.so.570.124.06"),
        "visibility.cuda_visible_devices": ok({"raw": None, "set": False, "kind": "unset", "entries": None,
                                               "ignored": [], "stopped_at": None, "stop_reason": None,
                                               "hides_all": False, "loose_tokens": []}),
        "visibility.cuda_device_order": ok(None),
        "visibility.nvidia_visible_devices": ok({"raw": None, "mode": "unset", "devices": []}),
        "visibility.nvidia_driver_capabilities": ok({"raw": None, "capabilities": ["compute", "utility"],
                                                     "default": True, "missing": []}),
        "visibility.cuda_devices": ok({"devices": [
            {"cuda": g["index"], "nvml_index": g["index"], "uuid": g.get("uuid"), "pci_bus_id": g.get("pci_bus_id"),
             "name": g.get("name")} for g in gpus], "unmatched": None, "order": "FASTEST_FIRST", "order_certain": True}),
    })
    return data


def nv_facts(gpus: list[dict[str, Any]] | None = None, **changes: Any) -> Facts:
    """Healthy NVIDIA facts with changes (``key=value``, ``key=Reading``, ``key=None`` removes;
    ``__`` stands for ``.``)."""
    return changed(healthy_nvidia_readings(copy.deepcopy(gpus) if gpus is not None else None), changes)
