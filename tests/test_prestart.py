"""The torch child started from ``sys.argv`` before click is imported, and adopted by the probe."""

from __future__ import annotations

import os
import subprocess
import sys

from envdoctor import prestart
from envdoctor.host import Host


def test_a_plain_check_prestarts_the_torch_child_and_the_probe_adopts_it(monkeypatch) -> None:
    prestart.maybe_start(["check", "--no-micro"])
    [(command, env, proc)] = prestart._started
    assert command == prestart.command_for(sys.executable)

    def no_new_child(*args: object, **kwargs: object) -> None:
        raise AssertionError("the probe started a torch child of its own")

    monkeypatch.setattr(subprocess, "Popen", no_new_child)
    res = Host(python=sys.executable).run_child("torch_probe", {"maps": True}, timeout=60)
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
