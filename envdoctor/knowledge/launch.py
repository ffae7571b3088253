"""What a distributed launcher (torchrun, srun, a Kubernetes Job through torchrun) told this
process, read from its environment variables: pure functions, no I/O.

The one home for the launch variables' names and meanings, for the NCCL switches a launch
check reports, and for the socket-interface syntax of ``NCCL_SOCKET_IFNAME`` /
``GLOO_SOCKET_IFNAME``. The launch probe, the launch checks and the cluster check all ask here.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from envdoctor.knowledge import remedies
from envdoctor.record import Record

#: Variables torchrun (torch.distributed.elastic) sets for every worker.
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
                 "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE")
#: Variables srun sets for every task (``man srun``, "OUTPUT ENVIRONMENT VARIABLES").
SLURM_VARS = ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
              "SLURM_STEP_TASKS_PER_NODE", "SLURM_NODEID", "SLURM_JOB_NODELIST", "SLURM_STEP_NODELIST",
              "SLURM_JOB_ID", "SLURM_NNODES", "SLURMD_NODENAME")
#: Any of these means "some launcher started this process as one rank of many".
MARKERS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID", "SLURM_PROCID", "SLURM_NTASKS")
#: Reported, compared across ranks, never a reason for a finding on their own.
IFNAME_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")

#: Per-rank by design: never a "difference" between ranks.
PER_RANK_VARS = frozenset({"RANK", "LOCAL_RANK", "GROUP_RANK", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID",
                           "SLURMD_NODENAME", "TORCHELASTIC_ERROR_FILE", "TORCHELASTIC_RESTART_COUNT",
                           "TORCHELASTIC_MAX_RESTARTS", "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE",
                           "GROUP_WORLD_SIZE", "SLURM_TASK_PID", "SLURM_GTIDS", "SLURM_CPU_BIND",
                           "SLURM_CPU_BIND_LIST", "SLURM_TOPOLOGY_ADDR", "SLURM_STEP_ID", "SLURM_JOB_ID"})


class NcclSwitch(Record):
    """An NCCL variable that turns a transport off or the logs up (NCCL's "Environment Variables"
    page, https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html, as of NCCL 2.27)."""

    name: str
    bad: tuple[str, ...]  # values (upper-case) that disable/force something; () = any value
    effect: str
    #: Judged on every run (the `env-vars` check), not only for a distributed launch: the
    #: leftovers of debugging a hang that slow down even a one-node job.
    everywhere: bool = False
    #: The value that undoes it, when that is not ``unset NAME``.
    fix: str = ""

    def undo(self) -> str:
        """The command that undoes it (written by envdoctor.knowledge.remedies): ``fix`` is the value to set instead."""
        return remedies.env_set(self.name, self.fix) if self.fix else remedies.env_unset(self.name)


#: The one list of NCCL switches worth a word. Those marked ``everywhere`` are judged by the
#: `env-vars` check on every run; the rest by `launch-nccl-env` when a launch is seen.
NCCL_SWITCHES: tuple[NcclSwitch, ...] = (
    NcclSwitch("NCCL_P2P_DISABLE", ("1",), "forces NCCL off peer-to-peer onto slower transports", everywhere=True),
    NcclSwitch("NCCL_IB_DISABLE", ("1",), "forces NCCL off InfiniBand onto slower transports", everywhere=True),
    NcclSwitch("NCCL_DEBUG", ("INFO", "TRACE"), "floods the logs of every rank", everywhere=True,
               fix="WARN"),
    NcclSwitch("NCCL_SHM_DISABLE", ("1",), "disables the shared-memory transport between GPUs of one node"),
    NcclSwitch("NCCL_NET_GDR_LEVEL", ("LOC", "0"), "disables GPUDirect RDMA between NIC and GPU"),
    NcclSwitch("NCCL_NET_GDR_DISABLE", ("1",), "disables GPUDirect RDMA between NIC and GPU"),
    NcclSwitch("NCCL_P2P_LEVEL", ("LOC", "0"), "disables peer-to-peer transfers between GPUs"),
    NcclSwitch("NCCL_NET", ("SOCKET",), "forces TCP sockets instead of InfiniBand/RoCE"),
    NcclSwitch("NCCL_IB_HCA", (), "restricts NCCL to the named InfiniBand adapters"),
    NcclSwitch("NCCL_ALGO", (), "forces one collective algorithm for every message size"),
    NcclSwitch("NCCL_PROTO", (), "forces one protocol for every message size"),
    NcclSwitch("NCCL_DEBUG_SUBSYS", (), "selects debug subsystems (only matters with NCCL_DEBUG=INFO/TRACE)"),
    NcclSwitch("NCCL_BLOCKING_WAIT", ("1",), "makes every collective wait on the host (a debugging switch)"),
    NcclSwitch("TORCH_NCCL_BLOCKING_WAIT", ("1",), "makes every collective wait on the host (a debugging switch)"),
    NcclSwitch("NCCL_LAUNCH_MODE", ("GROUP",), "launches kernels as a group (a debugging switch)"),
)


def nccl_switches(env: Mapping[str, str], everywhere: bool = False) -> list[dict[str, str]]:
    """The NCCL switches set in ``env`` to a value that changes transports or debugging: those
    judged on every run (``everywhere``), or the rest, a distributed launch's."""
    out = []
    for sw in NCCL_SWITCHES:
        if sw.everywhere is not everywhere:
            continue
        value = env.get(sw.name)
        if value is None or value == "":
            continue
        if sw.bad and value.strip().upper() not in sw.bad:
            continue
        out.append({"name": sw.name, "value": value, "effect": sw.effect, "undo": sw.undo()})
    return out


def _int(env: Mapping[str, str], name: str) -> tuple[int | None, str | None]:
    raw = env.get(name)
    if raw is None:
        return None, None
    text = raw.strip()
    if not re.fullmatch(r"[+-]?\d{1,9}", text):
        return None, f"{name}={raw!r} is not an integer"
    return int(text), None


def tasks_per_node(spec: str | None, node: int | None) -> int | None:
    """``SLURM_TASKS_PER_NODE`` (``"4(x2),3"``) -> the count on node ``node``."""
    if not spec or node is None or node < 0:
        return None
    counts: list[int] = []
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if not m:
            return None
        counts.extend([int(m.group(1))] * int(m.group(2) or 1))
        if len(counts) > node:
            return counts[node]
    return None


def read_launch(env: Mapping[str, str]) -> dict[str, Any] | None:
    """The launch as this process sees it, or None when no launcher variable is set.

    torchrun's variables win over srun's: under ``srun torchrun …`` SLURM_PROCID numbers the
    torchrun agents (nodes), not the ranks."""
    if not any(env.get(m) not in (None, "") for m in MARKERS):
        return None
    torchrun = any(env.get(v) not in (None, "") for v in ("RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID"))
    problems: list[str] = []
    names = {"rank": "RANK", "world_size": "WORLD_SIZE", "local_rank": "LOCAL_RANK",
             "local_world_size": "LOCAL_WORLD_SIZE", "node_rank": "GROUP_RANK"}
    if not torchrun:
        names = {"rank": "SLURM_PROCID", "world_size": "SLURM_NTASKS", "local_rank": "SLURM_LOCALID",
                 "local_world_size": "SLURM_NTASKS_PER_NODE", "node_rank": "SLURM_NODEID"}
    values: dict[str, int | None] = {}
    for field, var in names.items():
        values[field], problem = _int(env, var)
        if problem:
            problems.append(problem)
    if not torchrun and values["local_world_size"] is None:
        values["local_world_size"] = tasks_per_node(env.get("SLURM_STEP_TASKS_PER_NODE")
                                                    or env.get("SLURM_TASKS_PER_NODE"), values["node_rank"])
    port, problem = _int(env, "MASTER_PORT")
    if problem:
        problems.append(problem)
    launcher = "torchrun" if env.get("TORCHELASTIC_RUN_ID") else "slurm" if not torchrun else "env"
    if env.get("SLURM_JOB_ID") and launcher != "slurm":
        launcher += "+slurm"
    return {
        "launcher": launcher,
        **values,
        "master_addr": env.get("MASTER_ADDR"),
        "master_port": port,
        "agent_store": env.get("TORCHELASTIC_USE_AGENT_STORE") == "True",
        "run_id": env.get("TORCHELASTIC_RUN_ID"),
        "vars": {n: names_value for n in (*names.values(), "MASTER_ADDR", "MASTER_PORT")
                 if (names_value := env.get(n)) is not None},
        "unparsable": problems,
    }


def launch_problems(info: Mapping[str, Any]) -> list[str]:
    """Why this process cannot take part in a rendezvous as launched; [] when it can."""
    problems = list(info.get("unparsable") or ())
    src = info.get("vars") or {}
    rank, world = info.get("rank"), info.get("world_size")
    local, local_world = info.get("local_rank"), info.get("local_world_size")
    slurm = str(info.get("launcher", "")).startswith("slurm")
    rank_var, world_var = ("SLURM_PROCID", "SLURM_NTASKS") if slurm else ("RANK", "WORLD_SIZE")
    for field, var in (("rank", rank_var), ("world_size", world_var)):
        if info.get(field) is None and var not in src:
            problems.append(f"{var} is not set")
    for var in ("MASTER_ADDR", "MASTER_PORT"):
        if not src.get(var):
            problems.append(f"{var} is not set" + (" (srun does not set it: export it in the batch script)"
                                                   if slurm else ""))
    if isinstance(world, int) and world < 1:
        problems.append(f"{world_var}={world} must be at least 1")
    if isinstance(rank, int) and isinstance(world, int) and world >= 1 and not 0 <= rank < world:
        problems.append(f"{rank_var}={rank} is outside 0…{world - 1} ({world_var}={world})")
    if isinstance(local, int) and isinstance(local_world, int) and local_world >= 1 and not 0 <= local < local_world:
        problems.append(f"LOCAL_RANK={local} is outside 0…{local_world - 1} (LOCAL_WORLD_SIZE={local_world})")
    if isinstance(local_world, int) and isinstance(world, int) and local_world > world >= 1:
        problems.append(f"LOCAL_WORLD_SIZE={local_world} is larger than {world_var}={world}")
    port = info.get("master_port")
    if isinstance(port, int) and not 1 <= port <= 65535:
        problems.append(f"MASTER_PORT={port} is not a TCP port (1…65535)")
    addr = info.get("master_addr")
    if addr and not valid_host(addr):
        problems.append(f"MASTER_ADDR={addr!r} is neither an IP address nor a valid host name")
    return problems


_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


def valid_host(name: str) -> bool:
    """An IP literal or an RFC 1123 host name (checked before any lookup is attempted)."""
    try:
        ipaddress.ip_address(name.strip("[]"))
        return True
    except ValueError:
        pass
    if not name or len(name) > 253:
        return False
    labels = name[:-1].split(".") if name.endswith(".") else name.split(".")
    return all(_LABEL.match(label) for label in labels)


def is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]"))
        return True
    except ValueError:
        return False


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def ifname_patterns(var: str, value: str) -> tuple[bool, bool, list[str]]:
    """(exclude, exact, names). NCCL: ``^`` excludes, ``=`` matches exactly, otherwise each name is a
    prefix (``eth`` matches eth0). Gloo: each comma-separated name is exact."""
    text = value.strip()
    exclude = exact = False
    if var.startswith("NCCL"):
        if text.startswith("^"):
            exclude, text = True, text[1:]
        if text.startswith("="):
            exact, text = True, text[1:]
    else:
        exact = True
    return exclude, exact, [n.strip() for n in text.split(",") if n.strip()]


def ifname_matches(var: str, value: str, interfaces: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Which existing interfaces ``value`` selects, and which named ones do not exist / are down."""
    exclude, exact, names = ifname_patterns(var, value)
    selected: list[str] = []
    unknown: list[str] = []
    for name in names:
        hits = [i for i in interfaces if (i == name if exact else i.startswith(name))]
        if not hits:
            unknown.append(name)
        selected.extend(h for h in hits if h not in selected)
    if exclude:
        selected = [i for i in interfaces if i not in selected and i != "lo"]
        unknown = []
    down = [i for i in selected if not interfaces[i].get("up")]
    return {"selected": selected, "unknown": unknown, "down": down, "exclude": exclude}


def visible_gpus(count: int | None, local_rank: int | None, local_world: int | None) -> dict[str, Any]:
    """Which CUDA device this rank should use: ``cuda:LOCAL_RANK`` when the node's ranks share
    the visible GPUs, ``cuda:0`` when each rank was given exactly one (srun --gpus-per-task=1,
    CUDA_VISIBLE_DEVICES per rank), None when it has none."""
    if not count or local_rank is None or local_rank < 0:
        return {"device": None, "mode": "none"}
    if local_rank < count:
        return {"device": local_rank, "mode": "shared"}
    if count == 1:
        return {"device": 0, "mode": "one-per-rank"}
    return {"device": None, "mode": "out-of-range"}


_PATTERN = re.compile(r"%(.)")


def expand_output(path: str, env: Mapping[str, str], hostname: str) -> str:
    """``-o reports/%N.json`` under srun: srun's own filename patterns, for envdoctor's ``-o``
    (srun expands them only in its own --output). ``%N`` short host name, ``%j`` job id, ``%t``
    task rank (RANK or SLURM_PROCID), ``%n`` node id, ``%%`` a percent sign; any other ``%x`` is
    kept as written."""
    info = read_launch(env) or {}
    values = {
        "N": hostname.split(".", 1)[0],
        "j": env.get("SLURM_JOB_ID") or env.get("TORCHELASTIC_RUN_ID") or "",
        "t": "" if info.get("rank") is None else str(info["rank"]),
        "n": "" if info.get("node_rank") is None else str(info["node_rank"]),
        "%": "%",
    }

    def sub(m: re.Match[str]) -> str:
        value = values.get(m.group(1))
        # A value never adds a path separator: a hostile host name cannot move the file.
        return m.group(0) if value is None else value.replace("/", "_")

    return _PATTERN.sub(sub, path)
