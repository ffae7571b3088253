"""The torch child started from ``sys.argv`` before click is imported, and adopted by the probe."""

from __future__ import annotations

import os
import subprocess
import sys

from envdoctor import prestart, target
from envdoctor.host import Host


def test_a_plain_check_prestarts_the_torch_child_and_the_probe_adopts_it(monkeypatch) -> None:
    prestart.maybe_start(["check", "--no-micro"])
    [(command, env, proc)] = prestart._started
    examined = target.choose(Host(), None, os.getcwd()).path  # what the CLI will examine
    assert command == prestart.command_for(examined)

    def no_new_child(*args: object, **kwargs: object) -> None:
        raise AssertionError("the probe started a torch child of its own")

    monkeypatch.setattr(subprocess, "Popen", no_new_child)
    res = Host(python=examined).run_child("torch_probe", {"maps": True}, timeout=60)
    assert not prestart._started
    assert res.ok and res.data["torch"]["version"], res.explain()
    proc.wait(timeout=10)


def test_a_child_that_does_not_match_is_ended_unused() -> None:
    prestart.maybe_start(["report", "--python", sys.executable])
    [(_, _, proc)] = prestart._started
    host = Host(environ={**os.environ, "SOMETHING_ELSE": "1"}, python=sys.executable)
    res = host.run_child("torch_probe", {"maps": False}, timeout=60)
    assert res.ok, res.explain()
    assert not prestart._started
    assert proc.wait(timeout=5) < 0  # killed, not adopted


def test_no_prestart_for_help_distributed_or_a_missing_interpreter() -> None:
    for argv in (["check", "--help"], ["check", "--distributed"], ["diagnose", "f.json"],
                 ["check", "--python", "/nonexistent/python"], []):
        prestart.maybe_start(argv)
        assert not prestart._started, argv


def test_the_prestarted_interpreter_is_the_one_the_cli_discovers(tmp_path, monkeypatch) -> None:
    # Started for another interpreter than the CLI then examines, the child would be a wasted
    # torch import on a busy machine: both ask envdoctor.target, in its one order.
    venv = tmp_path / "proj" / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    deeper = tmp_path / "proj" / "src"
    deeper.mkdir()
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    monkeypatch.chdir(deeper)
    assert prestart.interpreter(["--no-micro"]) == str(venv / "python") == target.choose(Host(), None, str(deeper)).path
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path / "proj" / ".venv"))
    assert prestart.interpreter([]) == target.choose(Host(), None, str(deeper)).path
    assert prestart.interpreter(["--python", str(tmp_path / "proj" / ".venv")]) == str(venv / "python")
    assert prestart.interpreter(["--python", str(tmp_path / "nope")]) is None
