"""Presentation of `diff` and `fleet` results (rich tables). Presentation only; every string from a
report is shown literally (control characters made visible)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .render import safe

if TYPE_CHECKING:
    from rich.console import Console


def _v(value: Any) -> str:
    return safe(value) if value is not None else "—"


def render_diff(result: Mapping[str, Any], console: Console) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    a, b = result["a"]["path"], result["b"]["path"]
    console.print(Text(f"envdoctor diff · A = {safe(a)} ({result['a']['kind']}) · B = {safe(b)} "
                       f"({result['b']['kind']})", style="bold"))
    diffs = result["differences"]
    if not diffs:
        console.print(Text("No difference in driver, CUDA, torch, cuDNN, NCCL, GPUs, Python, packages or "
                           "environment.", style="green"))
    else:
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for head in ("area", "what", "A", "B", "judged by (A → B today)"):
            table.add_column(head, no_wrap=head == "area")
        last = None
        for d in diffs:
            judges = ", ".join(f"{j['check']} ({j['a'] or '—'} → {j['b'] or '—'})" for j in d["judged_by"])
            table.add_row(Text(d["area"] if d["area"] != last else "", style="cyan"), Text(safe(d["label"])),
                          Text(_v(d["a"])), Text(_v(d["b"]), style="bold"), Text(safe(judges), style="dim"))
            last = d["area"]
        console.print(table)
    if result["verdicts"]:
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title="Checks that judge A and B "
                      "differently (today's checks)", title_justify="left")
        for head in ("check", "A", "B", "B's finding"):
            table.add_column(head)
        for v in result["verdicts"]:
            table.add_row(Text(v["check"], style="cyan"), Text(_v(v["a"])), Text(_v(v["b"]), style="bold"),
                          Text(_v(v["title_b"] or v["title_a"])))
        console.print(table)
    console.print(Text(f"{len(diffs)} difference(s), {len(result['verdicts'])} check(s) judged differently."))


def render_fleet(result: Mapping[str, Any], console: Console, limit: int = 20) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    configs = result["configurations"]
    console.print(Text(f"envdoctor fleet · {result['reports']} report(s) · {len(configs)} configuration(s) · "
                       f"{result['healthy_nodes']} without failures · {len(result['corrupt'])} unreadable",
                       style="bold"))
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title="Configurations",
                  title_justify="left")
    for head in ("#", "nodes", "driver", "torch", "CUDA", "cuDNN", "NCCL", "GPUs", "differs from the majority"):
        table.add_column(head)
    for c in configs[:limit]:
        asp = c["aspects"]
        differs = "; ".join(f"{d['label']}: {_v(d['this'])} (majority {_v(d['majority'])})"
                            for d in c["differs_from_majority"][:6])
        more = len(c["differs_from_majority"]) - 6
        nodes = ", ".join(safe(n) for n in c["nodes"][:4]) + (f" … (+{c['count'] - 4})" if c["count"] > 4 else "")
        table.add_row(Text(str(c["id"]) + (" (majority)" if c["majority"] else ""), style="green" if c["majority"]
                           else "yellow"), Text(f"{c['count']}: {nodes}"),
                      *(Text(_v(asp.get(k))) for k in ("driver", "torch", "torch_build", "cudnn", "nccl", "gpus")),
                      Text(safe(differs) + (f" (+{more} more)" if more > 0 else ""), style="yellow"))
    console.print(table)
    if len(configs) > limit:
        console.print(Text(f"… {len(configs) - limit} more configuration(s) in --json", style="dim"))
    if result["failures_by_check"]:
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title="Failures by check",
                      title_justify="left")
        for head in ("check", "nodes", "fail", "error", "e.g."):
            table.add_column(head)
        for cid, row in list(result["failures_by_check"].items())[:limit]:
            table.add_row(Text(safe(cid), style="cyan"), str(row["nodes"]), str(row.get("fail", 0)),
                          str(row.get("error", 0)), Text(", ".join(safe(n) for n in row["examples"][:5])))
        console.print(table)
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title="Failures by node",
                      title_justify="left")
        table.add_column("node")
        table.add_column("failing checks")
        for node, checks in list(result["failures_by_node"].items())[:limit]:
            table.add_row(Text(safe(node)), Text(safe(", ".join(checks))))
        console.print(table)
        if len(result["failures_by_node"]) > limit:
            console.print(Text(f"… {len(result['failures_by_node']) - limit} more node(s) in --json", style="dim"))
    for item in result["corrupt"][:limit]:
        console.print(Text(f"skipped: {safe(item['error'])}", style="yellow"))
    if len(result["corrupt"]) > limit:
        console.print(Text(f"… {len(result['corrupt']) - limit} more unreadable file(s) in --json", style="yellow"))
