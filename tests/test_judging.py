"""The shared test helper runs checks through the product's runner, and never hides a crash."""

from __future__ import annotations

import pytest

from envdoctor.kit import fail, warn
from envdoctor.model import Facts, Finding, Reason, Status, missing, ok
from envdoctor.registry import check

from .judging import judge, judge_one, worst


@check("helper-two-findings", "Two findings", needs=("host.os",))
def two(facts: Facts) -> list[Finding]:
    return [warn("a warning"), fail("a failure"), warn("another warning")]


@check("helper-raises", "Raises", needs=("host.os",))
def raises(facts: Facts) -> Finding:
    return {}["missing"]


@check("helper-not-a-finding", "Returns a dict")
def not_a_finding(facts: Facts) -> object:
    return [{"status": "ok"}]


def test_findings_get_the_check_id_as_the_runner_fills_it_in() -> None:
    found = judge(two, Facts({"host.os": ok("Linux")}))
    assert [f.id for f in found] == ["helper-two-findings"] * 3


def test_a_plain_dict_of_readings_is_accepted() -> None:
    assert len(judge(two, {"host.os": ok("Linux")})) == 3


def test_a_needed_fact_that_timed_out_is_an_error_without_calling_the_check() -> None:
    finding = judge_one(raises, {"host.os": missing(Reason.TIMEOUT, detail="stuck")})
    assert finding.status is Status.ERROR and finding.title == "Could not judge: Raises" and "stuck" in finding.detail


def test_a_check_that_raises_fails_the_test_with_its_exception() -> None:
    with pytest.raises(AssertionError, match="helper-raises raised KeyError") as info:
        judge(raises, {"host.os": ok("Linux")})
    assert isinstance(info.value.__cause__, KeyError)


def test_a_check_that_returns_no_finding_is_an_error_finding() -> None:
    finding = judge_one(not_a_finding, {})
    assert finding.status is Status.ERROR and "not a Finding" in finding.detail


def test_judge_one_refuses_more_than_one_finding() -> None:
    with pytest.raises(AssertionError, match="helper-two-findings"):
        judge_one(two, {"host.os": ok("Linux")})


def test_worst_is_the_most_severe_finding() -> None:
    assert worst(two, {"host.os": ok("Linux")}).title == "a failure"
