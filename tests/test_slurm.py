"""`envdoctor healthcheck --slurm` (envdoctor/commands/slurm.py) and the Slurm files of deploy/slurm/ and
README.md's "Slurm" section, on a real single-node Slurm the tests start (tests/slurm_cluster.py).

The fast tests hold the drain-reason format, the node-state parsing and the verdict. The slow ones run
the real slurmctld + slurmd with README's slurm.conf lines: slurmd itself runs the HealthCheckProgram
every 2 s (README's interval, shortened; every other line as README has it) through a wrapper that
sources the scenario's stand-in environment (tests/fakes: a libnvidia-ml whose nvmlInit fails) and then
runs deploy/slurm/envdoctor-healthcheck.sh, as a site's would.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from envdoctor.commands import slurm
from envdoctor.model import Finding, Status

from .fakes.nvidia_fakes import fake_cuda, fake_nvml
from .slurm_cluster import Cluster, free_ports, unavailable

REPO = Path(__file__).resolve().parent.parent
DEPLOY = REPO / "deploy" / "slurm"
README = REPO / "README.md"
INTERVAL = 2  # seconds between HealthCheckProgram runs in the tests (README's value is for real fleets)


def readme_block(marker: str) -> str:
    """The fenced block that follows ``<!-- marker -->`` in README.md."""
    text = README.read_text()
    m = re.search(rf"<!-- {re.escape(marker)} -->\s*```[a-z]*\n(.*?)```", text, re.S)
    assert m, f"README.md has no code block after <!-- {marker} -->"
    return m.group(1)


def readme_conf() -> dict[str, str]:
    lines = [ln.strip() for ln in readme_block("slurm-conf").splitlines() if ln.strip() and not ln.startswith("#")]
    return dict(ln.split("=", 1) for ln in lines)


# -- fast: the format and the parsing ------------------------------------------------------------------------
def f(id_: str, status: Status, title: str) -> Finding:
    return Finding(id_, status, title)


def test_a_failure_is_unhealthy_and_names_the_first_failing_check() -> None:
    v = slurm.verdict([f("a", Status.OK, "fine"), f("driver-version-mismatch", Status.FAIL, "Driver/library version mismatch"),
                       f("device-nodes", Status.FAIL, "x"), f("b", Status.ERROR, "could not judge")], [])
    assert v == slurm.Verdict("unhealthy", "driver-version-mismatch", "Driver/library version mismatch", 1)
    assert slurm.drain_reason(v) == "envdoctor: driver-version-mismatch: Driver/library version mismatch (+1 more)"


def test_an_error_alone_is_no_verdict_and_a_hang_is_unhealthy() -> None:
    assert slurm.verdict([f("nvml-init", Status.ERROR, "NVML crashed"), f("x", Status.SKIP, "")], []).kind == "error"
    hung = slurm.verdict([f("nvml-init", Status.ERROR, "NVML did not answer")], ["nvml"])
    assert hung.kind == "unhealthy" and hung.check == "probe-hung" and "nvml" in hung.cause
    assert slurm.verdict([f("x", Status.WARN, "w"), f("y", Status.SKIP, "s")], []).kind == "healthy"
    # Nothing judged (every check skipped): no resume, no drain (the one verdict, engines.verdict, says unknown).
    assert slurm.verdict([f("y", Status.SKIP, "s")], []).kind == "error"


def test_the_reason_is_one_bounded_printable_line_that_envdoctor_owns() -> None:
    reason = slurm.drain_reason(slurm.Verdict("unhealthy", "gpu-xid", "a\nb\x1b[31m" + "long " * 80, 3))
    assert reason.startswith("envdoctor: gpu-xid: a b") and reason.endswith("… (+3 more)")
    assert len(reason) <= slurm.REASON_LIMIT and reason.isprintable()
    assert slurm.owned(reason) and slurm.owned("envdoctor: x") and not slurm.owned("NHC: x")
    assert not slurm.owned("maintenance (envdoctor: said so)") and not slurm.owned("")
    # Every user reads a reason (sinfo -R): a secret in a finding's title never reaches it.
    secret = "ghp_" + "a1B2c3D4e5" * 4
    assert secret not in slurm.drain_reason(slurm.Verdict("unhealthy", "x", f"token {secret} in HF_TOKEN"))


def test_scontrol_show_node_state_and_reason() -> None:
    text = ("NodeName=vm Arch=x86_64 CoresPerSocket=2\n   CPUAlloc=0 CPUEfctv=2 CPUTot=2\n"
            "   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
            "   Partitions=debug\n   Reason=envdoctor: nvml-init: NVML: a=b [root@2026-12-01T22:37:27]\n")
    assert slurm.parse_show_node(text) == slurm.NodeState("IDLE+DRAIN", True, "envdoctor: nvml-init: NVML: a=b")
    assert slurm.parse_show_node("NodeName=vm\n   State=MIXED ThreadsPerCore=1\n") == slurm.NodeState("MIXED", False, "")
    assert slurm.parse_show_node("   State=DRAINED\n").drained  # type: ignore[union-attr]
    assert slurm.parse_show_node("Node vm not found\n") is None


def test_the_node_is_slurmds_name_else_the_short_host_name() -> None:
    assert slurm.node_name({"SLURMD_NODENAME": "gpu017"}) == "gpu017"
    assert slurm.node_name({}) and "." not in slurm.node_name({})


def test_slurm_mode_refuses_a_budget_slurm_would_kill() -> None:
    proc = subprocess.run([sys.executable, "-m", "envdoctor", "healthcheck", "--slurm", "--max-seconds", "59"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "60 s" in proc.stderr


def test_readme_has_the_slurm_conf_lines_and_they_name_the_deploy_files() -> None:
    conf = readme_conf()
    assert set(conf) == {"HealthCheckProgram", "HealthCheckInterval", "HealthCheckNodeState", "Prolog", "Epilog"}
    for key in ("HealthCheckProgram", "Prolog", "Epilog"):
        assert (DEPLOY / Path(conf[key]).name).is_file(), conf[key]
        assert os.access(DEPLOY / Path(conf[key]).name, os.X_OK)
    assert int(conf["HealthCheckInterval"]) >= 60  # a fleet's interval, not the tests'
    assert conf["HealthCheckNodeState"] == "ANY"  # a drained node must be checked, or it is never resumed


def test_absent_slurm_skips_on_a_developer_machine_and_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        unavailable("Slurm/munge not installed")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="services-slurm"):
        unavailable("Slurm/munge not installed")


# -- fast: the command against a stand-in scontrol (what it reads, what it runs) ----------------------------
FAKE_SCONTROL = """#!/bin/sh
# A stand-in scontrol: "show node" prints $FAKE_NODE_SHOW; every call is appended to $FAKE_SCONTROL_LOG.
printf '%s\\n' "$*" >> "$FAKE_SCONTROL_LOG"
[ -n "$FAKE_SCONTROL_SLEEP" ] && sleep "$FAKE_SCONTROL_SLEEP"
case "$1" in show) printf '%s\\n' "$FAKE_NODE_SHOW" ;; esac
exit "${FAKE_SCONTROL_RC:-0}"
"""


def run_mode(tmp_path: Path, show: str, *args: str, nvml: dict[str, object] | None = None,
             **env: str) -> tuple[subprocess.CompletedProcess[str], list[str], float]:
    """``envdoctor healthcheck --slurm`` with a stand-in scontrol first on PATH; (result, scontrol calls, seconds)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "scontrol").write_text(FAKE_SCONTROL)
    (bin_dir / "scontrol").chmod(0o755)
    log = tmp_path / "scontrol.log"
    full = dict(os.environ, PATH=f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}", FAKE_SCONTROL_LOG=str(log),
                FAKE_NODE_SHOW=show, SLURMD_NODENAME="gpu017", ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD="1", **env)
    if nvml is not None:
        fake = fake_nvml(tmp_path, nvml)
        full.update(FAKE_NVML_CONFIG=fake["FAKE_NVML_CONFIG"], LD_LIBRARY_PATH=fake["_LIB_DIRS"])
    began = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "envdoctor", "healthcheck", "--slurm", *args], capture_output=True,
                          text=True, env=full, timeout=90)
    calls = log.read_text().splitlines() if log.exists() else []
    return proc, calls, time.monotonic() - began


IDLE = "NodeName=gpu017 Arch=x86_64\n   State=IDLE ThreadsPerCore=1 TmpDisk=0\n   Partitions=debug"
OURS = "NodeName=gpu017\n   State=IDLE+DRAIN ThreadsPerCore=1\n   Reason=envdoctor: nvml-init: NVML: x [root@2026-12-01T10:00:00]"
THEIRS = "NodeName=gpu017\n   State=MIXED+DRAIN ThreadsPerCore=1\n   Reason=bad DIMM [admin@2026-12-01T10:00:00]"


def test_healthy_and_drained_by_envdoctor_is_resumed_and_nothing_else_is_touched(tmp_path: Path) -> None:
    proc, calls, _ = run_mode(tmp_path, OURS)
    assert proc.returncode == 0 and "resumed gpu017" in proc.stdout, proc.stdout + proc.stderr
    assert calls == ["show node gpu017", "update nodename=gpu017 state=resume"]
    proc, calls, _ = run_mode(tmp_path / "b", THEIRS)
    assert proc.returncode == 0 and "drained by someone else" in proc.stdout and calls == ["show node gpu017"]
    proc, calls, _ = run_mode(tmp_path / "c", IDLE)
    assert proc.returncode == 0 and proc.stdout.startswith("healthy (") and calls == ["show node gpu017"]


def test_a_hung_driver_drains_within_the_budget_and_an_error_never_does(tmp_path: Path) -> None:
    # nvmlInit never returns: the probe hangs (a wedged driver), and the node is drained in time.
    proc, calls, seconds = run_mode(tmp_path, IDLE, "--max-seconds", "2", nvml={"init_hang": 1})
    assert proc.returncode == 1 and seconds < slurm.HARD_SECONDS, (proc.stdout, seconds)  # the product's bound
    assert calls[-1].startswith("update nodename=gpu017 state=drain reason=envdoctor: probe-hung: the nvml probe"), calls
    # nvmlInit crashes its probe: envdoctor could not look, so scontrol is not even asked.
    proc, calls, _ = run_mode(tmp_path / "b", OURS, nvml={"init_crash": 1})
    assert proc.returncode == 3 and proc.stdout.startswith("error (") and "node left as it is" in proc.stdout
    assert "nvml-init: NVML crashed" in proc.stdout and calls == []


def test_scontrol_failing_or_hanging_is_an_error_within_the_hard_budget(tmp_path: Path) -> None:
    proc, calls, _ = run_mode(tmp_path, IDLE, FAKE_SCONTROL_RC="1")
    assert proc.returncode == 3 and "scontrol show node failed (exit 1" in proc.stdout, proc.stdout
    proc, calls, seconds = run_mode(tmp_path / "b", IDLE, FAKE_SCONTROL_SLEEP="30")
    assert proc.returncode == 3 and "gave no answer within 5 s" in proc.stdout and seconds < slurm.HARD_SECONDS, (
        proc.stdout, seconds)


# -- slow: a real Slurm --------------------------------------------------------------------------------------
class Scenarios:
    """The stand-in environments the wrappers source before running a deploy/slurm script."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = Path(sys.executable).parent
        self.log = root / "envdoctor-slurm.log"
        nvml = fake_nvml(root / "fakes", {"init": 18})  # nvmlInit: Driver/library version mismatch
        cuda = fake_cuda(root / "fakes", {})
        self.broken_libs = {"LD_LIBRARY_PATH": f"{nvml['_LIB_DIRS']}:{cuda['_LIB_DIRS']}",
                            "FAKE_NVML_CONFIG": nvml["FAKE_NVML_CONFIG"], "FAKE_CUDA_CONFIG": cuda["FAKE_CUDA_CONFIG"]}
        self.crash_cfg = root / "fakes" / "nvml-crash.cfg"
        self.crash_cfg.write_text("init_crash=1\n")
        self.hang_cfg = root / "fakes" / "nvml-hang.cfg"
        self.hang_cfg.write_text("init_hang=1\n")
        # PATH without scontrol: a folder with what the scripts use besides it.
        self.no_scontrol = root / "bin-no-scontrol"
        self.no_scontrol.mkdir()
        for tool in ("date", "sh", "cat", "printf"):
            found = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
            if found.startswith("/"):
                (self.no_scontrol / tool).symlink_to(found)

    def base(self) -> dict[str, str]:
        return {"ENVDOCTOR": str(self.bin / "envdoctor"), "ENVDOCTOR_SLURM_LOG": str(self.log),
                "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1", "ENVDOCTOR_MAX_SECONDS": "15",
                "PATH": f"{self.bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "HOME": "/root", "LANG": "C.UTF-8",
                # The cluster's slurm.conf is not at /etc/slurm/slurm.conf, where scontrol looks by default.
                "SLURM_CONF": str(self.root / "slurm.conf")}

    def set(self, kind: str, name: str) -> None:
        """Write ``kind``.env (healthcheck, prolog or epilog) for scenario ``name``."""
        env = self.base()
        if name == "off":
            (self.root / f"{kind}.env").write_text("exit 0\n")
            return
        if name in ("broken", "broken-no-scontrol"):
            env.update(self.broken_libs)
        if name == "broken-no-scontrol":
            env["PATH"] = f"{self.bin}:{self.no_scontrol}"
        if name == "crash":  # the NVML stand-in alone (no libcuda: no driver seen working, so no device-node check)
            env.update(LD_LIBRARY_PATH=self.broken_libs["LD_LIBRARY_PATH"].split(":")[0],
                       FAKE_NVML_CONFIG=str(self.crash_cfg))
        if name == "hang":  # nvmlInit never returns: a wedged driver, judged within a short budget
            env.update(LD_LIBRARY_PATH=self.broken_libs["LD_LIBRARY_PATH"].split(":")[0],
                       FAKE_NVML_CONFIG=str(self.hang_cfg), ENVDOCTOR_MAX_SECONDS="3")
        assert name in ("healthy", "broken", "broken-no-scontrol", "crash", "hang"), name
        text = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
        tmp = self.root / f".{kind}.env"
        tmp.write_text(text)
        tmp.rename(self.root / f"{kind}.env")  # the wrapper never sources half a file

    def wrapper(self, kind: str, script: str) -> Path:
        """The program slurm.conf names: the scenario's environment, then the shipped script."""
        path = self.root / f"{kind}-wrapper.sh"
        path.write_text(f"#!/bin/sh\n. {shlex.quote(str(self.root / (kind + '.env')))}\n"
                        f"exec {shlex.quote(str(DEPLOY / script))}\n")
        path.chmod(0o755)
        return path

    def lines(self, what: str) -> list[str]:
        if not self.log.exists():
            return []
        return [ln for ln in self.log.read_text().splitlines() if f" {what} " in ln]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Scenarios]]:
    root = tmp_path_factory.mktemp("slurm")
    scenarios = Scenarios(root)
    for kind in ("healthcheck", "prolog", "epilog"):
        scenarios.set(kind, "healthy")
    conf = readme_conf()
    programs = {"HealthCheckProgram": "healthcheck", "Prolog": "prolog", "Epilog": "epilog"}
    lines = [f"{key}={scenarios.wrapper(programs[key], Path(value).name)}" if key in programs
             else f"{key}={INTERVAL}" if key == "HealthCheckInterval" else f"{key}={value}"
             for key, value in conf.items()]
    c = Cluster(root, lines)
    try:
        c.start()
        yield c, scenarios
    finally:
        c.stop()


def runs(sc: Scenarios) -> int:
    return len(sc.lines("healthcheck"))


def wait_runs(c: Cluster, sc: Scenarios, n: int = 2, seconds: float = 40) -> list[str]:
    """Wait until slurmd has run the HealthCheckProgram ``n`` more times; the new log lines."""
    start = runs(sc)
    c.wait_for(lambda: runs(sc) >= start + n, seconds, f"{n} HealthCheckProgram runs")
    return sc.lines("healthcheck")[start:]


def reset(c: Cluster, sc: Scenarios) -> None:
    """Healthy scenario everywhere, the node idle and not drained."""
    for kind in ("healthcheck", "prolog", "epilog"):
        sc.set(kind, "healthy")
    c.run(["scancel", "--quiet", "-u", "root"], timeout=20)
    if c.state()[0] not in ("idle",):
        c.run(["scontrol", "update", f"nodename={c.node}", "state=resume"], timeout=20)
    c.wait_for(lambda: c.state() == ("idle", "none"), 60, "the node idle and undrained")


def test_a_healthy_node_stays_idle(cluster: tuple[Cluster, Scenarios]) -> None:
    c, sc = cluster
    reset(c, sc)
    new = wait_runs(c, sc)
    assert all(" exit 0: healthy (" in ln for ln in new), new
    assert c.state() == ("idle", "none")


def test_a_broken_environment_drains_the_node_and_fixed_it_resumes(cluster: tuple[Cluster, Scenarios]) -> None:
    c, sc = cluster
    reset(c, sc)
    sc.set("healthcheck", "broken")
    c.wait_for(lambda: c.state()[0] in ("drain", "drng"), 40, "the node drained")
    state, reason = c.state()
    assert reason.startswith("envdoctor: driver-version-mismatch: Driver/library version mismatch"), reason
    shown = c.run(["scontrol", "show", "node", c.node], check=True).stdout
    assert "Reason=envdoctor: driver-version-mismatch:" in shown
    drained = [ln for ln in sc.lines("healthcheck") if "exit 1: unhealthy" in ln]
    assert drained and f"drained {c.node}: envdoctor: driver-version-mismatch" in drained[0]
    # Still broken: it stays drained (the same reason, no new scontrol update needed).
    assert "stays drained" in wait_runs(c, sc, 1)[-1]
    # Fixed: envdoctor drained it, so envdoctor resumes it.
    sc.set("healthcheck", "healthy")
    c.wait_for(lambda: c.state() == ("idle", "none"), 40, "the node resumed")
    assert any(f"resumed {c.node}" in ln for ln in sc.lines("healthcheck"))


def test_a_node_drained_by_someone_else_is_left_alone(cluster: tuple[Cluster, Scenarios]) -> None:
    c, sc = cluster
    reset(c, sc)
    c.run(["scontrol", "update", f"nodename={c.node}", "state=drain", "reason=NHC: swap full"], check=True)
    c.wait_for(lambda: c.state()[0] == "drain", 20, "the node drained by hand")
    new = wait_runs(c, sc)  # healthy: not envdoctor's drain, so no resume
    assert c.state() == ("drain", "NHC: swap full") and "drained by someone else" in new[-1], new
    sc.set("healthcheck", "broken")
    new = wait_runs(c, sc)  # unhealthy: their reason is kept, not overwritten
    assert c.state() == ("drain", "NHC: swap full") and "left alone" in new[-1] and " exit 1: " in new[-1], new
    reset(c, sc)


def test_a_missing_tool_or_a_probe_that_could_not_run_never_drains(cluster: tuple[Cluster, Scenarios]) -> None:
    c, sc = cluster
    reset(c, sc)
    sc.set("healthcheck", "broken-no-scontrol")
    new = wait_runs(c, sc)
    assert c.state() == ("idle", "none")
    assert " exit 3: error (" in new[-1] and "scontrol not found" in new[-1], new
    sc.set("healthcheck", "crash")  # nvmlInit crashes the probe: envdoctor could not look
    new = wait_runs(c, sc)
    assert c.state() == ("idle", "none")
    assert " exit 3: error (" in new[-1] and "could not judge" in new[-1] and "node left as it is" in new[-1], new
    assert "nvml-init: NVML crashed" in new[-1], new  # the cause, ahead of the checks it left unjudged


def test_a_hung_driver_drains_the_node_within_the_budget(cluster: tuple[Cluster, Scenarios]) -> None:
    c, sc = cluster
    reset(c, sc)
    sc.set("healthcheck", "hang")
    c.wait_for(lambda: c.state()[0] in ("drain", "drng"), 40, "the node drained")
    assert c.state()[1].startswith("envdoctor: probe-hung: the nvml probe did not answer"), c.state()
    line = next(ln for ln in sc.lines("healthcheck") if "exit 1: unhealthy" in ln)
    seconds = float(re.search(r"unhealthy \(([0-9.]+)s\)", line).group(1))  # type: ignore[union-attr]
    assert seconds < 3 + 2 * slurm.SCONTROL_SECONDS, line  # the budget, then scontrol: far inside Slurm's 60 s
    sc.set("healthcheck", "healthy")
    c.wait_for(lambda: c.state() == ("idle", "none"), 40, "the node resumed")


def sbatch(c: Cluster, argv: list[str], seconds: float = 90, env: dict[str, str] | None = None) -> tuple[str, str]:
    """Submit, wait until the job has left the queue; (job id, its output file's text)."""
    out = c.root / "job-%j.out"
    proc = c.run(["sbatch", "--parsable", f"--output={out}", *argv], check=True, env=env)
    job = proc.stdout.strip().split(";")[0]

    def done() -> bool:
        return c.run(["squeue", "-h", "-j", job, "-o", "%T"], timeout=10).stdout.strip() == ""
    c.wait_for(done, seconds, f"job {job} to finish")
    path = c.root / f"job-{job}.out"
    return job, path.read_text() if path.exists() else ""


def test_the_prolog_refuses_an_unhealthy_node_and_the_epilog_drains_one_a_job_broke(
        cluster: tuple[Cluster, Scenarios]) -> None:
    c, sc = cluster
    reset(c, sc)
    sc.set("healthcheck", "off")  # only the prolog (and the epilog Slurm runs after it) judge now
    sc.set("prolog", "broken")
    sc.set("epilog", "broken")
    proc = c.run(["sbatch", "--parsable", "--output=/dev/null", "--wrap", "true"], check=True)
    job = proc.stdout.strip().split(";")[0]
    c.wait_for(lambda: c.state()[0] in ("drain", "drng"), 60, "the prolog to drain the node")
    assert c.state()[1].startswith("envdoctor: driver-version-mismatch:"), c.state()
    # Slurm's side of the contract: the job did not run here; it went back to the queue (held).
    c.wait_for(lambda: c.run(["squeue", "-h", "-j", job, "-o", "%T"]).stdout.strip() == "PENDING", 30,
               "the job requeued")
    held = c.run(["squeue", "-h", "-j", job, "-o", "%r"]).stdout.strip()
    assert "held" in held.lower(), held
    # Slurm's own drain for the failed prolog kept envdoctor's reason: the HealthCheckProgram owns it.
    assert c.state()[1].startswith("envdoctor: driver-version-mismatch:"), c.state()
    assert any(" exit 1: unhealthy" in ln for ln in sc.lines("prolog"))
    reset(c, sc)
    sc.set("healthcheck", "off")
    sc.set("epilog", "broken")  # the job "broke" the node: the epilog sees it
    job, _ = sbatch(c, ["--wrap", "true"])
    c.wait_for(lambda: c.state()[0] in ("drain", "drng"), 30, "the epilog to drain the node")
    assert c.state()[1].startswith("envdoctor: driver-version-mismatch:"), c.state()
    assert any(f"epilog job {job} exit 1: unhealthy" in ln for ln in sc.lines("epilog"))
    # ...and the HealthCheckProgram, which owns that drain, resumes the node once it is healthy.
    sc.set("epilog", "healthy")
    sc.set("healthcheck", "healthy")
    c.wait_for(lambda: c.state() == ("idle", "none"), 40, "the node resumed")


def test_srun_two_tasks_check_distributed(cluster: tuple[Cluster, Scenarios]) -> None:
    c, sc = cluster
    reset(c, sc)
    port = free_ports(1)[0]
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "NO_COLOR": "1", "COLUMNS": "220",
           "OMP_NUM_THREADS": "1", "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONWARNINGS": "ignore"}
    envdoctor = str(Path(sys.executable).parent / "envdoctor")
    began = time.monotonic()
    proc = c.run(["srun", "-N1", "-n2", envdoctor, "check", "--distributed", "--init-timeout", "60",
                  "--collective-timeout", "30", "--timeout", "8"], timeout=150, env=env)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr + c.logs()
    assert "cluster check · 2 rank(s) · launcher slurm" in out and "All 2 ranks arrived" in out, out
    assert "All-reduce exact on every rank" in out and "Cluster summary: 0 fail" in out, out
    assert time.monotonic() - began < 150


def test_the_readme_sbatch_script_runs(cluster: tuple[Cluster, Scenarios]) -> None:
    c, sc = cluster
    reset(c, sc)
    script = c.root / "envdoctor.sbatch"
    script.write_text(readme_block("slurm-sbatch"))
    env_note = "ALL,NO_COLOR=1,OMP_NUM_THREADS=1,ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD=1,PYTHONWARNINGS=ignore"
    # One node, no GPU here: the command line overrides the script's #SBATCH node and GPU counts.
    path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"  # torchrun, envdoctor
    job, out = sbatch(c, ["--nodes=1", "--gpus-per-node=0", f"--export={env_note}", f"--chdir={c.root}",
                          str(script)], seconds=150, env={"PATH": path})
    report = c.root / f"cluster-{job}.json"
    assert report.is_file(), out + c.logs()
    import json

    data = json.loads(report.read_text())
    titles = {f["id"]: f["title"] for f in data["findings"]}
    assert data["origin"] == "cluster" and data["summary"]["fail"] == 0 and data["summary"]["error"] == 0, data["summary"]
    assert titles["cluster-rendezvous"].startswith("All 2 ranks arrived"), titles  # auto: one rank per CPU here
    state = c.run(["scontrol", "show", "job", job], timeout=10).stdout
    assert "JobState=COMPLETED" in state and "ExitCode=0:0" in state, state + out


def test_only_a_driver_probes_hang_drains_another_probes_is_no_verdict() -> None:
    from envdoctor.model import Status as S

    assert slurm.verdict([f("x", S.OK, "")], ["nvml"]).kind == "unhealthy"
    other = slurm.verdict([f("x", S.OK, "")], ["visibility"])
    assert other.kind == "error" and "visibility" in other.cause and "driver" not in other.cause


def test_the_prolog_refuses_the_node_only_for_envdoctors_own_unhealthy_answer(tmp_path: Path) -> None:
    """A crash of envdoctor (exit 1 with a traceback) must not hold a job: only the line 'unhealthy …' does."""
    prolog = Path(__file__).resolve().parent.parent / "deploy" / "slurm" / "envdoctor-prolog.sh"
    for said, rc, expected in (("unhealthy (0.3s): drained gpu017: envdoctor: x: y", 1, 1),
                               ("Traceback (most recent call last):", 1, 0), ("healthy (0.2s)", 0, 0),
                               ("error (0.1s): could not judge", 3, 0)):
        fake = tmp_path / f"envdoctor-{rc}-{expected}"
        fake.write_text(f"#!/bin/sh\necho {shlex.quote(said)}\nexit {rc}\n")
        fake.chmod(0o755)
        proc = subprocess.run(["sh", str(prolog)], env={"ENVDOCTOR": str(fake), "ENVDOCTOR_SLURM_LOG": str(tmp_path / "log"),
                                                         "PATH": os.environ["PATH"]}, capture_output=True, timeout=60)
        assert proc.returncode == expected, (said, proc)
