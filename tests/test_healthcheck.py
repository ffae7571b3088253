"""`envdoctor healthcheck` as Docker/Kubernetes run it, against stand-in NVIDIA libraries."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from .fakes.nvidia_fakes import fake_cuda, fake_nvml


def healthcheck(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    full = dict(os.environ, ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD="1", NO_COLOR="1")
    dirs = [v for k, v in env.items() if k == "_LIB_DIRS"]
    full.update({k: v for k, v in env.items() if k != "_LIB_DIRS"})
    if dirs:
        full["LD_LIBRARY_PATH"] = os.pathsep.join(dirs)
    began = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "envdoctor", "healthcheck", *args], capture_output=True, text=True,
                          env=full, timeout=60)
    return proc, time.monotonic() - began


def _both(tmp_path, nvml: dict[str, object], cuda: dict[str, object]) -> dict[str, str]:
    a = fake_nvml(tmp_path, nvml)
    b = fake_cuda(tmp_path, cuda)
    merged = {**a, **b}
    merged["_LIB_DIRS"] = a["_LIB_DIRS"] + os.pathsep + b["_LIB_DIRS"]
    return merged


def test_hung_nvml_is_unhealthy_within_the_budget(tmp_path):
    proc, seconds = healthcheck(_both(tmp_path, {"init_hang": 1}, {}), "--max-seconds", "2")
    assert proc.returncode == 1
    assert seconds < 4  # the budget holds even though the child never answers
    [line] = proc.stdout.strip().splitlines()
    assert line.startswith("unhealthy") and ("hung" in line or "nvml" in line)


def test_driver_library_mismatch_is_unhealthy(tmp_path):
    proc, _ = healthcheck(_both(tmp_path, {"init": 18}, {}), "--max-seconds", "5")
    assert proc.returncode == 1
    [line] = proc.stdout.strip().splitlines()
    assert line.startswith("unhealthy") and "mismatch" in line.lower()


def test_healthcheck_never_imports_torch(tmp_path):
    # A torch that would hang forever if imported: the healthcheck must not notice it.
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("import time\ntime.sleep(60)\n")
    proc, seconds = healthcheck({"PYTHONPATH": str(tmp_path)}, "--max-seconds", "5")
    assert seconds < 5 and proc.returncode in (0, 1)
    assert len(proc.stdout.strip().splitlines()) == 1
