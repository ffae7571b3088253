"""Small helpers for writing checks: finding constructors and evidence.

The runner fills in the finding's id from the check that returned it, so a check writes
``return fail("…", detail=…, remedy=Remediation(…))`` and never repeats its own id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .model import Facts, Finding, Reading, Remediation, Status, thaw

__all__ = ["ok", "warn", "fail", "skip", "error", "evidence", "Remediation", "pip_install_torch"]


def _make(status: Status, title: str, detail: str = "", evidence: Mapping[str, Any] | None = None,
          remedy: Remediation | None = None, gpus: Iterable[int] = (), id: str = "") -> Finding:
    return Finding(id=id, status=status, title=title, detail=detail, evidence=dict(evidence or {}),
                   remediation=remedy or Remediation(), gpus=tuple(gpus))


def ok(title: str, detail: str = "", evidence: Mapping[str, Any] | None = None, gpus: Iterable[int] = (),
       id: str = "") -> Finding:
    return _make(Status.OK, title, detail, evidence, None, gpus, id)


def warn(title: str, detail: str = "", evidence: Mapping[str, Any] | None = None,
         remedy: Remediation | None = None, gpus: Iterable[int] = (), id: str = "") -> Finding:
    return _make(Status.WARN, title, detail, evidence, remedy, gpus, id)


def fail(title: str, detail: str = "", evidence: Mapping[str, Any] | None = None,
         remedy: Remediation | None = None, gpus: Iterable[int] = (), id: str = "") -> Finding:
    return _make(Status.FAIL, title, detail, evidence, remedy, gpus, id)


def skip(title: str, detail: str = "", evidence: Mapping[str, Any] | None = None, id: str = "") -> Finding:
    return _make(Status.SKIP, title, detail, evidence, None, (), id)


def error(title: str, detail: str = "", evidence: Mapping[str, Any] | None = None,
          remedy: Remediation | None = None, id: str = "") -> Finding:
    return _make(Status.ERROR, title, detail, evidence, remedy, (), id)


def evidence(facts: Facts, *keys: str) -> dict[str, Any]:
    """``{key: value}`` for facts that were read, ``{key: "<reason>: <detail>"}`` for the rest."""
    out: dict[str, Any] = {}
    for key in keys:
        reading: Reading = facts.get(key)
        out[key] = thaw(reading.value) if reading.ok else reading.describe()
    return out


def pip_install_torch(version: str | None, variant: str, extra: str = "", python: str | None = None) -> str:
    """The exact reinstall command for a torch build from a PyTorch variant index, run through the
    user's own interpreter (``python -m pip``) when it is known, so it lands in the right env."""
    from .remedies import torch_install

    return torch_install(python, version, variant, tuple(extra.split()))
