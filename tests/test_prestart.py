"""The Plan read from ``sys.argv`` before click is imported (envdoctor/pipeline/startup.py), the
torch child started from it, and adopted by the probe when click's Plan for the run is the same."""

from __future__ import annotations

import os
import subprocess
import sys

import click
import pytest

from envdoctor.pipeline import startup
from envdoctor.pipeline.plan import Plan
from envdoctor.process import prestart, target
from envdoctor.process.host import Host


@pytest.fixture(autouse=True)
def _nothing_left() -> object:
    yield
    startup.adopt(Plan(command="nothing"))  # ends whatever a test left started


def _click_plan(argv: list[str]) -> Plan:
    """The Plan click builds for ``argv`` (the command's own function, its pipeline stubbed out)."""
    from envdoctor.commands import cli

    seen: list[Plan] = []

    def capture(plan: Plan, progress: bool) -> None:
        seen.append(plan)
        raise SystemExit(0)

    real = cli._run
    cli._run = capture  # type: ignore[assignment]
    try:
        cli.main.main(argv, standalone_mode=False)
    except SystemExit:
        pass
    finally:
        cli._run = real  # type: ignore[assignment]
    [plan] = seen
    return plan


@pytest.mark.parametrize("argv", [
    ["check"], ["check", "--no-micro"], ["check", "--device", "cpu", "--compile"], ["check", "--device=cuda:1"],
    ["check", "--only", "torch-import", "--only=driver-installed", "--skip", "gpu-ecc", "-v", "--fail-on", "warn"],
    ["check", "--timeout", "7", "--python", sys.executable], ["report", "--markdown", "--no-micro"],
    ["report", "-o", "r.json", "--timeout=2.5"], ["check", "--micro-only"],
    ["check", "--no-micro", "--prometheus-textfile", "e.prom", "--prometheus-failures-only", "--nfd-features=.",
     "--nfd-expiry", "600"],
    ["check", "--json", "-o", "r.json", "--expect-gpus", "2", "--no-micro"],
])
def test_startup_reads_the_plan_click_builds(argv: list[str], tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert startup.plan_from_argv(argv) == _click_plan(argv)


def test_a_plain_check_starts_the_torch_child_and_the_probe_adopts_it(monkeypatch) -> None:
    startup.begin(["check", "--no-micro"])
    plan = startup.plan_from_argv(["check", "--no-micro"])
    assert plan is not None and plan.python is not None
    examined = target.choose(Host(), None, os.getcwd()).path  # what the CLI will examine
    assert plan.python == examined
    early = startup.adopt(plan)
    assert early is not None and early.started == [prestart.command_for(examined)]

    def no_new_child(*args: object, **kwargs: object) -> None:
        raise AssertionError("the probe started a torch child of its own")

    monkeypatch.setattr(subprocess, "Popen", no_new_child)
    host = Host(python=examined, early=early)
    assert host.niced(10).early is early
    res = host.run_child("torch_probe", {"maps": True}, timeout=60)
    assert early.started == []
    assert res.ok and res.data["torch"]["version"], res.explain()


def test_another_plan_ends_the_early_child_unused() -> None:
    startup.begin(["report", "--python", sys.executable])
    [early] = startup._pending
    [(_, _, proc)] = early._children
    plan = startup.plan_from_argv(["report", "--python", sys.executable, "--no-micro"])
    assert plan is not None and startup.adopt(plan) is None
    assert not startup._pending
    assert proc.wait(timeout=5) < 0  # killed, not adopted


def test_a_command_for_another_script_leaves_the_early_child_alone() -> None:
    startup.begin(["report", "--python", sys.executable])
    early = startup.adopt(startup._pending[0].plan)
    assert early is not None
    host = Host(python=sys.executable, early=early)
    assert host.run([sys.executable, "-c", "pass"], timeout=30).ok
    assert len(early.started) == 1  # still there for the torch probe
    res = host.run_child("torch_probe", {"maps": False}, timeout=60)  # another command line for the script
    assert res.ok and early.started == []
    early.end()


def test_no_early_start_for_help_distributed_another_command_or_a_missing_interpreter() -> None:
    for argv in (["check", "--help"], ["check", "--distributed"], ["diagnose", "f.json"], ["check", "stray"],
                 ["check", "--python", "/nonexistent/python"], ["check", "--timeout"], ["check", "--timeout", "x"],
                 ["healthcheck", "--max-seconds", "nope"], []):
        assert startup.plan_from_argv(argv) is None, argv
        startup.begin(argv)
        assert not startup._pending, argv
    assert startup.plan_from_argv(["check", "--micro-only"]) is not None
    startup.begin(["check", "--micro-only"])  # a Plan, but its first probe is not the torch facts' child
    assert startup._pending[0].started == []


def test_the_interpreter_is_the_one_the_cli_discovers(tmp_path, monkeypatch) -> None:
    # Started for another interpreter than the CLI then examines, the child would be a wasted
    # torch import on a busy machine: both ask envdoctor.process.target, in its one order.
    venv = tmp_path / "proj" / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    deeper = tmp_path / "proj" / "src"
    deeper.mkdir()
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    monkeypatch.chdir(deeper)
    chosen = target.choose(Host(), None, str(deeper))
    assert startup.interpreter(None) == (str(venv / "python"), chosen.chosen_by) == (chosen.path, chosen.chosen_by)
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path / "proj" / ".venv"))
    assert startup.interpreter(None) == (target.choose(Host(), None, str(deeper)).path, "VIRTUAL_ENV")
    assert startup.interpreter(str(tmp_path / "proj" / ".venv")) == (str(venv / "python"), "--python")
    assert startup.interpreter(str(tmp_path / "nope")) is None


def test_click_is_not_imported_by_startup() -> None:
    code = ("import sys\nfrom envdoctor.pipeline import startup\nstartup.plan_from_argv(['check'])\n"
            "print('click' in sys.modules, 'envdoctor.process.host' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "False"], out
    assert click  # the tests import it, start-up does not


@pytest.mark.parametrize(("argv", "output", "deadline"), [
    (["healthcheck"], "line", 5.0), (["healthcheck", "--npd"], "npd", 4.0),
    (["healthcheck", "--slurm", "--max-seconds", "20"], "slurm", 20.0),
])
def test_every_healthcheck_protocol_starts_the_driver_child_early(argv: list[str], output: str,
                                                                  deadline: float) -> None:
    plan = startup.plan_from_argv(argv)
    assert plan is not None and plan.output == output and plan.deadline == deadline
    assert startup._driver_child(plan) is not None
