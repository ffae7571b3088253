"""Presentation of the cluster report: ranks x facts with the odd cells marked, the all-reduce
figures, and the cluster findings with their remedies. Presentation only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from envdoctor.model import Status
from envdoctor.output.render import STYLES, _finding_body, findings_table, safe

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
            ar.add_row(_size(r["bytes"]), f"{r['time_s'] * 1000:.3f} ms" if r["time_s"] else "-",
                       f"{r['algbw_gbps']:.3f}" if r["algbw_gbps"] is not None else "-",
                       f"{r['busbw_gbps']:.3f}" if r["busbw_gbps"] is not None else "-",
                       Text("yes", style="green") if not r["wrong"] else Text("NO", style="bold red"))
        console.print(ar)


def render_cluster(report: Report, cluster: Mapping[str, Any], console: Console, verbose: bool = False) -> None:
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
    shown = rows_all
    if len(rows_all) > ROW_LIMIT:
        # A large job: every rank that is odd, failed or unfinished, and the first few others.
        shown = [r for i, r in enumerate(rows_all) if i < 8 or r.get("odd") or r.get("state") != "finished"
                 or r.get("status") in ("fail", "error", "missing")]
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
    _render_allreduce(report, console)
    console.print(findings_table(report.findings, verbose))
    for f in report.findings:
        if f.status in (Status.FAIL, Status.ERROR) or (f.status is Status.WARN and verbose):
            console.print(Panel(_finding_body(f, verbose), title=Text(f"{f.status.value}: {f.id}"), title_align="left",
                                border_style=STYLES[f.status].replace("bold ", ""), expand=True))
            for cmd in f.remediation.command_lines():
                for cmd_line in safe(cmd).splitlines() or [""]:
                    console.print(Text("  " + cmd_line, style="bold"), soft_wrap=True)
    s = report.summary
    summary = Text("Cluster summary: ")
    for status in (Status.FAIL, Status.ERROR, Status.WARN, Status.OK, Status.SKIP):
        summary.append(f"{s[status.value]} {status.value}  ", style=STYLES[status] if s[status.value] else "dim")
    console.print(summary)
