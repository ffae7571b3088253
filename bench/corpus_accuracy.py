"""Print how the built-in checks judge every case of tests/corpus: a per-case table and the
accuracy numbers issue 4 sets as the bar (broken cases: the expected check is the first `fail`
after sort_findings; healthy cases: no `fail` at all).

Run: python bench/corpus_accuracy.py [--json]
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from envdoctor.inputs import decode
from envdoctor.model import Status
from envdoctor.parsers import ParseError, detect_formats, parse_text
from envdoctor.pipeline.diagnose import diagnose, sort_findings
from envdoctor.registry import load_registry

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "corpus"
HEALTHY = "healthy"


@dataclass(frozen=True)
class Outcome:
    file: str
    expected: str
    got: str  # first failing check id, "healthy" when none fails, "parse-error: …" when unreadable
    fails: tuple[str, ...]
    top_warn: str = ""  # first warning, shown when nothing fails (a paste too short to prove a fail)
    kind: str = "report"  # "report" (collect_env and/or nvidia-smi) or "messages" (torch's own lines, a banner)
    shape: str = ""  # the case's shape of text, as cases.json records it
    remedy: str = ""  # what the thread says to do (a phrase the top finding's remedy must contain), "" if none
    said: str = ""  # the top failing finding's remedy: its words and commands

    @property
    def remedy_right(self) -> bool:
        return self.correct and self.remedy.lower() in self.said.lower()

    @property
    def correct(self) -> bool:
        return self.got == self.expected


def load_cases(corpus: Path = CORPUS) -> list[dict]:
    return list(json.loads((corpus / "cases.json").read_text(encoding="utf-8"))["cases"])


def judge(case: dict, registry, corpus: Path = CORPUS) -> Outcome:  # type: ignore[no-untyped-def]
    text = decode((corpus / case["file"]).read_bytes(), case["file"])
    kind = "messages" if detect_formats(text) in (["torch-messages"], ["ultralytics"]) else "report"
    try:
        facts = parse_text(text)
    except ParseError as exc:
        return Outcome(case["file"], case["expected"], f"parse-error: {exc}", (), kind=kind,
                       shape=case.get("shape", ""), remedy=case.get("remedy", ""))
    findings = sort_findings(diagnose(facts, registry))
    fails = tuple(f.id for f in findings if f.status is Status.FAIL)
    warns = [f.id for f in findings if f.status is Status.WARN]
    top = next((f for f in findings if f.status is Status.FAIL), None)
    said = " ".join([top.remediation.text, *top.remediation.commands]) if top is not None else ""
    return Outcome(case["file"], case["expected"], fails[0] if fails else HEALTHY, fails, warns[0] if warns else "",
                   kind, case.get("shape", ""), case.get("remedy", ""), said)


def evaluate(corpus: Path = CORPUS) -> tuple[list[Outcome], dict[str, float | int]]:
    registry = load_registry(plugins=False)
    outcomes = [judge(c, registry, corpus) for c in load_cases(corpus)]
    broken = [o for o in outcomes if o.expected != HEALTHY]
    healthy = [o for o in outcomes if o.expected == HEALTHY]
    right = sum(o.correct for o in broken)
    # Supplementary, never the bar: the first problem a user would read (the first fail, else the
    # first warning) — what a truncated paste that cannot prove a fail still points at.
    top_problem = sum(o.correct or (not o.fails and o.top_warn == o.expected) for o in broken)
    false_fails = sum(bool(o.fails) for o in healthy)
    stats: dict[str, float | int] = {
        "cases": len(outcomes),
        "broken": len(broken),
        "broken_right": right,
        "broken_accuracy": right / len(broken) if broken else 1.0,
        "broken_top_problem_right": top_problem,
        "root_causes": len({o.expected for o in broken}),
        "shapes": len({o.shape for o in outcomes}),
        # The exact remedy, where the thread gives one (cases.json's `remedy`): the right top finding
        # and its remedy names what the thread did.
        "with_remedy": sum(bool(o.remedy) for o in broken),
        "remedy_right": sum(o.remedy_right for o in broken if o.remedy),
        "healthy": len(healthy),
        "healthy_with_fail": false_fails,
        # The same bar split by what the paste holds: a collect_env / nvidia-smi report, or only
        # torch's own warning and error lines (which carry fewer facts and map more directly).
        "broken_reports": sum(o.kind == "report" for o in broken),
        "broken_reports_right": sum(o.correct for o in broken if o.kind == "report"),
        "broken_messages": sum(o.kind == "messages" for o in broken),
        "broken_messages_right": sum(o.correct for o in broken if o.kind == "messages"),
    }
    return outcomes, stats


def breakdown(outcomes: list[Outcome], by: str) -> dict[str, tuple[int, int, int]]:
    """``shape`` or ``expected`` -> (cases, right, healthy cases with a fail)."""
    rows: dict[str, list[int]] = {}
    for o in outcomes:
        row = rows.setdefault(getattr(o, by) or "?", [0, 0, 0])
        row[0] += 1
        row[1] += o.correct
        row[2] += o.expected == HEALTHY and bool(o.fails)
    return {k: (v[0], v[1], v[2]) for k, v in sorted(rows.items())}


def _print_breakdown(title: str, rows: dict[str, tuple[int, int, int]]) -> None:
    print(f"\n{title:32}  cases  right  accuracy  healthy-fails")
    for name, (n, right, false_fails) in rows.items():
        print(f"{name:32}  {n:5}  {right:5}  {100 * right / n:7.0f}%  {false_fails:13}")


def main(argv: list[str]) -> int:
    outcomes, stats = evaluate()
    if "--json" in argv:
        print(json.dumps({"cases": [asdict(o) | {"correct": o.correct, "remedy_right": o.remedy_right}
                                    for o in outcomes], "stats": stats}, indent=1))
        return 0
    width = max(len(o.file) for o in outcomes)
    print(f"{'case':{width}}  {'expected':24}  {'top fail':24}  ok  {'paste':8}  other fails")
    for o in outcomes:
        rest = ", ".join(f for f in o.fails[1:]) or "-"
        print(f"{o.file:{width}}  {o.expected:24}  {o.got[:24]:24}  {'✓' if o.correct else '✗'}   {o.kind:8}  {rest}")
    _print_breakdown("shape", breakdown(outcomes, "shape"))
    _print_breakdown("cause (expected)", breakdown(outcomes, "expected"))
    print()
    print(f"broken cases: {stats['broken_right']}/{stats['broken']} right "
          f"({100 * stats['broken_accuracy']:.0f}%, bar 90%)")
    print(f"  of which collect_env/nvidia-smi reports: {stats['broken_reports_right']}/{stats['broken_reports']}; "
          f"torch's messages only: {stats['broken_messages_right']}/{stats['broken_messages']}")
    if stats["with_remedy"]:
        print(f"exact remedy where the thread gives one: {stats['remedy_right']}/{stats['with_remedy']} "
              f"({100 * stats['remedy_right'] / stats['with_remedy']:.0f}%, bar 80%)")
        missed = [o.file for o in outcomes if o.remedy and not o.remedy_right]
        if missed:
            print("  remedy missed: " + ", ".join(missed))
    print(f"healthy cases: {stats['healthy_with_fail']}/{stats['healthy']} with a fail (bar 0)")
    print(f"cases: {stats['cases']} ({stats['broken']} broken over {stats['root_causes']} root causes, "
          f"{stats['healthy']} healthy, {stats['shapes']} shapes)")
    print(f"supplementary: {stats['broken_top_problem_right']}/{stats['broken']} broken cases have the expected "
          "check as their first problem (first fail, else first warning)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
