"""The one run pipeline (issue 20): a Plan, collect, judge; the structure rules that keep it one."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from envdoctor.model import Facts, ok
from envdoctor.pipeline import judge as pipeline
from envdoctor.pipeline.plan import Plan
from envdoctor.process.lifecycle import ExitCode

from .sources import parsed

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "envdoctor"


def _sources() -> list[Path]:
    return [p for base in (ROOT / "envdoctor", ROOT / "checks") for p in base.rglob("*.py")
            if "child" not in p.relative_to(ROOT).parts]


def test_a_report_is_built_in_one_module() -> None:
    built = []
    for path in _sources():
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                if name == "Report":
                    built.append(str(path.relative_to(ROOT)))
    assert built == ["envdoctor/pipeline/judge.py"], built


def _in_main_block(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def test_sys_argv_is_read_only_by_the_entry_point() -> None:
    # The child scripts (another interpreter) read their own arguments; a module's `python -m` block may pass
    # sys.argv on; every other reading of the command line is start-up's (envdoctor/pipeline/startup.py).
    readers = []
    for path in _sources():
        tree = parsed(path)
        allowed = _in_main_block(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "argv" and ast.unparse(node.value) == "sys" and \
                    node.lineno not in allowed:
                readers.append(str(path.relative_to(ROOT)))
    assert readers == ["envdoctor/__main__.py"], readers


def test_probe_options_have_no_untyped_extras() -> None:
    from envdoctor.probes import Options

    assert not hasattr(Options(), "extra")


def test_every_exit_code_the_readme_lists_is_the_enum_and_back() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("### Exit codes", 1)[1].split("\n\n", 2)[1]
    listed = {int(c) for row in table.splitlines() if row.startswith("| ") and row[2].isdigit()
              for c in re.findall(r"\d+", row.split("|")[1])}
    assert listed == {int(c) for c in ExitCode}


@pytest.mark.parametrize("args, words", [
    (["check", "--bogus"], "No such option '--bogus'"),  # click's own usage error
    (["check", "--only", "zzzzzzzz"], "--only 'zzzzzzzz': no such check"),  # ours
    (["diff", "/nonexistent/a.json", "/nonexistent/b.json"], "no such file"),  # unusable input
])
def test_one_usage_error_format(args: list[str], words: str) -> None:
    from tests.faults import cli_env

    proc = subprocess.run([sys.executable, "-m", "envdoctor", *args], capture_output=True, text=True, env=cli_env(),
                          timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == ExitCode.USAGE and len(lines) == 1, proc.stderr
    assert lines[0].startswith("envdoctor: error: ") and words in lines[0], proc.stderr


def test_the_registry_is_loaded_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = pipeline.load_registry

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(kwargs)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "load_registry", counting)
    pipeline.registry.cache_clear()
    pipeline._selected.cache_clear()
    try:
        facts = Facts({"torch.version": ok("2.6.0+cu126")})
        first = pipeline.judge(facts, (), "paste:x", Plan(command="diagnose"))
        again = pipeline.judge(facts, (), "paste:y", Plan(command="diagnose", skip=("torch-import",)))
        assert len(calls) == 1
        assert {f.id for f in first.findings} - {f.id for f in again.findings} == {"torch-import"}
    finally:
        pipeline.registry.cache_clear()
        pipeline._selected.cache_clear()


def test_judge_names_the_compatibility_table_unless_the_fast_path_judged() -> None:
    from envdoctor.knowledge import compat

    facts = Facts({})
    assert pipeline.judge(facts, (), "live", Plan()).compat_as_of == compat.as_of()
    fast = pipeline.judge(facts, (), "live", Plan(command="healthcheck", fast=True, micro=False))
    assert fast.compat_as_of is None and fast.origin == "live" and fast.warnings == ()
    assert {f.id for f in fast.findings} <= {s.id for s in pipeline.fast_checks(False)}


def test_the_plan_reaches_the_probes_and_the_expect_gpus_fact() -> None:
    from envdoctor.pipeline.collect import options_for, plan_facts

    plan = Plan(command="exec", fast=True, budget=10.0, expect_gpus=2, device="cpu")
    options = options_for(plan)
    assert options.healthcheck and options.device == "cpu" and options.torch_child is None
    assert 0.1 <= options.timeout <= 5.0
    assert plan_facts(plan)["plan.expect_gpus"].value == 2 and plan_facts(Plan()) == {}
    full = options_for(Plan(micro_checks=("device",), micro_inject="hang", distributed=True))
    assert full.micro_checks == ("device",) and full.micro_inject == "hang" and full.distributed
    assert full.torch_child is not None  # one torch child for the torch facts and the microchecks


def test_the_layout_shows_the_pipeline() -> None:
    # At most 15 modules directly in envdoctor/: the rest live in the package of their stage.
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(flat) <= 15, flat
    for stage in ("commands", "pipeline", "knowledge", "process", "output", "probes", "parsers", "child"):
        assert (PACKAGE / stage / "__init__.py").is_file(), stage
        assert ast.get_docstring(ast.parse((PACKAGE / stage / "__init__.py").read_text())), f"{stage} says what it holds"


def test_expect_gpus_failing_says_how_to_make_a_gpu_visible() -> None:
    """A node short of GPUs gets the commands that show which GPUs the driver and the process see."""
    from envdoctor.checks.expect import expect_gpus

    finding = expect_gpus.func(Facts({"plan.expect_gpus": ok(2), "cuda.device_count": ok(1)}))
    assert finding.status.value == "fail" and finding.remediation is not None
    assert any("nvidia-smi -L" in c for c in finding.remediation.commands)
