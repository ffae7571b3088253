"""Presentation only: the rich terminal view, Markdown for bug tickets, the healthcheck line.

Every string that came from the machine or a report (GPU names, paths, env values, error texts)
is shown literally: rich markup is never interpreted (we build ``Text`` objects, not markup
strings) and terminal control sequences are made visible instead of being executed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .model import Finding, Status, thaw

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from .report import Report

# C0 and C1 controls (U+009B alone is a CSI on many terminals), line/paragraph separators and
# bidi overrides (they reorder what is shown around them).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
ICONS = {Status.OK: "✔", Status.WARN: "▲", Status.FAIL: "✖", Status.SKIP: "○", Status.ERROR: "⁉"}
STYLES = {Status.OK: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim",
          Status.ERROR: "bold magenta"}


def safe(text: Any) -> str:
    """Make control characters (ESC sequences, BEL, backspace…) visible; keep newlines/tabs."""
    s = text if isinstance(text, str) else str(text)
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], s)


def _value_text(value: Any) -> str:
    value = thaw(value)
    if isinstance(value, str):
        return safe(value)
    return safe(json.dumps(value, ensure_ascii=False, sort_keys=True, default=str))


# -- terminal ----------------------------------------------------------------------------------
def make_console(stderr: bool = False) -> Console:
    from rich.console import Console

    # highlight=False: no automatic colouring of numbers/paths inside data strings;
    # rich itself honours NO_COLOR and non-TTY output.
    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def _headline(report: Report) -> str:
    f = report.facts
    parts = [f"envdoctor {report.envdoctor_version}"]
    if report.origin != "live":
        parts.append(f"re-judging {report.origin}")
    if f.value("python.version"):
        parts.append(f"Python {f.value('python.version')}")
    if f.value("torch.version"):
        parts.append(f"torch {f.value('torch.version')}")
    elif not f.get("torch.version").ok:
        parts.append("torch: " + f.get("torch.version").describe().split(":")[0])
    if f.value("nvml.driver_version"):
        parts.append(f"driver {f.value('nvml.driver_version')}")
    gpus = f.value("nvml.gpus") or f.value("torch.devices") or []
    # A saved report is untrusted input: only well-formed GPU entries make the header.
    gpus = [g for g in gpus if isinstance(g, Mapping)] if isinstance(gpus, (list, tuple)) else []
    if gpus:
        counts: dict[str, int] = {}
        for g in gpus:
            name = str(g.get("name", "?"))
            counts[name] = counts.get(name, 0) + 1
        parts.append(", ".join(f"{n}× {name}" for name, n in sorted(counts.items())))
    if report.compat_as_of:
        parts.append(f"compat table as of {report.compat_as_of}")
    return " · ".join(safe(p) for p in parts)


def target_line(report: Report) -> str | None:
    """``python: /x/.venv/bin/python (VIRTUAL_ENV)``: the interpreter examined and why it was chosen."""
    target = report.facts.value("python.target")
    if not isinstance(target, Mapping) or not target.get("path"):
        return None
    why = target.get("chosen_by")
    return safe(f"python: {target['path']}" + (f" ({why})" if why else ""))


def findings_table(findings: Iterable[Finding], verbose: bool = False) -> Table:
    """One row per finding (skips only with ``verbose``): status, check id, title and the GPUs it names."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True, style="cyan")
    table.add_column("finding")
    for f in findings:
        if f.status is Status.SKIP and not verbose:
            continue
        gpus = f" [GPU {', '.join(map(str, f.gpus))}]" if f.gpus else ""
        table.add_row(Text(f"{ICONS[f.status]} {f.status.value}", style=STYLES[f.status]), Text(f.id),
                      Text(safe(f.title) + gpus))
    return table


def render_terminal(report: Report, console: Console, verbose: bool = False) -> None:
    from rich.panel import Panel
    from rich.text import Text

    console.print(Text(_headline(report), style="bold"))
    examined = target_line(report)
    if examined:
        console.print(Text(examined))
    for w in report.warnings:
        console.print(Text("warning: " + safe(w), style="yellow"))
    console.print(findings_table(report.findings, verbose))
    for f in report.findings:
        if f.status in (Status.WARN, Status.FAIL, Status.ERROR) or (verbose and f.status is not Status.SKIP):
            console.print(Panel(_finding_body(f, verbose), title=Text(f"{f.status.value}: {f.id}"),
                                title_align="left", border_style=STYLES[f.status].replace("bold ", ""),
                                expand=True))
            # Commands go below the panel, unwrapped (soft_wrap), so a copy-paste gets one line.
            for cmd in f.remediation.commands:
                for cmd_line in safe(cmd).splitlines() or [""]:
                    console.print(Text("  " + cmd_line, style="bold"), soft_wrap=True)
    skipped = [f for f in report.findings if f.status is Status.SKIP]
    if skipped and not verbose:
        console.print(Text(f"{len(skipped)} check(s) skipped (-v shows why).", style="dim"))
    if verbose:
        render_facts(report, console)
    s = report.summary
    line = Text("Summary: ")
    for status in (Status.FAIL, Status.ERROR, Status.WARN, Status.OK, Status.SKIP):
        line.append(f"{s[status.value]} {status.value}  ", style=STYLES[status] if s[status.value] else "dim")
    console.print(line)


def _finding_body(f: Finding, verbose: bool) -> Any:
    from rich.text import Text

    body = Text()
    body.append(safe(f.title), style="bold")
    if f.detail:
        body.append("\n" + safe(f.detail))
    if f.evidence:
        body.append("\n\nEvidence:", style="dim")
        for key, value in f.evidence.items():
            body.append(f"\n  {safe(key)} = ", style="dim")
            body.append(_value_text(value))
    r = f.remediation
    if r:
        body.append("\n\nWhat to do: ", style="bold green")
        if r.text:
            body.append(safe(r.text))
        if r.commands:
            body.append("\n  (commands below)", style="dim")
        for link in r.links:
            body.append("\n  ↗ " + safe(link), style="blue")
    return body


def render_facts(report: Report, console: Console) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(title="Facts", box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column("fact", style="cyan", no_wrap=True)
    table.add_column("value")
    table.add_column("source", style="dim")
    for key in sorted(report.facts):
        r = report.facts[key]
        value = Text(_value_text(r.value)[:300]) if r.ok else Text(safe(r.describe()), style="yellow")
        table.add_row(Text(key), value, Text(safe(r.source)))
    console.print(table)
    probes = [p for p in report.probes]
    if probes:
        console.print(Text("Probes: " + ", ".join(f"{p.name} {p.status} {p.seconds:.2f}s" for p in probes),
                           style="dim"))


# -- Markdown ----------------------------------------------------------------------------------
def _md(text: Any) -> str:
    """Inline Markdown-safe text for a table cell or a sentence."""
    s = safe(text).replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`").replace("<", "&lt;")
    return s.replace("\n", " ")


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def render_markdown(report: Report) -> str:
    out = ["### envdoctor report", "", _md(_headline(report)), ""]
    s = report.summary
    out.append(" · ".join(f"**{s[st.value]}** {st.value}" for st in
                          (Status.FAIL, Status.ERROR, Status.WARN, Status.OK, Status.SKIP)))
    out += ["", "| status | check | finding |", "| --- | --- | --- |"]
    for f in report.findings:
        gpus = f" (GPU {', '.join(map(str, f.gpus))})" if f.gpus else ""
        out.append(f"| {ICONS[f.status]} {f.status.value} | `{f.id}` | {_md(f.title)}{gpus} |")
    problems = [f for f in report.findings if f.status in (Status.WARN, Status.FAIL, Status.ERROR)]
    for f in problems:
        out += ["", f"#### {f.status.value}: `{f.id}` — {_md(f.title)}", ""]
        if f.detail:
            out += [_md(f.detail), ""]
        r = f.remediation
        if r:
            if r.text:
                out += [f"**What to do:** {_md(r.text)}", ""]
            if r.commands:
                body = "\n".join(safe(c) for c in r.commands)
                fence = _fence(body)
                out += [f"{fence}sh", body, fence, ""]
            for link in r.links:
                out.append(f"- <{safe(link)}>")
    from .report import json_text

    facts_json = json_text(report.facts.to_dict(thawed=False), indent=1)
    fence = _fence(facts_json)
    out += ["", "<details><summary>Facts (envdoctor report --json has everything)</summary>", "",
            f"{fence}json", facts_json, fence, "", "</details>", ""]
    return "\n".join(out)


# -- healthcheck -------------------------------------------------------------------------------
def healthcheck_line(findings: Iterable[Finding], seconds: float, hung: Iterable[str] = ()) -> tuple[bool, str]:
    bad = [f for f in findings if f.status in (Status.FAIL, Status.ERROR)]
    hung = list(hung)
    healthy = not bad and not hung
    if healthy:
        return True, f"healthy ({seconds:.2f}s)"
    # A hang is the most urgent news (a wedged driver), then envdoctor errors, then failures.
    bad.sort(key=lambda f: f.status is not Status.ERROR)
    parts = [f"probe {h} hung" for h in hung] + [f"{f.id}: {f.title}" for f in bad[:3]]
    more = f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""
    return False, safe(f"unhealthy ({seconds:.2f}s): " + "; ".join(parts) + more)
