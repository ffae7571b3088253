"""The one way tests run a check against facts: through the product's runner.

Every check goes through :func:`envdoctor.pipeline.diagnose.run_check`, exactly as ``envdoctor check`` and
``diagnose`` run it, so the runner's part is exercised too: findings get the check's id, a
``needs=`` fact that timed out or crashed makes the check ``error`` ("could not judge") unless it
``judges_failures``, and a check that returns something other than findings is caught.

One difference from the product, on purpose: a check that *raises* fails the test with that
exception (chained, so pytest shows where). The runner would turn it into an ``error`` finding,
and a test that only asserts "no FAIL" or "does not crash" would then pass over a real bug.
Tests of the runner's own crash isolation call ``run_check`` directly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from envdoctor.model import SEVERITY, Facts, Finding, Reading
from envdoctor.pipeline.diagnose import run_check
from envdoctor.registry import CheckResult, CheckSpec


def judge(spec: CheckSpec, facts: Facts | Mapping[str, Reading]) -> list[Finding]:
    """Every finding ``spec`` gives on ``facts`` (a Facts or a plain ``key -> Reading`` dict)."""
    raised: list[Exception] = []

    def recording(f: Facts) -> CheckResult:
        try:
            result = spec.func(f)
            # A generator check raises while it is consumed: consume it here, where that is seen.
            return result if result is None or isinstance(result, Finding) else list(result)
        except Exception as exc:  # re-raised below, once the runner has had its say
            raised.append(exc)
            raise

    found = run_check(dataclasses.replace(spec, func=recording), _as_facts(facts))
    if raised:
        exc = raised[0]
        raise AssertionError(f"check {spec.id} raised {type(exc).__name__}: {exc}") from exc
    return found


def judge_one(spec: CheckSpec, facts: Facts | Mapping[str, Reading]) -> Finding:
    """The single finding ``spec`` gives on ``facts``; more or fewer fails the test."""
    found = judge(spec, facts)
    assert len(found) == 1, (spec.id, [f"{f.status.value}: {f.title}" for f in found])
    return found[0]


def worst(spec: CheckSpec, facts: Facts | Mapping[str, Reading]) -> Finding:
    """The most severe of the (one or more) findings ``spec`` gives on ``facts``; the first of equals."""
    found = judge(spec, facts)
    assert found, spec.id
    return max(found, key=lambda f: SEVERITY[f.status])


def _as_facts(facts: Facts | Mapping[str, Reading]) -> Facts:
    return facts if isinstance(facts, Facts) else Facts(facts)


__all__ = ["judge", "judge_one", "worst"]
