"""Small helpers for writing checks: finding constructors and evidence.

The runner fills in the finding's id from the check that returned it, so a check writes
``return fail("…", detail=…, remedy=Remediation(…))`` and never repeats its own id.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from .model import Facts, Finding, Reading, Remediation, Status

__all__ = ["ok", "warn", "fail", "skip", "error", "evidence", "read_first", "Remediation", "pip_install_torch"]


def _make(status: Status, title: str, detail: str = "", evidence: Mapping[str, Any] | None = None,
          remedy: Remediation | None = None, gpus: Iterable[int] = (), id: str = "") -> Finding:
    # The Finding freezes the evidence into a mapping of its own, so the caller's is not copied first;
    # an empty remedy is one shared frozen value.
    return Finding(id=id, status=status, title=title, detail=detail,
                   evidence=evidence if type(evidence) is dict else dict(evidence or {}),
                   remediation=remedy or _NO_REMEDY, gpus=gpus if type(gpus) is tuple else tuple(gpus))


_NO_REMEDY = Remediation()


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


#: Evidence shows at most this many items of a list (and four times as many keys of an object):
#: the facts hold everything, and a finding per check repeating a 20,000-GPU list would make
#: the output grow with checks x GPUs.
EVIDENCE_ITEMS = 32


def evidence(facts: Facts, *keys: str) -> dict[str, Any]:
    """``{key: value}`` for facts that were read, ``{key: "<reason>: <detail>"}`` for the rest."""
    out: dict[str, Any] = {}
    for key in keys:
        reading: Reading = facts.get(key)
        out[key] = capped(reading.value) if reading.ok else reading.describe()
    return out


def read_first(facts: Facts, ev: Mapping[str, Any]) -> dict[str, Any]:
    """``ev`` with the facts that were read before those that were not (otherwise in order): for a
    verdict that any of several facts can decide (torch's arch list, else the table by its version),
    the first evidence entry is then one the verdict rests on, never one the report does not show."""
    def unread(key: str) -> bool:
        reading = facts.get(key)
        return not reading.ok or reading.value is None

    return {k: ev[k] for k in sorted(ev, key=unread)}


def capped(value: Any, depth: int = 0) -> Any:
    """``value`` with long strings, lists and objects cut, nested ones too (a few levels)."""
    if isinstance(value, str):
        limit = EVIDENCE_ITEMS * 64
        return value if len(value) <= limit else f"{value[:limit]}… ({len(value) - limit:,} more characters in the facts)"
    if depth > 3:
        return value
    if isinstance(value, (list, tuple)):
        items = [capped(v, depth + 1) for v in value[:EVIDENCE_ITEMS]]
        if len(value) > EVIDENCE_ITEMS:
            items.append(f"… {len(value) - EVIDENCE_ITEMS:,} more in the facts")
        return value if len(value) <= EVIDENCE_ITEMS and all(a is b for a, b in zip(items, value, strict=False)) else items
    if isinstance(value, Mapping):
        limit = EVIDENCE_ITEMS * 4
        out = {k: capped(v, depth + 1) for k, v in itertools.islice(value.items(), limit)}
        if len(value) > limit:
            out["…"] = f"{len(value) - limit:,} more in the facts"
        return value if len(value) <= limit and all(out[k] is v for k, v in value.items()) else out
    return value


def pip_install_torch(version: str | None, variant: str, extra: str = "", python: str | None = None) -> str:
    """The exact reinstall command for a torch build from a PyTorch variant index, run through the
    user's own interpreter (``python -m pip``) when it is known, so it lands in the right env."""
    from envdoctor.knowledge.remedies import torch_install

    return torch_install(python, version, variant, tuple(extra.split()))
