"""Every path, module and command the README, CONTRIBUTING and docs/FACTS.md name exists: a file moved
or renamed without its docs fails here, not in a reader's shell. Fast (no subprocess, no probe)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ("README.md", "CONTRIBUTING.md", "docs/FACTS.md")

#: What the recipes in CONTRIBUTING.md create while they are carried out and then undo: named there,
#: never in the tree (a sample left behind fails too).
RECIPE_SAMPLES = frozenset({
    "checks/torch_debug.py", "tests/test_torch_debug.py", "envdoctor.checks.torch_debug",
    "envdoctor/child/cuinit_time.py", "envdoctor/probes/cuinit_time.py", "tests/test_cuinit_time.py",
    "envdoctor.probes.cuinit_time",
    "tests/corpus/dockwater-10-nvml-driver-not-loaded.txt",
    "tests/test_x.py",  # "only the tests you touch": a placeholder
})
#: Build outputs the docs name (ignored by git, made by the tests).
BUILT = frozenset({"tests/.fakebuild", ".venv"})

_TOP = r"(?:envdoctor|checks|tests|bench|docs|\.ci)"
#: A path from the top of the tree: envdoctor/knowledge/factkeys.py, checks/__init__.py, .ci/lint.
_PATH_RE = re.compile(rf"(?<![\w/.-])({_TOP}/[\w./<>*-]*[\w>*])")
#: A Python file named by its path inside a package (`parsers/signatures.py`, the picture's
#: pipeline/judge.py) or alone (`cli.py`).
_FILE_RE = re.compile(r"(?<![\w/.<>*-])((?:[\w.-]+/)*[\w-]+\.py)\b")
#: Files of other projects the docs quote (an emitter's source, a plugin's module).
ELSEWHERE = frozenset({"python/triton/backends/nvidia/driver.py", "xformers/_cpp_lib.py", "mypkg_envdoctor.py",
                       "mypkg/envdoctor_checks.py", "train.py"})
#: A module or attribute: envdoctor.knowledge.factkeys, envdoctor.views.torch_import_error.
_DOTTED_RE = re.compile(r"(?<![\w/.])(envdoctor(?:\.\w+)+)")
_MODULE_RE = re.compile(r"python -m ([\w.]+)")
_COMMAND_RE = re.compile(r"(?:`|\$ |bin/)envdoctor ([a-z][a-z-]*)\b")


def _text(doc: str) -> str:
    return (ROOT / doc).read_text(encoding="utf-8")


def _placeholder(name: str) -> bool:
    return "<" in name or "*" in name or "…" in name


def _exists(path: str) -> bool:
    """A file or folder, or ``module/file.name``: a name defined in ``module/file.py``."""
    if (ROOT / path).exists():
        return True
    module, _, name = path.rpartition(".")
    source = ROOT / f"{module}.py"
    return bool(module) and source.is_file() and re.search(rf"^(?:def|class) {re.escape(name)}\b|^{re.escape(name)}\b",
                                                          source.read_text(encoding="utf-8"), re.M) is not None


def _tree_files() -> set[str]:
    out: set[str] = set()
    for top in ("envdoctor", "checks", "tests", "bench", "tools"):
        out |= {p.relative_to(ROOT).as_posix() for p in (ROOT / top).rglob("*.py")}
    return out


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_the_docs_name_exists(doc: str) -> None:
    text = _text(doc)
    named = {m.rstrip(".") for m in _PATH_RE.findall(text)}
    missing = sorted(p for p in named - RECIPE_SAMPLES - BUILT if not _placeholder(p) and not _exists(p))
    assert not missing, f"{doc} names paths that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS)
def test_every_python_file_the_docs_name_is_in_the_tree(doc: str) -> None:
    files = _tree_files()
    missing = []
    for name in _FILE_RE.findall(_text(doc)):
        if name in ELSEWHERE or any(s == name or s.endswith("/" + name) for s in RECIPE_SAMPLES):
            continue
        if not any(f == name or f.endswith("/" + name) for f in files):
            missing.append(name)
    assert not missing, f"{doc} names Python files no folder holds: {sorted(set(missing))}"


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(name)
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


@pytest.mark.parametrize("doc", DOCS)
def test_every_module_and_name_the_docs_name_imports(doc: str) -> None:
    text = _text(doc)
    dotted = set(_DOTTED_RE.findall(text)) - RECIPE_SAMPLES
    bad = sorted(d for d in dotted if not _resolves(d))
    assert not bad, f"{doc} names modules or attributes that do not exist: {bad}"
    modules = set(_MODULE_RE.findall(text)) - {"pytest", "venv", "pip", "mypy", "ruff", "torch.utils.collect_env"}
    runnable = sorted(m for m in modules if importlib.util.find_spec(m) is None)
    assert not runnable, f"{doc}: `python -m` of modules that do not exist: {runnable}"


@pytest.mark.parametrize("doc", DOCS)
def test_every_envdoctor_command_the_docs_run_exists(doc: str) -> None:
    from envdoctor.commands.cli import main

    unknown = sorted(set(_COMMAND_RE.findall(_text(doc))) - set(main.commands))
    assert not unknown, f"{doc} runs envdoctor commands that do not exist: {unknown}"


def test_the_recipe_samples_are_named_and_not_left_in_the_tree() -> None:
    text = _text("CONTRIBUTING.md")
    assert all(sample in text for sample in RECIPE_SAMPLES), sorted(s for s in RECIPE_SAMPLES if s not in text)
    left = sorted(s for s in RECIPE_SAMPLES if "/" in s and (ROOT / s).exists())
    assert not left, f"a recipe's sample was left in the tree: {left}"


#: Where a sample's ``from .x import …`` can sit: a check, a probe, a parser, a test.
_SIBLING_PACKAGES = ("envdoctor.checks", "envdoctor.probes", "envdoctor.parsers", "tests")


def _imports(doc: str) -> list[tuple[int, str, list[str]]]:
    """(level, module, names) of every ``from … import …`` in the doc's Python samples."""
    out = []
    for block in re.findall(r"```python\n(.*?)```", _text(doc), re.S):
        for node in ast.walk(ast.parse(textwrap.dedent(block))):
            if isinstance(node, ast.ImportFrom):
                out.append((node.level, node.module or "", [a.name for a in node.names]))
            elif isinstance(node, ast.Import):
                out += [(0, a.name, []) for a in node.names]
    return out


@pytest.mark.parametrize("doc", DOCS[:2])
def test_every_import_in_the_docs_samples_resolves(doc: str) -> None:
    bad = []
    for level, module, names in _imports(doc):
        if level == 0 and not module.startswith("envdoctor"):
            continue  # the child's _edchild, jsonschema, …: not ours to resolve
        bases = ("envdoctor",) if level == 2 else _SIBLING_PACKAGES if level == 1 else ("",)
        wanted = [".".join(p for p in (base, module) if p) for base in bases]
        if any(w in RECIPE_SAMPLES for w in wanted):
            continue
        if not any(_resolves(w) and all(_resolves(f"{w}.{n}") or f"{w}.{n}" in RECIPE_SAMPLES for n in names)
                   for w in wanted):
            bad.append(f"from {'.' * level}{module} import {', '.join(names)}")
    assert not bad, f"{doc}: imports in its samples that do not resolve: {bad}"
