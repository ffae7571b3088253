"""envdoctor: probe a GPU/PyTorch environment, judge it, and say exactly what to do.

Plugin authors need only ``from envdoctor import check, kit`` (and ``Facts``, ``CheckResult`` for
typing); the heavy parts (rich, pynvml, torch) are imported lazily by the commands that need them. The
``TYPE_CHECKING`` imports give a type checker the real types of the lazily served names.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import kit
    from .model import Facts, Finding, Reading, Reason, Remediation, Status
    from .registry import CheckResult, CheckSpec, check

__version__ = "0.1.0"
__all__ = ["__version__", "check", "CheckResult", "CheckSpec", "Facts", "Finding", "Reading", "Reason", "Remediation",
           "Status", "kit"]

_FROM_MODEL = ("Facts", "Finding", "Reading", "Reason", "Remediation", "Status")


class _SourceChecks:
    """``envdoctor.checks`` from a source checkout's top-level ``checks/`` folder.

    The wheel ships ``checks/`` as ``envdoctor/checks`` and an editable install maps it with its own
    finder; but ``python -m envdoctor`` (or ``torchrun -m envdoctor``) run from the repository
    root imports this package from the checkout, where no ``envdoctor/checks`` exists. This finder
    answers for exactly ``envdoctor.checks`` (its submodules follow its ``__path__``), so no
    top-level ``checks`` package is ever importable."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != f"{__name__}.checks":
            return None
        import importlib.util

        return importlib.util.spec_from_file_location(name, os.path.join(self.folder, "__init__.py"),
                                                      submodule_search_locations=[self.folder])


def _map_source_checks() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.isdir(os.path.join(here, "checks")):
        return  # installed from the wheel
    folder = os.path.join(os.path.dirname(here), "checks")
    if os.path.isfile(os.path.join(folder, "__init__.py")) and not any(
            isinstance(f, _SourceChecks) for f in sys.meta_path):
        sys.meta_path.append(_SourceChecks(folder))  # after the import system's own (and an editable install's)


_map_source_checks()


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
