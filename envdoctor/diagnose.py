"""Run checks over Facts; a check that raises becomes an ``error`` finding, never a traceback."""

from __future__ import annotations

import traceback
from collections.abc import Iterable

from .kit import error
from .model import SEVERITY, Facts, Finding, Reason
from .registry import CheckSpec, Registry

_UNJUDGEABLE = (Reason.TIMEOUT, Reason.CRASHED)


def select(registry: Registry | Iterable[CheckSpec], only: Iterable[str] = (), skip: Iterable[str] = (),
           healthcheck: bool = False) -> tuple[list[CheckSpec], list[str]]:
    """The checks to run and the unknown ids the user named (to warn about)."""
    specs = list(registry)
    known = {s.id for s in specs}
    only_set, skip_set = set(only), set(skip)
    unknown = sorted((only_set | skip_set) - known)
    if healthcheck:
        specs = [s for s in specs if s.healthcheck]
    if only_set:
        specs = [s for s in specs if s.id in only_set]
    return [s for s in specs if s.id not in skip_set], unknown


def run_check(spec: CheckSpec, facts: Facts) -> list[Finding]:
    if not spec.judges_failures:
        broken = {k: facts.get(k) for k in spec.needs if facts.get(k).reason in _UNJUDGEABLE}
        if broken:
            detail = "; ".join(f"{k}: {r.describe()}" for k, r in broken.items())
            return [error(f"Could not judge: {spec.title}", detail=f"A fact this check needs could not be read ({detail}).",
                          evidence={k: r.describe() for k, r in broken.items()}, id=spec.id)]
    try:
        result = spec.func(facts)
        if result is None:
            found: list[Finding] = []
        elif isinstance(result, Finding):
            found = [result]
        else:
            found = list(result)
        out = []
        for f in found:
            if not isinstance(f, Finding):
                raise TypeError(f"check returned {type(f).__name__}, not a Finding")
            out.append(f if f.id else _with_id(f, spec.id))
        return out
    except Exception as exc:  # noqa: BLE001 - contain the crash, show where it happened
        tb = traceback.extract_tb(exc.__traceback__)
        where = f" at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else ""
        return [error(f"Check crashed: {spec.title}",
                      detail=f"{type(exc).__name__}: {exc}{where}. This is a bug in the check ({spec.provider}); "
                             "the other checks still ran.", id=spec.id)]


def _with_id(finding: Finding, check_id: str) -> Finding:
    """A copy of a finding carrying its check's id. Not ``dataclasses.replace``: that validates and
    freezes the evidence a second time, which was a sixth of judging a report."""
    copy = object.__new__(Finding)
    copy.__dict__.update(finding.__dict__)
    object.__setattr__(copy, "id", check_id)
    return copy


def diagnose(facts: Facts, checks: Iterable[CheckSpec]) -> list[Finding]:
    findings: list[Finding] = []
    for spec in checks:
        findings.extend(run_check(spec, facts))
    return findings


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Worst first, otherwise in check order (stable)."""
    return sorted(findings, key=lambda f: -SEVERITY[f.status])
