"""The fast part of bench/fault_matrix.py: one or more scenarios of each family, judged exactly
as the bench judges them (no hang, no traceback, no leaked canary, the expected exit code)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent.parent / "bench" / "fault_matrix.py"
_spec = importlib.util.spec_from_file_location("fault_matrix", _PATH)
assert _spec and _spec.loader
matrix = importlib.util.module_from_spec(_spec)
sys.modules["fault_matrix"] = matrix
_spec.loader.exec_module(matrix)

FAST = [s for s in matrix.scenarios() if s.fast]


def test_the_matrix_has_at_least_150_scenarios_and_every_family_a_fast_one():
    every = matrix.scenarios()
    assert len(every) >= 150
    assert len({s.id for s in every}) == len(every)
    assert {s.family for s in every} - {"concurrency"} <= {s.family for s in FAST}


@pytest.mark.parametrize("scenario", FAST, ids=[s.id for s in FAST])
def test_fast_scenario(tmp_path, scenario):
    result = matrix.run_scenario(scenario, tmp_path)
    assert result.ok, f"{scenario.id}: rc={result.rc} {result.seconds:.1f}s {result.why}"
