"""Launch checks: what torchrun / srun told this rank, judged before any network is touched.

They run in every `envdoctor check` whose environment carries launcher variables, and first of
all in `envdoctor check --distributed`; without those variables they skip.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envdoctor.knowledge import remedies
from envdoctor.knowledge.launch import IFNAME_VARS, ifname_matches, launch_problems, nccl_switches, visible_gpus

from ..kit import Remediation, evidence, fail, ok, skip, warn
from ..model import Facts, Finding
from ..registry import check

_NOT_LAUNCHED = "Not started by torchrun or srun"
_TORCHRUN = "https://docs.pytorch.org/docs/stable/elastic/run.html"


def _info(facts: Facts) -> dict[str, Any] | None:
    info = facts.value("launch.info")
    return dict(info) if isinstance(info, dict) or hasattr(info, "items") else None


def _describe(info: dict[str, Any]) -> str:
    rank, world = info.get("rank"), info.get("world_size")
    local, local_world = info.get("local_rank"), info.get("local_world_size")
    where = f"rank {rank} of {world}"
    if local is not None:
        where += f", local rank {local} of {local_world if local_world is not None else '?'}"
    return f"{where} ({info.get('launcher')})"


@check("launch-vars", "Launcher variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_*) are consistent",
       needs=("launch.info",))
def launch_vars(facts: Facts) -> Finding:
    info = _info(facts)
    if info is None:
        return skip(_NOT_LAUNCHED, detail=facts.get("launch.info").detail or facts.get("launch.info").describe())
    ev = {"launch.info": info.get("vars", {})}
    problems = launch_problems(info)
    slurm = str(info.get("launcher", "")).startswith("slurm")
    if slurm and problems and all(p.startswith(("MASTER_ADDR is not set", "MASTER_PORT is not set")) for p in problems):
        # srun starts tasks for many reasons (one `envdoctor report` per node, too); only a job that
        # calls init_process_group("env://") needs these, and `check --distributed` refuses without them.
        return warn("srun did not set MASTER_ADDR/MASTER_PORT", detail="; ".join(problems) + ". torch.distributed's "
                    "env:// initialisation (and envdoctor check --distributed) needs both.", evidence=ev,
                    remedy=Remediation("Export them in the batch script before srun.", remedies.slurm_master_env()))
    if problems:
        torchrun = ("torchrun --nnodes=N --nproc-per-node=GPUS --rdzv-backend=c10d "
                    "--rdzv-endpoint=HOST:29500 -m envdoctor check --distributed")
        commands = remedies.slurm_master_env() if slurm else (torchrun,)
        return fail("This rank's launch variables are unusable", detail="; ".join(problems) + ". The rank cannot "
                    "join the rendezvous: the other ranks wait for it until their timeout.", evidence=ev,
                    remedy=Remediation("Let the launcher set these variables (torchrun sets all of them; under "
                                       "srun export MASTER_ADDR and MASTER_PORT) instead of setting them by hand.",
                                       commands, (_TORCHRUN,)))
    return ok(f"Launched as {_describe(info)}", evidence=ev)


@check("launch-master", "MASTER_ADDR resolves and MASTER_PORT can be used", needs=("launch.master", "launch.port"))
def launch_master(facts: Facts) -> Finding:
    info = _info(facts)
    if info is None:
        return skip(_NOT_LAUNCHED)
    master = facts.value("launch.master")
    ev = evidence(facts, "launch.master", "launch.port")
    if not master:
        return skip("MASTER_ADDR not judged", detail=facts.get("launch.master").describe(), evidence=ev)
    if master.get("error") or not master.get("addresses"):
        return fail(f"MASTER_ADDR={master.get('addr')} cannot be reached: {master.get('error') or 'no address'}",
                    detail="Every rank connects to MASTER_ADDR:MASTER_PORT to find the others; a name this "
                    "node cannot resolve makes the rank fail at init_process_group (or wait until its timeout).",
                    evidence=ev, remedy=Remediation(
                        "Use the IP address or a name every node resolves (check /etc/hosts and DNS on this node).",
                        (f"getent hosts {master.get('addr')}",)))
    port = facts.value("launch.port") or {}
    if port.get("in_use"):
        addr = port.get("address") or master.get("addr")
        return fail(f"MASTER_PORT {port.get('port')} on {addr} is already in use ({port.get('in_use')})",
                    detail="Rank 0 must listen on MASTER_PORT; another process (often a previous run that did "
                    "not exit) holds it, so init_process_group fails with \"address already in use\".",
                    evidence=ev, remedy=Remediation("Stop the process holding the port, or choose another port.",
                                                    (f"ss -ltnp 'sport = :{port.get('port')}'",
                                                     remedies.env_set("MASTER_PORT", "29501"))))
    where = "this node" if master.get("local") else "another node"
    return ok(f"MASTER_ADDR {master.get('addr')} resolves to {', '.join(master.get('addresses') or [])} ({where})",
              evidence=ev)


def _visible_count(facts: Facts) -> int | None:
    count = facts.value("torch.device_count")
    if isinstance(count, int):
        return count
    mapping = facts.value("visibility.cuda_devices")
    if mapping and isinstance(mapping.get("devices"), (list, tuple)):
        return len(mapping["devices"])
    count = facts.value("nvml.device_count")
    return count if isinstance(count, int) else None


@check("launch-gpu-map", "One rank per visible GPU, and LOCAL_RANK names a visible GPU",
       needs=("launch.info", "torch.device_count"))
def launch_gpu_map(facts: Facts) -> Finding:
    info = _info(facts)
    if info is None:
        return skip(_NOT_LAUNCHED)
    local, local_world = info.get("local_rank"), info.get("local_world_size")
    count = _visible_count(facts)
    ev = {**evidence(facts, "torch.device_count", "nvml.device_count"), "local_rank": local,
          "local_world_size": local_world, "CUDA_VISIBLE_DEVICES": (facts.value("env.vars") or {}).get(
              "CUDA_VISIBLE_DEVICES")}
    if count is None:
        # Neither torch nor NVML counted the GPUs: unknown is not "no GPU".
        return skip("The GPUs visible to this rank were not read", detail=facts.get("torch.device_count").describe(),
                    evidence=ev)
    if not count:
        return ok("No visible GPU: this rank runs on the CPU (Gloo)", evidence=ev)
    if local is None:
        return skip("LOCAL_RANK not set", evidence=ev)
    mapping = visible_gpus(count, local, local_world)
    cvd_set = ev["CUDA_VISIBLE_DEVICES"] is not None
    remedy = Remediation("Start one process per GPU: --nproc-per-node equal to the GPUs each node has, or give "
                         "each task its own GPU (srun --gpus-per-task=1).",
                         (f"torchrun --nproc-per-node={count} …",), (_TORCHRUN,))
    if mapping["mode"] == "out-of-range" or (mapping["mode"] == "one-per-rank" and not cvd_set):
        return fail(f"LOCAL_RANK {local} has no GPU of its own: this node shows {count} GPU(s) to "
                    f"{local_world or '?'} ranks", detail="Ranks that share a GPU make NCCL fail with \"Duplicate GPU "
                    "detected\"; a LOCAL_RANK beyond the visible GPUs fails with \"invalid device ordinal\".",
                    evidence=ev, remedy=remedy)
    if isinstance(local_world, int) and local_world > count and mapping["mode"] == "shared":
        return fail(f"{local_world} ranks on this node but only {count} visible GPU(s)",
                    detail="Several ranks would use one GPU: NCCL refuses (\"Duplicate GPU detected\").",
                    evidence=ev, remedy=remedy)
    device = f"cuda:{mapping['device']}"
    note = ""
    if isinstance(local_world, int) and local_world < count and mapping["mode"] == "shared":
        note = f"; {count - local_world} of {count} GPU(s) on this node get no rank"
    return ok(f"LOCAL_RANK {local} uses {device}{note}", evidence=ev)


@check("launch-ifname", "NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME name interfaces that exist and are up",
       needs=("env.vars", "launch.interfaces"))
def launch_ifname(facts: Facts) -> Finding:
    if not isinstance(facts.value("env.vars"), Mapping):
        return skip("The environment was not read", detail=facts.get("env.vars").describe(),
                    evidence=evidence(facts, "env.vars"))
    env = facts.value("env.vars")
    set_vars = [v for v in IFNAME_VARS if env.get(v)]
    if not set_vars:
        return skip("No socket-interface variable is set")
    ifaces = facts.value("launch.interfaces")
    if not ifaces:
        return skip("Network interfaces not known", detail=facts.get("launch.interfaces").describe())
    ev = {"env.vars": {v: env[v] for v in set_vars},
          "launch.interfaces": {k: ("up" if v.get("up") else "down") for k, v in ifaces.items()}}
    bad: list[str] = []
    for var in set_vars:
        m = ifname_matches(var, env[var], ifaces)
        if m["unknown"]:
            bad.append(f"{var}={env[var]} names no interface on this node ({', '.join(m['unknown'])})")
        elif not m["selected"]:
            bad.append(f"{var}={env[var]} leaves no interface to use")
        elif m["down"]:
            bad.append(f"{var}={env[var]} selects interface(s) that are down ({', '.join(m['down'])})")
    if bad:
        up = [k for k, v in ifaces.items() if v.get("up")]
        return fail("Socket-interface variable names a missing or down interface", detail="; ".join(bad) +
                    f". This node's interfaces that are up: {', '.join(up) or 'none'}. NCCL then fails with "
                    "\"no socket interface found\" and Gloo with \"Unable to find address for …\".", evidence=ev,
                    remedy=Remediation("Name an interface that exists and is up on every node (or unset the "
                                       "variable to let NCCL/Gloo choose).",
                                       ("ip -br link",) + tuple(remedies.env_unset(v) for v in set_vars)))
    return ok(", ".join(f"{v}={env[v]}" for v in set_vars) + " selects interfaces that are up", evidence=ev)


@check("launch-nccl-env", "No NCCL variable silently disables a transport or forces an algorithm",
       needs=("env.vars",))
def launch_nccl_env(facts: Facts) -> Finding:
    if not isinstance(facts.value("env.vars"), Mapping) and (shown := _text_switches(facts)):
        # A paste: the switches a command line in it sets (what it does not show is unknown, so never an ok).
        return warn("NCCL variables set in the text change transports", detail="; ".join(
            f"{s['name']}={s['value']} {s['effect']}" for s in shown) + ". Set to get past a hang or an error, "
            "they hide its cause (peer-to-peer through PCIe ACS, an InfiniBand or shared-memory fault) and make "
            "collectives slower than the hardware allows: fix the cause, then unset them.",
            evidence=evidence(facts, "text.env_assignments"),
            remedy=Remediation("Find what they work around (NCCL_DEBUG=INFO names the transport that fails), "
                               "then unset them.", (remedies.env_set("NCCL_DEBUG", "INFO", "one run, to see the "
                                                                     "transport"),
                                                    *(s["undo"] for s in shown))))
    if not isinstance(facts.value("env.vars"), Mapping):
        return skip("The environment was not read", detail=facts.get("env.vars").describe(),
                    evidence=evidence(facts, "env.vars"))
    env = facts.value("env.vars")
    found = nccl_switches(env)
    if not found and _info(facts) is None:
        return skip("No NCCL switch is set")
    if not found:
        return ok("No NCCL variable disables a transport or forces an algorithm",
                  evidence={"env.vars": {k: v for k, v in env.items() if str(k).startswith("NCCL_")}})
    return warn("NCCL variables change transports or debugging", detail="; ".join(
        f"{s['name']}={s['value']} {s['effect']}" for s in found) + ". Often left over from debugging a hang; "
        "collectives are then slower than the hardware allows.", evidence={"env.vars": {s["name"]: s["value"]
                                                                                        for s in found}},
        remedy=Remediation("Unset them unless you set them on purpose.", tuple(s["undo"] for s in found)))


def _text_switches(facts: Facts) -> list[dict[str, str]]:
    """The NCCL switches a command line in a pasted text sets (``text.env_assignments``)."""
    reading = facts.get("text.env_assignments")
    if not reading.ok or not isinstance(reading.value, Mapping):
        return []
    env = {str(k): str(v) for k, v in reading.value.items()}
    # NCCL_DEBUG=INFO in a paste is the log asked for to diagnose it, not a setting left behind.
    return [s for s in (*nccl_switches(env, everywhere=True), *nccl_switches(env))
            if not s["name"].startswith("NCCL_DEBUG")]
