"""`envdoctor diff A B` and `envdoctor fleet FILES|DIR`: saved reports compared, never the host.

Both compare through :mod:`envdoctor.knowledge.compare` (the same aspects the cluster check uses). `fleet`
streams: each file is read, judged and reduced to a small summary (its configuration's key, its
failing checks) in worker processes, and only those summaries are kept, so memory grows with the
number of distinct configurations, not with the reports' size.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from envdoctor import inputs
from envdoctor.inputs import MAX_INPUT_BYTES
from envdoctor.knowledge.compare import (
    AREA_ORDER,
    BY_NAME,
    Difference,
    differences,
    facts_getter,
    raw_getter,
    signature,
    signature_key,
)
from envdoctor.report import ReportError

_STATUSES = frozenset({"ok", "warn", "fail", "skip", "error"})
#: Below this many files the reports are read in this process (a pool costs more than it saves).
_POOL_MIN = 200
#: Files handed to the workers and not yet taken back (bounds the results waiting in this process).
_WINDOW = 2048


# -- diff --------------------------------------------------------------------------------------
_CLUSTER_KIND = '"envdoctor-cluster"'


def load_any(path: str) -> tuple[Any, str]:
    """A saved report or a paste -> (Facts, origin). ``CLUSTER.json#R`` (or a cluster report alone,
    meaning rank 0) picks one rank's report out of a `check --distributed` report. Raises
    ReportError with one line."""
    from envdoctor.inputs import parse_report, report_from_json
    from envdoctor.model import Facts
    from envdoctor.report import Report

    rank = None
    if "#" in path and not os.path.exists(path):
        path, _, rank = path.rpartition("#")
    name = "standard input" if path == "-" else path
    text = inputs.read_text(path)
    # Parsed here only when it may be a cluster report (its "kind" is spelled in the text): a plain
    # report parsed twice held two copies of a 58 MB report at once (diff peaked at 626 MB).
    if _CLUSTER_KIND in text and text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            data = None
        ranks = cluster_ranks(data)
        if ranks is not None:
            chosen = dict(ranks).get(rank or "0")
            if chosen is None:
                raise ReportError(f"{name} is a cluster report without rank {rank or 0} (it has "
                                  f"{', '.join(r for r, _ in ranks) or 'none'})")
            return report_from_json(chosen, f"{name}#{rank or 0}").facts, f"cluster rank {rank or 0}"
        del data
    # The text is handed over, not kept (parse_report drops it once parsed), and the saved findings
    # are not read: diff judges both sides again.
    owned = [text]
    del text
    loaded = parse_report(owned.pop(), name, False)
    if isinstance(loaded, Report):
        return loaded.facts, "report"
    assert isinstance(loaded, Facts)
    return loaded, "paste"


def diff_reports(path_a: str, path_b: str) -> dict[str, Any]:
    """What differs between two reports, most important first, each with the checks that judge it
    and how those checks judge each side today."""
    from envdoctor.pipeline.diagnose import diagnose
    from envdoctor.pipeline.judge import registry

    checks = registry()

    def side(path: str) -> tuple[dict[str, Any], dict[str, Any], str]:
        # One side at a time: its facts are let go once signed and judged, so two big reports
        # are never held at once.
        facts, kind = load_any(path)
        return signature(facts_getter(facts)), {f.id: f for f in diagnose(facts, checks)}, kind

    sig_a, findings_a, kind_a = side(path_a)
    sig_b, findings_b, kind_b = side(path_b)
    diffs = differences([("A", sig_a), ("B", sig_b)])
    out = []
    for d in diffs:
        values = {m: v for v, ms in d.values.items() for m in ms}
        judges = [{"check": c, "a": _status(findings_a.get(c)), "b": _status(findings_b.get(c))}
                  for c in d.judged_by if c in findings_a or c in findings_b]
        out.append({"area": d.area, "name": d.name, "label": d.label, "a": values.get("A"), "b": values.get("B"),
                    "judged_by": judges})
    verdicts = [{"check": cid, "a": _status(findings_a.get(cid)), "b": _status(findings_b.get(cid)),
                 "title_a": findings_a[cid].title if cid in findings_a else None,
                 "title_b": findings_b[cid].title if cid in findings_b else None}
                for cid in dict.fromkeys([*findings_a, *findings_b])
                if _status(findings_a.get(cid)) != _status(findings_b.get(cid))]
    return {"a": {"path": path_a, "kind": kind_a}, "b": {"path": path_b, "kind": kind_b}, "differences": out,
            "verdicts": verdicts}


def _status(finding: Any) -> str | None:
    return finding.status.value if finding is not None else None


# -- fleet: one file -> one summary (runs in worker processes) --------------------------------
@dataclass
class Summary:
    path: str
    node: str
    error: str | None = None
    key: str = ""
    sig: dict[str, Any] | None = None
    failing: list[tuple[str, str]] = field(default_factory=list)  # (check id, fail|error)
    #: Only when a store is written (envdoctor.commands.store): every finding as (check id, status,
    #: GPU indices), the report's created_at and envdoctor_version as saved.
    rows: list[tuple[str, str, tuple[int, ...]]] | None = None
    created: Any = None
    version: Any = None


def node_name(path: str, get: Any = None) -> str:
    host = get("launch.hostname") if get else None
    if isinstance(host, str) and host:
        return host[:100]
    base = os.path.basename(path)
    return base.removesuffix(".json")


def summarize_file(path: str, rejudge: bool = False) -> Summary:
    """The first (for a cluster report: rank 0's) summary of a file; never raises."""
    return summarize_all(path, rejudge)[0]


def summarize_all(path: str, rejudge: bool = False, keep: bool = False) -> list[Summary]:
    """One summary per report in the file (a cluster report holds one per rank); never raises:
    an unusable file becomes one Summary with ``error``."""
    try:
        found = _summarize(path, rejudge, keep)
        return found or [Summary(path, node_name(path), error=f"{path} is a cluster report without rank reports")]
    except ReportError as exc:
        return [Summary(path, node_name(path), error=str(exc))]
    except RecursionError:
        return [Summary(path, node_name(path), error=f"{path} is nested too deeply to be an envdoctor report")]
    except Exception as exc:  # noqa: BLE001 - hostile content must never stop the fleet
        return [Summary(path, node_name(path), error=f"{path}: unreadable ({type(exc).__name__}: {str(exc)[:200]})")]


def read_bytes(path: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The file's bytes through the one loader's refusals (not a regular file, too large), UTF-8 left
    undecoded: json.loads reads UTF-8 bytes directly, which is most of a fleet's time. Any other
    encoding (PowerShell's UTF-16) is decoded by the loader first."""
    data = inputs.read_bytes(path, limit=limit)
    codec, bom = inputs.encoding_of(data)
    if codec != "utf-8":
        return inputs.decode(data, path).encode("utf-8")
    data = data[bom:]
    if not data or (len(data) < 4096 and not data.strip()):
        raise ReportError(f"{path} is empty")
    if b"\x00" in data[:8192]:
        raise ReportError(f"{path} is binary data, not a JSON report or pasted text")
    return data


def _summarize(path: str, rejudge: bool, keep: bool = False) -> list[Summary]:
    data_bytes = read_bytes(path)
    if not data_bytes[:256].lstrip().startswith(b"{"):  # a slice: never copy the whole report
        facts, _ = load_any(path)  # a paste: parsed (and judged) like `diagnose` does
        return [_from_facts(path, facts, keep)]
    try:
        data = json.loads(data_bytes)
    except UnicodeDecodeError:
        data = _loads_text(path, data_bytes.decode("utf-8", "replace"))
    except json.JSONDecodeError as exc:
        raise ReportError(f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    ranks = cluster_ranks(data)
    if ranks is not None:  # a cluster report: one summary per rank, named node/rank
        return [_summarize_report(f"{path}#{r}", rep, rejudge, rank=r, keep=keep) for r, rep in ranks]
    return [_summarize_report(path, data, rejudge, keep=keep)]


def cluster_ranks(data: Any) -> list[tuple[str, Any]] | None:
    """The per-rank reports of a `check --distributed` report (``kind: envdoctor-cluster``), else None."""
    if not isinstance(data, dict) or data.get("kind") != "envdoctor-cluster":
        return None
    ranks = (data.get("cluster") or {}).get("ranks") if isinstance(data.get("cluster"), dict) else None
    if not isinstance(ranks, dict):
        return []
    return sorted(ranks.items(), key=lambda kv: int(kv[0]) if str(kv[0]).isdigit() else 0)


def _summarize_report(path: str, data: Any, rejudge: bool, rank: str | None = None, keep: bool = False) -> Summary:
    from envdoctor.inputs import schema_problem

    problem = schema_problem(data, path)  # what diagnose refuses, fleet does not count
    if problem is not None:
        raise ReportError(problem)
    if not isinstance(data.get("findings", []), list):
        # Its saved verdict cannot be read, its facts can: judged again, as diagnose judges it.
        rejudge = True
    if rejudge:
        from envdoctor.inputs import report_from_json

        s = _from_facts(path, report_from_json(data, path, findings=False).facts, keep)
    else:
        get = raw_getter(data["facts"])
        sig = signature(get)
        failing = []
        rows = None
        if keep:  # every finding, for the store; the failing ones are read from the same rows
            from envdoctor.commands.store import finding_rows

            rows = finding_rows(data.get("findings"))
            failing = [(cid, status) for cid, status, _ in rows if status in ("fail", "error")]
        else:
            for f in data.get("findings") or ():
                if (type(f) is dict or isinstance(f, Mapping)) and f.get("status") in ("fail", "error") and isinstance(
                        f.get("id"), str):  # dict first: an abc check per finding is a tenth of a fleet's time
                    failing.append((f["id"][:100], str(f["status"])))
        s = Summary(path, node_name(path, get), key=_digest(sig), sig=sig, failing=failing, rows=rows)
    if keep:
        s.created, s.version = data.get("created_at"), data.get("envdoctor_version")
    if rank is not None:
        s.node = f"{s.node}/rank{rank}"
    return s


def _digest(sig: Mapping[str, Any]) -> str:
    import hashlib

    return hashlib.sha1(signature_key(sig).encode("utf-8", "surrogatepass")).hexdigest()


def _loads_text(path: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportError(f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None


def _from_facts(path: str, facts: Any, keep: bool = False) -> Summary:
    from envdoctor.pipeline.diagnose import diagnose
    from envdoctor.pipeline.judge import checks_for
    from envdoctor.pipeline.plan import Plan

    get = facts_getter(facts)
    sig = signature(get)
    # The pipeline's checks: the registry is loaded once per process, not once per file.
    found = diagnose(facts, checks_for(Plan())[0])
    failing: list[tuple[str, str]] = [(f.id, str(f.status.value)) for f in found if f.status.value in ("fail", "error")]
    s = Summary(path, node_name(path, get), key=_digest(sig), sig=sig, failing=failing)
    if keep:
        s.rows = [(f.id, str(f.status.value), tuple(f.gpus)) for f in found]
    return s


_SENT: set[str] = set()  # per worker process: configurations whose signature was already sent


def _worker(args: tuple[str, bool, bool]) -> list[Summary]:
    """Summaries with a configuration's signature only the first time this worker meets it:
    the parent keeps one signature per configuration, so the rest would only cost pickling."""
    found = summarize_all(*args)
    for s in found:
        if s.sig is not None:
            if s.key in _SENT:
                s.sig = None
            else:
                _SENT.add(s.key)
    return found


def _init_worker() -> None:
    """A worker takes the default signal dispositions back: the pool ends its workers with SIGTERM
    when the fleet is done, and the command's handler (inherited through fork) would print
    "interrupted by SIGTERM" for each; Ctrl-C is the parent's to handle."""
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _parquet(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"PAR1"
    except OSError:
        return False


def iter_paths(items: Iterable[str]) -> Iterator[tuple[str, str | None]]:
    """(path, None) for each file to read, (path, why) for an argument that is not one."""
    for item in items:
        if os.path.isdir(item):
            for root, dirs, files in os.walk(item):
                dirs.sort()
                for name in sorted(files):
                    path = os.path.join(root, name)
                    # A fleet store beside the reports (`fleet DIR --store DIR/fleet.parquet`) is the
                    # fleet's own output, no report of a node: read it by naming it, never inside its folder.
                    if not name.startswith(".") and not (name.endswith(".parquet") and _parquet(path)):
                        yield path, None
        elif os.path.lexists(item):
            yield item, None
        else:
            yield item, f"{item}: no such file or directory"


def summaries(paths: list[str], rejudge: bool = False, jobs: int | None = None, keep: bool = False) -> Iterator[Summary]:
    """Summaries in input order, read in parallel when there are many files (``keep``: with every
    finding, for a store)."""
    jobs = jobs or min(8, os.cpu_count() or 1)
    if len(paths) < _POOL_MIN or jobs < 2:
        for p in paths:
            yield from summarize_all(p, rejudge, keep)
        return
    import multiprocessing
    import threading

    # Back-pressure: imap's feeder would hand out every file at once, and when this process is
    # slower than the workers (writing a store, or given less CPU) their results would pile up here.
    gate, stop = threading.Semaphore(_WINDOW), threading.Event()

    def feed() -> Iterator[tuple[str, bool, bool]]:
        for p in paths:
            while not gate.acquire(timeout=0.2):
                if stop.is_set():
                    return
            if stop.is_set():
                return
            yield p, rejudge, keep

    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    try:
        pool = ctx.Pool(jobs, initializer=_init_worker)
    except OSError:  # no process or file descriptor left for workers (ulimit -u/-n): read them here
        for p in paths:
            yield from summarize_all(p, rejudge, keep)
        return
    with pool:
        try:
            for found in pool.imap(_worker, feed(), chunksize=32):
                gate.release()
                yield from found
        finally:
            stop.set()  # the feeder thread returns before the pool is terminated


# -- fleet: the aggregate ----------------------------------------------------------------------
@dataclass
class Fleet:
    reports: int = 0
    corrupt: list[dict[str, str]] = field(default_factory=list)
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> {"sig", "nodes": [...]}
    by_check: dict[str, Counter[str]] = field(default_factory=dict)  # check -> status -> count
    check_nodes: dict[str, list[str]] = field(default_factory=dict)  # check -> first nodes failing it
    by_node: dict[str, list[str]] = field(default_factory=dict)  # node -> failing checks

    def add(self, s: Summary) -> None:
        from envdoctor.inputs import shown_name  # a file name's ESC/BEL/OSC never reaches a terminal raw

        if s.error:
            self.corrupt.append({"path": shown_name(s.path), "error": shown_name(s.error)})
            return
        s.node = shown_name(s.node)
        self.reports += 1
        group = self.configs.setdefault(s.key, {"sig": s.sig, "nodes": []})
        if group["sig"] is None:
            group["sig"] = s.sig
        group["nodes"].append(s.node)
        seen = set()
        for cid, status in s.failing:
            if cid in seen:
                continue
            seen.add(cid)
            self.by_check.setdefault(cid, Counter())[status] += 1
            nodes = self.check_nodes.setdefault(cid, [])
            if len(nodes) < 20:
                nodes.append(s.node)
        if seen:
            self.by_node[s.node] = sorted(seen)


def fleet(items: Iterable[str], rejudge: bool = False, jobs: int | None = None, store: str | None = None) -> dict[str, Any]:
    """The fleet's result; ``store``: also written, one row per node × check, to that Parquet file.
    An item that is such a store is read back as the reports it was written from."""
    from envdoctor.commands import store as columnar

    agg = Fleet()
    sink = columnar.StoreWriter(store) if store else None
    try:
        for part, stored in columnar.split_items(list(items)):
            if stored:
                for s in columnar.read_store(part[0], Summary):
                    agg.add(s)
                continue
            paths: list[str] = []
            for path, why in iter_paths(part):
                if why:
                    agg.corrupt.append({"path": path, "error": why})
                    if sink:
                        sink.add(Summary(path, node_name(path), error=why))
                else:
                    paths.append(path)
            for s in summaries(paths, rejudge, jobs, keep=sink is not None):
                agg.add(s)
                if sink:
                    sink.add(s)
        if sink:
            sink.close()
    finally:
        if sink:
            sink.abort()
    return fleet_result(agg)


def fleet_result(agg: Fleet) -> dict[str, Any]:
    groups = sorted(agg.configs.values(), key=lambda g: -len(g["nodes"]))
    majority = groups[0] if groups and (len(groups) == 1 or len(groups[0]["nodes"]) > len(groups[1]["nodes"])) else None
    configs = []
    for i, g in enumerate(groups):
        differs: list[dict[str, Any]] = []
        if majority is not None and g is not majority:
            differs = [_vs(d) for d in differences([("majority", majority["sig"]), ("this", g["sig"])])]
        configs.append({"id": i + 1, "count": len(g["nodes"]), "majority": g is majority,
                        "nodes": g["nodes"][:50], "more_nodes": max(0, len(g["nodes"]) - 50),
                        "aspects": g["sig"]["aspects"], "differs_from_majority": differs})
    outliers = [{"config": c["id"], "nodes": c["nodes"], "more_nodes": c["more_nodes"],
                 "differs": c["differs_from_majority"]} for c in configs if not c["majority"]]
    by_check = {cid: {"nodes": sum(cnt.values()), **dict(cnt), "examples": agg.check_nodes[cid]}
                for cid, cnt in sorted(agg.by_check.items(), key=lambda kv: -sum(kv[1].values()))}
    by_node = dict(sorted(agg.by_node.items(), key=lambda kv: (-len(kv[1]), kv[0])))
    return {"reports": agg.reports, "corrupt": agg.corrupt, "configurations": configs, "outliers": outliers,
            "failures_by_check": by_check, "failures_by_node": by_node,
            "healthy_nodes": agg.reports - len(agg.by_node)}


def _vs(d: Difference) -> dict[str, Any]:
    values = {m: v for v, ms in d.values.items() for m in ms}
    return {"area": d.area, "name": d.name, "label": d.label, "majority": values.get("majority"),
            "this": values.get("this"), "judged_by": list(d.judged_by)}


def fleet_exit(result: Mapping[str, Any]) -> int:
    """0 all reports readable, one configuration, no failure; 1 otherwise; 2 nothing readable."""
    from envdoctor.process.lifecycle import ExitCode

    if not result["reports"]:
        return ExitCode.USAGE
    if result["corrupt"] or result["outliers"] or result["failures_by_node"]:
        return ExitCode.FAIL
    return ExitCode.OK


def area_rank(area: str) -> int:
    return AREA_ORDER.index(area) if area in AREA_ORDER else len(AREA_ORDER)


__all__ = ["BY_NAME", "diff_reports", "fleet", "fleet_exit", "summarize_file"]
