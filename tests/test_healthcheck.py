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


def test_the_healthcheck_subsets_name_every_healthcheck_probe_and_check() -> None:
    # healthcheck imports only HEALTHCHECK_MODULES / checks.HEALTHCHECK: they must hold every
    # probe and check flagged healthcheck=True, or one would silently stop running.
    from envdoctor.checks import HEALTHCHECK

    from envdoctor.probes import builtin_probes, healthcheck_probes
    from envdoctor.registry import load_registry

    # The same probes (the healthcheck starts NVIDIA's first, see HEALTHCHECK_MODULES).
    assert sorted(s.name for s in healthcheck_probes()) == sorted(s.name for s in builtin_probes() if s.healthcheck)
    assert sorted(s.name for s in healthcheck_probes(micro=True)) == sorted(
        s.name for s in builtin_probes() if s.healthcheck or s.micro)
    assert healthcheck_probes()[0].name == "nvml+cuda-driver"
    full = [s.id for s in load_registry(plugins=False) if s.healthcheck and not s.micro]
    subset = [s.id for s in load_registry(plugins=False, builtin=HEALTHCHECK) if s.healthcheck]
    assert subset == full
    assert [s.id for s in load_registry(plugins=False, builtin=(*HEALTHCHECK, "micro")) if s.healthcheck] == [
        s.id for s in load_registry(plugins=False) if s.healthcheck]


def test_healthcheck_imports_no_probe_or_check_module_it_does_not_run() -> None:
    code = ("import sys\nfrom envdoctor.commands import cli\n"
            "sys.argv = ['envdoctor', 'healthcheck']\n"
            "import atexit, os\n"
            "from envdoctor.process import lifecycle\n"
            "def answer(line, code):\n"
            "    print(sorted(m for m in sys.modules if m.startswith(('envdoctor.probes.', 'envdoctor.checks.', 'rich', 'torch'))))\n"
            "    sys.stdout.flush(); os._exit(code)\n"
            "lifecycle.answer = answer\n"
            "cli.run()\n")
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    loaded = set(eval(out.strip().splitlines()[-1]))
    assert not {m for m in loaded if m.startswith(("rich", "torch"))}, loaded
    assert {"envdoctor.probes.libraries", "envdoctor.probes.python_probe", "envdoctor.probes.launch_probe",
            "envdoctor.checks.libraries", "envdoctor.checks.compat", "envdoctor.checks.torch_build"}.isdisjoint(loaded)
    assert "envdoctor.probes.nvidia" in loaded and "envdoctor.checks.driver" in loaded


_SPAWNS = ("import os, subprocess, sys\n"
           "from envdoctor.process import lifecycle\n"
           "spawned, took = [], []\n"
           "real = subprocess.Popen.__init__\n"
           "def init(self, args, *a, **k):\n"
           "    spawned.append(' '.join(os.path.basename(str(x)) for x in args[1:4]))\n"
           "    real(self, args, *a, **k)\n"
           "subprocess.Popen.__init__ = init\n"
           "real_take = lifecycle.Early.take\n"
           "def take(self, command, env):\n"
           "    found = real_take(self, command, env)\n"
           "    took.append(found is not None)\n"
           "    return found\n"
           "lifecycle.Early.take = take\n"
           "def answer(line, code):\n"
           "    print(repr((line, spawned, took))); sys.stdout.flush(); os._exit(code)\n"
           "lifecycle.answer = answer\n"
           "from envdoctor.__main__ import run\n"
           "run()\n")


def test_the_healthcheck_adopts_the_driver_child_started_before_click(tmp_path):
    # One child for NVML and cuInit, started from the entry point (before click and the checks are
    # imported), adopted by the probe: no second start.
    env = _both(tmp_path, {"count": 2}, {"count": 2})
    full = dict(os.environ, ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD="1", NO_COLOR="1", LD_LIBRARY_PATH=env.pop("_LIB_DIRS"),
                **env)
    out = subprocess.run([sys.executable, "-c", "import sys; sys.argv = ['envdoctor', 'healthcheck']\n" + _SPAWNS],
                         capture_output=True, text=True, env=full, timeout=60)
    line, spawned, took = eval(out.stdout.strip().splitlines()[-1])
    assert line.startswith(("healthy", "unhealthy")) and "hung" not in line, out  # no device nodes here
    assert spawned == ["-S driver_probe.py -"] and took == [True]


def test_a_driver_child_started_for_nothing_leaves_without_touching_the_driver(tmp_path):
    # A usage error after the early start: the child never gets its arguments, so it never calls
    # nvmlInit (which would hang here) and the run ends at once.
    env = _both(tmp_path, {"init_hang": 1}, {"init_hang": 1})
    proc, seconds = healthcheck(env, "--max-seconds", "nope")
    assert proc.returncode == 2 and "nope" in proc.stderr and seconds < 10


def test_with_python_the_healthcheck_starts_no_driver_child_early(tmp_path):
    # cuInit then runs in that interpreter: the early child (envdoctor's own) would be the wrong one.
    from envdoctor.pipeline import startup

    for argv in (["healthcheck", "--python", sys.executable], ["healthcheck", f"--python={sys.executable}"],
                 ["healthcheck", "--help"], ["check"]):
        plan = startup.plan_from_argv(argv)
        assert plan is None or startup._driver_child(plan) is None, argv
    plan = startup.plan_from_argv(["healthcheck", "--max-seconds", "3", "--expect-gpus=2"])
    assert plan is not None and startup._driver_child(plan) is not None
    assert (plan.budget, plan.deadline, plan.expect_gpus) == (2.7, 3.0, 2)


def test_without_pynvml_on_the_path_the_driver_child_runs_with_site(monkeypatch):
    from envdoctor.process import driverstart

    monkeypatch.setattr(driverstart, "_folder", [None])
    command = driverstart.command_for(sys.executable, nvml=True)
    assert "-S" not in command and command[-1] == "-"
    assert driverstart.command_for("/opt/target/python", nvml=False)[:2] == ("/opt/target/python", "-S")
