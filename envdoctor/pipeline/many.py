"""Judging many saved reports or pastes in one process: ``diagnose FILE… | DIR`` and
``fleet --rejudge``, through the pipeline's one :func:`~envdoctor.pipeline.judge.judge`.

One process pays click, the registry and the checks' imports once (the pipeline caches them);
each file then costs only its own reading and judging. A saved report's old findings are not read
(they are judged again), and an unusable file is one result line with its reason, never the end of
the batch.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from envdoctor.pipeline.plan import Plan
from envdoctor.process.lifecycle import ExitCode


@dataclass(frozen=True)
class Judged:
    """One file's result: its report (re-judged), or why it could not be read."""

    path: str
    report: Any = None
    error: str = ""

    def exit_code(self, fail_on: str = "fail") -> int:
        return ExitCode.USAGE if self.report is None else int(self.report.exit_code(fail_on))


def origin_of(path: str, loaded: Any) -> str:
    from envdoctor.model import Facts

    kind = "paste" if isinstance(loaded, Facts) else "report"
    return f"{kind}:{'stdin' if path == '-' else os.path.basename(path)}"


def judge_path(path: str, plan: Plan | None = None) -> Judged:
    """One file through the one loader and today's checks (``plan``: ``--only``/``--skip``); never
    raises on bad input (a registry that cannot load raises RegistryError)."""
    from envdoctor.inputs import load
    from envdoctor.model import Facts
    from envdoctor.pipeline.judge import judge
    from envdoctor.report import ReportError

    try:
        loaded = load(path, findings=False)
    except ReportError as exc:
        return Judged(path, error=str(exc))
    except RecursionError:
        return Judged(path, error=f"{path} is nested too deeply to be an envdoctor report")
    facts, runs = (loaded, ()) if isinstance(loaded, Facts) else (loaded.facts, loaded.probes)
    report = judge(facts, runs, origin_of(path, loaded), plan or Plan(command="diagnose"))
    if not isinstance(loaded, Facts) and loaded.warnings:  # what loading found (saved findings ignored)
        from dataclasses import replace

        report = replace(report, warnings=(*report.warnings, *loaded.warnings))
    return Judged(path, report)


def expand(items: Iterable[str]) -> Iterator[str]:
    """Files named, and the files of folders named (sorted, hidden ones left out)."""
    for item in items:
        if os.path.isdir(item):
            for root, dirs, files in os.walk(item):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if not name.startswith("."):
                        yield os.path.join(root, name)
        else:
            yield item


def worst_exit(codes: Iterable[int]) -> int:
    """The batch's exit code: the worst of its files' (3 could not complete > 2 unusable input >
    1 a failure > 0)."""
    return max(codes, default=ExitCode.USAGE)


def summary_record(judged: Judged, fail_on: str = "fail") -> dict[str, Any]:
    """One file's result as JSON: its exit code, counts and the findings that are not ok."""
    from envdoctor.redact import redact_text

    out: dict[str, Any] = {"file": redact_text(judged.path), "exit_code": judged.exit_code(fail_on)}
    if judged.report is None:
        out["error"] = redact_text(judged.error)
        return out
    rep = judged.report
    out["summary"] = rep.summary
    out["findings"] = [{"id": f.id, "status": f.status.value, "title": f.title}
                       for f in rep.findings if f.status.value in ("fail", "error", "warn")]
    return out


def summary_line(judged: Judged, fail_on: str = "fail") -> str:
    from envdoctor.inputs import shown_name
    from envdoctor.redact import redact_text

    name = shown_name(redact_text(judged.path))
    if judged.report is None:
        return f"{name}: unusable: {shown_name(redact_text(judged.error))}"
    counts = judged.report.summary
    worst = counts.get("worst", "ok")
    parts = [f"{counts.get(k, 0)} {k}" for k in ("fail", "error", "warn") if counts.get(k)]
    failing = [f.id for f in judged.report.findings if f.status.value in ("fail", "error")]
    tail = f" ({', '.join(failing[:8])}{', …' if len(failing) > 8 else ''})" if failing else ""
    return f"{name}: {worst}" + (f": {', '.join(parts)}" if parts else "") + tail


__all__ = ["Judged", "expand", "judge_path", "summary_line", "summary_record", "worst_exit"]
