"""`envdoctor check --distributed`: one rank's part of the cluster check, and rank 0's report.

Every rank (started by torchrun, srun or a Kubernetes Job through torchrun) judges its launch
variables first, without any network; a rank that cannot take part reports that and stops. The
others start the rank child (``child/dist.py``, in the target interpreter: it imports torch)
*before* probing, so its ``import torch`` overlaps the probes, then send it their report. Rank 0
turns what its child gathered into ``cluster.*`` facts, judges them with ``checks/cluster.py``,
prints one report and hands the exit code to every rank through the store.

Exit codes are the usual ones, the same on every rank: 0 no failure, 1 a failure anywhere in the
cluster (including a rank that never arrived or never finished), 2 usage error (not started by a
launcher), 3 the cluster check could not complete (rank 0 vanished before its verdict, or a
check crashed). A rank that cannot reach the rendezvous store exits 1 (its launch is broken).
Stopped by SIGTERM/SIGINT (torchrun stops every rank when one fails), rank 0 reports what it has
at once and every rank it reaches exits 128 + the signal (143, 130), as every envdoctor command.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from envdoctor.knowledge.compare import facts_getter, raw_getter, signature
from envdoctor.knowledge.factkeys import validate_fact_keys
from envdoctor.knowledge.launch import is_loopback, launch_problems, read_launch
from envdoctor.model import Facts, Finding, ProbeRun, Reason, missing, ok
from envdoctor.pipeline import collect as _collect
from envdoctor.pipeline import judge as _judge
from envdoctor.pipeline.plan import Plan
from envdoctor.process.host import ChildResult, Host, LiveChild, start_live_child
from envdoctor.process.lifecycle import ExitCode
from envdoctor.report import Report, exit_code

#: Extra seconds the envdoctor process waits for its child beyond the child's own deadlines.
#: The facts rank 0 writes from what every rank posted (envdoctor/knowledge/factkeys.py: ``command:distributed``).
KEYS = ("cluster.world_size", "cluster.launch", "cluster.options", "cluster.fatal", "cluster.arrived",
        "cluster.decision", "cluster.collective", "cluster.stopped", "cluster.signatures", "cluster.rank_findings")
validate_fact_keys(KEYS, "envdoctor.pipeline.cluster KEYS", producer="command:distributed")

_MARGIN = 10.0
#: Seconds a stopped rank (SIGTERM from the launcher) still waits for rank 0's verdict.
_STOP_GRACE = 3.0
#: Seconds rank 0 waits for its envdoctor process's verdict before it gives up on it.
VERDICT_TIMEOUT = 60.0


class NotLaunched(Exception):
    """--distributed without any launcher variable: a usage error."""


@dataclass(frozen=True)
class ClusterOptions:
    init_timeout: float = 30.0
    collective_timeout: float = 30.0
    min_busbw: float | None = None
    sizes: tuple[int, ...] = ()
    iters: int = 5
    probe_deadline: float = 31.5  # the slowest probe's deadline (the torch probe: 6 x --timeout + grace)
    device: str | None = None
    inject: str = ""  # self-test hook passed to the child (ENVDOCTOR_DIST_INJECT)
    fail_on: str = "fail"

    @property
    def facts_timeout(self) -> float:
        return max(self.init_timeout + self.collective_timeout, self.probe_deadline) + 3.0


#: The pipeline's functions (tests hand in lighter ones): ``collect(plan, host, torch_probe=…)`` and
#: ``judge(facts, runs, origin, plan)``.
Collect = Callable[..., tuple[Facts, list[ProbeRun]]]
Judge = Callable[[Facts, Any, str, Plan], Report]


@dataclass
class Outcome:
    """What one rank ends with: the exit code, and on rank 0 (or a rank that ran alone) a report."""

    code: int
    report: Report | None = None
    cluster: dict[str, Any] | None = None
    line: str = ""
    published: bool = False


def run(host: Host, plan: Plan, options: ClusterOptions, publish: Callable[[Outcome], None] | None = None,
        collect: Collect = _collect.collect, judge: Judge = _judge.judge) -> Outcome:
    """This rank's part (``plan``: ``check --distributed``'s). On rank 0 ``publish`` prints the report
    *before* the verdict goes out: the other ranks exit as soon as they have it, and torchrun then
    stops whoever is still running."""
    info = read_launch(host.environ)
    if info is None:
        raise NotLaunched("--distributed needs a launcher: no RANK/WORLD_SIZE (torchrun) or SLURM_PROCID/"
                          "SLURM_NTASKS (srun) in the environment. Run: torchrun --nproc-per-node=N -m envdoctor "
                          "check --distributed")
    problems = launch_problems(info)
    addr = info.get("master_addr") or ""
    if not problems and addr:
        _, why = ([addr], "") if _is_ip(addr) else host.resolve(addr, 2.0)
        if why:
            problems.append(why)
    if problems:
        return _alone(host, plan, collect, judge, info, "; ".join(problems), options)
    child = start_live_child(host, "dist", _child_args(host, info, options))
    if isinstance(child, str):
        return _alone(host, plan, collect, judge, info, child, options)
    stop = _Stopper(child)
    facts, runs = collect(plan, host, torch_probe=_shared_torch_probe(child))
    local = judge(facts, runs, "live", plan)
    child.send({"facts": local.to_dict()})
    # The handlers stay until the process leaves (os._exit): a SIGTERM while rank 0 prints must
    # not kill it half-way.
    if info.get("rank") == 0:
        return _rank0(child, local, info, plan, options, stop, publish)
    return _follower(child, local, info, options, stop)


def _shared_torch_probe(child: LiveChild) -> Callable[[float], ChildResult]:
    """The python probe's torch facts from the rank child, which runs the same torch_probe script
    after its own ``import torch`` (one import per rank, not two)."""

    def wait(timeout: float) -> ChildResult:
        began = time.monotonic()
        value, why = child.wait_for("torch_probe", timeout)
        seconds = time.monotonic() - began
        if why == "timeout":
            stage = child.last_stage
            return ChildResult("timeout", {}, stage, None, "", seconds)
        if why or not isinstance(value, dict):
            lines = child.stderr_lines()
            tail = lines[-1] if lines else ""
            return ChildResult("crashed", {}, child.last_stage, None, "\n".join(lines), seconds,
                               "the rank child ended before reporting torch" + (f": {tail}" if tail else ""))
        raw = value.get("data")
        data: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if not value.get("done"):
            return ChildResult("failed", data, str(value.get("stage") or ""), None, "", seconds,
                               "torch_probe did not finish in the rank child")
        return ChildResult("ok", data, str(value.get("stage") or ""), 0, "", float(value.get("seconds") or seconds))

    return wait


def _is_ip(addr: str) -> bool:
    from envdoctor.knowledge.launch import is_ip

    return is_ip(addr)


def _child_args(host: Host, info: Mapping[str, Any], options: ClusterOptions) -> dict[str, Any]:
    import socket

    addr = str(info.get("master_addr"))
    return {
        "rank": info.get("rank"), "world_size": info.get("world_size"), "local_rank": info.get("local_rank") or 0,
        "local_world_size": info.get("local_world_size"), "node_rank": info.get("node_rank"),
        "master_addr": addr, "master_port": info.get("master_port"), "agent_store": bool(info.get("agent_store")),
        "run_id": f"{info.get('run_id') or 'run'}-{host.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}",
        "host": socket.gethostname(), "init_timeout": options.init_timeout,
        "collective_timeout": options.collective_timeout, "facts_timeout": options.facts_timeout,
        "verdict_timeout": VERDICT_TIMEOUT, "sizes": list(options.sizes) or None, "iters": options.iters,
        "device": options.device, "inject": options.inject, "loopback": is_loopback(addr) or addr == "localhost",
        # For the torch probe run inside the rank child: it initialises CUDA on the rank's own GPU
        # and reads the memory map afterwards itself.
        "init_cuda": False, "maps": False,
    }


class _Stopper:
    """SIGTERM/SIGINT (torchrun stops every worker when one fails): rank 0 tells its child to
    report what it has now instead of waiting out its deadlines."""

    def __init__(self, child: LiveChild) -> None:
        self.child = child
        self.why: str | None = None
        self.since = 0.0
        self.signum = 0
        self.previous: dict[int, Any] = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self.previous[sig] = signal.signal(sig, self._handle)
            except (ValueError, OSError):  # not the main thread
                pass

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else "signal"

    @property
    def code(self) -> int:
        return 128 + self.signum if self.signum else int(ExitCode.INCOMPLETE)

    def _handle(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        self.since = self.since or time.monotonic()
        self.signum = self.signum or signum
        self.why = self.why or (f"{name} received (the launcher stops every rank when one of them exits with an "
                                "error)")
        self.child.send({"stop": self.why})


def _alone(host: Host, plan: Plan, collect: Collect, judge: Judge, info: Mapping[str, Any], why: str,
           options: ClusterOptions) -> Outcome:
    """This rank cannot join: judge it alone (its launch checks say why) and exit 1."""
    facts, runs = collect(plan, host)
    rep = judge(facts, runs, "live", plan)
    code = max(rep.exit_code(options.fail_on), ExitCode.FAIL)
    return Outcome(code, rep, None, f"rank {info.get('rank')} cannot take part in the cluster check: {why}")


class _StoreWatch:
    """The rank child in its "store" stage (connecting to MASTER_ADDR:MASTER_PORT) for longer than
    --init-timeout and a grace: a listener that accepts and never answers holds torch's store
    client past every timeout of its own, so the deadline is kept here, on the wall clock."""

    GRACE = 5.0

    def __init__(self, child: LiveChild, options: ClusterOptions) -> None:
        self.child, self.limit, self.since = child, options.init_timeout + self.GRACE, 0.0

    def expired(self) -> bool:
        if self.child.last_stage != "store":
            self.since = 0.0
            return False
        self.since = self.since or time.monotonic()
        return time.monotonic() - self.since > self.limit


def _no_store_answer(info: Mapping[str, Any], options: ClusterOptions) -> dict[str, Any]:
    return {"phase": "store", "address": f"{info.get('master_addr')}:{info.get('master_port')}",
            "error": f"the rendezvous store did not answer within --init-timeout {options.init_timeout:g} s "
                     "(something listens on that port but does not answer)", "host_it": False}


def _follower(child: LiveChild, local: Report, info: Mapping[str, Any], options: ClusterOptions,
              stop: _Stopper) -> Outcome:
    deadline = time.monotonic() + options.facts_timeout + VERDICT_TIMEOUT + _MARGIN
    rank = info.get("rank")
    store = _StoreWatch(child, options)
    while time.monotonic() < deadline:
        if store.expired():
            fatal = _no_store_answer(info, options)
            child.kill()
            return Outcome(ExitCode.FAIL, local, None, f"rank {rank}: cannot reach the rendezvous store at "
                           f"{fatal['address']} ({fatal['error']})")
        if stop.why:  # the launcher is stopping the job: wait briefly for rank 0's verdict, then go
            deadline = min(deadline, stop.since + _STOP_GRACE)
        rec = child.next(0.5)
        if rec is None:
            continue
        if rec.get("injected_exit"):
            child.kill()
            sys.stdout.flush()
            import os

            os._exit(ExitCode.FAIL)
        if "fatal" in rec:
            fatal = rec["fatal"]
            child.kill()
            return Outcome(ExitCode.FAIL, local, None, f"rank {rank}: cannot reach the rendezvous store at "
                           f"{fatal.get('address', '?')} ({str(fatal.get('error', ''))[:300]})")
        if rec.get("_done") or rec.get("_eof"):
            code = rec.get("exit")
            child.kill()
            if isinstance(code, int):
                return Outcome(code, None, None, f"rank {rank}: the cluster report is on rank 0; exit {code}")
            why = rec.get("why") or "the rank child ended without a verdict"
            return Outcome(ExitCode.INCOMPLETE, None, None, f"rank {rank}: {why}; exit {int(ExitCode.INCOMPLETE)}")
    child.kill()
    if stop.why:  # stopped, and rank 0 said nothing within the grace: the signal's own exit code
        return Outcome(stop.code, None, None, f"rank {rank}: stopped early: {stop.name}; exit {stop.code}")
    return Outcome(ExitCode.INCOMPLETE, None, None,
                   f"rank {rank}: no verdict from rank 0 in time; exit {int(ExitCode.INCOMPLETE)}")


def _rank0(child: LiveChild, local: Report, info: Mapping[str, Any], plan: Plan, options: ClusterOptions,
           stop: _Stopper, publish: Callable[[Outcome], None] | None) -> Outcome:
    gathered: dict[str, Any] = {"rank_reports": {}}
    deadline = time.monotonic() + options.facts_timeout + _MARGIN
    store = _StoreWatch(child, options)
    while time.monotonic() < deadline:
        if store.expired():
            gathered["fatal"] = _no_store_answer(info, options)
            break
        if stop.why:  # stopped: the child reports what it has at once; it is not waited for long
            deadline = min(deadline, stop.since + _STOP_GRACE)
        rec = child.next(0.2 if stop.why else 0.5)
        if rec is None:
            continue
        if rec.get("_eof"):
            break
        for key in ("decision", "arrived", "collective", "fatal", "torch"):
            if key in rec:
                gathered[key] = rec[key]
        if "rank_facts" in rec:
            item = rec["rank_facts"] or {}
            gathered["rank_reports"][str(item.get("rank"))] = item.get("facts")
        if "fatal" in rec or "gathered" in rec:
            break
    report, cluster = build_report(gathered, local, info, options, stop.why, plan)
    # Stopped (SIGTERM from the launcher or a user): the report says so, and the exit code is the
    # signal's (143 for SIGTERM, 130 for SIGINT), on every rank that gets this verdict.
    code = stop.code if stop.why else report.exit_code(options.fail_on)
    outcome = Outcome(code, report, cluster)
    if publish is not None:
        publish(outcome)
        outcome.published = True
    child.send({"exit": code})
    end = time.monotonic() + (2.0 if stop.why else 6.0)
    while time.monotonic() < end:
        rec = child.next(0.2)
        if rec is not None and (rec.get("_done") or rec.get("_eof")):
            break
    child.kill()
    return outcome


def build_report(gathered: Mapping[str, Any], local: Report, info: Mapping[str, Any], options: ClusterOptions,
                 stopped: str | None = None, plan: Plan | None = None) -> tuple[Report, dict[str, Any]]:
    """Rank 0: the cluster facts from what the child gathered, judged by the cluster checks (with
    the warnings of ``plan``'s selection, as rank 0's own report)."""
    from envdoctor.checks.cluster import CHECKS

    reports: dict[str, Any] = {k: v for k, v in (gathered.get("rank_reports") or {}).items() if isinstance(v, Mapping)}
    reports["0"] = local.to_dict()
    readings = cluster_readings(gathered, reports, info, options, stopped)
    facts = Facts(readings)
    report = _judge.judge(facts, (), "cluster", plan or Plan(command="distributed", distributed=True), checks=CHECKS)
    return report, {"table": node_table(facts, reports, list(report.findings)), "ranks": reports}


def cluster_readings(gathered: Mapping[str, Any], reports: Mapping[str, Any], info: Mapping[str, Any],
                     options: ClusterOptions, stopped: str | None) -> dict[str, Any]:
    src = "rank0"
    silent = missing(Reason.TIMEOUT, src, "rank 0's cluster child reported nothing in time")
    fatal = gathered.get("fatal")

    def got(key: str) -> Any:
        if key in gathered:
            return ok(gathered[key], src)
        if fatal:
            return missing(Reason.FAILED, src, f"the cluster check stopped at {fatal.get('phase')}: "
                           f"{str(fatal.get('error', ''))[:300]}")
        return silent

    return {
        "cluster.world_size": ok(info.get("world_size"), src),
        "cluster.launch": ok({k: info.get(k) for k in ("launcher", "master_addr", "master_port", "local_world_size",
                                                        "run_id")}, src),
        "cluster.options": ok({"init_timeout": options.init_timeout, "collective_timeout": options.collective_timeout,
                               "min_busbw": options.min_busbw}, src),
        "cluster.fatal": ok(fatal, src),
        "cluster.arrived": got("arrived"),
        "cluster.decision": got("decision"),
        "cluster.collective": got("collective"),
        "cluster.stopped": ok(stopped, src),
        "cluster.signatures": ok({r: signature(raw_getter(rep.get("facts"))) for r, rep in reports.items()}, src),
        "cluster.rank_findings": ok({r: [{"id": f.get("id"), "status": f.get("status"), "title": f.get("title")}
                                         for f in (rep.get("findings") or ()) if isinstance(f, Mapping)]
                                     for r, rep in reports.items()}, src),
    }


#: Columns of the node table that are always shown; differing env vars and packages are added.
TABLE_ASPECTS = ("driver", "cuda_driver", "torch", "torch_build", "cudnn", "nccl", "gpus", "python")


def node_table(facts: Facts, reports: Mapping[str, Any], findings: list[Finding]) -> dict[str, Any]:
    """Ranks (grouped by node) x facts; ``odd`` lists the columns where a rank is not the majority."""
    from envdoctor.checks.cluster import allreduce_table
    from envdoctor.knowledge.compare import BY_NAME

    columns = [(name, BY_NAME[name].label) for name in TABLE_ASPECTS]
    odd: dict[str, set[str]] = {}
    for f in findings:
        ev = facts_getter_evidence(f)
        diff = ev.get("difference")
        if not diff:
            continue
        name = diff["name"]
        if name not in TABLE_ASPECTS:
            columns.append((name, diff["label"]))
        for m in ev.get("odd_ranks") or ():
            odd.setdefault(str(m), set()).add(name)
    arrived = facts.value("cluster.arrived") or {}
    sigs = facts.value("cluster.signatures") or {}
    times = {}
    rows_ar = allreduce_table(facts)
    if rows_ar:
        times = rows_ar[-1]["per_rank"]
    coll = facts.value("cluster.collective") or {}
    finished = set((coll.get("finished") or {}).keys())
    progress = coll.get("progress") or {}
    world = int(facts.value("cluster.world_size") or 0)
    ranks, absent = _table_ranks(world, {*arrived, *reports, *finished, *progress})
    rows = []
    for rank in ranks:
        key = str(rank)
        a = arrived.get(key) or {}
        sig = sigs.get(key) or {}
        values: dict[str, Any] = {}
        for name, _ in columns:
            if ":" in name:
                kind, _, var = name.partition(":")
                values[name] = (sig.get("env" if kind == "env" else "packages") or {}).get(var)
            else:
                values[name] = (sig.get("aspects") or {}).get(name)
        status = _rank_status(reports.get(key))
        state = ("finished" if key in finished else
                 str((progress.get(key) or {}).get("phase") or ("arrived" if a else "never arrived"))[:40])
        rows.append({"rank": rank, "host": a.get("host"), "node": a.get("node_rank"), "status": status,
                     "state": state, "allreduce_s": times.get(key), "values": values,
                     "odd": sorted(odd.get(key, ()))})
    table: dict[str, Any] = {"columns": [{"name": n, "label": label} for n, label in columns], "rows": rows}
    if absent:
        table["absent"] = absent
    return table


#: Ranks that left no trace (never arrived, no report) get a row each only up to this many; the
#: others are one summary: a WORLD_SIZE of 100,000 with one rank started is 99,999 empty rows.
ABSENT_ROWS = 16


def _table_ranks(world: int, known_keys: set[Any]) -> tuple[list[int], dict[str, Any] | None]:
    """The ranks the table has a row for (every rank that left a trace, and the first ABSENT_ROWS
    of the others), and the summary of the absent ranks left out (None when none is), found
    without walking every rank of the world."""
    known = set()
    for k in known_keys:
        try:
            r = int(k)
        except (TypeError, ValueError):
            continue
        if 0 <= r < world:
            known.add(r)
    gaps: list[tuple[int, int]] = []  # the absent ranks, as inclusive ranges
    start = 0
    for r in sorted(known):
        if r > start:
            gaps.append((start, r - 1))
        start = r + 1
    if start < world:
        gaps.append((start, world - 1))
    shown: list[int] = []
    for a, b in gaps:
        shown.extend(range(a, min(b, a + ABSENT_ROWS - len(shown) - 1) + 1))
        if len(shown) >= ABSENT_ROWS:
            break
    count = sum(b - a + 1 for a, b in gaps)
    left = count - len(shown)
    ranks = sorted(known | set(shown))
    if not left:
        return ranks, None
    rest, skip = [], len(shown)  # the ranges of the ranks left out, at most 8 of them named
    for a, b in gaps:
        if skip >= b - a + 1:
            skip -= b - a + 1
            continue
        a, skip = a + skip, 0
        rest.append(f"{a}" if a == b else f"{a}-{b}")
    named = ", ".join(rest[:8]) + (", …" if len(rest) > 8 else "")
    return ranks, {"count": left, "ranks": named, "state": "never arrived"}


def facts_getter_evidence(f: Finding) -> dict[str, Any]:
    from envdoctor.model import thaw

    return thaw(f.evidence) if f.id == "cluster-consistency" else {}


def _rank_status(report: Any) -> str:
    if not isinstance(report, Mapping):
        return "missing"
    summary = report.get("summary") or {}
    return str(summary.get("worst") or "?")


def cluster_json(report: Report, cluster: Mapping[str, Any], fail_on: str = "fail") -> str:
    import json

    from envdoctor.redact import redact_value

    data = report.to_dict()
    data["kind"] = "envdoctor-cluster"
    data["exit_code"] = exit_code(report.findings, fail_on)
    from envdoctor.checks.cluster import allreduce_table

    data["cluster"] = redact_value({"allreduce": allreduce_table(report.facts), "table": cluster.get("table"),
                                    "ranks": cluster.get("ranks")})
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


__all__ = ["ClusterOptions", "NotLaunched", "Outcome", "build_report", "cluster_json", "facts_getter", "run"]
