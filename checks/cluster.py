"""Cluster checks: pure functions of the ``cluster.*`` facts rank 0 gathers in
`envdoctor check --distributed` (who arrived, who finished, the all-reduce figures, every
rank's configuration). Not part of a single-machine run: :data:`CHECKS` is registered by the
cluster command only.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from typing import Any

from envdoctor.knowledge.compare import MISSING_LABEL, UNSET, Difference, differences, member_ranges, per_rank_pattern

from ..kit import Remediation, error, fail, ok, skip, warn
from ..model import Facts, Finding, Status
from ..registry import CheckSpec, check

#: Areas whose difference between ranks breaks or silently changes a job; the rest warn.
_FAIL_AREAS = frozenset({"driver", "cuda", "torch", "cudnn", "nccl", "python", "packages"})
_FAIL_ENV_PREFIXES = ("NCCL_", "GLOO_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_")
#: Clock skew that makes logs of different nodes impossible to line up (and breaks Kerberos/TLS).
SKEW_WARN_S = 1.0
#: A rank whose all-reduce takes this much longer than the median is called slow.
SLOW_FACTOR = 1.5
_NCCL_TESTS = "https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md"


def _ranks(facts: Facts) -> dict[int, dict[str, Any]]:
    arrived = facts.value("cluster.arrived") or {}
    out = {}
    for key, value in arrived.items():
        try:
            out[int(key)] = dict(value) if isinstance(value, Mapping) else {}
        except (TypeError, ValueError):
            continue
    return out


def where(facts: Facts, ranks: list[int]) -> str:
    """'rank 3 (host b)', or 'node 1 (host b, ranks 2-3)' when they are a whole node."""
    info = _ranks(facts)
    by_node: dict[Any, list[int]] = {}
    for r, a in info.items():
        by_node.setdefault((a.get("host"), a.get("node_rank")), []).append(r)
    parts: list[str] = []
    left = set(ranks)
    for (host, node), members in sorted(by_node.items(), key=lambda kv: min(kv[1])):
        if len(by_node) > 1 and set(members) <= left and len(members) > 0:
            label = f"node {node}" if node is not None else "node"
            parts.append(f"{label} ({host}, rank{'s' if len(members) > 1 else ''} {member_ranges(members)})")
            left -= set(members)
    by_host: dict[Any, list[int]] = {}
    for r in sorted(left):
        by_host.setdefault(info.get(r, {}).get("host"), []).append(r)
    for host, members in sorted(by_host.items(), key=lambda kv: kv[1][0]):
        label = f"rank {members[0]}" if len(members) == 1 else f"ranks {member_ranges(members)}"
        parts.append(label + (f" ({host})" if host else ""))
    return ", ".join(parts)


#: How many of the ranks that never arrived are named one by one in a finding's detail.
NAMED = 16


def _short_ranges(ranks: list[int]) -> str:
    """``member_ranges`` cut at 200 characters (scattered ranks of a huge job are a long list)."""
    text = member_ranges(ranks)
    cut = text.rfind(", ", 0, 200)
    return text if len(text) <= 200 else text[:cut if cut > 0 else 200] + ", …"


def _expected_host(facts: Facts, rank: int) -> str:
    """Where a rank that never arrived should have run: the node of its neighbours when the
    nodes have equal rank counts (torchrun numbers ranks node by node)."""
    info = _ranks(facts)
    launch = facts.value("cluster.launch") or {}
    per_node = launch.get("local_world_size")
    if not isinstance(per_node, int) or per_node < 1:
        return "host unknown"
    node = rank // per_node
    hosts = {str(a["host"]) for r, a in info.items() if r // per_node == node and a.get("host")}
    if hosts:
        return f"node {node}, host {', '.join(sorted(hosts))}"
    return f"node {node}, whose ranks all missed the rendezvous"


@check("cluster-rendezvous", "Every rank reached the rendezvous within the deadline",
       needs=("cluster.decision",), judges_failures=True)
def rendezvous(facts: Facts) -> Finding:
    fatal = facts.value("cluster.fatal")
    launch = facts.value("cluster.launch") or {}
    address = f"{launch.get('master_addr')}:{launch.get('master_port')}"
    if fatal:
        detail = str(fatal.get("error", ""))
        in_use = "address already in use" in detail.lower() or "errno: 98" in detail.lower()
        return fail(f"Rank 0 could not {'host' if fatal.get('host_it') else 'reach'} the rendezvous store at "
                    f"{address}" + (": the port is already in use" if in_use else ""), detail=detail[:800],
                    evidence={"cluster.fatal": dict(fatal)},
                    remedy=Remediation("Free the port (a previous run may still hold it) or pick another one."
                                       if in_use else "Check MASTER_ADDR/MASTER_PORT and that rank 0 is running.",
                                       (f"ss -ltnp 'sport = :{launch.get('master_port')}'",) if in_use else ()))
    decision = facts.value("cluster.decision")
    if not decision:
        return error("The cluster check did not reach a decision", detail=facts.get("cluster.decision").describe())
    world = facts.value("cluster.world_size")
    missing = list(decision.get("missing") or [])
    limit = (facts.value("cluster.options") or {}).get("init_timeout")
    stopped = facts.value("cluster.stopped")
    if missing and isinstance(stopped, str) and stopped:
        # Stopped (SIGTERM from the launcher, Ctrl-C) while waiting: the missing ranks were not given
        # their --init-timeout, so "never arrived within N s" would not be true.
        signame = stopped.split(" received", 1)[0]
        return fail(f"Stopped early: {signame}, while {len(missing)} of {world} rank(s) had not arrived: "
                    f"rank{'s' if len(missing) > 1 else ''} {_short_ranges(missing)}",
                    detail="The cluster check was stopped before its --init-timeout"
                    + (f" ({limit:g} s)" if isinstance(limit, (int, float)) else "") + f" ran out: {stopped}.", evidence={"missing": missing, "arrived": sorted(_ranks(facts)), "stopped": stopped})
    if missing:
        # Each missing rank named, up to NAMED: a WORLD_SIZE of 100,000 with one rank started is
        # 99,999 ranks that never said anything (the title's ranges name them all).
        names = "; ".join(f"rank {r} ({_expected_host(facts, r)})" for r in missing[:NAMED]) + (
            f"; and {len(missing) - NAMED:,} more" if len(missing) > NAMED else "")
        return fail(f"{len(missing)} of {world} rank(s) never arrived within {limit:g} s: "
                    f"rank{'s' if len(missing) > 1 else ''} {_short_ranges(missing)}",
                    detail=f"Never arrived: {names}. The ranks that did arrive stopped instead of waiting for "
                    "the library's default timeout (10-30 minutes). A rank that never arrives crashed before "
                    "init_process_group, runs on a node that cannot reach MASTER_ADDR, or was never started.",
                    evidence={"missing": missing, "arrived": sorted(_ranks(facts))},
                    remedy=Remediation("Look at that rank's own output (its launch checks say what it saw), "
                                       "and check that its node can reach MASTER_ADDR:MASTER_PORT.",
                                       (f"nc -zv {launch.get('master_addr')} {launch.get('master_port')}",)))
    seconds = decision.get("arrival_seconds")
    return ok(f"All {world} ranks arrived" + (f" in {seconds:.1f} s" if isinstance(seconds, (int, float)) else "")
              + f"; backend {decision.get('backend')}", evidence={"backend": decision.get("backend")})


@check("cluster-backend", "NCCL on GPUs when every rank has one, else Gloo", needs=("cluster.decision",))
def backend(facts: Facts) -> Finding:
    decision = facts.value("cluster.decision") or {}
    info = _ranks(facts)
    if not info:
        return skip("No rank arrived")
    without = sorted(r for r, a in info.items() if a.get("gpu") is None)
    with_gpu = sorted(r for r, a in info.items() if a.get("gpu") is not None)
    if decision.get("backend") not in ("nccl", "gloo"):
        return skip("The backend chosen was not read", detail=facts.get("cluster.decision").describe())
    if decision.get("backend") == "nccl":
        return ok(f"NCCL on {len(with_gpu)} GPU rank(s)")
    if with_gpu and without:
        whys = sorted({str(info[r].get("gpu_why") or "no GPU") for r in without})
        return warn(f"Gloo on the CPU: {where(facts, without)} ha{'s' if len(without) == 1 else 've'} no usable GPU",
                    detail=f"NCCL needs a GPU on every rank; {len(with_gpu)} rank(s) have one. Why not: "
                    f"{'; '.join(whys)}.", evidence={"without_gpu": without})
    return ok("Gloo on the CPU: no rank has a usable GPU")


_ABSENT = frozenset({UNSET, *MISSING_LABEL.values()})


@check("cluster-gpu-share", "No two ranks use the same GPU", needs=("cluster.arrived",))
def gpu_share(facts: Facts) -> Finding:
    info = _ranks(facts)
    used: dict[tuple[Any, str], list[int]] = {}
    for r, a in info.items():
        if a.get("gpu_uuid"):
            used.setdefault((a.get("host"), str(a["gpu_uuid"])), []).append(r)
    if not used:
        return skip("No rank uses a GPU")
    shared = {k: v for k, v in used.items() if len(v) > 1}
    if not shared:
        return ok(f"Each of the {sum(len(v) for v in used.values())} GPU ranks has a GPU of its own")
    parts = [f"{where(facts, sorted(ranks))} share {uuid}" for (_, uuid), ranks in shared.items()]
    return fail("Ranks share a GPU: " + "; ".join(parts), detail="NCCL refuses two ranks on one GPU (\"Duplicate GPU "
                "detected\"); without NCCL they compete for its memory and time. Usually CUDA_VISIBLE_DEVICES is "
                "set to the same GPU for every rank of a node, or LOCAL_RANK is not used to pick the device.",
                evidence={"shared": {uuid: sorted(ranks) for (_, uuid), ranks in shared.items()}},
                remedy=Remediation("Give each rank its own GPU: torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) "
                                   "and leave CUDA_VISIBLE_DEVICES to the launcher (srun --gpus-per-task=1)."))


def _severity(diff: Difference) -> Status:
    if diff.area in _FAIL_AREAS:
        return Status.FAIL
    if diff.area == "env" and diff.label.startswith(_FAIL_ENV_PREFIXES):
        return Status.FAIL
    return Status.WARN


@check("cluster-consistency", "Every rank runs the same driver, CUDA, torch, cuDNN, NCCL, Python and settings",
       needs=("cluster.signatures",))
def consistency(facts: Facts) -> list[Finding]:
    sigs = facts.value("cluster.signatures") or {}
    if len(sigs) < 2:
        return [skip("Fewer than two ranks reported their configuration")]
    members = sorted(((str(k), v) for k, v in sigs.items()), key=lambda kv: int(kv[0]))
    nodes = {str(r): (a.get("host"), a.get("node_rank")) for r, a in _ranks(facts).items()}
    found: list[Finding] = []
    for diff in differences(members):
        if diff.name == "env:CUDA_VISIBLE_DEVICES" and per_rank_pattern(diff.values, nodes):
            continue
        # Without a majority (two nodes, one each way) rank 0's side is the reference.
        reference = diff.majority if diff.majority is not None else next(
            (v for v, ms in diff.values.items() if "0" in ms), next(iter(diff.values)))
        odd = {v: ms for v, ms in diff.values.items() if v != reference}
        odd_ranks = sorted(int(m) for ms in odd.values() for m in ms)
        parts = [f"{where(facts, sorted(int(m) for m in ms))} {'has' if len(ms) == 1 else 'have'} {v}"
                 for v, ms in odd.items()]
        count = len(diff.values[reference])
        who = (f"the majority ({count} of {len(members)} ranks)" if diff.majority is not None
               else f"rank 0's side ({count} of {len(members)} ranks, no majority)")
        side = f"it is {reference} on {who}" if reference in _ABSENT else f"{who} has {reference}"
        title = f"{diff.label} differs: {'; '.join(parts)}, where {side}"
        status = _severity(diff)
        detail = ("Ranks of one job must run the same software stack: a different version on one node gives "
                  "hangs, \"NCCL error: unhandled system error\" or silently different numerics. Judged on "
                  f"each node by: {', '.join(diff.judged_by) or 'none'}.")
        remedy = Remediation(f"Make {diff.label} the same on every node ({reference} on "
                             f"{'the majority' if diff.majority is not None else 'rank 0'}).")
        make = fail if status is Status.FAIL else warn
        found.append(make(title, detail=detail, evidence={"difference": diff.to_dict(), "odd_ranks": odd_ranks},
                          remedy=remedy))
    if not found:
        return [ok(f"All {len(members)} ranks have the same configuration")]
    return found


@check("cluster-finished", "Every rank finished the collective within the deadline", needs=("cluster.collective",))
def finished(facts: Facts) -> Finding:
    decision = facts.value("cluster.decision") or {}
    if not decision.get("go"):
        return skip("The collective did not start (a rank was missing)")
    coll = facts.value("cluster.collective") or {}
    done = {int(k) for k in (coll.get("finished") or {})}
    arrived = sorted(_ranks(facts))
    late = [r for r in arrived if r not in done]
    limit = (facts.value("cluster.options") or {}).get("collective_timeout")
    if not late:
        return ok(f"All {len(arrived)} ranks finished the all-reduce in {coll.get('seconds', 0):.1f} s")
    progress = coll.get("progress") or {}
    states: dict[int, Mapping[str, Any]] = {}
    for r in late:
        state = progress.get(str(r))
        states[r] = state if isinstance(state, Mapping) else {}
    phases = {r: str(states[r].get("phase") or "no progress reported") for r in late}
    steps: dict[int, int] = {}
    for r in late:
        step = states[r].get("step")
        steps[r] = step if isinstance(step, int) else 0
    lowest = min(steps.values())
    culprits = [r for r in late if steps[r] == lowest]
    waiting = [r for r in late if r not in culprits]
    stopped = coll.get("stopped")
    detail = "; ".join(f"rank {r}: {phases[r]}" + (f" ({_first_line(states[r].get('error'))})"
                                                   if states[r].get("error") else "") for r in late)
    if waiting:
        detail += (f". {where(facts, waiting)} waited for {where(facts, culprits)}, which never got past "
                   f"\"{phases[culprits[0]]}\"")
    if stopped:
        detail += f". The job was stopped early: {stopped}"
    return fail(f"{where(facts, culprits)} stopped before finishing the all-reduce (deadline {limit:g} s)",
                detail=detail + ".", evidence={"late": late, "culprits": culprits, "phases": phases},
                remedy=Remediation("Look at that rank's output and its node: a crash, a hung GPU (nvidia-smi), or "
                                   "a network path the others cannot reach. Rerun with NCCL_DEBUG=WARN to see "
                                   "where NCCL stops."))


def _first_line(text: Any) -> str:
    line = str(text or "").strip().splitlines()[0] if str(text or "").strip() else ""
    return line if len(line) <= 200 else line[:199] + "…"


def allreduce_table(facts: Facts) -> list[dict[str, Any]]:
    """Per size: slowest rank's mean time, algbw and busbw (nccl-tests: busbw = algbw * 2(n-1)/n)."""
    coll = facts.value("cluster.collective") or {}
    finished_ranks = coll.get("finished") or {}
    world = facts.value("cluster.world_size") or len(finished_ranks)
    rows: dict[int, dict[str, Any]] = {}
    for rank, record in finished_ranks.items():
        for entry in (record or {}).get("sizes") or ():
            size = int(entry.get("bytes") or 0)
            row = rows.setdefault(size, {"bytes": size, "per_rank": {}, "wrong": {}})
            row["per_rank"][str(rank)] = entry.get("avg")
            if entry.get("wrong"):
                row["wrong"][str(rank)] = entry.get("wrong")
    out = []
    for size in sorted(rows):
        row = rows[size]
        times = [t for t in row["per_rank"].values() if isinstance(t, (int, float)) and t > 0]
        slowest = max(times) if times else None
        algbw = size / slowest / 1e9 if slowest else None
        factor = 2 * (world - 1) / world if world else 0
        row.update(time_s=slowest, algbw_gbps=algbw, busbw_gbps=algbw * factor if algbw is not None else None)
        out.append(row)
    return out


@check("cluster-allreduce", "The all-reduce sums exactly and reaches the bus bandwidth asked for",
       needs=("cluster.collective",))
def allreduce(facts: Facts) -> list[Finding]:
    rows = allreduce_table(facts)
    if not rows:
        return [skip("No rank finished an all-reduce")]
    decision = facts.value("cluster.decision") or {}
    backend_name = decision.get("backend", "?")
    wrong = sorted({int(r) for row in rows for r in row["wrong"]})
    found: list[Finding] = []
    figures = ", ".join(f"{_size(r['bytes'])}: {r['busbw_gbps']:.2f} GB/s" for r in rows if r["busbw_gbps"])
    ev = {"sizes": [{k: v for k, v in r.items()} for r in rows]}
    if wrong:
        found.append(fail(f"All-reduce result is wrong on {where(facts, wrong)}",
                          detail="Integer-valued data whose sum is known exactly came back different: memory, "
                          "a GPU or a link corrupts data. Which iterations: " + "; ".join(
                              f"{_size(r['bytes'])}: " + ", ".join(f"rank {k} {v}x" for k, v in r["wrong"].items())
                              for r in rows if r["wrong"]), evidence=ev,
                          remedy=Remediation("Take the node out of service and run its GPU/memory diagnostics "
                                             "(dcgmi diag -r 3).", ("dcgmi diag -r 3",))))
    largest = rows[-1]
    threshold = (facts.value("cluster.options") or {}).get("min_busbw")
    busbw = largest["busbw_gbps"] or 0.0
    if isinstance(threshold, (int, float)) and busbw < threshold:
        found.append(fail(f"All-reduce bus bandwidth {busbw:.2f} GB/s at {_size(largest['bytes'])} is below "
                          f"--min-busbw {threshold:g} GB/s", detail=f"{backend_name}; per size: {figures}. busbw = "
                          "algbw x 2(n-1)/n, the nccl-tests convention.", evidence=ev,
                          remedy=Remediation("Check NCCL's transport (NCCL_DEBUG=INFO shows NET/IB vs NET/Socket), "
                                             "the NCCL_* switches and the interface it picked.", (),
                                             (_NCCL_TESTS,))))
    slow = _slow_ranks(rows)
    if slow:
        found.append(warn(f"{where(facts, slow)} {'is' if len(slow) == 1 else 'are'} slower than the others in the "
                          "all-reduce", detail="Mean time per iteration above "
                          f"{SLOW_FACTOR}x the median of all ranks at {_size(largest['bytes'])}. A slow rank or "
                          "link holds back every collective of the job.", evidence=ev))
    if not found or all(f.status is Status.WARN for f in found):
        found.insert(0, ok(f"All-reduce exact on every rank; busbw {figures} ({backend_name})", evidence=ev))
    return found


def _slow_ranks(rows: list[dict[str, Any]]) -> list[int]:
    per_rank = rows[-1]["per_rank"]
    times = {int(r): t for r, t in per_rank.items() if isinstance(t, (int, float)) and t > 0}
    if len(times) < 3:
        return []
    median = statistics.median(times.values())
    return sorted(r for r, t in times.items() if t > SLOW_FACTOR * median)


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):g} {unit}"
    return f"{n} B"


@check("cluster-clock", "Node clocks agree", needs=("cluster.collective",))
def clock(facts: Facts) -> Finding:
    coll = facts.value("cluster.collective") or {}
    clocks = {int(r): rec.get("clock") for r, rec in (coll.get("finished") or {}).items()
              if isinstance((rec or {}).get("clock"), (int, float))}
    if len(clocks) < 2 or 0 not in clocks:
        return skip("Clock readings from fewer than two ranks")
    skew = {r: t - clocks[0] for r, t in clocks.items()}
    worst_rank = max(skew, key=lambda r: abs(skew[r]))
    worst_skew = skew[worst_rank]
    ev = {"skew_s": {str(r): round(s, 4) for r, s in skew.items()}}
    if abs(worst_skew) >= SKEW_WARN_S:
        odd = sorted(r for r, s in skew.items() if abs(s) >= SKEW_WARN_S)
        return warn(f"Clock of {where(facts, odd)} is {worst_skew:+.1f} s off rank 0's",
                    detail="Read right after a barrier. Logs of different nodes cannot be lined up, and "
                    "certificate/Kerberos checks fail with skewed clocks.", evidence=ev,
                    remedy=Remediation("Run time synchronisation (chrony/NTP) on every node.",
                                       ("chronyc tracking", "timedatectl status")))
    return ok(f"Clocks agree within {abs(worst_skew) * 1000:.0f} ms", evidence=ev)


@check("cluster-rank-findings", "Each rank's own checks pass", needs=("cluster.rank_findings",))
def rank_findings(facts: Facts) -> list[Finding]:
    per_rank = facts.value("cluster.rank_findings") or {}
    if not per_rank:
        return [skip("No rank reported its findings")]
    by_check: dict[tuple[str, str, str], list[int]] = {}
    for rank, items in per_rank.items():
        for item in items or ():
            if item.get("status") in ("fail", "error", "warn"):
                by_check.setdefault((item["status"], item["id"], item.get("title", "")), []).append(int(rank))
    found: list[Finding] = []
    makers: dict[str, Callable[..., Finding]] = {"fail": fail, "error": error, "warn": warn}
    total = len(per_rank)
    for (status, cid, title), ranks in sorted(by_check.items(), key=lambda kv: ("fail", "error", "warn").index(
            kv[0][0])):
        scope = "every rank" if len(ranks) == total and total > 1 else where(facts, sorted(ranks))
        found.append(makers[status](f"{cid} on {scope}: {title}", evidence={"check": cid, "ranks": sorted(ranks)},
                                    detail=f"Rank {min(ranks)}'s report in the JSON output has the detail and the "
                                    "remedy."))
    if not found:
        return [ok(f"Every check passes on all {total} ranks")]
    return found


CHECKS: tuple[CheckSpec, ...] = (rendezvous, backend, gpu_share, finished, allreduce, consistency, clock, rank_findings)
