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

from envdoctor.model import Finding, Reason, Status, thaw

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from envdoctor.output.examined import Examined
    from envdoctor.report import Report

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
    from envdoctor.process.encoding import console_width

    return Console(stderr=stderr, highlight=False, soft_wrap=False, width=console_width())


def _headline(report: Report) -> str:
    f = report.facts
    parts = [f"envdoctor {report.envdoctor_version}"]
    if report.origin != "live":
        parts.append(f"re-judging {report.origin}")
    if f.value("python.version"):
        parts.append(f"Python {f.value('python.version')}")
    if f.value("torch.version"):
        parts.append(f"torch {f.value('torch.version')}")
    elif f.get("torch.version").reason not in (None, Reason.NOT_COLLECTED):  # healthcheck/exec never probe torch
        parts.append("torch: " + f.get("torch.version").describe().split(":")[0])
    if f.value("nvml.driver_version"):
        parts.append(f"driver {f.value('nvml.driver_version')}")
    gpu_part = gpu_words(f)
    if gpu_part:
        parts.append(gpu_part)
    if report.compat_as_of:
        parts.append(f"compat table as of {report.compat_as_of}")
        from envdoctor.knowledge import compat  # a report's torch newer than the table says so (issue 22)

        if newer := compat.torch_newer_than_table(f.value("torch.version")):
            parts.append(newer)
    return " · ".join(safe(p) for p in parts)


def gpu_words(facts: Any) -> str:
    """The GPUs of the header: ``8× NVIDIA H100 80GB HBM3``, or, when none was found, ``no NVIDIA
    GPU`` with what said so, so a box without one never shows only a green screen. Unknown is not
    none: GPUs that could not be read say so; a text that does not show them says nothing here
    (the headline says what it does not show)."""
    gpus = facts.value("nvml.gpus") or facts.value("torch.devices") or []
    # A saved report is untrusted input: only well-formed GPU entries make the header.
    gpus = [g for g in gpus if isinstance(g, Mapping)] if isinstance(gpus, (list, tuple)) else []
    if gpus:
        counts: dict[str, int] = {}
        for g in gpus:
            name = str(g.get("name", "?"))
            counts[name] = counts.get(name, 0) + 1
        return ", ".join(f"{n}× {name}" for name, n in sorted(counts.items()))
    nvml, pci = facts.get("nvml.gpus"), facts.get("driver.pci_gpus")
    on_bus = [g for g in pci.value if isinstance(g, Mapping)] if pci.ok and isinstance(pci.value, (list, tuple)) else []
    if on_bus:  # on the bus, but no driver reading names them
        why = nvml.reason.value if nvml.reason is not None else "it lists none"
        return f"{len(on_bus)} NVIDIA GPU(s) on the PCI bus, none answering NVML ({why})"
    if nvml.ok or (nvml.reason is Reason.ABSENT and pci.ok):  # NVML and the bus show none
        return "no NVIDIA GPU" + (" (no NVIDIA driver)" if nvml.reason is Reason.ABSENT else "")
    if nvml.reason is Reason.ABSENT:  # no NVIDIA driver at all, the bus not read
        return "no NVIDIA GPU found (no NVIDIA driver)"
    if pci.ok:  # the bus was read and shows none, whatever NVML said
        return "no NVIDIA GPU (none on the PCI bus)"
    if nvml.reason in (None, Reason.NOT_COLLECTED, Reason.NOT_IN_REPORT):
        return ""
    return f"GPUs not read (NVML: {nvml.reason.value})"


def target_line(report: Report) -> str | None:
    """``python: /x/.venv/bin/python (VIRTUAL_ENV)``: the interpreter examined and why it was chosen."""
    target = report.facts.value("python.target")
    if not isinstance(target, Mapping) or not target.get("path"):
        return None
    why = target.get("chosen_by")
    return safe(f"python: {target['path']}" + (f" ({why})" if why else ""))


#: The order findings are shown in: the problems first (fail, then envdoctor's own errors, then
#: warnings), then what passed and what did not apply.
ORDER = {Status.FAIL: 0, Status.ERROR: 1, Status.WARN: 2, Status.OK: 3, Status.SKIP: 4}
PROBLEMS = (Status.FAIL, Status.ERROR, Status.WARN)


def problems_first(findings: Iterable[Finding]) -> list[Finding]:
    """fail → error → warn → ok → skip; within a status, in check order (stable)."""
    return sorted(findings, key=lambda f: ORDER[f.status])


def _gpus(f: Finding) -> str:
    return f" [GPU {', '.join(map(str, f.gpus))}]" if f.gpus else ""


def findings_table(findings: Iterable[Finding], verbose: bool = False, problems_only: bool = False) -> Table:
    """One row per finding, problems first (skips only with ``verbose``; with ``problems_only``
    just fail/error/warn): status, check id, title and the GPUs it names."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True, style="cyan")
    table.add_column("finding")
    for f in problems_first(findings):
        if (f.status is Status.SKIP and not verbose) or (problems_only and f.status not in PROBLEMS):
            continue
        table.add_row(Text(f"{ICONS[f.status]} {f.status.value}", style=STYLES[f.status]), Text(f.id),
                      Text(safe(f.title) + _gpus(f)))
    return table


def _plain_rows(findings: list[Finding], console: Console) -> None:
    """The findings table for a pipe or a file: columns aligned with spaces, nothing wrapped,
    no padding after the last column (so no trailing spaces)."""
    from rich.text import Text

    width = max((len(f.id) for f in findings), default=0)
    for f in findings:
        line = Text(f"{ICONS[f.status]} {f.status.value:<6} ", style=STYLES[f.status])
        line.append(f"{f.id:<{width}}  ", style="cyan")
        line.append(safe(f.title) + _gpus(f))
        console.print(line, soft_wrap=True)


def what_was_examined(report: Report) -> Examined:
    """What the report's findings say was passed, not judged (and why) and not applicable."""
    from envdoctor.output.examined import Examined

    return Examined.of(report.findings, report.facts, report.origin)


def _count_line(report: Report, verbose: bool, hint: bool = True) -> str:
    """``13 ok · 40 could not be judged: not in the text · 5 not applicable here``: what passed kept
    apart from what the report does not show."""
    parts = what_was_examined(report).counts()
    if not parts:
        return ""
    return " · ".join(parts) + ("" if verbose or not hint else " — -v lists them with why")


def render_terminal(report: Report, console: Console, verbose: bool = False, verbose_hint: bool = True) -> None:
    """Problems first: the fail/error/warn rows, one line counting the rest (the rows with ``-v``),
    a block per problem in the same order with its commands outside any box, and a summary naming
    the failing checks. On a terminal the rows and blocks are a rich table and panels; on a pipe
    or a file (``console.is_terminal`` false) plain lines, never wrapped, without trailing spaces,
    so URLs and commands stay whole."""
    from rich.text import Text

    plain = not console.is_terminal
    console.print(Text(_headline(report), style="bold"), soft_wrap=plain)
    examined = target_line(report)
    if examined:
        console.print(Text(examined), soft_wrap=plain)
    for w in report.warnings:
        console.print(Text("warning: " + safe(w), style="yellow"), soft_wrap=plain)
    ordered = problems_first(report.findings)
    problems = [f for f in ordered if f.status in PROBLEMS]
    rows = [f for f in ordered if verbose or f.status in PROBLEMS]
    if not problems:
        seen = what_was_examined(report)
        console.print(Text(seen.headline() or "", style="green" if seen.passed else "yellow"), soft_wrap=plain)
    if rows and plain:
        _plain_rows(rows, console)
    elif rows:
        console.print(findings_table(ordered, verbose, problems_only=not verbose))
    count = _count_line(report, verbose, verbose_hint)
    if count:
        console.print(Text(count, style="dim"), soft_wrap=plain)
    shown: set[str] = set()  # each command once per screen: a later block points above
    for f in ordered:
        if f.status in PROBLEMS or (verbose and f.status is Status.OK):
            _render_block(f, console, verbose, plain, shown)
    if verbose:
        render_facts(report, console)
    console.print(summary_text(report), soft_wrap=plain)


def summary_text(report: Report) -> Any:
    """``Summary: 1 fail (torch-arch-support) · 0 error · 2 warn (a, b) · 13 ok · 30 skip``."""
    from rich.text import Text

    line = Text("Summary: ")
    seen = what_was_examined(report)
    for n, status in enumerate((Status.FAIL, Status.ERROR, Status.WARN, Status.OK, Status.SKIP)):
        ids = [f.id for f in report.findings if f.status is status] if status in PROBLEMS else []
        named = f" ({_some(list(dict.fromkeys(ids)))})" if ids else ""
        if status is Status.SKIP and seen.unjudged_count:
            # Skips are not all "does not apply": say how many the report could not judge, and why.
            why = next(iter(seen.unjudged)) if len(seen.unjudged) == 1 else "could not be judged"
            named = f" ({seen.unjudged_count} {why})"
        line.append(("" if n == 0 else " · ") + f"{len(ids) if ids else report.summary[status.value]} "
                    f"{status.value}{named}", style=STYLES[status] if report.summary[status.value] else "dim")
    return line


def _some(names: list[str], most: int = 10) -> str:
    """``a, b, c`` — at most ``most`` names, then ``+N more``."""
    return ", ".join(names[:most]) + (f", +{len(names) - most} more" if len(names) > most else "")


def _render_block(f: Finding, console: Console, verbose: bool, plain: bool, shown: set[str] | None = None) -> None:
    """One problem's block, then its commands; ``shown``: the commands earlier blocks of this screen
    printed, said here as "above" instead of again (and this block's added to it)."""
    from rich.panel import Panel
    from rich.text import Text

    shown = set() if shown is None else shown
    body = _finding_body(f, verbose, title=not plain, printed=shown)
    if plain:
        head = Text(f"\n{ICONS[f.status]} {f.status.value}: {f.id}", style=STYLES[f.status])
        head.append(" — " + safe(f.title) + _gpus(f), style="bold")
        console.print(head, soft_wrap=True)
        for line in body.split("\n"):
            if line.plain.strip():
                console.print(Text("  ") + line, soft_wrap=True)
    else:
        console.print(Panel(body, title=Text(f"{f.status.value}: {f.id}"), title_align="left",
                            border_style=STYLES[f.status].replace("bold ", ""), expand=True))
    # Commands go below the block, never wrapped (soft_wrap), so a copy-paste gets one line each.
    for text, style in remedy_lines(f.remediation, shown):
        console.print(Text(text, style=style), soft_wrap=True)
    shown.update(all_commands(f.remediation))


def _options(r: Any) -> list[Any]:
    """The alternatives of a remediation (each one text + commands), when it has any: one of them
    is to be done, not all (``either … or …``)."""
    return [a for a in (getattr(r, "alternatives", None) or ()) if a]


def _commands_of(option: Any) -> tuple[str, ...]:
    if isinstance(option, str):
        return (option,)
    if isinstance(option, (list, tuple)):
        return tuple(str(c) for c in option)
    return tuple(getattr(option, "commands", ()) or ())


def all_commands(r: Any) -> list[str]:
    """Every command a remediation prints (its own steps, then each alternative's)."""
    out = list(getattr(r, "commands", ()) or ())
    for option in _options(r):
        out += _commands_of(option)
    return out


def remedy_lines(r: Any, shown: Iterable[str] = ()) -> list[tuple[str, str]]:
    """(line, style) for a remediation's commands, each once and whole: its own steps in order,
    then its alternatives as ``either: …`` / ``or: …`` with each one's commands under it. A command
    in ``shown`` (printed above on this screen) is not printed again: an alternative made only of
    such commands says "(the command above)"."""
    above = set(shown)
    lines: list[tuple[str, str]] = []
    for cmd in getattr(r, "commands", ()) or ():
        if cmd not in above:
            lines += [("    " + cmd_line, "bold") for cmd_line in safe(cmd).splitlines() or [""]]
    for n, option in enumerate(_options(r)):
        words = safe(getattr(option, "text", "") or "")
        fresh = [cmd for cmd in _commands_of(option) if cmd not in above]
        note = " (the command above)" if _commands_of(option) and not fresh else ""
        lines.append(("  " + ("either" if n == 0 else "or") + (f": {words}" if words else ":") + note, "bold green"))
        for cmd in fresh:
            lines += [("    " + cmd_line, "bold") for cmd_line in safe(cmd).splitlines() or [""]]
    return lines


def _without_commands(text: str, commands: Iterable[str], above: Iterable[str] = ()) -> str:
    """Prose that quotes a command the block prints anyway says so instead: each command once. A
    quoted command (`` `nvidia-smi -L` ``) is replaced with its quotes."""
    above = set(above)
    for cmd in commands:
        if cmd and cmd in text:
            where = "the command above" if cmd in above else "the command below"
            text = text.replace(f"`{cmd}`", where).replace(cmd, where)
    return text


def _finding_body(f: Finding, verbose: bool, title: bool = True, printed: Iterable[str] = ()) -> Any:
    """Title, detail, the evidence (without ``verbose`` only its first entry: checks list the fact
    that decided the verdict first), what to do and the links. Commands are not in here; those in
    ``printed`` (by an earlier block) are pointed to as above."""
    from rich.text import Text

    above = set(printed)
    commands = all_commands(f.remediation)
    body = Text()
    if title:
        body.append(safe(f.title) + "\n", style="bold")
    if f.detail:
        body.append(safe(_without_commands(f.detail, commands, above)))
    if f.evidence:
        shown = list(f.evidence.items()) if verbose else list(f.evidence.items())[:1]
        for key, value in shown:
            body.append(f"\nEvidence: {safe(key)} = ", style="dim")
            body.append(_value_text(value))
        if len(shown) < len(f.evidence):
            body.append(f" (+{len(f.evidence) - len(shown)} more with -v)", style="dim")
    r = f.remediation
    if r:
        if r.text or commands:
            body.append("\nWhat to do: ", style="bold green")
            body.append(safe(_without_commands(r.text, commands, above)) if r.text else "")
            below = [c for c in commands if c not in above]
            if below and len(below) < len(commands):
                body.append(" (commands below, and above)", style="dim")
            elif below:
                body.append(" (commands below)" if len(below) > 1 else " (command below)", style="dim")
            elif commands:
                body.append(" (commands above)" if len(commands) > 1 else " (command above)", style="dim")
        for link in r.links:
            body.append("\n↗ " + safe(link), style="blue")
    return body


def render_facts(report: Report, console: Console) -> None:
    """``-v``: every fact as a ``key = value  (source)`` line, the value whole (JSON for a list or an
    object), never cut and never wrapped by envdoctor, at any width, on a terminal and on a pipe:
    the facts are the evidence, and a table squeezes them into a narrow column."""
    from rich.text import Text

    console.print(Text("\nFacts", style="bold"))
    for key in sorted(report.facts):
        r = report.facts[key]
        value = Text(_value_text(r.value)) if r.ok else Text(safe(r.describe()), style="yellow")
        line = Text(f"  {key} = ", style="cyan") + value
        if r.source:
            line.append(f"  ({safe(r.source)})", style="dim")
        console.print(line, soft_wrap=True)
    probes = [p for p in report.probes]
    if probes:
        console.print(Text("Probes: " + ", ".join(f"{p.name} {p.status} {p.seconds:.2f}s" for p in probes),
                           style="dim"), soft_wrap=True)


# -- Markdown ----------------------------------------------------------------------------------
def _md(text: Any) -> str:
    """Inline Markdown-safe text for a table cell or a sentence."""
    s = safe(text).replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`").replace("<", "&lt;")
    return s.replace("\n", " ")


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


#: GitHub refuses an issue or comment body over 65,536 characters; the report stays under this,
#: leaving room for the words the user writes around it.
MARKDOWN_LIMIT = 60_000


def _html(text: Any) -> str:
    """Text inside an HTML element (the ``<summary>`` line): escaped, one line."""
    return safe(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")


def _summary_words(report: Report) -> str:
    """``1 fail (torch-arch-support) · 0 error · 2 warn (a, b) · 13 ok · 30 skip``."""
    return summary_text(report).plain.removeprefix("Summary: ")


def _md_row(f: Finding) -> str:
    gpus = f" (GPU {', '.join(map(str, f.gpus))})" if f.gpus else ""
    return f"| {ICONS[f.status]} {f.status.value} | `{f.id}` | {_md(f.title)}{gpus} |"


def _md_commands(commands: Iterable[str]) -> list[str]:
    body = "\n".join(safe(c) for c in commands)
    if not body:
        return []
    fence = _fence(body)
    return [f"{fence}sh", body, fence, ""]


def _md_block(f: Finding, shown: Iterable[str] = ()) -> list[str]:
    """One problem: heading, detail, what to do, the commands (each once, in a shell fence; the
    alternatives as *Either* … *or* …), the links. A command in ``shown`` (an earlier block of this
    report printed it) is not printed again, as on the screen."""
    above = set(shown)
    r = f.remediation
    commands = all_commands(r)
    out = [f"#### {ICONS[f.status]} {f.status.value}: `{f.id}` — {_md(f.title)}", ""]
    if f.detail:
        out += [_md(_without_commands(f.detail, commands, above)), ""]
    if f.evidence:
        key, value = next(iter(f.evidence.items()))
        out += [f"Evidence: `{_md(key)}` = {_md(_value_text(value)[:300])}", ""]
    own_above = bool(r.commands) and all(c in above for c in r.commands)
    pointer = (" (commands above)" if len(r.commands) > 1 else " (command above)") if own_above else ""
    if r.text or pointer:
        words = _md(_without_commands(r.text, commands, above)) if r.text else pointer.strip(" ()")
        out += [f"**What to do:** {words}{pointer if r.text else ''}", ""]
    out += _md_commands(c for c in r.commands if c not in above)
    for n, option in enumerate(_options(r)):
        words = _md(getattr(option, "text", "") or "")
        fresh = [c for c in _commands_of(option) if c not in above]
        note = " (the command above)" if _commands_of(option) and not fresh else ""
        out += [("*Either*" if n == 0 else "*or*") + (f" {words}" if words else ":") + note, ""]
        out += _md_commands(fresh)
    out += [f"- <{safe(link)}>" for link in r.links]
    return out + ([""] if r.links else [])


def _md_facts(report: Report, budget: int) -> list[str] | None:
    """The facts, folded, as JSON; None when they do not fit in ``budget`` characters (written in
    pieces and given up as soon as they pass it: a 50 MB report is never rendered whole)."""
    from envdoctor.report import json_chunks

    pieces: list[str] = []
    size = 0
    for piece in json_chunks(report.facts.to_dict(thawed=False), indent=1):
        size += len(piece)
        if size > budget:
            return None
        pieces.append(piece)
    facts_json = "".join(pieces)
    fence = _fence(facts_json)
    return ["<details><summary>Facts (<code>envdoctor report --json</code> has everything)</summary>", "",
            f"{fence}json", facts_json, fence, "", "</details>", ""]


def render_markdown(report: Report, limit: int = MARKDOWN_LIMIT) -> str:
    """The whole report as one ``<details>`` block for a ticket: its summary line the counts and the
    failing ids; inside, the problems first with their remedies, the passing checks in one table,
    the facts folded; skips omitted. Kept under ``limit`` characters: what does not fit is cut
    (the facts first, then the passing rows, then the last problems' details), with a note."""
    ordered = problems_first(report.findings)
    problems = [f for f in ordered if f.status in PROBLEMS]
    passing = [f for f in ordered if f.status is Status.OK]
    examined = target_line(report)
    head = [f"<details><summary>envdoctor: {_html(_summary_words(report))}</summary>", "", _md(_headline(report)), "",
            *([_md(examined), ""] if examined else [])]
    table = ["| status | check | finding |", "| --- | --- | --- |"]
    tail = ["</details>", ""]
    cut: list[str] = []
    # What must fit: the head, the problem rows and their blocks (as many as fit, in order).
    reserve = 1000  # for the note of what was cut and the closing lines
    body = list(head)
    used = sum(len(line) + 1 for line in body)
    seen = what_was_examined(report)
    if not problems:
        body += [_md(seen.headline() or ""), ""]
    else:
        body += table
        # Rows of problems take at most half of the room: the blocks with the remedies matter more.
        for n, f in enumerate(problems):
            row = _md_row(f)
            if used + len(row) + 1 > limit // 2:
                cut.append(f"the rows of {len(problems) - n} more problem(s)")
                break
            body.append(row)
            used += len(row) + 1
        body.append("")
    shown: set[str] = set()  # each command once per report: a later block points above
    for n, f in enumerate(problems):
        block = _md_block(f, shown)
        size = sum(len(line) + 1 for line in block)
        if used + size > limit - reserve:
            cut.append(f"the details of {len(problems) - n} problem(s) ({_some([g.id for g in problems[n:]])})")
            break
        body += block
        used += size
        shown.update(all_commands(f.remediation))
    if passing:
        rows = ["<details><summary>" + f"{len(passing)} passing check(s)</summary>", "", *table,
                *[_md_row(f) for f in passing], "", "</details>", ""]
        size = sum(len(line) + 1 for line in rows)
        if used + size > limit - reserve:
            cut.append(f"the {len(passing)} passing check(s)")
        else:
            body += rows
            used += size
    facts = _md_facts(report, limit - reserve - used) if not cut else None
    if facts is None:
        cut.insert(0, f"the {len(report.facts)} facts")
    else:
        body += facts
    if seen.unjudged_count:
        body += [f"{_md(seen.unjudged_words())}; omitted here.", ""]
    if seen.not_applicable:
        body += [f"{seen.not_applicable} check(s) that do not apply here are omitted.", ""]
    if cut:
        body += [f"**Cut to stay under {limit:,} characters:** {'; '.join(cut)}. "
                 "`envdoctor report --json -o report.json` has everything (attach the file).", ""]
    return "\n".join(body + tail)


# -- healthcheck -------------------------------------------------------------------------------
def healthcheck_line(findings: Iterable[Finding], seconds: float, hung: Iterable[str] = ()) -> tuple[bool, str]:
    findings = list(findings)
    bad = [f for f in findings if f.status in (Status.FAIL, Status.ERROR)]
    hung = list(hung)
    if not bad and not hung:
        # Unknown is never healthy: a run in which every check skipped judged nothing (the engines'
        # verdict, envdoctor/output/engines.py, says unknown for the same run).
        if not any(f.status in (Status.OK, Status.WARN) for f in findings):
            return False, f"unhealthy ({seconds:.2f}s): nothing could be judged (every check skipped)"
        return True, f"healthy ({seconds:.2f}s)"
    # A hang is the most urgent news (a wedged driver), then envdoctor errors, then failures.
    bad.sort(key=lambda f: f.status is not Status.ERROR)
    parts = [f"probe {h} hung" for h in hung] + [f"{f.id}: {f.title}" for f in bad[:3]]
    more = f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""
    return False, safe(f"unhealthy ({seconds:.2f}s): " + "; ".join(parts) + more)
