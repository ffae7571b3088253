"""Presentation of `diff` and `fleet` results: rich tables on a terminal, and on a pipe or a file
(``console.is_terminal`` false) plain tab-separated lines under a header line, never wrapped, so a
pasted table keeps every value whole. Presentation only; every string from a report is shown
literally (control characters made visible)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from envdoctor.output.render import safe

if TYPE_CHECKING:
    from rich.console import Console


def _v(value: Any) -> str:
    return safe(value) if value is not None else "—"


Cell = tuple[str, str]  # (text, style)


def _table(console: Console, heads: tuple[str, ...], rows: list[tuple[Cell, ...]], title: str = "",
           no_wrap: tuple[str, ...] = ()) -> None:
    """One table: a rich table on a terminal; on a pipe its title, then the header and each row as
    tab-separated plain lines (tabs and newlines inside a value become spaces)."""
    from rich.text import Text

    if not console.is_terminal:
        if title:
            console.print(Text(title), soft_wrap=True)
        for line in (heads, *(tuple(text for text, _ in row) for row in rows)):
            # Written as is: rich would expand the tabs into spaces.
            console.file.write("\t".join(" ".join(cell.split()) for cell in line) + "\n")
        return
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title=title or None, title_justify="left")
    for head in heads:
        table.add_column(head, no_wrap=head in no_wrap)
    for row in rows:
        table.add_row(*(Text(text, style=style) for text, style in row))
    console.print(table)


def render_diff(result: Mapping[str, Any], console: Console) -> None:
    from rich.text import Text

    plain = not console.is_terminal  # on a pipe: never wrapped

    a, b = result["a"]["path"], result["b"]["path"]
    console.print(Text(f"envdoctor diff · A = {safe(a)} ({result['a']['kind']}) · B = {safe(b)} "
                       f"({result['b']['kind']})", style="bold"), soft_wrap=plain)
    diffs = result["differences"]
    if not diffs:
        console.print(Text("No difference in driver, CUDA, torch, cuDNN, NCCL, GPUs, Python, packages or "
                           "environment.", style="green"), soft_wrap=plain)
    else:
        rows: list[tuple[Cell, ...]] = []
        last = None
        for d in diffs:
            judges = ", ".join(f"{j['check']} ({j['a'] or '—'} → {j['b'] or '—'})" for j in d["judged_by"])
            area = d["area"] if d["area"] != last or not console.is_terminal else ""
            rows.append(((area, "cyan"), (safe(d["label"]), ""), (_v(d["a"]), ""), (_v(d["b"]), "bold"),
                         (safe(judges), "dim")))
            last = d["area"]
        _table(console, ("area", "what", "A", "B", "judged by (A → B today)"), rows, no_wrap=("area",))
    if result["verdicts"]:
        _table(console, ("check", "A", "B", "B's finding"),
               [((v["check"], "cyan"), (_v(v["a"]), ""), (_v(v["b"]), "bold"), (_v(v["title_b"] or v["title_a"]), ""))
                for v in result["verdicts"]], title="Checks that judge A and B differently (today's checks)")
    console.print(Text(f"{len(diffs)} difference(s), {len(result['verdicts'])} check(s) judged differently."), soft_wrap=plain)


def render_fleet(result: Mapping[str, Any], console: Console, limit: int = 20) -> None:
    from rich.text import Text

    plain = not console.is_terminal  # on a pipe: never wrapped

    configs = result["configurations"]
    console.print(Text(f"envdoctor fleet · {result['reports']} report(s) · {len(configs)} configuration(s) · "
                       f"{result['healthy_nodes']} without failures · {len(result['corrupt'])} unreadable",
                       style="bold"), soft_wrap=plain)
    rows: list[tuple[Cell, ...]] = []
    differing: list[tuple[str, str]] = []
    for c in configs[:limit]:
        asp = c["aspects"]
        differs = "; ".join(f"{d['label']}: {_v(d['this'])} (majority {_v(d['majority'])})"
                            for d in c["differs_from_majority"][:6])
        more = len(c["differs_from_majority"]) - 6
        nodes = ", ".join(safe(n) for n in c["nodes"][:4]) + (f" … (+{c['count'] - 4})" if c["count"] > 4 else "")
        rows.append(((str(c["id"]) + (" (majority)" if c["majority"] else ""), "green" if c["majority"] else "yellow"),
                     (f"{c['count']}: {nodes}", ""),
                     *((_v(asp.get(k)), "") for k in ("driver", "torch", "torch_build", "cudnn", "nccl", "gpus")),
                     (safe(differs) + (f" (+{more} more)" if more > 0 else ""), "yellow")))
        if differs:
            differing.append((str(c["id"]), rows[-1][-1][0]))
    heads = ("#", "nodes", "driver", "torch", "CUDA", "cuDNN", "NCCL", "GPUs", "differs from the majority")
    if plain:  # one tab-separated line per configuration (`| cut -f9`)
        _table(console, heads, rows, title="Configurations")
    else:
        # On a terminal the differences are lines under the table: as its last column, a narrow
        # terminal broke them to one word per line.
        _table(console, heads[:-1], [row[:-1] for row in rows], title="Configurations")
        for cid, words in differing:
            line = Text(f"#{cid} differs from the majority: ", style="bold")
            line.append(words, style="yellow")
            console.print(line, soft_wrap=True)
    if len(configs) > limit:
        console.print(Text(f"… {len(configs) - limit} more configuration(s) in --json", style="dim"), soft_wrap=plain)
    if result["failures_by_check"]:
        _table(console, ("check", "nodes", "fail", "error", "e.g."),
               [((safe(cid), "cyan"), (str(row["nodes"]), ""), (str(row.get("fail", 0)), ""),
                 (str(row.get("error", 0)), ""), (", ".join(safe(n) for n in row["examples"][:5]), ""))
                for cid, row in list(result["failures_by_check"].items())[:limit]], title="Failures by check")
        _table(console, ("node", "failing checks"),
               [((safe(node), ""), (safe(", ".join(checks)), ""))
                for node, checks in list(result["failures_by_node"].items())[:limit]], title="Failures by node")
        if len(result["failures_by_node"]) > limit:
            console.print(Text(f"… {len(result['failures_by_node']) - limit} more node(s) in --json", style="dim"), soft_wrap=plain)
    for item in result["corrupt"][:limit]:
        console.print(Text(f"skipped: {safe(item['error'])}", style="yellow"), soft_wrap=plain)
    if len(result["corrupt"]) > limit:
        console.print(Text(f"… {len(result['corrupt']) - limit} more unreadable file(s) in --json", style="yellow"), soft_wrap=plain)
