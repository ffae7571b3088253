"""Honest about age: a torch newer than the compatibility table is "not in the table (as of DATE)",
never a guess, and a report of such a torch says so in its header."""

from __future__ import annotations

import pytest

from envdoctor.knowledge import compat
from envdoctor.output.render import _headline
from envdoctor.report import Report

from . import builders


def _beyond() -> str:
    newest = compat.version(compat.latest_patch(compat.newest_release() or "") or "")
    assert newest is not None
    return f"{newest.release[0]}.{newest.release[1] + 1}.0"


def test_a_torch_newer_than_every_release_in_the_table_is_not_in_it() -> None:
    text = compat.torch_newer_than_table(_beyond() + "+cu130")
    assert text == f"torch {_beyond()} is not in the table (as of {compat.as_of()})"


@pytest.mark.parametrize("v", ["2.9.0+cu128", "2.6.0", "1.0.0", "junk", None, ""])
def test_a_release_the_table_holds_or_an_older_one_says_nothing(v: str | None) -> None:
    assert compat.torch_newer_than_table(v) is None


def test_the_report_header_says_the_torch_is_newer_than_the_table() -> None:
    newer = Report(facts=builders.facts(torch__version=_beyond() + "+cu130"), findings=(), compat_as_of=compat.as_of())
    assert f"torch {_beyond()} is not in the table (as of {compat.as_of()})" in _headline(newer)
    known = Report(facts=builders.facts(torch__version="2.9.0+cu128"), findings=(), compat_as_of=compat.as_of())
    assert "not in the table" not in _headline(known)
