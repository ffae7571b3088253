"""envdoctor: probe a GPU/PyTorch environment, judge it, and say exactly what to do.

Plugin authors need only ``from envdoctor import check, kit`` (and ``Facts``, ``CheckResult`` for
typing); the heavy parts (rich, pynvml, torch) are imported lazily by the commands that need them. The
``TYPE_CHECKING`` imports give a type checker the real types of the lazily served names.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import kit
    from .model import Facts, Finding, Reading, Reason, Remediation, Status
    from .registry import CheckResult, CheckSpec, check

__version__ = "0.1.0"
__all__ = ["__version__", "check", "CheckResult", "CheckSpec", "Facts", "Finding", "Reading", "Reason", "Remediation",
           "Status", "kit"]

_FROM_MODEL = ("Facts", "Finding", "Reading", "Reason", "Remediation", "Status")


def __getattr__(name: str) -> Any:
    if name in ("check", "CheckResult", "CheckSpec"):
        from . import registry

        return getattr(registry, name)
    if name in _FROM_MODEL:
        from . import model

        return getattr(model, name)
    if name == "kit":
        # ``from . import kit`` would ask this very __getattr__ again (RecursionError on a first import).
        return importlib.import_module(f"{__name__}.kit")
    raise AttributeError(name)
