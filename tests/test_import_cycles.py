"""No import circle in envdoctor/ and checks/ (issue 20): every ``import`` statement counts, at module
level, inside a function (a lazy import still ties the two modules together) or under ``if
TYPE_CHECKING:`` (a structure drawing shows those too). ``checks/`` is read as ``envdoctor.checks``, as the wheel ships it; the child
scripts (``envdoctor/child/``) run in another interpreter and import nothing of envdoctor."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from .sources import parsed

ROOT = Path(__file__).resolve().parent.parent


def _module_files() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for base, package in ((ROOT / "envdoctor", "envdoctor"), (ROOT / "checks", "envdoctor.checks")):
        for path in base.rglob("*.py"):
            rel = path.relative_to(base).with_suffix("")
            parts = [package, *rel.parts]
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join(parts)
            if not name.startswith("envdoctor.child"):
                out[name] = path
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    tree = parsed(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def resolve(target: str) -> None:
        while target and target not in known:  # a name imported from a module, not a module
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                resolve(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                root = ".".join(base + ([node.module] if node.module else []))
            else:
                root = node.module or ""
            for alias in node.names:
                resolve(f"{root}.{alias.name}" if f"{root}.{alias.name}" in known else root)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    return {name: set(imports) for name, imports in _graph().items()}  # a copy: a test may change it


@functools.lru_cache(maxsize=1)
def _graph() -> dict[str, frozenset[str]]:
    """Built once per test process (two tests read it)."""
    files = _module_files()
    known = set(files)
    return {name: frozenset(_imports(name, path, known)) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(graph):
            if v not in index:
                strong(v)
    finally:
        sys.setrecursionlimit(limit)
    return out


def test_the_graph_sees_the_modules() -> None:
    graph = import_graph()
    assert "envdoctor.commands.cli" in graph and "envdoctor.checks.driver" in graph and "envdoctor.process.host" in graph
    assert "envdoctor.model" in graph["envdoctor.report"]
    assert "envdoctor.checks._common" in graph["envdoctor.checks.driver"]


def test_the_finder_finds_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle() -> None:
    found = cycles(import_graph())
    assert not found, "import circles (each a group of modules that import each other): " + "; ".join(
        " <-> ".join(c) for c in found)
