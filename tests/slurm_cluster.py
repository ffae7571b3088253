"""A real single-node Slurm on 127.0.0.1 for the tests: munged, slurmctld and slurmd started as this
test process's own children from a private folder, stopped (and waited for) at the end.

Installed by ``.ci/services-slurm`` (Debian's slurm-wlm and munge). Where the binaries are absent
a developer's run skips these tests; under CI (``CI=true``) that is a failure, never a silent pass.
slurmd runs jobs as their users, so the cluster needs root: not root is the same skip / failure.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import ci

SBIN = ("/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin")
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sinfo", "scontrol", "srun", "sbatch", "squeue")
START_SECONDS = 60.0  # the node must be idle within this (seconds on an idle machine)


def find(name: str) -> str | None:
    return shutil.which(name) or next((os.path.join(d, name) for d in SBIN if os.access(os.path.join(d, name), os.X_OK)),
                                      None)


def unavailable(why: str) -> Any:
    """Skip on a developer's machine; fail under CI, where .ci/run installed Slurm."""
    ci.unavailable(f"{why}: run .ci/services-slurm as root (installs Debian's slurm-wlm and munge)",
                   ".ci/run installs Slurm with .ci/services-slurm")


def free_ports(n: int) -> list[int]:
    """``n`` loopback ports nobody listens on, below the kernel's ephemeral range."""
    try:
        low_eph = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low_eph = 32768
    rng = random.Random(f"{os.getpid()}-{time.monotonic_ns()}")
    ports: list[int] = []
    while len(ports) < n:
        port = rng.randrange(20000, min(low_eph, 32768))
        if port in ports:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
    return ports


def _die_with_parent() -> None:
    """In the daemon before exec: SIGTERM when the test process dies, even killed (Linux prctl
    PR_SET_PDEATHSIG), so no daemon outlives a test run that never reached its teardown."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


class Cluster:
    """One node (this host's short name, NodeAddr 127.0.0.1, 2 CPUs) in one partition."""

    def __init__(self, root: Path, conf_lines: list[str] | None = None) -> None:
        self.root = root
        self.node = socket.gethostname().split(".")[0]
        self.conf = root / "slurm.conf"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))
        for key in [k for k in self.env if k.startswith(("SLURM_", "SBATCH_", "SRUN_"))]:
            if key != "SLURM_CONF":
                del self.env[key]
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.extra = conf_lines or []

    # -- start and stop --------------------------------------------------------------------------------------
    def write_conf(self) -> None:
        r = self.root
        ctld_port, slurmd_port = free_ports(2)
        lines = [
            "ClusterName=envdoctor-test",
            f"SlurmctldHost={self.node}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={slurmd_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={r / 'munge.sock'}",
            f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / 'spool'}",
            f"SlurmctldPidFile={r / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / 'slurmd.pid'}",
            f"SlurmctldLogFile={r / 'slurmctld.log'}",
            f"SlurmdLogFile={r / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SwitchType=switch/none",
            "MpiDefault=none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "ReturnToService=2",
            "SlurmdTimeout=60",
            "MinJobAge=30",
            # Job ids (and so the README sbatch's MASTER_PORT, 29500 + id % 1000) of their own: two
            # test runs on one machine, each with its own cluster from job 1, met on port 29504.
            f"FirstJobId={random.randrange(1000, 90000)}",
            *self.extra,
            f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN",
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        ]
        self.conf.write_text("\n".join(lines) + "\n")

    def start(self) -> None:
        paths = {name: find(name) for name in (*DAEMONS, *CLIENTS)}
        missing = sorted(n for n, p in paths.items() if p is None)
        if missing:
            unavailable(f"Slurm/munge not installed ({', '.join(missing)} not found)")
        if os.geteuid() != 0:
            unavailable("slurmd needs root to run jobs")
        r = self.root
        for sub in ("state", "spool"):
            (r / sub).mkdir(parents=True, exist_ok=True)
        key = r / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        self.write_conf()
        self._spawn("munged", [str(paths["munged"]), "-F", "-f", f"--socket={r / 'munge.sock'}", f"--key-file={key}",
                               f"--pid-file={r / 'munged.pid'}", f"--seed-file={r / 'munged.seed'}",
                               f"--log-file={r / 'munged.log'}"])
        self.wait_for(lambda: (r / "munge.sock").exists(), 20, "munged's socket")
        self._spawn("slurmctld", [str(paths["slurmctld"]), "-D", "-i", "-f", str(self.conf)])
        self._spawn("slurmd", [str(paths["slurmd"]), "-D", "-f", str(self.conf)])
        self.wait_for(lambda: self.state()[0].startswith("idle") and not self.state()[0].endswith("*"),
                      START_SECONDS, "the node idle in sinfo")

    def _spawn(self, name: str, argv: list[str]) -> None:
        out = open(self.root / f"{name}.out", "wb")
        self.procs[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env=self.env, start_new_session=True, cwd=self.root,
                                            preexec_fn=_die_with_parent)
        out.close()

    def stop(self) -> None:
        """Stop every daemon this cluster started (slurmd first: its job steps go with it), and wait."""
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        # slurmstepd children of a job slurmd ran live in their own sessions: none may outlive the test.
        for pid in self._stepds():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def _stepds(self) -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmd = (entry / "cmdline").read_bytes().split(b"\0")
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if cmd and cmd[0].endswith(b"slurmstepd") and str(self.conf).encode() in environ:
                found.append(int(entry.name))
        return found

    # -- talking to it ---------------------------------------------------------------------------------------
    def run(self, argv: list[str], timeout: float = 30, env: dict[str, str] | None = None,
            check: bool = False) -> subprocess.CompletedProcess[str]:
        full = dict(self.env, **(env or {}))
        proc = subprocess.run(argv, capture_output=True, text=True, env=full, timeout=timeout, cwd=self.root)
        if check and proc.returncode != 0:
            pytest.fail(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}\n{self.logs()}")
        return proc

    def state(self) -> tuple[str, str]:
        """(sinfo's compact state, e.g. ``idle`` / ``drain`` / ``drng`` / ``idle*``; the reason, ``none`` if none)."""
        try:
            out = self.run(["sinfo", "-h", "-N", "-n", self.node, "-o", "%t|%E"], timeout=10).stdout.strip()
        except subprocess.TimeoutExpired:
            return "", ""
        state, _, reason = out.partition("|")
        return state, reason

    def wait_for(self, ready: Callable[[], bool], seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    pytest.fail(f"{name} exited {proc.returncode} while waiting for {what}:\n{self.logs()}")
            if ready():
                return
            time.sleep(0.25)
        pytest.fail(f"no {what} within {seconds:.0f} s (state {self.state()}):\n{self.logs()}")

    def logs(self, tail: int = 25) -> str:
        parts = []
        for name in ("slurmctld.log", "slurmd.log", "slurmctld.out", "slurmd.out", "munged.out"):
            path = self.root / name
            if path.exists():
                lines = path.read_text(errors="replace").splitlines()[-tail:]
                parts.append(f"--- {name}\n" + "\n".join(lines))
        return "\n".join(parts)
