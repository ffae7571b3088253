"""The click-free healthcheck (envdoctor.pipeline.startup.direct -> envdoctor.pipeline.fast.direct): taken
only for a command line click would accept as it is, with the very Plan click builds; anything else is click's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from envdoctor.pipeline import startup

TAKEN = (
    ["healthcheck"],
    ["healthcheck", "--npd"],
    ["healthcheck", "--slurm"],
    ["healthcheck", "--micro"],
    ["healthcheck", "--max-seconds", "3"],
    ["healthcheck", "--max-seconds=0.5", "--expect-gpus", "0"],
    ["healthcheck", "--npd", "--max-seconds", "600"],
    ["healthcheck", "--expect-gpus=8", "--slurm", "--max-seconds", "20"],
    ["healthcheck", "--npd", "--npd"],
)

LEFT_TO_CLICK = (
    ["check"],
    ["healthcheck", "--help"],
    ["healthcheck", "-h"],
    ["healthcheck", "--python", sys.executable],
    ["healthcheck", "--npd", "--slurm"],
    ["healthcheck", "--max-seconds", "nan"],
    ["healthcheck", "--max-seconds", "inf"],
    ["healthcheck", "--max-seconds", "0.4"],
    ["healthcheck", "--max-seconds", "601"],
    ["healthcheck", "--max-seconds", "nope"],
    ["healthcheck", "--max-seconds"],
    ["healthcheck", "--expect-gpus", "-1"],
    ["healthcheck", "--expect-gpus", "1.5"],
    ["healthcheck", "--prometheus-textfile", "x.prom"],
    ["healthcheck", "--nfd-features", "d"],
    ["healthcheck", "--micro=1"],
    ["healthcheck", "--"],
    ["healthcheck", "extra"],
)


@pytest.mark.parametrize("argv", TAKEN, ids=" ".join)
def test_a_plain_healthcheck_is_taken_with_the_plan_click_builds(argv, monkeypatch):
    from envdoctor.commands import cli
    from envdoctor.pipeline import fast

    plan = startup.direct(argv)
    assert plan is not None and plan == startup.plan_from_argv(argv)
    built = []

    def answer(plan, began):
        built.append(plan)
        raise SystemExit(0)

    monkeypatch.setattr(fast, "answer_healthcheck", answer)
    with pytest.raises(SystemExit):
        cli.main.main(args=argv, prog_name="envdoctor", standalone_mode=False)
    assert built == [plan]


@pytest.mark.parametrize("argv", LEFT_TO_CLICK, ids=" ".join)
def test_anything_click_would_check_or_word_is_left_to_click(argv):
    assert startup.direct(argv) is None


def test_shell_completion_is_left_to_click(monkeypatch):
    monkeypatch.setenv("_ENVDOCTOR_COMPLETE", "bash_complete")
    assert startup.direct(["healthcheck"]) is None


def test_a_slurm_budget_over_slurms_limit_is_a_usage_error_either_way():
    from envdoctor.commands import slurm
    from envdoctor.pipeline.fast import healthcheck_problem

    assert healthcheck_problem("slurm", slurm.MAX_BUDGET) is None
    assert "--max-seconds up to" in (healthcheck_problem("slurm", slurm.MAX_BUDGET + 1) or "")
    assert healthcheck_problem("npd", 600) is None and healthcheck_problem("line", 600) is None


def test_the_plain_healthcheck_never_imports_click(tmp_path):
    code = ("import os, sys\nsys.argv = ['envdoctor', 'healthcheck', '--max-seconds', '20']\n"
            "from envdoctor.process import lifecycle\n"
            "def answer(line, code):\n"
            "    print(repr((line, int(code), sorted(m for m in sys.modules if m.split('.')[0] in ('click', 'rich', 'torch')\n"
            "                                   or m == 'envdoctor.commands.cli'))))\n"
            "    sys.stdout.flush(); os._exit(code)\n"
            "lifecycle.answer = answer\n"
            "from envdoctor.__main__ import run\nrun()\n")
    env = dict(os.environ, ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD="1", NO_COLOR="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                         cwd=tmp_path)
    line, code_, loaded = eval(out.stdout.strip().splitlines()[-1])
    assert line.startswith(("healthy", "unhealthy")) and code_ in (0, 1), out
    assert loaded == [], loaded


def test_a_bug_on_the_click_free_path_is_one_line_and_exit_3(tmp_path):
    code = ("import sys\nsys.argv = ['envdoctor', 'healthcheck', '--max-seconds', '20']\n"
            "from envdoctor.pipeline import fast\n"
            "def boom(plan, began):\n"
            "    raise KeyError('a bug')\n"
            "fast.answer_healthcheck = boom\n"
            "from envdoctor.__main__ import run\nrun()\n")
    env = dict(os.environ, ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD="1", NO_COLOR="1")
    env.pop("ENVDOCTOR_DEBUG", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                         cwd=tmp_path)
    assert out.returncode == 3, out
    assert out.stderr.strip().splitlines() == [
        "envdoctor: error: internal error (KeyError: 'a bug'); please report it (ENVDOCTOR_DEBUG=1 shows the traceback)"]


def test_a_plan_with_a_usage_error_is_handed_back_untouched():
    from envdoctor.commands import slurm
    from envdoctor.pipeline import fast

    argv = ["healthcheck", "--slurm", "--max-seconds", str(slurm.MAX_BUDGET + 1)]
    plan = startup.direct(argv)
    assert plan is not None
    assert fast.direct(plan) is None  # no probe run, no exit: click words the error
