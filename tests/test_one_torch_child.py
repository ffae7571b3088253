"""One torch child for the torch facts and the microchecks (probes/torch_child.py): the real CPU
torch imported once, the python probe complete at the end of the facts, the microchecks running
on in the same process under their own deadline; a hang, crash or bus error in them stays the
microcheck finding it is with a child of their own, and never costs the torch facts; a torch that
hangs or crashes on import is the torch facts' finding, the microchecks a skip that says why."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from envdoctor.checks import micro as micro_checks

from envdoctor.model import Facts, Finding, ProbeRun, Reason, Status
from envdoctor.pipeline.diagnose import diagnose
from envdoctor.probes import Options, python_probe, run_probes
from envdoctor.probes import micro as micro_probe
from envdoctor.probes.torch_child import Shared, child_args
from envdoctor.process import childargs
from envdoctor.process.host import Host

from .conftest import test_env


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The child scripts started through subprocess.Popen, by file name."""
    names: list[str] = []
    real = subprocess.Popen

    def popen(argv: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(argv, (list, tuple)) and len(argv) > 1:
            names.append(os.path.basename(str(argv[1])))
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    yield names


def both(options: Options, host: Host | None = None) -> tuple[Facts, dict[str, Finding], dict[str, ProbeRun], float]:
    """The python and micro probes together, as `check` runs them, and the microchecks' findings."""
    options = dataclasses.replace(options, torch_child=Shared())
    began = time.monotonic()
    facts, runs = run_probes(host or Host(environ=test_env()), options, [python_probe.PROBE, micro_probe.PROBE])
    seconds = time.monotonic() - began
    return facts, {f.id: f for f in diagnose(facts, micro_checks.CHECKS)}, {r.name: r for r in runs}, seconds


def cpu(*checks: str, inject: str = "", timeout: float = 5.0) -> Options:
    return Options(device="cpu", timeout=timeout, micro_checks=tuple(checks) if checks else None, micro_inject=inject)


def test_one_import_serves_the_torch_facts_and_then_the_microchecks(started: list[str]) -> None:
    import torch

    facts, findings, runs, _ = both(cpu())
    assert started == ["torch_probe.py"]  # no micro.py child: one import torch
    assert facts["torch.version"].value == torch.__version__ and facts["python.packages"].ok
    core = ("micro-device", "micro-matmul", "micro-transformer", "micro-copy", "micro-dataloader")
    assert {i: findings[i].status for i in core} == {i: Status.OK for i in core}, {i: findings[i].detail for i in core}
    run = facts.value("micro.run")
    assert run["status"] == "ok" and list(run["devices"]) == ["cpu"] and run["torch"] == torch.__version__
    # The python probe was complete at the end of the facts, not at the end of the microchecks.
    assert runs["python"].seconds < runs["micro"].seconds - 0.5 * run["checks_seconds"], (runs, run)


def test_a_microcheck_hang_is_its_timeout_and_the_torch_facts_are_kept(started: list[str]) -> None:
    # The facts keep their own deadline (30 s); the microchecks' is 12 s from the start.
    options = cpu("device", "matmul", "transformer", inject="hang")
    options = dataclasses.replace(options, micro_deadline=12.0)
    facts, findings, runs, seconds = both(options)
    assert started == ["torch_probe.py"]
    assert facts["torch.version"].ok and facts["torch.cuda_available"].value is False
    assert facts["micro.matmul"].reason is Reason.TIMEOUT and "injected hang" in facts["micro.matmul"].detail
    assert facts["micro.device"].ok and facts["micro.transformer"].reason is Reason.SKIPPED
    assert facts["micro.run"].reason is Reason.TIMEOUT
    assert findings["micro-matmul"].status is Status.ERROR and "hung" in findings["micro-matmul"].title
    assert seconds < micro_probe.PROBE.deadline(options) + 3.0


def test_a_microcheck_segfault_is_its_crash_and_the_torch_facts_are_kept() -> None:
    facts, findings, _, _ = both(cpu("device", "matmul", inject="segfault"))
    assert facts["torch.version"].ok and facts["torch.import_error"].value is None
    assert facts["micro.matmul"].reason is Reason.CRASHED and "SIGSEGV" in facts["micro.matmul"].detail
    assert findings["micro-matmul"].status is Status.ERROR and findings["micro-device"].status is Status.OK


def test_a_bus_error_in_a_dataloader_worker_is_the_dev_shm_finding() -> None:
    facts, findings, _, _ = both(cpu("dataloader", inject="sigbus_worker"))
    assert facts["torch.version"].ok
    result = facts.value("micro.dataloader")["cpu"]
    assert result["ok"] is False and result["bus_error"] is True, result
    assert any("Unexpected bus error encountered in worker" in ln for ln in result["worker_stderr"]), result
    assert findings["micro-dataloader"].status is Status.FAIL and "/dev/shm" in findings["micro-dataloader"].title


def fake_torch(tmp_path: Path, body: str) -> Host:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(body)
    return Host(environ=test_env(PYTHONPATH=str(tmp_path)))


def test_a_torch_import_that_hangs_is_the_facts_timeout_and_a_microcheck_skip(tmp_path: Path) -> None:
    host = fake_torch(tmp_path, "import time\ntime.sleep(600)\n")
    options = cpu(timeout=0.5)  # the facts' deadline: 0.5 * 6 = 3 s
    facts, findings, runs, seconds = both(options, host)
    reading = facts["torch.version"]
    assert reading.reason is Reason.TIMEOUT and "import torch" in reading.detail
    assert facts["python.version"].ok
    run = facts["micro.run"]
    assert run.reason is Reason.SKIPPED and "hung before the microchecks" in run.detail, run
    assert "import torch" in run.detail
    assert all(facts[k].reason is Reason.SKIPPED for k in micro_probe.KEYS)
    assert all(f.status is Status.SKIP for f in findings.values())
    # The child is abandoned at the facts' deadline, not kept to the microchecks' one.
    assert seconds < python_probe.PROBE.deadline(options) + 3.0, (seconds, runs)


def test_a_torch_import_that_crashes_is_the_facts_crash_and_a_microcheck_skip(tmp_path: Path) -> None:
    host = fake_torch(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    facts, findings, _, _ = both(cpu(), host)
    assert facts["torch.version"].reason is Reason.CRASHED and "SIGSEGV" in facts["torch.version"].detail
    run = facts["micro.run"]
    assert run.reason is Reason.SKIPPED and "crashed before the microchecks" in run.detail, run
    assert all(f.status is Status.SKIP for f in findings.values())


def test_a_torch_import_that_raises_is_a_failed_run_as_with_a_child_of_their_own(tmp_path: Path) -> None:
    host = fake_torch(tmp_path, "raise OSError('libcudart.so.12: cannot open shared object file')\n")
    facts, findings, _, _ = both(cpu(), host)
    assert facts["torch.version"].reason is Reason.FAILED
    assert "libcudart.so.12" in facts["torch.import_error"].value
    assert facts["micro.run"].reason is Reason.FAILED and "libcudart.so.12" in facts["micro.run"].detail
    assert all(f.status is Status.SKIP for f in findings.values())


def test_without_planned_microchecks_the_torch_child_is_the_plain_one(started: list[str]) -> None:
    facts, _, _, _ = both(Options(micro=False))
    assert started == ["torch_probe.py"] and facts["torch.version"].ok
    assert facts["micro.run"].detail == "--no-micro"


def test_distributed_keeps_its_rank_childs_torch_facts(started: list[str]) -> None:
    from envdoctor.process.host import ChildResult

    def rank_child(timeout: float) -> ChildResult:
        return ChildResult("ok", {"python": {"version": "3.11.0"}, "torch": {"installed": True, "version": "2.13.0"}})

    facts, _, _, _ = both(Options(device="cpu", torch_probe=rank_child, micro_checks=("device",)))
    assert facts["torch.version"].value == "2.13.0"
    assert started == ["micro.py"]  # the microchecks in a child of their own, as before
    assert facts["micro.device"].ok


@pytest.mark.parametrize("argv", [
    ["--device", "cpu"], ["--device=cpu", "--compile"], ["--no-micro"], [], ["--device", "cuda:1"],
    ["--device", "cpu", "--no-micro"],
])
def test_startup_reads_the_microchecks_plan_as_the_probes_do(argv: list[str]) -> None:
    from envdoctor.pipeline import startup
    from envdoctor.pipeline.collect import options_for

    plan = startup.plan_from_argv(["check", "--python", sys.executable, *argv])
    assert plan is not None
    args, _ = child_args(Host(), options_for(plan))
    command = startup._torch_child(plan, os.path.exists)
    assert command is not None and command[2] == json.dumps(childargs.torch_args(args))


def test_check_device_cpu_prestarts_the_one_torch_child_and_the_probes_adopt_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    from envdoctor.pipeline import startup

    argv = ["check", "--device", "cpu", "--python", sys.executable]
    startup.begin(argv)
    plan = startup.plan_from_argv(argv)
    assert plan is not None
    early = startup.adopt(plan)
    assert early is not None
    [command] = early.started
    assert '"micro"' in command[2]

    def no_new_child(*args: object, **kwargs: object) -> None:
        raise AssertionError("a probe started a child of its own")

    monkeypatch.setattr(subprocess, "Popen", no_new_child)
    options = Options(device="cpu", python=sys.executable)  # what the command line asks, no test knobs
    facts, _, _, _ = both(options, Host(python=sys.executable, early=early))
    assert not early.started
    assert facts["torch.version"].ok, facts["torch.version"]
    assert facts["micro.run"].ok and facts["micro.device"].ok, facts["micro.run"]


def test_check_device_cpu_end_to_end_reports_both_from_one_child(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.update(NO_COLOR="1", ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD="1")
    proc = subprocess.run([sys.executable, "-m", "envdoctor", "report", "--json", "--device", "cpu", "-o", str(out),
                           "--python", sys.executable], capture_output=True, env=env, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr.decode()[-2000:]
    report = json.loads(out.read_text())
    facts = report["facts"]
    assert facts["torch.version"]["value"] and facts["micro.run"]["value"]["status"] == "ok", facts["micro.run"]
    assert facts["micro.matmul"]["value"]["cpu"]["dtypes"]["fp32"]["ok"] is True
    probes = {p["name"]: p for p in report["probes"]}
    assert probes["python"]["seconds"] < probes["micro"]["seconds"], probes


#: torch._dynamo that does not import (torch.optim's first optimizer imports it).
NO_DYNAMO = """
import sys
class _NoDynamo:
    def find_spec(self, name, path=None, target=None):
        if name == "torch._dynamo":
            raise ImportError("injected: torch._dynamo does not import")
        return None
sys.meta_path.insert(0, _NoDynamo())
"""


def test_a_lazy_import_that_fails_ahead_of_the_check_fails_again_inside_it(tmp_path: Path) -> None:
    # The microchecks import torch._dynamo in a thread while the matmuls run; a failure there is
    # not swallowed: the transformer check's own optimizer imports it again and reports it.
    (tmp_path / "sitecustomize.py").write_text(NO_DYNAMO)
    host = Host(environ=test_env(PYTHONPATH=str(tmp_path)))
    facts, findings, _, _ = both(cpu("device", "matmul", "transformer"), host)
    assert facts["micro.matmul"].ok and facts.value("micro.matmul")["cpu"]["ok"] is True
    result = facts.value("micro.transformer")["cpu"]
    assert result["ok"] is False and "torch._dynamo does not import" in result["error"], result
    assert findings["micro-transformer"].status is Status.FAIL
