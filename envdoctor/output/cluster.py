"""Presentation of the cluster report: ranks x facts with the odd cells marked, the all-reduce
figures, and the cluster findings with their remedies. On a terminal rich tables and panels; on
a pipe or a file (a Slurm output file, ``torchrun … | tee``, ``kubectl logs``) plain lines, never
wrapped, no trailing spaces: one line per rank and per all-reduce size, then the findings, blocks
and summary in `check`'s own line format. Presentation only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from envdoctor.model import Status
from envdoctor.output.render import (
    PROBLEMS,
    STYLES,
    _finding_body,
    _plain_rows,
    _render_block,
    findings_table,
    problems_first,
    safe,
    summary_text,
)

if TYPE_CHECKING:
    from rich.console import Console

    from envdoctor.report import Report

#: Above this many ranks the table shows the odd and unfinished ones and the first few.
ROW_LIMIT = 64
_STATUS_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "error": "bold magenta", "missing": "bold red"}


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):g} {unit}"
    return f"{n} B"


def headline(report: Report) -> str:
    f = report.facts
    world = f.value("cluster.world_size")
    launch = f.value("cluster.launch") or {}
    decision = f.value("cluster.decision") or {}
    parts = [f"envdoctor {report.envdoctor_version} cluster check", f"{world} rank(s)",
             f"launcher {launch.get('launcher')}", f"rendezvous {launch.get('master_addr')}:{launch.get('master_port')}"]
    if decision.get("backend"):
        parts.append(f"backend {decision['backend']}")
    return " · ".join(safe(p) for p in parts)


def _render_allreduce(report: Report, console: Console) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from envdoctor.checks.cluster import allreduce_table

    rows = allreduce_table(report.facts)
    if rows:
        ar = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title="All-reduce (busbw = algbw × 2(n−1)/n)",
                   title_justify="left")
        for head in ("size", "time (slowest rank)", "algbw GB/s", "busbw GB/s", "exact"):
            ar.add_column(head, justify="right")
        for r in rows:
            size, took, algbw, busbw, exact = _allreduce_cells(r)
            ar.add_row(size, took, algbw, busbw, Text("yes", style="green") if exact else Text("NO", style="bold red"))
        console.print(ar)


def _absent_line(table_data: Mapping[str, Any]) -> str:
    """The ranks of a huge job that never arrived, summed up instead of a row each."""
    absent = table_data.get("absent")
    if not isinstance(absent, Mapping) or not absent.get("count"):
        return ""
    return safe(f"… {absent['count']:,} more rank(s) {absent.get('state') or 'never arrived'}, no row each: "
                f"ranks {absent.get('ranks')}")


def _shown_rows(rows_all: list[Any]) -> list[Any]:
    if len(rows_all) <= ROW_LIMIT:
        return rows_all
    # A large job: every rank that is odd, failed or unfinished, and the first few others.
    return [r for i, r in enumerate(rows_all) if i < 8 or r.get("odd") or r.get("state") != "finished"
            or r.get("status") in ("fail", "error", "missing")]


def _allreduce_cells(r: Mapping[str, Any]) -> tuple[str, str, str, str, bool]:
    return (_size(r["bytes"]), f"{r['time_s'] * 1000:.3f} ms" if r["time_s"] else "-",
            f"{r['algbw_gbps']:.3f}" if r["algbw_gbps"] is not None else "-",
            f"{r['busbw_gbps']:.3f}" if r["busbw_gbps"] is not None else "-", not r["wrong"])


def render_cluster_plain(report: Report, cluster: Mapping[str, Any], console: Console, verbose: bool = False) -> None:
    """The cluster report as plain lines for a pipe or a file: nothing a narrow or absent terminal
    can squeeze, every value whole (``rank 3 · node 1/vm · ok · finished · NCCL_ALGO ✖ Ring · …``)."""
    from rich.text import Text

    from envdoctor.checks.cluster import allreduce_table

    def line(text: str, style: str = "") -> None:
        console.print(Text(text, style=style), soft_wrap=True)

    line(headline(report), "bold")
    table_data = cluster.get("table") or {}
    columns = table_data.get("columns") or []
    rows_all = list(table_data.get("rows") or ())
    shown = _shown_rows(rows_all)
    line("Ranks × facts (✖ = differs from the majority)", "bold")
    for row in shown:
        odd = set(row.get("odd") or ())
        node = row.get("node") if row.get("node") is not None else "-"
        cells = [f"rank {row['rank']}", f"node {node}/{row.get('host') or '?'}", str(row.get("status")),
                 str(row.get("state"))]
        for c in columns:
            value = row["values"].get(c["name"])
            cells.append(f"{c['label']} {'✖ ' if c['name'] in odd else ''}{value if value is not None else '-'}")
        t = row.get("allreduce_s")
        cells.append(f"all-reduce {t * 1000:.2f} ms" if isinstance(t, (int, float)) else "all-reduce -")
        line(" ".join(safe(" · ".join(cells)).split()))
    if len(shown) < len(rows_all):
        line(f"… {len(rows_all) - len(shown)} more rank(s) like the first ones (the JSON report has every rank)")
    if _absent_line(table_data):
        line(_absent_line(table_data))
    sizes = allreduce_table(report.facts)
    if sizes:
        line("All-reduce (busbw = algbw × 2(n−1)/n)", "bold")
        for r in sizes:
            size, took, algbw, busbw, exact = _allreduce_cells(r)
            line(f"{size} · {took} (slowest rank) · algbw {algbw} GB/s · busbw {busbw} GB/s · "
                 f"{'exact' if exact else 'NOT EXACT'}", "" if exact else "bold red")
    ordered = problems_first(report.findings)
    rows = [f for f in ordered if f.status.value != "skip" or verbose]
    if rows:
        _plain_rows(rows, console)
    for f in ordered:
        if f.status in PROBLEMS[:2] or (f.status is Status.WARN and verbose):
            _render_block(f, console, verbose, plain=True)
    console.print(_summary(report), soft_wrap=True)


def render_cluster(report: Report, cluster: Mapping[str, Any], console: Console, verbose: bool = False) -> None:
    if not console.is_terminal:
        render_cluster_plain(report, cluster, console, verbose)
        return
    from rich import box
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text


    console.print(Text(headline(report), style="bold"))
    table_data = cluster.get("table") or {}
    columns = table_data.get("columns") or []
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title="Ranks × facts (✖ = differs from "
                  "the majority)", title_justify="left")
    for head in ("rank", "node/host", "status", "state", *(c["label"] for c in columns), "all-reduce"):
        table.add_column(safe(head), no_wrap=head in ("rank", "status"))
    rows_all = list(table_data.get("rows") or ())
    shown = _shown_rows(rows_all)
    for row in shown:
        odd = set(row.get("odd") or ())
        cells = [Text(str(row["rank"])), Text(safe(f"{row.get('node') if row.get('node') is not None else '-'}/"
                                                   f"{row.get('host') or '?'}")),
                 Text(safe(row.get("status")), style=_STATUS_STYLE.get(str(row.get("status")), "")),
                 Text(safe(row.get("state")), style="" if row.get("state") == "finished" else "bold red")]
        for c in columns:
            value = row["values"].get(c["name"])
            text = safe(value if value is not None else "-")
            cells.append(Text(f"✖ {text}", style="bold red") if c["name"] in odd else Text(text))
        t = row.get("allreduce_s")
        cells.append(Text(f"{t * 1000:.2f} ms" if isinstance(t, (int, float)) else "-"))
        table.add_row(*cells)
    console.print(table)
    if len(shown) < len(rows_all):
        console.print(Text(f"… {len(rows_all) - len(shown)} more rank(s) like the first ones (the JSON report has "
                           "every rank)", style="dim"))
    if _absent_line(table_data):
        console.print(Text(_absent_line(table_data), style="bold red"))
    _render_allreduce(report, console)
    console.print(findings_table(report.findings, verbose))
    for f in report.findings:
        if f.status in (Status.FAIL, Status.ERROR) or (f.status is Status.WARN and verbose):
            console.print(Panel(_finding_body(f, verbose), title=Text(f"{f.status.value}: {f.id}"), title_align="left",
                                border_style=STYLES[f.status].replace("bold ", ""), expand=True))
            for cmd in f.remediation.command_lines():
                for cmd_line in safe(cmd).splitlines() or [""]:
                    console.print(Text("  " + cmd_line, style="bold"), soft_wrap=True)
    console.print(_summary(report))


def _summary(report: Report) -> Any:
    """``Cluster summary: 1 fail (cluster-consistency) · 0 error · …``: `check`'s summary line."""
    from rich.text import Text

    return Text("Cluster summary: ") + summary_text(report)[len("Summary: "):]
