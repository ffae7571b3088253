"""The Report (facts + findings + how each probe went), its JSON form, and safe writing.

Reading one back (a saved report or a pasted text) is :mod:`envdoctor.inputs`' job.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import __version__
from .model import SCHEMA_VERSION, Facts, Finding, ProbeRun, ProbeStatus, Status, summarize, worst
from .redact import redact_value

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INCOMPLETE = 0, 1, 2, 3


class ReportError(Exception):
    """Input that cannot be used as a report (raised by :mod:`envdoctor.inputs`); the message is shown as is."""


@dataclass(frozen=True)
class Report:
    facts: Facts
    findings: tuple[Finding, ...]
    probes: tuple[ProbeRun, ...] = ()
    created_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    envdoctor_version: str = __version__
    schema_version: int = SCHEMA_VERSION
    origin: str = "live"  # "live", "report:<file>", "paste:<format>"
    compat_as_of: str | None = None
    warnings: tuple[str, ...] = ()  # registry/plugin warnings, unknown --only ids, …

    @property
    def summary(self) -> dict[str, Any]:
        counts = summarize(self.findings)
        return {**counts, "worst": worst(self.findings).value}

    def exit_code(self, fail_on: str = "fail") -> int:
        return exit_code(self.findings, fail_on)

    def not_run(self) -> list[dict[str, str]]:
        """Probes that did not complete and checks that were skipped, with why."""
        out = [{"what": f"probe {p.name}", "why": p.status.value + (f": {p.detail}" if p.detail else "")}
               for p in self.probes if p.status is not ProbeStatus.OK]
        out += [{"what": f"check {f.id}", "why": f.detail or f.title} for f in self.findings if f.status is Status.SKIP]
        return out

    def to_dict(self) -> dict[str, Any]:
        data = {
            "schema_version": self.schema_version,
            "envdoctor_version": self.envdoctor_version,
            "created_at": self.created_at,
            "origin": self.origin,
            "compat_as_of": self.compat_as_of,
            "summary": self.summary,
            "findings": [f.to_dict() for f in self.findings],
            "probes": [p.to_dict() for p in self.probes],
            "not_run": self.not_run(),
            "warnings": list(self.warnings),
            "facts": self.facts.to_dict(),
        }
        return redact_value(data)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Report:
        return cls(
            facts=Facts.from_dict(data.get("facts") or {}),
            findings=tuple(Finding.from_dict(f) for f in data.get("findings") or ()),
            probes=tuple(ProbeRun.from_dict(p) for p in data.get("probes") or ()),
            created_at=str(data.get("created_at", "")),
            envdoctor_version=str(data.get("envdoctor_version", "")),
            schema_version=int(data.get("schema_version", SCHEMA_VERSION)),
            origin=str(data.get("origin", "live")),
            compat_as_of=data.get("compat_as_of"),
            warnings=tuple(str(w) for w in data.get("warnings") or ()),
        )


def exit_code(findings: Iterable[Finding], fail_on: str = "fail") -> int:
    """3 if envdoctor could not complete (an ``error``), else 1 on a failure (or a warning with
    ``--fail-on warn``), else 0."""
    statuses = {f.status for f in findings}
    if Status.ERROR in statuses:
        return EXIT_INCOMPLETE
    if Status.FAIL in statuses or (fail_on == "warn" and Status.WARN in statuses):
        return EXIT_FAIL
    return EXIT_OK


def to_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write via a temporary file in the same folder and rename: readers never see half a file."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
