"""Launch variables: parsing (pure), the launch probe on a fake host tree, the launch checks on facts,
and `cluster.run` refusing to join with bad variables (real probe code, no torch, no network)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any, ClassVar

import pytest
from envdoctor.checks import launch as launch_checks

from envdoctor.knowledge import launch
from envdoctor.knowledge.launch import (
    ifname_matches,
    launch_problems,
    nccl_switches,
    read_launch,
    tasks_per_node,
    valid_host,
    visible_gpus,
)
from envdoctor.model import Status
from envdoctor.probes import Options
from envdoctor.probes.launch_probe import probe_launch
from envdoctor.process.host import Host
from tests.builders import facts

TORCHRUN = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "abc",
            "TORCHELASTIC_USE_AGENT_STORE": "True"}


def test_not_launched_is_none() -> None:
    assert read_launch({"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0"}) is None


def test_torchrun_variables() -> None:
    info = read_launch(TORCHRUN)
    assert info is not None
    assert (info["launcher"], info["rank"], info["world_size"], info["local_rank"], info["local_world_size"],
            info["node_rank"], info["master_port"], info["agent_store"]) == ("torchrun", 1, 4, 1, 2, 0, 29500, True)
    assert launch_problems(info) == []


def test_slurm_variables_and_tasks_per_node() -> None:
    env = {"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
           "SLURM_TASKS_PER_NODE": "4(x2)", "SLURM_JOB_ID": "77", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    info = read_launch(env)
    assert info is not None
    assert (info["launcher"], info["rank"], info["world_size"], info["local_world_size"]) == ("slurm", 5, 8, 4)
    assert launch_problems(info) == []
    assert tasks_per_node("4(x2),3", 2) == 3 and tasks_per_node("2", 5) is None and tasks_per_node("x", 0) is None


def test_srun_plus_torchrun_prefers_torchrun() -> None:
    info = read_launch({**TORCHRUN, "SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_ID": "1"})
    assert info is not None and info["launcher"] == "torchrun+slurm" and info["rank"] == 1


@pytest.mark.parametrize("change, words", [
    ({"RANK": "4"}, "RANK=4 is outside 0…3"),
    ({"RANK": "x"}, "RANK='x' is not an integer"),
    ({"WORLD_SIZE": None}, "WORLD_SIZE is not set"),
    ({"MASTER_ADDR": None}, "MASTER_ADDR is not set"),
    ({"MASTER_PORT": "70000"}, "MASTER_PORT=70000 is not a TCP port"),
    ({"MASTER_ADDR": "bad..host"}, "neither an IP address nor a valid host name"),
    ({"LOCAL_RANK": "2"}, "LOCAL_RANK=2 is outside 0…1"),
])
def test_launch_problems(change: dict[str, Any], words: str) -> None:
    env = {k: v for k, v in {**TORCHRUN, **change}.items() if v is not None}
    info = read_launch(env)
    assert info is not None
    assert any(words in p for p in launch_problems(info)), launch_problems(info)


def test_srun_without_master_addr_says_export() -> None:
    info = read_launch({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"})
    assert info is not None
    assert any("export it in the batch script" in p for p in launch_problems(info))


def test_valid_host_before_any_lookup() -> None:
    assert valid_host("node-1.cluster.local") and valid_host("10.1.2.3") and valid_host("::1")
    assert not valid_host("bad..host") and not valid_host("-x") and not valid_host("a" * 64) and not valid_host("")


def test_ifname_syntax() -> None:
    ifaces = {"eth0": {"up": True}, "eth1": {"up": False}, "lo": {"up": True}, "ib0": {"up": True}}
    assert ifname_matches("NCCL_SOCKET_IFNAME", "eth", ifaces)["selected"] == ["eth0", "eth1"]
    assert ifname_matches("NCCL_SOCKET_IFNAME", "eth", ifaces)["down"] == ["eth1"]
    assert ifname_matches("NCCL_SOCKET_IFNAME", "=eth", ifaces)["unknown"] == ["eth"]
    assert ifname_matches("NCCL_SOCKET_IFNAME", "^eth", ifaces)["selected"] == ["ib0"]
    assert ifname_matches("GLOO_SOCKET_IFNAME", "eth", ifaces)["unknown"] == ["eth"]
    assert ifname_matches("GLOO_SOCKET_IFNAME", "eth0,lo", ifaces)["selected"] == ["eth0", "lo"]


def test_nccl_switches() -> None:
    found = nccl_switches({"NCCL_SHM_DISABLE": "1", "NCCL_NET": "socket", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "NVL",
                           "NCCL_NET_GDR_LEVEL": "PHB"})
    assert [f["name"] for f in found] == ["NCCL_SHM_DISABLE", "NCCL_NET", "NCCL_ALGO"]


def test_visible_gpus() -> None:
    assert visible_gpus(4, 2, 4) == {"device": 2, "mode": "shared"}
    assert visible_gpus(1, 3, 4) == {"device": 0, "mode": "one-per-rank"}
    assert visible_gpus(2, 3, 4)["mode"] == "out-of-range"
    assert visible_gpus(0, 0, 1)["device"] is None


# -- the probe, on a fake /sys tree ------------------------------------------------------------
def _sys_net(root: Path, ifaces: dict[str, bool]) -> None:
    for name, up in ifaces.items():
        d = root / "sys/class/net" / name
        d.mkdir(parents=True)
        (d / "flags").write_text("0x1003\n" if up else "0x1002\n")
        (d / "operstate").write_text("up\n" if up else "down\n")


class _Resolver(Host):
    """A host whose name lookups answer from a table: tests never query DNS."""

    names: ClassVar[dict[str, list[str]]] = {"master.test": ["127.0.0.1"]}

    def resolve(self, name: str, timeout: float = 2.0) -> tuple[list[str], str]:
        if name in self.names:
            return self.names[name], ""
        return [], f"{name} does not resolve (Name or service not known)"


def _probe(tmp_path: Path, env: dict[str, str], distributed: bool = False) -> Any:
    _sys_net(tmp_path, {"lo": True, "eth0": True, "eth1": False})
    host = _Resolver(environ={"PATH": "/usr/bin:/bin", **env}, root=tmp_path)
    readings = probe_launch(host, Options(distributed=distributed))
    base = facts(env__vars={k: v for k, v in env.items()})
    return base.merged(readings)


def _judge(f: Any, spec: Any) -> Any:
    from envdoctor.pipeline.diagnose import run_check

    (finding,) = run_check(spec, f)
    return finding


def test_probe_not_launched_skips(tmp_path: Path) -> None:
    f = _probe(tmp_path, {})
    assert f.value("launch.info") is None
    assert _judge(f, launch_checks.launch_vars).status is Status.SKIP
    assert _judge(f, launch_checks.launch_ifname).status is Status.SKIP


def test_probe_unresolvable_master(tmp_path: Path) -> None:
    env = {**TORCHRUN, "MASTER_ADDR": "nowhere.test"}
    f = _probe(tmp_path, env)
    finding = _judge(f, launch_checks.launch_master)
    assert finding.status is Status.FAIL and "nowhere.test" in finding.title and "does not resolve" in finding.title


def test_probe_resolvable_master_is_local(tmp_path: Path) -> None:
    f = _probe(tmp_path, {**TORCHRUN, "MASTER_ADDR": "master.test"})
    assert f.value("launch.master")["local"] is True
    assert _judge(f, launch_checks.launch_master).status is Status.OK


def test_probe_port_in_use_on_rank0(tmp_path: Path) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        env = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        f = _probe(tmp_path, env)
        finding = _judge(f, launch_checks.launch_master)
        assert finding.status is Status.FAIL and f"MASTER_PORT {port}" in finding.title and "in use" in finding.title
        # Under --distributed the rendezvous itself says so (its own store binds that port).
        f = _probe(tmp_path / "d", env, distributed=True)
        assert f.value("launch.port")["checked"] is False
    finally:
        holder.close()


def test_probe_ifname_missing_and_down(tmp_path: Path) -> None:
    env = {**TORCHRUN, "NCCL_SOCKET_IFNAME": "ib", "GLOO_SOCKET_IFNAME": "eth1"}
    finding = _judge(_probe(tmp_path, env), launch_checks.launch_ifname)
    assert finding.status is Status.FAIL
    assert "NCCL_SOCKET_IFNAME=ib names no interface on this node (ib)" in finding.detail
    assert "GLOO_SOCKET_IFNAME=eth1 selects interface(s) that are down (eth1)" in finding.detail
    ok = _judge(_probe(tmp_path / "ok", {**TORCHRUN, "NCCL_SOCKET_IFNAME": "eth"}), launch_checks.launch_ifname)
    assert ok.status is Status.FAIL  # eth1 is down and "eth" selects it too
    ok = _judge(_probe(tmp_path / "ok2", {**TORCHRUN, "NCCL_SOCKET_IFNAME": "=eth0"}), launch_checks.launch_ifname)
    assert ok.status is Status.OK


def test_ifname_judged_in_plain_check_without_launcher(tmp_path: Path) -> None:
    finding = _judge(_probe(tmp_path, {"NCCL_SOCKET_IFNAME": "eth9"}), launch_checks.launch_ifname)
    assert finding.status is Status.FAIL


def test_gpu_map() -> None:
    launched = {"rank": 3, "world_size": 4, "local_rank": 3, "local_world_size": 4, "vars": {}}
    f = facts(launch__info=launched, torch__device_count=2)
    finding = _judge(f, launch_checks.launch_gpu_map)
    assert finding.status is Status.FAIL and "LOCAL_RANK 3 has no GPU" in finding.title
    f = facts(launch__info={**launched, "local_rank": 1}, torch__device_count=2)
    assert "4 ranks on this node but only 2" in _judge(f, launch_checks.launch_gpu_map).title
    f = facts(launch__info={**launched, "local_world_size": 2, "local_rank": 1}, torch__device_count=8)
    finding = _judge(f, launch_checks.launch_gpu_map)
    assert finding.status is Status.OK and "6 of 8 GPU(s) on this node get no rank" in finding.title
    f = facts(launch__info=launched, torch__device_count=1, env__vars={"CUDA_VISIBLE_DEVICES": "3"})
    assert _judge(f, launch_checks.launch_gpu_map).title == "LOCAL_RANK 3 uses cuda:0"
    f = facts(launch__info=launched, torch__device_count=0)
    assert _judge(f, launch_checks.launch_gpu_map).status is Status.OK


def test_nccl_env_check() -> None:
    finding = _judge(facts(env__vars={"NCCL_SHM_DISABLE": "1"}), launch_checks.launch_nccl_env)
    assert finding.status is Status.WARN and "unset NCCL_SHM_DISABLE" in finding.remediation.commands
    assert _judge(facts(env__vars={}), launch_checks.launch_nccl_env).status is Status.SKIP


# -- cluster.run refuses to join, and still reports (real probe code; no torch, no network) -----
def _launch_only(host: Host) -> Any:
    """The pipeline's collect and judge cut down to the host and launch probes and the launch checks."""
    from envdoctor.pipeline import judge as pipeline
    from envdoctor.probes import run_probes
    from envdoctor.probes.host_probe import PROBES as HOST
    from envdoctor.probes.launch_probe import PROBES as LAUNCH

    def collect(plan: Any, on: Host, torch_probe: Any = None) -> Any:
        return run_probes(on, Options(distributed=plan.distributed), [*HOST, *LAUNCH])

    def judge(facts: Any, runs: Any, origin: str, plan: Any) -> Any:
        launch = tuple(i for i in pipeline.known_ids() if i.startswith("launch-"))
        return pipeline.judge(facts, runs, origin, plan.replace(only=launch))

    return collect, judge


def _distributed() -> Any:
    from envdoctor.pipeline.plan import Plan

    return Plan(command="distributed", distributed=True, micro=False)


@pytest.mark.parametrize("env, words", [
    ({"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}, "RANK=2 is outside 0…1"),
    ({"RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}, "WORLD_SIZE is not set"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "bad..host", "MASTER_PORT": "1"}, "valid host name"),
])
def test_cluster_run_alone_on_bad_launch(env: dict[str, str], words: str) -> None:
    from envdoctor.pipeline.cluster import ClusterOptions, run

    host = Host(environ={"PATH": "/usr/bin:/bin", **env})
    collect, judge = _launch_only(host)
    outcome = run(host, _distributed(), ClusterOptions(init_timeout=1, collective_timeout=1), collect=collect,
                  judge=judge)
    assert outcome.code == 1 and outcome.cluster is None
    assert words in outcome.line
    assert outcome.report is not None
    assert any(f.id == "launch-vars" and f.status is Status.FAIL for f in outcome.report.findings) or \
        "valid host name" in words


def test_cluster_run_without_launcher_is_a_usage_error() -> None:
    from envdoctor.pipeline.cluster import ClusterOptions, NotLaunched, run

    host = Host(environ={"PATH": "/usr/bin:/bin"})
    collect, judge = _launch_only(host)
    with pytest.raises(NotLaunched, match="torchrun --nproc-per-node=N"):
        run(host, _distributed(), ClusterOptions(), collect=collect, judge=judge)


def _live(code: str) -> Any:
    import subprocess
    import sys

    from envdoctor.process.host import LiveChild

    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    return LiveChild(proc)


def test_shared_torch_probe_timeout_and_early_exit() -> None:
    from envdoctor.pipeline.cluster import _shared_torch_probe

    mark = '"@@envdoctor@@ "'
    hung = _live(f"import sys, time; print({mark} + '{{\"probe_stage\": \"import torch\"}}', flush=True); "
                 "time.sleep(30)")
    try:
        result = _shared_torch_probe(hung)(0.8)
        assert result.status == "timeout" and result.stage == "import torch"
        assert "stuck in import torch" in result.explain()
    finally:
        hung.kill()
    died = _live("import sys; sys.stderr.write('ImportError: libtorch_cpu.so: cannot open\\n'); sys.exit(1)")
    result = _shared_torch_probe(died)(10)
    assert result.status == "crashed" and "libtorch_cpu.so" in result.detail
    good = _live(f"print({mark} + '{{\"torch_probe\": {{\"data\": {{\"torch\": {{\"installed\": false}}}}, "
                 f"\"done\": true, \"seconds\": 0.1}}}}', flush=True)")
    result = _shared_torch_probe(good)(10)
    assert result.status == "ok" and result.data == {"torch": {"installed": False}}


def test_output_patterns_like_srun() -> None:
    from envdoctor.knowledge.launch import expand_output

    env = {"SLURM_PROCID": "3", "SLURM_NTASKS": "8", "SLURM_NODEID": "1", "SLURM_JOB_ID": "77"}
    assert expand_output("reports/%N-%j-%t-%n.json", env, "gpu-node7.cluster") == "reports/gpu-node7-77-3-1.json"
    assert expand_output("r/%N%%%x.json", {}, "a/b") == "r/a_b%%x.json"
    assert expand_output("plain.json", env, "h") == "plain.json"


def test_report_output_pattern_end_to_end(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_JOB_ID": "4242",
           "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run([sys.executable, "-m", "envdoctor", "report", "--json", "--no-micro", "--only", "launch-vars",
                           "-o", str(tmp_path / "%N-%j.json")], capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    expected = tmp_path / f"{socket.gethostname().split('.')[0]}-4242.json"
    assert expected.is_file(), proc.stderr
    assert f"wrote {expected}" in proc.stderr


def test_srun_without_master_is_a_warning_in_a_plain_check() -> None:
    info = read_launch({"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "9"})
    finding = _judge(facts(launch__info=info), launch_checks.launch_vars)
    assert finding.status is Status.WARN and "export MASTER_PORT=29500" in finding.remediation.commands
    info = read_launch({"SLURM_PROCID": "5", "SLURM_NTASKS": "4"})
    assert _judge(facts(launch__info=info), launch_checks.launch_vars).status is Status.FAIL


def test_every_nccl_switch_is_judged_by_exactly_one_check() -> None:
    """One list of switches: the three every-run ones go to `env-vars` (with their undo), the rest to
    `launch-nccl-env`; none to both, none to neither."""
    env = {sw.name: (sw.bad[0] if sw.bad else "x") for sw in launch.NCCL_SWITCHES}
    everywhere = {f["name"] for f in nccl_switches(env, everywhere=True)}
    launch_only = {f["name"] for f in nccl_switches(env)}
    assert everywhere == {"NCCL_P2P_DISABLE", "NCCL_IB_DISABLE", "NCCL_DEBUG"}
    assert not everywhere & launch_only
    assert everywhere | launch_only == {sw.name for sw in launch.NCCL_SWITCHES}
    debug = next(f for f in nccl_switches({"NCCL_DEBUG": "info"}, everywhere=True))
    assert debug["undo"] == "export NCCL_DEBUG=WARN"
    assert nccl_switches({"NCCL_DEBUG": "WARN"}, everywhere=True) == []
