"""Typed views of the facts checks read most: NVML's GPUs, torch's devices and build, and what
CUDA_VISIBLE_DEVICES selects. Each has a ``from_facts`` (or a function over Facts) that never
raises: a missing fact or an odd value (a hand-edited report, an old producer) gives an empty
view or ``None`` fields, so a check asks one typed place instead of ``.get()`` chains.

The keys read here are the registry's (:mod:`envdoctor.knowledge.factkeys`); the views add no knowledge
of their own beyond the shape of those values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from envdoctor.knowledge import compat, versions
from envdoctor.knowledge.compat import Platform

from .model import Facts, Reason


def _str(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else str(value)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _strs(value: Any) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        return ()
    return tuple(str(v) for v in value)


def _mappings(value: Any) -> list[Mapping[str, Any]]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        return []
    return [v for v in value if isinstance(v, Mapping)]


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def same_uuid(a: Any, b: Any) -> bool:
    """GPU UUIDs compared as NVML (``GPU-…``) and torch (no prefix) write them."""
    return bool(a) and bool(b) and str(a).removeprefix("GPU-") == str(b).removeprefix("GPU-")


# -- nvml.gpus ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Gpu:
    """One entry of ``nvml.gpus``. Every NVML field stays reachable through :meth:`get`; the ones
    every check needs are typed attributes."""

    position: int  # where it is in nvml.gpus
    index: int | None
    name: str | None
    uuid: str | None
    pci_bus_id: str | None
    compute_capability: tuple[int, int] | None
    memory_total: int | None
    fields: Mapping[str, Any] = field(repr=False)

    @classmethod
    def from_nvml(cls, entry: Mapping[str, Any], position: int = 0) -> Gpu:
        return cls(position, _int(entry.get("index")), _str(entry.get("name")), _str(entry.get("uuid")),
                   _str(entry.get("pci_bus_id")), versions.parse_cc(entry.get("compute_capability")),
                   _int(entry.get("memory_total")), entry)

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)

    @property
    def error(self) -> Mapping[str, Any] | None:
        """NVML's error when even the GPU's handle could not be had (then no field was read)."""
        err = self.fields.get("error")
        return err if isinstance(err, Mapping) and err else None

    @property
    def lost(self) -> bool:
        return self.fields.get("lost") is True

    def missing(self, name: str) -> Mapping[str, Any] | None:
        """Why field ``name`` was not read (``{"reason", "name", "detail"}``), or None."""
        info = _mapping(self.fields.get("missing")).get(name)
        return info if isinstance(info, Mapping) else None

    def pcie_max(self) -> tuple[int | None, int | None]:
        """(generation, width) the GPU and system support (NVML's Max* calls, else the current
        ones): the current generation drops at idle to save power."""
        pcie = _mapping(self.fields.get("pcie"))

        def first(*names: str) -> int | None:
            return next((v for n in names if (v := _int(pcie.get(n))) is not None and v > 0), None)

        return first("max_gen", "gen"), first("max_width", "width")


def gpus(facts: Facts) -> list[Gpu]:
    """Every object in ``nvml.gpus``, in order (entries NVML could not open included: see ``error``)."""
    return [Gpu.from_nvml(g, pos) for pos, g in enumerate(_mappings(facts.value("nvml.gpus")))]


def find_gpu(found: Sequence[Gpu], uuid: Any = None, index: int | None = None) -> Gpu | None:
    """The GPU with this UUID, else the only one, else (no UUID given) the one with this index."""
    chosen = next((g for g in found if same_uuid(g.uuid, uuid)), None) if uuid else None
    if chosen is None and len(found) == 1:
        chosen = found[0]
    if chosen is None and not uuid and index is not None:
        chosen = next((g for g in found if g.index == index), None)
    return chosen


# -- torch.devices ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TorchDevice:
    """One entry of ``torch.devices`` (``torch.cuda.get_device_properties``)."""

    index: int | None
    name: str | None
    capability: tuple[int, int] | None
    total_memory: int | None
    uuid: str | None
    error: str | None

    @classmethod
    def from_torch(cls, entry: Mapping[str, Any]) -> TorchDevice:
        return cls(_int(entry.get("index")), _str(entry.get("name")), versions.parse_cc(entry.get("capability")),
                   _int(entry.get("total_memory")), _str(entry.get("uuid")), _str(entry.get("error")))


def torch_devices(facts: Facts) -> list[TorchDevice]:
    return [TorchDevice.from_torch(d) for d in _mappings(facts.value("torch.devices"))]


# -- torch's build ------------------------------------------------------------------------------------------------
def torch_variant(facts: Facts) -> str | None:
    """``cu126``, ``cpu``, ``rocm6.2`` from the torch facts, when torch was read."""
    version = facts.value("torch.version")
    if not version:
        # torch failed to import: its distribution metadata still carries the local tag.
        version = _mapping(facts.value("python.packages")).get("torch")
        return versions.local_tag(version) if version else None
    if tag := versions.local_tag(version):
        return tag
    cuda = facts.value("torch.cuda_version")
    if cuda:
        return versions.variant_for_cuda(cuda)
    if facts.get("torch.cuda_version").ok:
        return "cpu"
    return None


@dataclass(frozen=True)
class TorchBuild:
    """The installed torch as built: ``2.6.0+cu126`` is public ``2.6.0``, variant ``cu126``, CUDA ``12.6``."""

    version: str
    public: str
    variant: str | None  # "cu126", "cpu", "rocm6.2", None when not known
    cuda: str | None  # the CUDA it was built with; None for a CPU/ROCm build or when unknown
    cudnn_build: str | None = None  # "9.1.0", the cuDNN it was compiled against
    nccl: str | None = None  # "2.21.5"

    @classmethod
    def from_facts(cls, facts: Facts) -> TorchBuild | None:
        """None when torch's version was not read or is not a version (a mangled paste)."""
        ver = facts.value("torch.version")
        if not ver or versions.parse(ver) is None:
            return None
        text = str(ver)
        cuda = facts.value("torch.cuda_version")
        if cuda is not None and versions.parse(str(cuda)) is None:
            cuda = None  # a hand-edited or hostile report: not a version, so not used
        variant = torch_variant(facts)
        if not cuda and variant:
            cuda = versions.variant_cuda(variant)
        return cls(text, text.split("+", 1)[0], variant, str(cuda) if cuda else None,
                   _str(facts.value("torch.cudnn_build_version")), _str(facts.value("torch.nccl_version")))


# -- CUDA_VISIBLE_DEVICES -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CudaDevice:
    """One CUDA ordinal and the NVML GPU it is (``visibility.cuda_devices["devices"][i]``)."""

    cuda: int | None
    nvml_index: int | None
    uuid: str | None
    pci_bus_id: str | None
    name: str | None
    mig_uuid: str | None

    @classmethod
    def from_fact(cls, entry: Mapping[str, Any]) -> CudaDevice:
        return cls(_int(entry.get("cuda")), _int(entry.get("nvml_index")), _str(entry.get("uuid")),
                   _str(entry.get("pci_bus_id")), _str(entry.get("name")), _str(entry.get("mig_uuid")))


@dataclass(frozen=True)
class VisibleDevices:
    """``visibility.cuda_visible_devices`` as CUDA parses it, and (``mapped``) the CUDA ordinals
    matched to NVML's GPUs from ``visibility.cuda_devices``."""

    raw: str | None = None
    is_set: bool = False
    kind: str | None = None  # "unset", "empty", "index", "uuid", "mig"
    entries: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()
    stopped_at: str | None = None
    stop_reason: str | None = None  # "invalid", "negative", "duplicate"
    hides_all: bool = False
    loose_tokens: tuple[str, ...] = ()
    mapped: bool = False  # visibility.cuda_devices was read
    devices: tuple[CudaDevice, ...] = ()
    unmatched: str | None = None
    order: str | None = None  # "PCI_BUS_ID" or "FASTEST_FIRST"
    order_certain: bool = True

    @classmethod
    def from_facts(cls, facts: Facts) -> VisibleDevices:
        parsed = _mapping(facts.value("visibility.cuda_visible_devices"))
        mapping = _mapping(facts.value("visibility.cuda_devices"))
        return cls(
            raw=_str(parsed.get("raw")), is_set=bool(parsed.get("set")), kind=_str(parsed.get("kind")),
            entries=_strs(parsed.get("entries")), ignored=_strs(parsed.get("ignored")),
            stopped_at=_str(parsed.get("stopped_at")), stop_reason=_str(parsed.get("stop_reason")),
            hides_all=bool(parsed.get("hides_all")), loose_tokens=_strs(parsed.get("loose_tokens")),
            mapped=bool(mapping), devices=tuple(CudaDevice.from_fact(d) for d in _mappings(mapping.get("devices"))),
            unmatched=_str(mapping.get("unmatched")), order=_str(mapping.get("order")),
            order_certain=bool(mapping.get("order_certain", True)))

    @property
    def nvml_indices(self) -> list[int]:
        """The NVML indices of the GPUs the CUDA ordinals are, in CUDA order."""
        return [d.nvml_index for d in self.devices if d.nvml_index is not None]


__all__ = ["CudaDevice", "Gpu", "Platform", "TorchBuild", "TorchDevice", "VisibleDevices", "cudnn_error", "driver_cuda",
           "driver_os", "driver_version", "find_gpu", "gpus", "platform_of", "same_uuid", "torch_devices",
           "torch_import_error", "torch_variant"]


# -- platform, driver, torch's failure texts ----------------------------------------------------------------------
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


def _failure_text(facts: Facts, key: str, older: str) -> str | None:
    """The text a fact ``key`` holds; for reports written before ``key`` existed, the failure detail of
    the fact ``older`` that carried the same text."""
    value = facts.value(key)
    if value:
        return str(value)
    if key not in facts:
        reading = facts.get(older)
        if reading.reason is Reason.FAILED and reading.detail:
            return reading.detail
    return None


def torch_import_error(facts: Facts) -> str | None:
    """The text ``import torch`` failed with (``torch.import_error``), None when it imported or was not
    read. Reports written before that fact existed carry the text as torch.version's failure detail."""
    return _failure_text(facts, "torch.import_error", "torch.version")


def cudnn_error(facts: Facts) -> str | None:
    """The text reading the loaded cuDNN's version raised (``torch.cudnn_error``; torch's "cuDNN version
    incompatibility" error is the usual one). Older reports carry it as torch.cudnn_version's detail."""
    return _failure_text(facts, "torch.cudnn_error", "torch.cudnn_version")
