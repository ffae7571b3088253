"""What the compatibility checks read from the facts: the GPUs with their compute capability, the
installed torch build, its packages, and the words shared by their findings."""

from __future__ import annotations

import re
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envdoctor import views
from envdoctor.knowledge import catalogue, compat, remedies, versions
from envdoctor.knowledge.compat import CC, ArchList

from ..model import Facts
from ..views import TorchBuild
from ._common import torch_variant

GET_STARTED = remedies.PYTORCH_GET_STARTED
PREVIOUS = remedies.PYTORCH_PREVIOUS
DRIVERS = remedies.DRIVER_DOWNLOAD
MVC = remedies.CUDA_COMPATIBILITY


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


#: The last answer, by Facts identity (several checks ask), held weakly: a strong hold kept the
#: previous report's facts and their copies alive while the next one loaded (diff of two 58 MB reports).
_GPUS: list[tuple[weakref.ref[Facts], list[Gpu]]] = []


def _forget(memo: list[Any], ref: weakref.ref[Facts]) -> None:
    """The facts of ``memo``'s entry are gone: so is the answer (it may be large)."""
    if memo and memo[0][0] is ref:
        memo.clear()


def gpus(facts: Facts) -> list[Gpu]:
    """GPUs with their compute capability: NVML's, else torch's, else the table's by product name."""
    if _GPUS and _GPUS[0][0]() is facts:
        return list(_GPUS[0][1])
    out = _read_gpus(facts)
    _GPUS[:] = [(weakref.ref(facts, lambda r: _forget(_GPUS, r)), out)]
    return list(out)


def _read_gpus(facts: Facts) -> list[Gpu]:
    torch_devs = [d for d in (facts.value("torch.devices") or []) if isinstance(d, Mapping)]
    by_name = {str(d.get("name")): versions.parse_cc(d.get("capability")) for d in torch_devs if d.get("name")}
    out: list[Gpu] = []
    nvml = [g for g in (facts.value("nvml.gpus") or []) if isinstance(g, Mapping)]
    for pos, g in enumerate(nvml):
        name = str(g.get("name") or "")
        cc, origin = versions.parse_cc(g.get("compute_capability")), "nvml"
        if cc is None and by_name.get(name):
            cc, origin = by_name[name], "torch"
        if cc is None and name:
            cc, origin = compat.cc_for_gpu(name), "table"
        out.append(Gpu(_int(g.get("index"), pos), name, cc, origin))
    if out:
        return out
    for pos, d in enumerate(torch_devs):
        name = str(d.get("name") or "")
        cc, origin = versions.parse_cc(d.get("capability")), "torch"
        if cc is None and name:
            cc, origin = compat.cc_for_gpu(name), "table"
        out.append(Gpu(_int(d.get("index"), pos), name, cc, origin))
    if out:
        return out
    # Neither NVML nor torch listed a GPU: a pasted `lspci -nn` / kernel PCI line still names each by its
    # PCI id, which the GPU catalogue resolves (the id tells chips apart that share a product name).
    for pos, dev in enumerate(d for d in (facts.value("pci.nvidia_devices") or []) if isinstance(d, Mapping)):
        info = compat.gpu_by_pci_id(str(dev.get("device") or ""))
        out.append(Gpu(pos, info.name if info else str(dev.get("name") or f"10de:{dev.get('device')}"),
                       info.cc if info else None, "table"))
    return out


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def torch_build(facts: Facts) -> TorchBuild | None:
    return TorchBuild.from_facts(facts)


def installed_arch(facts: Facts, build: TorchBuild) -> ArchList | None:
    """What the installed torch reports (``get_arch_list()``), else the table's list for its build.

    ``get_arch_list()`` is empty whenever CUDA is unavailable, so an empty list means "unknown"."""
    reported = facts.value("torch.arch_list")
    if reported:
        parsed = compat.parse_arch_list(reported)
        if parsed.targets:
            return parsed
    if build.variant:
        return compat.arch_list(build.public, build.variant, views.platform_of(facts))
    return None


def _python(facts: Facts) -> str | None:
    return facts.value("python.version")


def _exe(facts: Facts) -> str | None:
    """The target interpreter, whose pip a remedy runs (None for a paste that does not name it)."""
    return facts.value("python.executable") or None


_PACKAGES: list[tuple[weakref.ref[Facts], dict[str, str]]] = []  # the last answer, as _GPUS


def _lower(name: str) -> str:
    return name if name.islower() else name.lower()  # lower() copies even a lower-case name


def _packages(facts: Facts) -> dict[str, str]:
    """Distribution name (lower-case) -> version. Shared between checks: read it, never change it."""
    if _PACKAGES and _PACKAGES[0][0]() is facts:
        return _PACKAGES[0][1]
    pkgs = facts.value("python.packages") or {}
    out = _lowered(pkgs) if hasattr(pkgs, "items") else {}
    _PACKAGES[:] = [(weakref.ref(facts, lambda r: _forget(_PACKAGES, r)), out)]
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
    drv = views.driver_version(facts)
    cap = views.driver_cuda(facts)
    if cap is None:
        return ""
    cuda = versions.cuda_from_int(cap)
    return f"your driver {drv} supports CUDA {cuda}" if drv else f"your driver supports CUDA {cuda}"


def _torch_dist(facts: Facts) -> tuple[str | None, str | None]:
    """(public version, variant) of torch, from torch itself or, when its import failed, its
    distribution's metadata in the package list."""
    build = torch_build(facts)
    if build is not None:
        return build.public, build.variant
    dist = _packages(facts).get("torch")
    if not dist or versions.parse(str(dist).split("+")[0]) is None:
        return None, None
    return str(dist).split("+")[0], torch_variant(facts)


def _gpus_without_any_wheel(facts: Facts) -> list[Gpu]:
    """GPUs that no torch wheel in the table runs on (gpu-eol's fail): a driver upgrade cannot help them."""
    plat = views.platform_of(facts)
    return [g for g in gpus(facts) if g.cc and compat.supported_by_newest(g.cc, plat) is False
            and compat.last_release_for(g.cc, plat) is None]


def _cuda_unavailable(facts: Facts) -> bool:
    """torch itself reported that CUDA does not work (``torch.cuda.is_available()`` False)."""
    return facts.value("torch.cuda_available") is False


def pip_found_no_torch(facts: Facts) -> str | None:
    """pip's own line that it found no torch at all ("… the requirement torch (from versions: none)", "No matching
    distribution found for torch"), or None."""
    said = facts.value("text.messages") if facts.get("text.messages").ok else ()
    for row in catalogue.judged_rows(said, "python-supported"):
        args = [str(a).strip() for a in row.get("args") or ()]
        name = re.split(r"[\s<>=!~\[;(]", args[0], maxsplit=1)[0].lower() if args else ""
        if name == "torch" and (row.get("id") == "pip-no-matching-distribution" or args[-1:] == ["none"]):
            return str(row.get("line"))
    return None
