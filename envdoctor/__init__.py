"""envdoctor: probe a GPU/PyTorch environment, judge it, and say exactly what to do.

Plugin authors need only ``from envdoctor import check, kit`` (and ``Facts`` for typing); the
heavy parts (rich, pynvml, torch) are imported lazily by the commands that need them.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "check", "Facts", "Finding", "Remediation", "Status", "kit"]


def __getattr__(name: str) -> Any:
    if name == "check":
        from .registry import check

        return check
    if name in ("Facts", "Finding", "Remediation", "Status"):
        from . import model

        return getattr(model, name)
    if name == "kit":
        # ``from . import kit`` would ask this very __getattr__ again (RecursionError on a first import).
        return importlib.import_module(f"{__name__}.kit")
    raise AttributeError(name)
