"""Issue 26 items 1-2: a process starved of threads, processes or file descriptors, and a probe
child that could not start. Could-not-run is `error` (exit 3), never a fail of the thing examined,
and never a traceback."""

from __future__ import annotations

import sys
import threading

from envdoctor.model import Reason, Status
from envdoctor.probes import python_probe
from envdoctor.probes.runner import run_probes
from envdoctor.probes.spec import Options
from envdoctor.process.host import Host
from envdoctor.process.starved import limit_hit

from .faults import fake_torch, run_cli


def test_a_probe_whose_thread_cannot_start_is_its_error_not_a_crash(monkeypatch):
    real = threading.Thread.start

    def start(self):
        if self.name.startswith("probe-"):
            raise RuntimeError("can't start new thread")
        return real(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    facts, runs = run_probes(Host(), Options(), [python_probe.PROBE])
    assert facts.get("torch.version").reason is Reason.CRASHED
    assert "could not start a thread" in facts.get("torch.version").detail
    assert [r.status.value for r in runs] == ["error"]


def test_a_child_that_exits_before_its_first_record_could_not_start(tmp_path):
    exe = tmp_path / "python"
    exe.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named '_edchild'\" >&2\nexit 1\n")
    exe.chmod(0o755)
    result = Host().run_child("torch_probe", {}, timeout=10, python=str(exe))
    assert result.status == "crashed" and "could not start" in result.detail and "_edchild" in result.detail


def test_torch_import_is_an_error_when_the_child_never_ran(tmp_path):
    exe = tmp_path / "python"
    exe.write_text("#!/bin/sh\nexit 1\n")
    exe.chmod(0o755)
    result = Host().run_child("torch_probe", {}, timeout=10, python=str(exe))
    readings = python_probe.readings_from_child(result)
    from envdoctor.model import Facts
    from envdoctor.pipeline.judge import judge
    from envdoctor.pipeline.plan import Plan

    report = judge(Facts(readings), plan=Plan(only=("torch-import",)))
    finding = next(f for f in report.findings if f.id == "torch-import")
    assert finding.status is Status.ERROR and "Reinstall" not in finding.title + (finding.detail or "")


def test_limits_are_named_in_one_line():
    import errno

    assert "ulimit -n" in (limit_hit(OSError(errno.EMFILE, "Too many open files")) or "")
    assert "ulimit -u" in (limit_hit(RuntimeError("can't start new thread")) or "")
    assert limit_hit(RuntimeError("a bug")) is None and limit_hit(OSError(errno.ENOENT, "x")) is None


def test_pythonsafepath_still_runs_the_children(tmp_path):
    torch = fake_torch(tmp_path, "healthy")
    out = run_cli(["check", "--no-micro", "--only", "torch-import"], env={"PYTHONSAFEPATH": "1", "PYTHONPATH": str(torch)},
                  timeout=60)
    assert out.rc == 0 and "_edchild" not in out.text and "torch 2.6.0+cpu" in out.text, out.text[-1500:]


def test_out_of_file_descriptors_is_an_error_and_exit_3(tmp_path):
    torch = fake_torch(tmp_path, "healthy")

    def low() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (8, 8))

    import subprocess

    from .faults import cli_env

    proc = subprocess.run([sys.executable, "-m", "envdoctor", "check", "--no-micro"], env=cli_env({"PYTHONPATH": str(torch)}),
                          capture_output=True, timeout=120, preexec_fn=low)
    text = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    assert "Traceback" not in text and "Exception ignored" not in text, text[-2000:]
    assert proc.returncode == 3, text[-2000:]
    assert "✖ fail" not in text and "Reinstall torch" not in text, text[-2000:]
