"""Version codecs, once each: how CUDA, cuDNN, NCCL, compute capabilities and wheel variant tags
are written as integers, tuples and strings, and the conversions between them.

Every other module asks here; none divides by 1000 itself. The encodings are NVIDIA's:
- CUDA (``cudaRuntimeGetVersion``, ``cuDriverGetVersion``, NVML, ``CUDART_VERSION``):
  ``major*1000 + minor*10`` — ``12080`` is 12.8.
- cuDNN (``cudnnGetVersion``, ``torch.backends.cudnn.version()``): ``major*1000 + minor*100 + patch``
  up to cuDNN 8 (``8902`` is 8.9.2), ``major*10000 + minor*100 + patch`` from cuDNN 9 (``90100``).
- NCCL (``ncclGetVersion``, ``NCCL_VERSION_CODE``): ``major*1000 + minor*100 + patch`` before 2.9
  (``2708``), ``major*10000 + minor*100 + patch`` from 2.9 (``22105`` is 2.21.5).
- compute capability: ``(9, 0)``, ``"9.0"``, ``"sm_90"``, ``"compute_90"``, ``"90"``.
- PyTorch wheel variants: ``cu126`` is CUDA 12.6; ``cpu``; ``rocm6.2``.

Sources: https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART____VERSION.html,
https://docs.nvidia.com/deeplearning/cudnn/backend/latest/api/cudnn-graph-library.html (cudnnGetVersion),
https://github.com/NVIDIA/nccl/blob/master/src/nccl.h.in (NCCL_VERSION), and the variant folders of
PyTorch's wheel index (its base URL is ``index.base`` in data/compat.json).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from packaging.version import InvalidVersion, Version

CC = tuple[int, int]
Triple = tuple[int, int, int]

_LEADING_NUMBER_RE = re.compile(r"\s*(\d+(?:\.\d+)*)")
_CC_DOTTED_RE = re.compile(r"(\d+)\.(\d)")
_CC_SM_RE = re.compile(r"(?:sm_|compute_)?(\d+)(\d)[af]?")
_VARIANT_CUDA_RE = re.compile(r"cu(\d+)(\d)")


# ---------------------------------------------------------------------------------------------
# Generic version strings

@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        m = _LEADING_NUMBER_RE.match(text)
        return Version(m.group(1)) if m else None


def parse(text: Any) -> Version | None:
    """A lenient ``packaging`` version: ``"570.124.06"``, ``"2.6.0+cu126"``, ``"12.8"``, and the leading
    number of anything else (``"12.4 (build 2)"``); None when there is no number at all."""
    if text is None:
        return None
    return _parse_text(str(text).strip())


def minor_of(text: Any) -> str | None:
    """``"2.6.0+cu126"`` -> ``"2.6"``."""
    v = parse(text)
    if v is None or len(v.release) < 2:
        return None
    return f"{v.release[0]}.{v.release[1]}"


def triple(text: Any) -> Triple | None:
    """``"9.1"`` -> ``(9, 1, 0)``: the first three release numbers, zero-padded."""
    v = parse(text)
    if v is None:
        return None
    rel = (*v.release, 0, 0)
    return rel[0], rel[1], rel[2]


def dotted(parts: tuple[int, ...] | list[int]) -> str:
    """``(9, 1, 0)`` -> ``"9.1.0"``."""
    return ".".join(str(int(p)) for p in parts)


# ---------------------------------------------------------------------------------------------
# CUDA: major*1000 + minor*10

def cuda_from_int(value: int) -> str:
    """``12080`` -> ``"12.8"``."""
    return f"{value // 1000}.{value % 1000 // 10}"


def cuda_to_int(text: Any) -> int | None:
    """``"12.8"`` (or ``"12.8.1"``, ``"12"``) -> ``12080``; None when it does not parse."""
    v = parse(text)
    if v is None:
        return None
    rel = (*v.release, 0)
    return rel[0] * 1000 + rel[1] * 10


def cuda_major(value: int) -> int:
    """``12080`` -> ``12``."""
    return value // 1000


def cuda_int_text(value: Any) -> str | None:
    """A positive CUDA API integer as ``"12.8"``; None for anything else (0 means "no driver")."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return cuda_from_int(value)


# ---------------------------------------------------------------------------------------------
# cuDNN and NCCL: two encodings each, told apart by size

def _split_code(value: int) -> Triple:
    if value >= 10000:  # cuDNN >= 9, NCCL >= 2.9
        return value // 10000, value % 10000 // 100, value % 100
    return value // 1000, value % 1000 // 100, value % 100


def cudnn_tuple(value: Any) -> Triple | None:
    """cuDNN as torch and ``cudnnGetVersion`` report it (``90100``, ``8907``), a tuple, or a string
    (``"9.10.2.21"``) -> ``(major, minor, patch)``."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return _split_code(value) if value > 0 else None
    if isinstance(value, (tuple, list)):
        try:
            nums = [int(p) for p in value[:3]]
        except (TypeError, ValueError):
            return None
        nums += [0] * (3 - len(nums))
        return nums[0], nums[1], nums[2]
    return triple(value)


def cudnn_to_int(value: Any) -> int | None:
    """``(8, 0, 3)`` or ``"8.0.3"`` -> ``8003``; ``(9, 1, 0)`` -> ``90100``: torch's encoding."""
    parts = cudnn_tuple(value)
    if parts is None:
        return None
    major, minor, patch = parts
    return major * 10000 + minor * 100 + patch if major >= 9 else major * 1000 + minor * 100 + patch


def cudnn_text(value: Any) -> str | None:
    """A cuDNN version integer (either encoding) as ``"9.1.0"``."""
    parts = cudnn_tuple(value) if isinstance(value, int) and value > 0 else None
    return dotted(parts) if parts else None


def nccl_text(value: Any) -> str | None:
    """An NCCL version integer (``22105``, or ``2708`` before 2.9) or tuple as ``"2.21.5"``; the
    suffix ``torch.cuda.nccl.version()`` appends to the tuple of some builds is kept as a part."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return dotted(_split_code(value)) if value > 0 else None
    if isinstance(value, (tuple, list)):
        return ".".join(str(p) for p in value)
    return str(value)


# ---------------------------------------------------------------------------------------------
# Compute capability

def parse_cc(value: Any) -> CC | None:
    """``"9.0"``, ``[9, 0]``, ``(12, 0)``, ``"sm_120"``, ``"120"`` -> ``(major, minor)``."""
    if isinstance(value, (list, tuple)) and len(value) >= 2:
        try:
            return int(value[0]), int(value[1])
        except (TypeError, ValueError):
            return None
    if isinstance(value, str) and len(value) < 64:
        return _parse_cc_text(value)
    return None


@functools.lru_cache(maxsize=1024)  # asked per GPU and per table row: few distinct texts
def _parse_cc_text(value: str) -> CC | None:
    text = value.strip()
    m = _CC_DOTTED_RE.fullmatch(text)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = _CC_SM_RE.fullmatch(text)
    if m:
        return int(m.group(1)), int(m.group(2))
    return None


def cc_text(cc: CC) -> str:
    """``(9, 0)`` -> ``"9.0"``."""
    return f"{cc[0]}.{cc[1]}"


def sm(cc: CC) -> str:
    """``(9, 0)`` -> ``"sm_90"``."""
    return f"sm_{cc[0]}{cc[1]}"


# ---------------------------------------------------------------------------------------------
# PyTorch wheel variants

@functools.lru_cache(maxsize=256)
def variant_cuda(variant: str | None) -> str | None:
    """``"cu128"`` -> ``"12.8"``; None for ``cpu``/``rocm…``."""
    m = _VARIANT_CUDA_RE.fullmatch(variant or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


def variant_for_cuda(cuda: Any) -> str:
    """``"12.8"`` -> ``"cu128"``."""
    v = parse(cuda)
    rel = (*(v.release if v else (0,)), 0)
    return f"cu{rel[0]}{rel[1]}"


def local_tag(version_text: Any) -> str | None:
    """The local version label of a wheel version: ``"2.6.0+cu126"`` -> ``"cu126"``; None without one."""
    text = str(version_text or "")
    return text.split("+", 1)[1] if "+" in text else None


def without_local(version_text: Any) -> str:
    """``"2.6.0+cu126"`` -> ``"2.6.0"``."""
    return str(version_text or "").split("+", 1)[0]


_SONAME_MAJOR_RE = re.compile(r"\.so\.(\d+)")
_DLL_DIGITS_RE = re.compile(r"64_(\d{2,3})(?:_\d+)?\.dll$|_(\d{3})_\d+\.dll$", re.IGNORECASE)


_SONAME_MINOR_RE = re.compile(r"\.so\.(\d+)\.(\d+)")


def soname_cuda(name: str | None) -> str | None:
    """The CUDA release a library file names to the minor: ``libcudart.so.9.0`` -> ``"9.0"``,
    ``libcudart.so.11.8.89`` -> ``"11.8"``; None for ``libcudart.so.12`` (a major only) or no soname."""
    if not name:
        return None
    m = _SONAME_MINOR_RE.search(name.replace("\\", "/").rsplit("/", 1)[-1])
    return f"{m.group(1)}.{m.group(2)}" if m else None


def soname_major(name: str | None) -> int | None:
    """The major a library file names: ``libcudart.so.9.0`` -> 9, ``libcudart.so.12`` -> 12; a Windows DLL
    names its CUDA release in digits: ``cudart64_110.dll`` -> 11 (11.0), ``cudart64_90.dll`` -> 9 (9.0),
    ``cudart64_12.dll`` -> 12, ``nvrtc64_120_0.dll`` / ``nvJitLink_120_0.dll`` -> 12. None when it names none."""
    if not name:
        return None
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    if m := _SONAME_MAJOR_RE.search(base):
        return int(m.group(1))
    if m := _DLL_DIGITS_RE.search(base):
        digits = m.group(1) or m.group(2)
        if len(digits) == 3:
            return int(digits[:2])
        # two digits: 80, 90, 92 are CUDA 8.0, 9.0, 9.2; from CUDA 12 on the DLL names the major alone (64_12)
        return int(digits[0]) if int(digits) >= 20 else int(digits)
    return None
