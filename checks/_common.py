"""Shared judgement helpers for the built-in checks (pure functions of Facts)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..model import Facts
from ..views import torch_variant

__all__ = ["cpu_only", "gib", "gpu_presence", "library_errors", "mib", "nccl_versions_differ", "outside_wheel",
           "torch_variant"]


def gpu_presence(facts: Facts) -> tuple[bool | None, str]:
    """Whether an NVIDIA GPU is present, from the strongest fact available, and why we think so.

    ``None`` means the facts cannot tell (nothing about GPUs was collected)."""
    count = facts.value("nvml.device_count")
    if isinstance(count, int) and count > 0:
        return True, f"NVML sees {count} GPU(s)"
    devices = facts.value("torch.devices")
    if devices:
        return True, f"torch sees {len(devices)} GPU(s)"
    pci = facts.value("driver.pci_gpus")
    if pci:
        return True, f"{len(pci)} NVIDIA device(s) on the PCI bus"
    gpus = facts.value("nvml.gpus")
    if gpus:
        return True, f"{len(gpus)} GPU(s) listed"
    if isinstance(count, int) and count == 0:
        return False, "NVML reports 0 GPUs"
    if facts.get("driver.pci_gpus").ok and pci is not None and len(pci) == 0:
        return False, "no NVIDIA device on the PCI bus"
    return None, "no GPU facts were collected"


def cpu_only(facts: Facts) -> str | None:
    """Why this is a CPU-only machine (a valid setup, not a fault), or None when the facts do not show that.

    The one test every check asks: the PCI bus was read and holds no NVIDIA display device, and nothing
    else saw a GPU (NVML, torch, a loaded nvidia kernel module). WSL 2 is never CPU-only by this test: its
    GPU reaches Linux through /dev/dxg and is not on the VM's PCI bus. A container counts: /sys shows the
    host's bus (sysfs is not namespaced)."""
    pci = facts.get("driver.pci_gpus")
    if not pci.ok or pci.value is None or len(pci.value) or facts.value("host.wsl"):
        return None
    count = facts.value("nvml.device_count")
    if (isinstance(count, int) and count > 0) or facts.value("torch.devices") or facts.value("nvml.gpus"):
        return None
    if facts.value("driver.kernel_module_version") or facts.value("nvml.driver_version"):
        return None
    scanned = facts.value("driver.pci_scanned")
    among = f" among the {scanned} devices" if isinstance(scanned, int) and not isinstance(scanned, bool) else ""
    return f"no NVIDIA GPU (vendor 0x10de){among} on the PCI bus"


def gib(n: Any) -> str:
    try:
        return f"{int(n) / (1 << 30):.1f} GiB"
    except (TypeError, ValueError):
        return "?"


def mib(n: Any) -> str:
    try:
        return f"{int(n) / (1 << 20):.0f} MiB"
    except (TypeError, ValueError):
        return "?"


def library_errors(facts: Facts) -> list[dict[str, Any]]:
    """Dynamic-loader failures torch met ("undefined symbol", "cannot open shared object file", …), as the
    parsers and the python probe wrote them (``torch.loader_failures``, parsed by
    ``envdoctor.knowledge.messages.loader_errors``); none when that fact was not read."""
    reading = facts.get("torch.loader_failures")
    if not reading.ok or not isinstance(reading.value, (list, tuple)):
        return []
    return [_loader_record(e) for e in reading.value if isinstance(e, Mapping)]


#: The fields the checks read from a loader record; a hand-edited report or an older producer may lack any.
_LOADER_FIELDS = ("path", "kind", "symbol", "library", "provider", "family", "version_node")
#: What a record says when the message named no symbol (Windows' WinError 127: "The specified procedure
#: could not be found" names none).
UNNAMED_SYMBOL = "a symbol the message does not name"


def _loader_record(entry: Mapping[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = dict.fromkeys(_LOADER_FIELDS)
    record.update(entry)
    if record["kind"] == "undefined-symbol" and not record["symbol"]:
        record["symbol"] = UNNAMED_SYMBOL
    return record


def outside_wheel(path: str | None) -> bool:
    """True for a library path that is not a pip wheel's copy (site-packages/…), e.g. /usr/local/cuda."""
    if not path or "/" not in path:
        return False
    norm = path.replace("\\", "/")
    return "/site-packages/" not in norm and "/dist-packages/" not in norm


def nccl_versions_differ(facts: Facts) -> tuple[str, list[str]] | None:
    """The first NCCL wheel the text lists at more than one version (several nodes' listings), with them."""
    listed = facts.value("nccl.wheel_versions") if facts.get("nccl.wheel_versions").ok else None
    for name, found in sorted((listed or {}).items()):
        if len(set(found)) > 1:
            return name, sorted(set(found))
    return None


#: cuDNN's own library (libcudnn.so.8, cudnn64_9.dll), not one of its sub-libraries (libcudnn_cnn_infer.so.8, …).
_CUDNN_MAIN_RE = re.compile(r"^(?:lib)?cudnn(?:64_\d+\.dll|\.so(?:\.\d+)*)$", re.IGNORECASE)


def cudnn_main_missing(err: Mapping[str, Any]) -> bool:
    """cuDNN itself cannot be found (no copy of it is there to be mixed with another): the loader's finding, not the
    mixed-copies one, which a missing or symbol-short sub-library shows."""
    return err.get("kind") == "missing-library" and err.get("family") == "cudnn" and \
        bool(_CUDNN_MAIN_RE.match(str(err.get("library") or "")))


def framework_version(facts: Facts, name: str) -> str | None:
    """The version of a framework other than torch the text states (``text.frameworks``: an issue form, a pip
    line, the framework's own banner), or None when it shows none."""
    shown = facts.value("text.frameworks") if facts.get("text.frameworks").ok else None
    found = shown.get(name) if isinstance(shown, Mapping) else None
    return str(found) if found else None
