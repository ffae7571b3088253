"""Helpers shared by the paste parsers: value conventions of collect_env and version conversions."""

from __future__ import annotations

from ..lazyre import lazy_re
from ..model import Reading, Reason, missing, ok

#: What collect_env prints when a reader returned None (``replace_nones``) or found no NVIDIA
#: stack at all (``No CUDA``). Both mean "this field was not read", never a value.
COULD_NOT_COLLECT = "could not collect"
NO_CUDA = "no cuda"
NOT_APPLICABLE = "n/a"

_VERSION_RE = lazy_re(r"\d+(?:\.\d+)+")
_BOOL = {"true": True, "yes": True, "false": False, "no": False}


def version_in(text: str) -> str | None:
    """The first dotted version number in ``text`` (``"(Ubuntu 11.4.0-1) 11.4.0"`` -> ``"11.4.0"``)."""
    found = _VERSION_RE.search(text)
    return found.group(0) if found else None


def to_bool(text: str) -> bool | None:
    """collect_env prints booleans as ``True/False`` (torch >= 1.5) or ``Yes/No`` (older)."""
    return _BOOL.get(text.strip().lower())


def unread(value: str, source: str, what: str) -> Reading:
    """The reading for a placeholder collect_env printed instead of a value."""
    low = value.strip().lower()
    if low == NO_CUDA:
        # Printed for every CUDA field when torch sees no CUDA and nvcc/nvidia-smi gave nothing.
        return missing(Reason.FAILED, source, "No CUDA")
    if low == COULD_NOT_COLLECT:
        return missing(Reason.FAILED, source, "Could not collect")
    if low == "":
        # collect_env never prints an empty value (None becomes "Could not collect"): the paste
        # was cut off right after the label.
        return missing(Reason.NOT_IN_REPORT, source, f"{what}: the paste ends at the label (truncated)")
    return missing(Reason.FAILED, source, f"{what}: {value.strip()!r}")


def is_placeholder(value: str) -> bool:
    return value.strip().lower() in (COULD_NOT_COLLECT, NO_CUDA, NOT_APPLICABLE, "", "none")


def not_read(readings: dict[str, Reading], key: str) -> bool:
    """No parser has read ``key`` yet (absent, or a reading with its reason): a later reader may fill it."""
    reading = readings.get(key)
    return reading is None or not reading.ok


def not_in_report(source: str, what: str) -> Reading:
    return missing(Reason.NOT_IN_REPORT, source, f"the pasted report has no {what}")


__all__ = ["is_placeholder", "not_in_report", "not_read", "ok", "to_bool", "unread",
           "version_in"]
