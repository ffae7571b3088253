"""One reading of "this run is CI": ``.ci/run`` exports ``CI=true``, as GitHub Actions and GitLab do.

A test whose engine (Slurm, promtool, node_exporter, pyarrow, duckdb) is missing skips on a developer's
machine and fails under CI, where the project's own scripts installed it.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def unavailable(message: str, ci_hint: str = "") -> NoReturn:
    """Skip on a developer's machine; fail under CI (``ci_hint`` says which script installs it)."""
    if in_ci():
        pytest.fail(f"{message} (CI=true{': ' + ci_hint if ci_hint else ''})")
    pytest.skip(message)
