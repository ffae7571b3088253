"""A healthy-facts builder: a realistic working GPU node; tests change one thing and judge."""

from __future__ import annotations

from typing import Any

from envdoctor.model import Facts, Reading, Reason, missing, ok


def healthy_readings() -> dict[str, Reading]:
    """One H100 node, driver 570.124.06, torch 2.6.0+cu126 from the official index."""
    gpu = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-5e1f0c4a-0000-0000-0000-000000000000",
           "pci_bus_id": "00000000:18:00.0", "compute_capability": "9.0", "memory_total": 85520809984,
           "memory_used": 0}
    return {
        "host.os": ok("Linux"), "host.distro": ok("Ubuntu 22.04.4 LTS"), "host.kernel": ok("5.15.0-100-generic"),
        "host.arch": ok("x86_64"), "host.glibc": ok("2.35"), "host.cpu_count": ok(64),
        "host.cgroup_cpu_limit": ok(None), "host.cgroup_memory_limit": ok(None), "host.memory_total": ok(1 << 40),
        "host.container": ok(None), "host.container_evidence": ok([]), "host.wsl": ok(False),
        "host.shm_size": ok(64 << 30), "host.is_root": ok(False),
        "env.vars": ok({"PATH": "/usr/local/bin:/usr/bin:/bin"}),
        "python.executable": ok("/opt/venv/bin/python"), "python.version": ok("3.11.9"),
        "python.implementation": ok("CPython"),
        "python.packages": ok({"torch": "2.6.0+cu126", "nvidia-cudnn-cu12": "9.5.1.17", "nvidia-nccl-cu12": "2.21.5",
                               "nvidia-ml-py": "12.570.86", "triton": "3.2.0"}),
        "torch.version": ok("2.6.0+cu126"), "torch.path": ok("/opt/venv/lib/python3.11/site-packages/torch"),
        "torch.cuda_version": ok("12.6"), "torch.hip_version": ok(None), "torch.debug": ok(False),
        "torch.arch_list": ok(["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]),
        "torch.cudnn_version": ok(90501), "torch.nccl_version": ok("2.21.5"), "torch.cuda_available": ok(True),
        "torch.cuda_available_messages": ok([]), "torch.device_count": ok(1),
        "torch.devices": ok([{"index": 0, "name": gpu["name"], "capability": [9, 0], "total_memory": 85520809984}]),
        "torch.cuda_init_error": ok(None), "torch.loaded_libraries": ok({}),
        "nvml.driver_version": ok("570.124.06"), "nvml.cuda_driver_version": ok(12080), "nvml.device_count": ok(1),
        "nvml.gpus": ok([gpu]),
        "driver.pci_gpus": ok([{"address": "0000:18:00.0", "vendor": "0x10de", "device": "0x2330",
                                "class": "0x030200", "driver": "nvidia"}]),
    }


def facts(**changes: Any) -> Facts:
    """Healthy facts with changes: ``key=value`` sets a value, ``key=Reading`` sets a reading,
    ``key=None`` removes the key. Keys use ``__`` for dots (``torch__version``)."""
    return changed(healthy_readings(), changes)


def changed(data: dict[str, Reading], changes: dict[str, Any]) -> Facts:
    """``data`` with :func:`facts`-style ``changes`` applied (so builders that extend the
    healthy node, like the NVIDIA one, take the same keywords)."""
    for name, value in changes.items():
        key = name.replace("__", ".")
        if value is None:
            data.pop(key, None)
        elif isinstance(value, Reading):
            data[key] = value
        else:
            data[key] = ok(value)
    return Facts(data)


__all__ = ["changed", "facts", "healthy_readings", "missing", "ok", "Reason"]
