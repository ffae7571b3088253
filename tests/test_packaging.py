"""The wheel ships every package of the source tree: pyproject's explicit ``packages`` list must name
each folder of envdoctor/ that holds an ``__init__.py`` (a new sub-package left out of it imports from
the checkout and fails only once installed)."""

from __future__ import annotations

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_pyproject_lists_every_package_of_the_tree() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "envdoctor").rglob("__init__.py")}
    found.add("envdoctor.checks")  # the top-level checks/ folder, mapped in by package-dir
    assert (ROOT / "checks" / "__init__.py").is_file()
    assert found == listed, f"missing from pyproject: {sorted(found - listed)}; listed but absent: {sorted(listed - found)}"
