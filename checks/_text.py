"""What a pasted text shows, for the checks that judge it (pure functions of Facts).

A paste shows only part of a machine: a variable a command line sets (``text.env_assignments``), the symptom the
program printed (``text.messages``, ``torch.cuda_available``). These helpers read those facts and never guess: a
value the text does not show is ``None`` (unknown), never "unset" or "healthy".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..model import Facts

__all__ = ["assigned", "gpu_count", "message_causes", "no_gpu_seen"]


def assigned(facts: Facts, name: str) -> str | None:
    """The value a command line in the text gives ``name`` (a ``NAME=value`` prefix or assignment), or None when
    the text does not show it set."""
    reading = facts.get("text.env_assignments")
    if not reading.ok or not isinstance(reading.value, Mapping):
        return None
    value = reading.value.get(name)
    return str(value) if value is not None else None


def message_causes(facts: Facts) -> set[str]:
    """The causes of the catalogue rows the text holds (``text.messages``)."""
    rows = facts.value("text.messages") if facts.get("text.messages").ok else None
    return {str(r.get("cause")) for r in rows or () if isinstance(r, Mapping) and r.get("cause")}


def no_gpu_seen(facts: Facts) -> str | None:
    """Why the text shows that CUDA saw no GPU in the process (torch's "No CUDA GPUs are available", CUDA's
    no-device error, ``torch.cuda.is_available()`` False, a device count of 0); None when it does not show that."""
    if "no-visible-gpu" in message_causes(facts):
        return "the text holds CUDA's \"no CUDA-capable device\" / torch's \"No CUDA GPUs are available\""
    if facts.get("torch.cuda_available").ok and facts.value("torch.cuda_available") is False:
        return "torch.cuda.is_available() is False in the text"
    count = facts.value("torch.device_count") if facts.get("torch.device_count").ok else None
    if isinstance(count, int) and not isinstance(count, bool) and count == 0:
        return "torch.cuda.device_count() is 0 in the text"
    return None


#: Where a GPU list counts the driver's GPUs. A tool's start-up line (llama.cpp, Ollama, TensorFlow) lists the
#: devices CUDA shows the process, after CUDA_VISIBLE_DEVICES was applied, and prose names the cards it mentions:
#: neither says how many the driver has.
_NOT_THE_DRIVERS = ("tool log", "prose")


def gpu_count(facts: Facts) -> tuple[int, str] | None:
    """How many GPUs the text shows the driver has (nvidia-smi's list, collect_env's, a device count), and
    where that came from; None when it shows none, or only a tool's or a sentence's list."""
    def read(key: str) -> Any:
        r = facts.get(key)
        return r.value if r.ok and r.source not in _NOT_THE_DRIVERS else None

    count, gpus = read("nvml.device_count"), read("nvml.gpus")
    if isinstance(count, int) and not isinstance(count, bool) and count > 0:
        return count, "nvml.device_count"
    if isinstance(gpus, (list, tuple)) and gpus:
        return len(gpus), "nvml.gpus"
    return None
