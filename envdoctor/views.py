"""Typed views of the facts checks read most, so each is read one way everywhere.

Each view takes Facts and tolerates missing or odd values (a pasted report, a hand-edited file).
"""

from __future__ import annotations


from . import compat, versions
from .compat import Platform
from .model import Facts, Reason

__all__ = ["Platform", "cudnn_error", "driver_cuda", "driver_os", "driver_version", "platform_of", "torch_import_error"]


def platform_of(facts: Facts) -> Platform:
    os_name = str(facts.value("host.os") or "Linux")
    arch = str(facts.value("host.arch") or "x86_64").lower()
    if os_name == "Windows":
        return "windows_x86_64"
    return "linux_aarch64" if arch in ("aarch64", "arm64") else "linux_x86_64"


def driver_os(facts: Facts) -> str:
    """Whose driver numbering applies: WSL2 runs on the Windows driver."""
    if facts.value("host.os") == "Windows" or facts.value("host.wsl"):
        return "Windows"
    return "Linux"


def driver_cuda(facts: Facts) -> int | None:
    """The highest CUDA the driver supports, as the API encodes it (``12080``), from the facts.

    NVML/cuDriverGetVersion first; else derived from the driver version string via the table (a
    pasted collect_env carries the driver version but not its CUDA)."""
    for key in ("nvml.cuda_driver_version", "cuda.driver_version"):
        value = facts.value(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    drv = driver_version(facts)
    if drv:
        ans = compat.highest_cuda_for_driver(drv, driver_os(facts))
        if ans.value:
            return versions.cuda_to_int(ans.value)
    return None


def driver_version(facts: Facts) -> str | None:
    for key in ("nvml.driver_version", "driver.kernel_module_version"):
        value = facts.value(key)
        if value and versions.parse(value) is not None:
            return str(value)
    return None


def torch_import_error(facts: Facts) -> str | None:
    """The text ``import torch`` failed with (``torch.import_error``), None when it imported or was not
    read. Reports written before that fact existed carry the text as torch.version's failure detail."""
    value = facts.value("torch.import_error")
    if value:
        return str(value)
    if "torch.import_error" not in facts:
        reading = facts.get("torch.version")
        if reading.reason is Reason.FAILED and reading.detail:
            return reading.detail
    return None


def cudnn_error(facts: Facts) -> str | None:
    """The text reading the loaded cuDNN's version raised (``torch.cudnn_error``; torch's "cuDNN version
    incompatibility" error is the usual one). Older reports carry it as torch.cudnn_version's detail."""
    value = facts.value("torch.cudnn_error")
    if value:
        return str(value)
    if "torch.cudnn_error" not in facts:
        reading = facts.get("torch.cudnn_version")
        if reading.reason is Reason.FAILED and reading.detail:
            return reading.detail
    return None
