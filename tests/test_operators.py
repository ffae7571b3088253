"""What operators run: ``healthcheck --expect-gpus N`` and ``envdoctor exec -- CMD`` (a container
ENTRYPOINT preflight that becomes CMD: same PID, CMD's signals and exit code), with real processes,
real signals and stand-in NVIDIA libraries."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envdoctor.process.lifecycle import ExitCode
from tests.faults import cli_env
from tests.test_healthcheck import _both, healthcheck

CHILD = r"""
import json, os, signal, sys, time
out = sys.argv[1]
def on_signal(signum, frame):
    with open(out + ".term", "w") as fh:
        fh.write(str(signum))
    sys.exit(int(sys.argv[2]))
signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)
with open(out + ".tmp", "w") as fh:
    json.dump({"pid": os.getpid(), "argv": sys.argv[1:]}, fh)
os.replace(out + ".tmp", out)
if sys.argv[3:4] == ["wait"]:
    while True:
        time.sleep(0.05)
sys.exit(int(sys.argv[2]))
"""


def _wait_for(path: Path, proc: subprocess.Popen[bytes], seconds: float = 60) -> dict:
    end = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "the command never started"
        time.sleep(0.05)
    return json.loads(path.read_text())


def test_exec_becomes_the_command_same_pid_and_its_exit_code(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    out = tmp_path / "child.json"
    proc = subprocess.Popen([sys.executable, "-m", "envdoctor", "exec", "--", sys.executable, str(script), str(out),
                             "7", "--some-flag"], env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=str(tmp_path))
    _, err = proc.communicate(timeout=120)
    seen = json.loads(out.read_text())
    assert proc.returncode == 7, err.decode()
    assert seen["pid"] == proc.pid  # exec'd in place, not a child
    assert seen["argv"] == [str(out), "7", "--some-flag"]  # its own options pass through untouched
    assert "envdoctor exec: preflight passed" in err.decode()


def test_the_command_does_not_inherit_pythons_ignored_sigpipe():
    # Python ignores SIGPIPE and SIGXFSZ; an exec keeps ignored signals ignored, so `CMD | head`
    # would never end CMD. The kernel's view of the exec'd shell (not Python's, which resets it).
    proc = subprocess.run([sys.executable, "-m", "envdoctor", "exec", "--", "sh", "-c", "cat /proc/$$/status"],
                          env=cli_env(), capture_output=True, timeout=120)
    ignored = int(next(line for line in proc.stdout.decode().splitlines() if line.startswith("SigIgn:")).split()[1], 16)
    assert proc.returncode == 0
    assert not ignored & (1 << (signal.SIGPIPE - 1)) and not ignored & (1 << (signal.SIGXFSZ - 1))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_reach_the_command_and_its_exit_code_comes_back(tmp_path, sig):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    out = tmp_path / "child.json"
    proc = subprocess.Popen([sys.executable, "-m", "envdoctor", "exec", "--", sys.executable, str(script), str(out),
                             "42", "wait"], env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=str(tmp_path))
    seen = _wait_for(out, proc)
    assert seen["pid"] == proc.pid
    os.kill(proc.pid, sig)  # to that PID only, as `docker stop` / the kubelet send it to PID 1
    proc.communicate(timeout=30)
    assert proc.returncode == 42
    assert (tmp_path / "child.json.term").read_text() == str(int(sig))


def test_a_command_that_does_not_handle_sigterm_dies_of_it(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "envdoctor", "exec", "--", "sh", "-c",
                             f"echo $$ > {tmp_path}/pid; exec sleep 60"], env=cli_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    end = time.monotonic() + 60
    while not (tmp_path / "pid").exists() or not (tmp_path / "pid").read_text().strip():
        assert time.monotonic() < end and proc.poll() is None
        time.sleep(0.05)
    assert int((tmp_path / "pid").read_text()) == proc.pid
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGTERM


def test_a_failing_environment_does_not_start_the_command_and_exits_78(tmp_path):
    env = _both(tmp_path, {"count": 1}, {"count": 1})
    lib_dirs = env.pop("_LIB_DIRS")
    marker = tmp_path / "started"
    proc = subprocess.run([sys.executable, "-m", "envdoctor", "exec", "--expect-gpus", "2", "--", "touch", str(marker)],
                          env=cli_env({**env, "LD_LIBRARY_PATH": lib_dirs}), capture_output=True, timeout=120)
    err = proc.stderr.decode()
    assert proc.returncode == int(ExitCode.PREFLIGHT) == 78, err
    assert not marker.exists() and proc.stdout == b""
    assert "expect-gpus" in err and "1 GPU(s) visible, 2 expected" in err
    assert err.strip().splitlines()[-1].startswith("envdoctor exec: preflight failed in ")
    assert "Traceback" not in err


def test_a_command_that_does_not_exist_is_127(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "envdoctor", "exec", "--", "no-such-command-anywhere"],
                          env=cli_env(), capture_output=True, timeout=120)
    assert proc.returncode == 127 and "no-such-command-anywhere: command not found" in proc.stderr.decode()


def test_exec_without_a_command_is_a_usage_error():
    proc = subprocess.run([sys.executable, "-m", "envdoctor", "exec"], env=cli_env(), capture_output=True, timeout=60)
    assert proc.returncode == 2


def test_healthcheck_expect_gpus_is_unhealthy_below_the_count(tmp_path):
    env = _both(tmp_path, {"count": 2}, {"count": 2})
    enough, _ = healthcheck(env, "--expect-gpus", "2")
    too_few, _ = healthcheck(env, "--expect-gpus", "3")
    assert "expect-gpus" not in enough.stdout
    assert too_few.returncode == 1 and "expect-gpus: 2 GPU(s) visible, 3 expected" in too_few.stdout
    assert len(too_few.stdout.strip().splitlines()) == 1


def test_expect_gpus_counts_what_cuda_would_see():
    from envdoctor.model import Facts, Reason, Status, missing, ok
    from envdoctor.pipeline.collect import plan_facts
    from envdoctor.pipeline.diagnose import run_check
    from envdoctor.pipeline.plan import Plan

    def expect_gpus(facts, expected):
        from envdoctor.checks.expect import expect_gpus as spec

        [finding] = run_check(spec, facts.merged(plan_facts(Plan(expect_gpus=expected))))
        return finding

    assert run_check(__import__("envdoctor.checks.expect", fromlist=["x"]).expect_gpus, Facts({})) == []  # not asked
    no_driver = Facts({"nvml.gpus": missing(Reason.ABSENT, detail="libnvidia-ml.so.1 not found")})
    assert expect_gpus(no_driver, 1).title == "0 GPU(s) visible, 1 expected"
    assert expect_gpus(no_driver, 0).status is Status.OK
    hung = Facts({"nvml.gpus": missing(Reason.TIMEOUT)})
    assert expect_gpus(hung, 1).status is Status.FAIL and "could be counted" in expect_gpus(hung, 1).title
    hidden = Facts({"cuda.device_count": ok(1), "nvml.gpus": ok([{"index": 0}, {"index": 1}])})
    assert expect_gpus(hidden, 2).title == "1 GPU(s) visible, 2 expected"  # CUDA_VISIBLE_DEVICES=0


def test_a_hung_driver_fails_the_preflight_within_its_budget(tmp_path):
    env = _both(tmp_path, {"init_hang": 1}, {})
    lib_dirs = env.pop("_LIB_DIRS")
    marker = tmp_path / "started"
    began = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "envdoctor", "exec", "--max-seconds", "2", "--", "touch", str(marker)],
                          env=cli_env({**env, "LD_LIBRARY_PATH": lib_dirs}), capture_output=True, timeout=60)
    err = proc.stderr.decode()
    assert proc.returncode == 78 and not marker.exists(), err
    assert time.monotonic() - began < 30  # a budget, not a wait on the stuck child
    assert "hung" in err.strip().splitlines()[-1], err


def test_the_readme_shows_readiness_not_liveness_and_the_install_line():
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    container = readme[readme.index("### In a container"):readme.index("## Clusters")]
    assert "readinessProbe:" in container and "startupProbe:" in container and "livenessProbe" not in readme
    assert "Why not a liveness probe" in container and "--max-seconds" in container
    dockerfile = container[container.index("```dockerfile"):container.index("```", container.index("```dockerfile") + 3)]
    # Installed from a wheel built from the source (not on any index), under tini (a Python PID 1).
    assert "pip install --no-cache-dir /tmp/gpu_envdoctor-" in dockerfile
    assert 'ENTRYPOINT ["tini", "--", "envdoctor", "exec", "--"]' in dockerfile
    assert f"| {int(ExitCode.PREFLIGHT)} | `exec`" in readme and f"values: [{int(ExitCode.PREFLIGHT)}]" in container
