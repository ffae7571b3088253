"""The Report (facts + findings + how each probe went), its JSON form, and safe loading/writing.

Loading is where hostile input arrives (a report attached to a ticket, a pasted text), so every
way it can be wrong ends in :class:`ReportError` with one clear line: never a traceback.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import __version__
from .model import SCHEMA_VERSION, Facts, Finding, ProbeRun, ProbeStatus, Status, summarize, worst
from .redact import redact_value

#: A saved report is a few hundred KB; refuse absurd inputs before reading them into memory.
MAX_INPUT_BYTES = 64 * 1024 * 1024

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INCOMPLETE = 0, 1, 2, 3


class ReportError(Exception):
    """Input that cannot be used as a report; the message is shown as is."""


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


def read_input(path: str, stdin: Any = None, limit: int = MAX_INPUT_BYTES) -> str:
    """Read a report or pasted text from ``path`` (``-`` = stdin) as text, bounded in size."""
    if path == "-":
        import sys

        stream = stdin if stdin is not None else sys.stdin.buffer
        data = stream.read(limit + 1)
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
    else:
        p = Path(path)
        try:
            if p.is_dir():
                raise ReportError(f"{path} is a directory, not a report file")
            st = p.stat()
            if not stat.S_ISREG(st.st_mode):
                # A FIFO or device would block the read forever (or never end): use `-` for a pipe.
                raise ReportError(f"{path} is not a regular file; to read a pipe, pass - and redirect it to stdin")
            size = st.st_size
            if size > limit:
                raise ReportError(f"{path} is {size / 1e6:.0f} MB; a report is at most {limit // (1 << 20)} MiB. "
                                  "Is this the right file?")
            with p.open("rb") as fh:
                data = fh.read(limit + 1)
        except FileNotFoundError:
            raise ReportError(f"{path}: no such file") from None
        except PermissionError:
            raise ReportError(f"{path}: permission denied") from None
        except OSError as exc:
            raise ReportError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise ReportError(f"input is larger than {limit // (1 << 20)} MiB; a report is far smaller")
    if not data.strip():
        raise ReportError(f"{'standard input' if path == '-' else path} is empty")
    if b"\x00" in data[:8192]:
        raise ReportError(f"{'standard input' if path == '-' else path} is binary data, not a JSON report or "
                          "pasted text")
    return data.decode("utf-8", errors="replace").lstrip("\ufeff")


def parse_report(text: str, name: str = "input") -> Report | Facts:
    """A saved JSON report -> Report; anything else -> Facts parsed from a pasted text."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            if stripped.startswith("{"):
                raise ReportError(f"{name} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
                                  "was it truncated?") from None
        except RecursionError:
            raise ReportError(f"{name} is nested too deeply to be an envdoctor report") from None
        else:
            return report_from_json(data, name)
    from .parsers import ParseError, parse_text

    try:
        return parse_text(text)
    except ParseError as exc:
        raise ReportError(f"{name}: {exc}") from None


def report_from_json(data: Any, name: str = "input") -> Report:
    if not isinstance(data, dict):
        raise ReportError(f"{name} is JSON but not an envdoctor report (expected an object)")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ReportError(f"{name} has no integer 'schema_version'; it is not an envdoctor report")
    if version > SCHEMA_VERSION:
        raise ReportError(f"{name} uses report schema {version}, newer than this envdoctor understands "
                          f"({SCHEMA_VERSION}); upgrade envdoctor: pip install -U gpu-envdoctor")
    if version < 1:
        raise ReportError(f"{name} has an invalid schema_version {version}")
    if not isinstance(data.get("facts"), dict):
        raise ReportError(f"{name} has no 'facts' object; it is not an envdoctor report")
    try:
        return Report.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ReportError(f"{name} is not a well-formed envdoctor report ({type(exc).__name__}: {exc})") from None
