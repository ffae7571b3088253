"""Exposure hints: Jupyter, TensorBoard or (in a container) sshd listening on every interface, a Jupyter
server without a token or password, and a training container running as root where that matters
(an exposed service, a host folder mounted writable). Each is a ``warn`` with the flag that fixes
it: none of them breaks training, all of them let someone else in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envdoctor.knowledge import remedies

from ..kit import Remediation, evidence, ok, skip, warn
from ..model import Facts, Finding
from ..registry import check

_NAMES = {"jupyter": "Jupyter", "tensorboard": "TensorBoard", "sshd": "sshd"}


def _services(facts: Facts) -> list[Mapping[str, Any]]:
    return [s for s in facts.value("exposure.services") or () if isinstance(s, Mapping)]


def _where(service: Mapping[str, Any]) -> str:
    return ", ".join(f"{'[' + p['address'] + ']' if ':' in str(p['address']) else p['address']}:{p['port']}"
                     for p in service.get("listen") or ())


def _everywhere(service: Mapping[str, Any]) -> bool | None:
    """Whether the service listens on every interface (the probe's flag); None when that was not read:
    unknown is not "on the loopback only"."""
    flag = service.get("all_interfaces")
    return flag if isinstance(flag, bool) else None


def _all_port(service: Mapping[str, Any]) -> int | None:
    ports = [p["port"] for p in service.get("listen") or () if p.get("address") in ("0.0.0.0", "::", "")]
    return ports[0] if ports else None


@check("exposed-services", "Jupyter, TensorBoard and sshd listen on the loopback only",
       needs=("exposure.services", "host.container"))
def exposed_services(facts: Facts) -> Finding | list[Finding]:
    reading = facts.get("exposure.services")
    ev = evidence(facts, "exposure.services", "host.container")
    if not reading.ok or reading.value is None:
        return skip("Listening sockets were not read", detail=reading.describe() if not reading.ok else
                    "exposure.services is null.", evidence=ev)
    container = facts.value("host.container")
    found: list[Finding] = []
    unknown: list[str] = []
    for service in _services(facts):
        name = str(service.get("service"))
        everywhere = _everywhere(service)
        if everywhere is None:
            unknown.append(f"{_NAMES.get(name, name)} (pid {service.get('pid')})")
            continue
        if not everywhere:
            continue
        if name == "sshd" and not container:
            continue  # a server's own sshd listens everywhere by design; in a container it is a side door
        label = _NAMES.get(name, name)
        pid = service.get("pid")
        found.append(warn(f"{label} listens on every interface ({_where(service)})",
                          detail=f"{label} (pid {pid}) accepts connections from any network this machine is on, not "
                          "only from itself"
                          + (f" (and from wherever this {container} container's ports are published)" if container else "")
                          + ". Bind it to 127.0.0.1 and reach it through an SSH tunnel.",
                          evidence={**ev, "service": dict(service)},
                          remedy=Remediation(f"Restart {label} on 127.0.0.1.",
                                             remedies.bind_local(name, _all_port(service)),
                                             (remedies.SSHD_CONFIG_DOC if name == "sshd" else
                                              remedies.JUPYTER_SECURITY_DOC,) if name != "tensorboard" else ())))
    if found:
        return found
    if unknown and len(unknown) == len(_services(facts)):
        return skip("Where the services listen was not read", detail="Not read for: " + ", ".join(unknown) + ".",
                    evidence=ev)
    seen = [f"{_NAMES.get(str(s.get('service')), s.get('service'))} on {_where(s)}" for s in _services(facts)
            if _everywhere(s) is not None]
    if unknown:
        seen.append("not read for " + ", ".join(unknown))
    return ok("No Jupyter, TensorBoard or container sshd listens on every interface",
              detail=("Seen: " + "; ".join(seen) + ".") if seen else "None of them is listening.", evidence=ev)


@check("jupyter-auth", "A Jupyter server asks for a token or password", needs=("exposure.services",))
def jupyter_auth(facts: Facts) -> Finding | list[Finding]:
    reading = facts.get("exposure.services")
    ev = evidence(facts, "exposure.services")
    if not reading.ok:
        return skip("Listening sockets were not read", detail=reading.describe(), evidence=ev)
    servers = [s for s in _services(facts) if s.get("service") == "jupyter"]
    if not servers:
        return skip("No Jupyter server is running", evidence=ev)
    open_ = [s for s in servers if s.get("auth") == "none"]
    if not open_:
        return ok(f"{len(servers)} Jupyter server(s), each asks for a token or password",
                  detail="; ".join(f"pid {s.get('pid')}: {s.get('auth')} ({s.get('auth_from')})" for s in servers) + ".",
                  evidence=ev)
    return [warn(f"Jupyter server on {_where(s)} runs without a token or password",
                 detail=f"Jupyter (pid {s.get('pid')}) was started with authentication off ({s.get('auth_from')}): "
                 "anyone who reaches its port runs code as its user"
                 + (", from any network: it listens on every interface" if s.get("all_interfaces") else "") + ".",
                 evidence={**ev, "service": dict(s)},
                 remedy=Remediation("Start it without the empty token (Jupyter then makes a random one), or set a "
                                    "password.", remedies.jupyter_require_auth(), (remedies.JUPYTER_SECURITY_DOC,)))
            for s in open_]


def _training_container(facts: Facts) -> str | None:
    """Why this container looks like one that trains (GPU access, or a launched rank), else None."""
    nodes = facts.value("driver.device_nodes") or {}
    if isinstance(nodes, Mapping) and any(v != "absent" for k, v in nodes.items() if "nvidia" in str(k)):
        return "NVIDIA device nodes are passed in"
    count = facts.value("nvml.device_count")
    if isinstance(count, int) and not isinstance(count, bool) and count > 0:
        return f"NVML sees {count} GPU(s)"
    if facts.value("torch.devices"):
        return "torch sees a GPU"
    if facts.value("launch.info"):
        return "it was started as a rank by a launcher"
    return None


def _why_root_matters(facts: Facts) -> tuple[list[str], list[str]]:
    """(what makes root matter here, what could not be read to say so): a service listening on
    every interface (someone else's way in) and a host or network folder mounted writable (what
    root in the container can change on the host's disks)."""
    reasons: list[str] = []
    unread: list[str] = []
    services = facts.get("exposure.services")
    if services.ok and services.value is not None:
        exposed = [f"{_NAMES.get(str(s.get('service')), s.get('service'))} listens on {_where(s)}"
                   for s in _services(facts) if _everywhere(s)]
        reasons += exposed
    else:
        unread.append(f"the listening services ({services.describe()})")
    mounts = facts.get("host.shared_mounts")
    if mounts.ok and isinstance(mounts.value, (list, tuple)):
        shared = [m for m in mounts.value if isinstance(m, Mapping) and m.get("writable")]
        if shared:
            names = ", ".join(f"{m.get('mountpoint')} ({m.get('fstype')})" for m in shared[:5])
            reasons.append(f"host folder(s) mounted writable: {names}" + (f" (+{len(shared) - 5} more)"
                                                                          if len(shared) > 5 else ""))
    else:
        unread.append(f"the mounts ({mounts.describe()})")
    return reasons, unread


@check("container-root", "A training container runs as root only where nothing makes that matter",
       needs=("host.is_root", "host.container", "driver.device_nodes", "exposure.services", "host.shared_mounts"))
def container_root(facts: Facts) -> Finding:
    """Root in a container matters where someone can reach it (a service listening on every
    interface) or where it can change the host's files (a host or network folder mounted writable):
    then a ``warn``. NGC and pytorch images run as root by design; without either, it is said at
    ``ok`` level (``-v`` shows it), so ``--fail-on warn`` stays usable under torchrun."""
    ev = evidence(facts, "host.is_root", "host.container", "driver.device_nodes", "nvml.device_count",
                  "exposure.services", "host.shared_mounts")
    container = facts.value("host.container")
    if not facts.get("host.is_root").ok or facts.value("host.is_root") is None:
        return skip("Whether envdoctor runs as root was not read", detail=facts.get("host.is_root").describe(),
                    evidence=ev)
    if not container:
        return skip("Not in a container", evidence=ev)
    if not facts.value("host.is_root"):
        return ok(f"This {container} container runs as an unprivileged user", evidence=ev)
    why = _training_container(facts)
    if why is None:
        return skip(f"This {container} container runs as root, but has no GPU and no launcher: not a training "
                    "container", evidence=ev)
    reasons, unread = _why_root_matters(facts)
    remedy = Remediation("Run the container as an unprivileged user.", remedies.run_as_user(container),
                         (remedies.K8S_SECURITY_CONTEXT if container == "kubernetes" else remedies.DOCKER_USER_DOC,))
    if reasons:
        return warn(f"This training container runs as root ({container}) with {'; '.join(reasons)}",
                    detail=f"envdoctor runs as uid 0 in a {container} container ({why}) where " + "; ".join(reasons)
                    + ". Root in the container is root over every mounted host folder (datasets, checkpoints) and "
                    "behind an exposed service; training needs no privilege.", evidence=ev, remedy=remedy)
    if unread:  # unknown is never ok: whether root matters here was not read
        return skip(f"This {container} container runs as root; whether that matters was not read",
                    detail="Not read: " + "; ".join(unread) + ".", evidence=ev)
    return ok(f"This {container} container runs as root, with no exposed service and no host folder mounted "
              "writable", detail=f"uid 0 in a {container} container ({why}), as NGC and pytorch images run by design; "
              "nothing here makes root matter. An unprivileged user is still the safer default "
              f"({remedies.DOCKER_USER_DOC if container != 'kubernetes' else remedies.K8S_SECURITY_CONTEXT}).",
              evidence=ev)
