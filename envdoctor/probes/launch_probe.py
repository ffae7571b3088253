"""Probe the launch: the launcher's variables (torchrun / srun), whether MASTER_ADDR resolves and
is this machine, whether MASTER_PORT is free where this rank must listen on it, and the network
interfaces the socket-interface variables may name. Lookups and a local bind only: no traffic.
"""

from __future__ import annotations

import socket
from typing import Any

from envdoctor.knowledge.launch import IFNAME_VARS, is_ip, is_loopback, launch_problems, read_launch, valid_host
from envdoctor.process.host import Host

from ..model import Reading, Reason, missing, ok
from .spec import Options, ProbeSpec

KEYS = ("launch.info", "launch.master", "launch.port", "launch.interfaces", "launch.hostname")
SOURCE = "launch"
_IFF_UP = 0x1


def interfaces(host: Host) -> dict[str, dict[str, Any]]:
    """/sys/class/net: name -> {"up": IFF_UP set, "operstate": …}."""
    out: dict[str, dict[str, Any]] = {}
    for name in host.list_dir("/sys/class/net"):
        flags_text, _, _ = host.read_text(f"/sys/class/net/{name}/flags", 64)
        state_text, _, _ = host.read_text(f"/sys/class/net/{name}/operstate", 64)
        try:
            up = bool(int((flags_text or "0").strip(), 16) & _IFF_UP)
        except ValueError:
            up = False
        out[name] = {"up": up, "operstate": (state_text or "").strip() or None}
    return out


def _master(host: Host, info: dict[str, Any], timeout: float) -> tuple[Reading, bool]:
    addr = info.get("master_addr")
    if not addr:
        return missing(Reason.ABSENT, SOURCE, "MASTER_ADDR is not set"), False
    if not valid_host(addr):
        return ok({"addr": addr, "addresses": [], "error": "not an IP address or a valid host name",
                   "local": False, "loopback": False}, SOURCE), False
    addresses, error = ([addr.strip("[]")], "") if is_ip(addr) else host.resolve(addr, timeout)
    local_ips = {a for addrs in host.local_addresses().values() for a in addrs}
    loopback = bool(addresses) and all(is_loopback(a) for a in addresses)
    local = any(is_loopback(a) or a in local_ips for a in addresses)
    return ok({"addr": addr, "addresses": addresses, "error": error or None, "local": local,
               "loopback": loopback}, SOURCE), local


def probe_launch(host: Host, options: Options) -> dict[str, Reading]:
    env = host.environ
    info = read_launch(env)
    wants_ifaces = info is not None or any(env.get(v) for v in IFNAME_VARS)
    ifaces = ok(interfaces(host), "/sys/class/net") if wants_ifaces else missing(
        Reason.SKIPPED, SOURCE, "no launcher or socket-interface variable is set")
    if info is None:
        why = "not started by torchrun or srun (no RANK/WORLD_SIZE/SLURM_PROCID in the environment)"
        return {"launch.info": ok(None, SOURCE, why), "launch.master": missing(Reason.SKIPPED, SOURCE, why),
                "launch.port": missing(Reason.SKIPPED, SOURCE, why), "launch.interfaces": ifaces,
                "launch.hostname": missing(Reason.SKIPPED, SOURCE, why)}
    # Collected only for a launched rank: the cluster report and fleet views name nodes by it.
    hostname = ok(socket.gethostname(), "gethostname")
    master, local = _master(host, info, min(2.0, options.timeout))
    port = info.get("master_port")
    if not isinstance(port, int) or not 1 <= port <= 65535:
        port_reading = missing(Reason.SKIPPED, SOURCE, "MASTER_PORT is missing or invalid")
    elif options.distributed:
        port_reading = ok({"port": port, "in_use": None, "checked": False}, SOURCE,
                          "the cluster check's own rendezvous tells whether the port can be used")
    elif info.get("agent_store"):
        port_reading = ok({"port": port, "in_use": None, "checked": False}, SOURCE,
                          "torchrun's agent hosts the store on this port")
    elif info.get("rank") == 0 and local and not launch_problems(info):
        addresses = (master.value or {}).get("addresses") or []
        bind_to = next((a for a in addresses if is_loopback(a)), addresses[0] if addresses else None)
        in_use = host.port_in_use(bind_to, port) if bind_to else None
        port_reading = ok({"port": port, "in_use": in_use, "checked": True, "address": bind_to}, SOURCE)
    else:
        port_reading = ok({"port": port, "in_use": None, "checked": False}, SOURCE,
                          "only rank 0, on the MASTER_ADDR host, listens on MASTER_PORT")
    return {"launch.info": ok(info, SOURCE), "launch.master": master, "launch.port": port_reading,
            "launch.interfaces": ifaces, "launch.hostname": hostname}


PROBES = [ProbeSpec("launch", probe_launch, KEYS, scale=1.0)]
