"""Host checks: shared memory for DataLoader workers, container context, cgroup limits, env vars."""

from __future__ import annotations

from collections.abc import Mapping

from envdoctor.knowledge import catalogue, remedies
from envdoctor.knowledge.launch import nccl_switches

from ..kit import Remediation, evidence, fail, ok, skip, warn
from ..model import Facts, Finding, Reason
from ..registry import CheckResult, check
from ._common import gib, mib

# A fact that was never looked at (a pasted report lacks it) cannot be judged either way.
_UNSEEN = (Reason.NOT_COLLECTED, Reason.NOT_IN_REPORT, Reason.SKIPPED)


def _unseen(facts: Facts, *keys: str) -> bool:
    return all(facts.get(k).reason in _UNSEEN for k in keys)

# PyTorch DataLoader workers pass batches through /dev/shm; Docker's default is 64 MiB
# ("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient
# shared memory (shm)", pytorch/pytorch#2244, #5040).
SHM_MIN = 1 << 30
SHM_DOCKER_DEFAULT = 64 << 20


def _nccl_shm_failed(facts: Facts) -> Finding | None:
    """NCCL's own words that it could not create, extend or map a segment in /dev/shm (its catalogue rows, from
    src/include/shm.h / src/misc/shmutils.cc): its intra-node transport keeps its buffers there, so /dev/shm is
    too small or full for this run, whatever size it has."""
    said = facts.value("text.messages") if facts.get("text.messages").ok else ()
    rows = [r for r in catalogue.judged_rows(said, "host-shm-size") if r.get("cause") == "nccl-shm-exhausted"]
    if not rows:
        return None
    container = facts.value("host.container") if facts.get("host.container").ok else None
    size = facts.value("host.shm_size") if facts.get("host.shm_size").ok else None
    shown = f" (/dev/shm here is {mib(size)})" if isinstance(size, int) else ""
    text, commands, links = remedies.message_remedy("shm", container=container) or ("Enlarge /dev/shm.", (), ())
    return fail("NCCL ran out of shared memory (/dev/shm is too small or full)",
                detail=f"{rows[0].get('line', '')!r}: NCCL keeps the buffers of its intra-node transport in "
                       f"/dev/shm{shown}; it could not allocate a segment there. A container gets 64 MiB unless "
                       "told otherwise.",
                evidence=evidence(facts, "text.messages", "host.shm_size", "host.container"),
                remedy=Remediation(text + " NCCL_SHM_DISABLE=1 takes NCCL's shared-memory transport out (slower), "
                                   "as an alternative.", commands, links))


@check("host-shm-size", "Shared memory (/dev/shm) is large enough for DataLoader workers",
       needs=("host.shm_size",), healthcheck=True)
def shm_size(facts: Facts) -> CheckResult:
    size = facts.value("host.shm_size")
    ev = evidence(facts, "host.shm_size", "host.container")
    if nccl := _nccl_shm_failed(facts):
        return nccl
    if _unseen(facts, "host.shm_size"):
        return skip("/dev/shm size not known", detail=facts.get("host.shm_size").describe(), evidence=ev)
    if size is None:
        reading = facts.get("host.shm_size")
        return warn("/dev/shm is not available", detail=f"{reading.describe()}. DataLoader workers (num_workers > 0) "
                    "exchange batches through /dev/shm and will fail without it.", evidence=ev,
                    remedy=Remediation("Mount a tmpfs on /dev/shm, or start the container with a larger one.",
                                       (remedies.container_run("--shm-size=16g", note="or: --ipc=host"),)))
    container = facts.value("host.container")
    if size >= SHM_MIN:
        return ok(f"/dev/shm is {gib(size)}", evidence=ev)
    where = f"this {container} container" if container else "this machine"
    detail = (f"/dev/shm in {where} is only {mib(size)}"
              + (" (Docker's default)" if size == SHM_DOCKER_DEFAULT else "")
              + ". PyTorch DataLoader workers pass batches through it; when it fills, workers die with "
              "\"Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm)\".")
    commands: tuple[str, ...]
    if container == "kubernetes":
        commands = ("# in the pod spec:\nvolumes:\n- name: dshm\n  emptyDir: {medium: Memory, sizeLimit: 16Gi}\n"
                    "# and in the container:\nvolumeMounts:\n- name: dshm\n  mountPath: /dev/shm",)
        text = "Mount a memory-backed emptyDir on /dev/shm."
    elif container:
        commands = (remedies.container_run("--shm-size=16g"), remedies.container_run("--ipc=host"))
        text = "Restart the container with a larger /dev/shm (or share the host's IPC namespace)."
    else:
        commands = (remedies.shm_remount(),)
        text = "Enlarge the /dev/shm tmpfs."
    status = warn if container or size < 256 << 20 else ok
    if status is ok:
        return ok(f"/dev/shm is {mib(size)}", detail=detail, evidence=ev)
    return warn(f"/dev/shm is only {mib(size)}", detail=detail, evidence=ev,
                remedy=Remediation(text + " Or set num_workers=0 in the DataLoader (slower).", commands,
                                   (remedies.DOCKER_SHM_SIZE,
                                    remedies.TORCH_DOCKER_IMAGE)))


@check("host-container", "Container context", needs=("host.container", "host.wsl"))
def container(facts: Facts) -> CheckResult:
    kind = facts.value("host.container")
    ev = evidence(facts, "host.container", "host.container_evidence", "host.wsl")
    if facts.value("host.wsl"):
        kernel = str(facts.value("host.kernel") or "").lower()
        if "microsoft" in kernel and "microsoft-standard" not in kernel and "wsl2" not in kernel:
            # WSL 1's kernel release ("4.4.0-19041-Microsoft"): no GPU there (wsl-version says what to do).
            return ok("Running under WSL 1", detail=f"kernel {facts.value('host.kernel')}",
                      evidence=evidence(facts, "host.kernel", "host.wsl"))
        return ok("Running under WSL2", detail="GPU access goes through the Windows driver (/usr/lib/wsl/lib).",
                  evidence=evidence(facts, "host.wsl", "host.container", "host.container_evidence"))
    if kind:
        return ok(f"Running in a {kind} container", detail="; ".join(facts.value("host.container_evidence", [])),
                  evidence=ev)
    if not facts.get("host.container").ok:
        return skip("Container context unknown", detail=facts.get("host.container").describe(), evidence=ev)
    return ok("Not in a container", evidence=ev)


@check("host-resources", "CPU and memory limits leave room for data loading",
       needs=("host.cpu_count", "host.cgroup_cpu_limit", "host.cgroup_memory_limit", "host.memory_total"))
def resources(facts: Facts) -> CheckResult:
    ev = evidence(facts, "host.cgroup_cpu_limit", "host.cgroup_memory_limit", "host.cpu_count", "host.memory_total")
    cpu_limit, mem_limit_read = facts.get("host.cgroup_cpu_limit"), facts.get("host.cgroup_memory_limit")
    if not cpu_limit.ok and not mem_limit_read.ok:
        return skip("CPU and memory limits not known", detail=f"{cpu_limit.describe()}; {mem_limit_read.describe()}",
                    evidence=ev)
    cpus = facts.value("host.cpu_count")
    quota = facts.value("host.cgroup_cpu_limit")
    mem_limit = facts.value("host.cgroup_memory_limit")
    notes = []
    if quota is not None and cpus and quota < cpus:
        notes.append(f"the cgroup allows {quota:g} of {cpus} CPUs: torch and DataLoader size their thread pools "
                     f"from os.cpu_count() ({cpus}), which oversubscribes the quota")
    if mem_limit is not None and mem_limit < 4 << 30:
        notes.append(f"the cgroup memory limit is {gib(mem_limit)}: DataLoader workers and pinned memory can be "
                     "OOM-killed (exit code 137)")
    if not notes:
        # A limit that was not read is not "no limit": say which part was judged.
        unknown = [what for what, r in (("the CPU limit", cpu_limit), ("the memory limit", mem_limit_read)) if not r.ok]
        if quota is not None and not cpus:
            unknown.append("the CPU count (to compare the CPU limit with)")
        if unknown:
            judged = "memory" if not cpu_limit.ok else "CPU" if not mem_limit_read.ok else "CPU or memory"
            read_first = {k: ev[k] for k in sorted(ev, key=lambda k: not facts.get(k).ok)}
            return ok(f"No restrictive {judged} limit", detail=f"Not read: {', '.join(unknown)}.", evidence=read_first)
        return ok("No restrictive CPU or memory limits", evidence=ev)
    commands = []
    if quota is not None and cpus and quota < cpus:
        commands.append(remedies.env_set("OMP_NUM_THREADS", str(max(1, int(quota)))))
    return warn("Container limits are tighter than the machine", detail="; ".join(notes) + ".", evidence=ev,
                remedy=Remediation("Size threads and workers to the limit, or raise the limit "
                                   f"({remedies.CONTAINER_RUN} --cpus/--memory, Kubernetes resources.limits).", tuple(commands)))


@check("env-vars", "Environment variables that change CUDA/torch behaviour", needs=("env.vars",))
def env_vars(facts: Facts) -> CheckResult:
    reading = facts.get("env.vars")
    if not reading.ok or not isinstance(reading.value, Mapping):
        return skip("Environment not known", detail=reading.describe() if not reading.ok else
                    "env.vars holds no variables: the environment was not read.", evidence=evidence(facts, "env.vars"))
    env = reading.value
    ev = {"env.vars": {k: env[k] for k in sorted(env) if k in _WATCHED or k.startswith("NCCL_")}}
    problems = []
    commands: list[str] = []
    if env.get("CUDA_LAUNCH_BLOCKING", "0") not in ("", "0"):
        problems.append("CUDA_LAUNCH_BLOCKING=1 makes every kernel launch synchronous (a debugging switch; "
                        "training runs several times slower)")
        commands.append(remedies.env_unset("CUDA_LAUNCH_BLOCKING"))
    if env.get("LD_PRELOAD"):
        problems.append(f"LD_PRELOAD={env['LD_PRELOAD']} injects libraries into every process, which can shadow "
                        "the CUDA libraries torch bundles")
        commands.append(remedies.env_unset("LD_PRELOAD"))
    for switch in nccl_switches(env, everywhere=True):
        problems.append(f"{switch['name']}={switch['value']} {switch['effect']} (often left over from debugging "
                        "a hang)")
        commands.append(switch["undo"])
    # CUDA_VISIBLE_DEVICES is cuda-visible-devices' to judge (with its remedy): said here too, the
    # screen showed it twice, with `unset CUDA_VISIBLE_DEVICES` in two blocks.
    if not problems:
        return ok("No environment variables that slow down or hide the GPU", evidence=ev)
    return warn("Environment variables change how CUDA and torch behave", detail="; ".join(problems) + ".",
                evidence=ev, remedy=Remediation("Unset them unless you set them on purpose.", tuple(commands)))


_WATCHED = {"CUDA_LAUNCH_BLOCKING", "LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME"}
