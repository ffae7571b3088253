"""The child scripts run in the *target* interpreter, which can be far older than envdoctor's own
(torch 1.4 supported Python 3.5): they keep to Python 3.5 syntax and the standard library."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

CHILD = Path(__file__).resolve().parent.parent / "envdoctor" / "child"
SCRIPTS = sorted(p for p in CHILD.glob("*.py") if p.name != "__init__.py")
#: What a child may import besides the standard library: its helper, its sibling scripts, and what it probes.
ALLOWED = {"_edchild", "torch", "pynvml"} | {p.stem for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_child_script_parses_as_python_3_5(script: Path) -> None:
    tree = ast.parse(script.read_text(encoding="utf-8"), feature_version=(3, 5))
    for node in ast.walk(tree):
        assert not isinstance(node, ast.JoinedStr), f"{script.name}:{node.lineno}: f-string (Python 3.6+)"
        assert not isinstance(node, ast.AnnAssign), f"{script.name}:{node.lineno}: variable annotation (3.6+)"
        assert not isinstance(node, ast.NamedExpr), f"{script.name}:{node.lineno}: walrus (3.8+)"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_child_script_imports_no_envdoctor_module(script: Path) -> None:
    tree = ast.parse(script.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        for name in names:
            top = name.split(".")[0]
            assert top != "envdoctor", f"{script.name}: imports {name}"
            if isinstance(node, ast.ImportFrom) and node.level:
                raise AssertionError(f"{script.name}: relative import")
            assert top in sys.stdlib_module_names or top in ALLOWED, f"{script.name}: imports {name}"
