"""The fast tier (``pytest -m "not slow"``) is a real subset of the suite: every slow entry names a test
that exists, every test file keeps fast tests (unless listed slow-only), and it stays large."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.tiers import MIN_FAST_TESTS, SLOW_ONLY_FILES, SLOW_TESTS, is_slow

TESTS = Path(__file__).resolve().parent


def _tests_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.name.startswith("test_")}


def _files() -> dict[str, set[str]]:
    return {p.name: _tests_of(p) for p in sorted(TESTS.glob("test_*.py"))}


def test_every_slow_entry_names_a_test_that_exists() -> None:
    files = _files()
    stale = [e for e in SLOW_TESTS if e.split("::", 1)[0] not in files
             or e.split("::", 1)[1].split("[", 1)[0] not in files[e.split("::", 1)[0]]]
    assert not stale, stale
    assert SLOW_ONLY_FILES <= set(files)


def test_every_test_file_keeps_fast_tests() -> None:
    lost = [f for f, names in _files().items() if f not in SLOW_ONLY_FILES and names
            and all(is_slow(f, n) for n in names)]
    assert not lost, f"no fast test left in {lost}: keep one fast or list the file in SLOW_ONLY_FILES"


def test_the_fast_tier_is_most_of_the_suite(request) -> None:
    """Counted from the test functions (a parametrized one once), the fast tier keeps nine in ten of
    them; when this run collected the whole suite, at least MIN_FAST_TESTS of its items are fast."""
    functions = [(f, n) for f, names in _files().items() for n in names]
    fast = [x for x in functions if not is_slow(*x)]
    assert len(fast) > 0.9 * len(functions), (len(fast), len(functions))
    session = request.session
    if len({item.path.name for item in session.items}) == len(_files()):  # the whole suite was collected
        kept = [item for item in session.items if not item.get_closest_marker("slow")]
        assert len(kept) >= MIN_FAST_TESTS or not any(item.get_closest_marker("slow") for item in session.items)
    assert is_slow("test_micro.py", "test_compile_runs_inductor_on_the_cpu")
    assert is_slow("test_canary.py", "test_no_canary_in_any_output[check]")
    assert not is_slow("test_canary.py", "test_no_canary_in_any_output[list]")
