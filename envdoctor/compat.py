"""Compatibility knowledge lookups (interim: the compat issue replaces this with the data file)."""

from __future__ import annotations

from .model import Facts

# (variant, CUDA version as the driver API encodes it)
_VARIANTS = (("cu130", 13000), ("cu129", 12090), ("cu128", 12080), ("cu126", 12060), ("cu118", 11080))


def driver_cuda(facts: Facts) -> int | None:
    for key in ("nvml.cuda_driver_version", "cuda.driver_version"):
        value = facts.value(key)
        if isinstance(value, int) and value > 0:
            return value
    return None


def variant_for_driver(facts: Facts) -> tuple[str, str]:
    cap = driver_cuda(facts)
    if cap is None:
        return "cu128", "No NVIDIA driver was read, so the variant cannot be matched to it;"\
            " cu128 runs on drivers >= 525.60.13 (CUDA 12 minor-version compatibility)."
    for variant, needs in _VARIANTS:
        if needs <= cap:
            return variant, f"Your driver supports CUDA {cap // 1000}.{cap % 1000 // 10}, so {variant} wheels run on it."
    return "cu118", "Your driver is older than CUDA 11.8 needs; upgrade the driver."
