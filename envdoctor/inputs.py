"""The one loader for everything ``diagnose`` reads: a saved JSON report or any pasted text, from a
file or standard input, in whatever encoding it was saved.

Loading is where hostile input arrives (a report attached to a ticket, a pasted text), so every way
it can be wrong ends in :class:`~envdoctor.report.ReportError` with one clear line, never a
traceback. Bytes become text here (UTF-8, UTF-8 with a BOM, and the UTF-16 that PowerShell's ``>``
and Notepad write, with or without a BOM); text becomes a Report (JSON) or Facts (a paste, through
:mod:`envdoctor.parsers`).
"""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from envdoctor.knowledge import remedies

from .model import MAX_NESTING, SCHEMA_VERSION, Facts, Status, TooDeep
from .redact import may_hold_secret
from .report import Report, ReportError

#: A saved report is a few hundred KB; refuse absurd inputs before reading them into memory.
MAX_INPUT_BYTES = 64 * 1024 * 1024
# Count limits on what diagnose reads (README, "Limits"): far above any real machine, low enough
# that judging the largest legal input stays within seconds and bounded memory.
#: GPUs listed in any one fact of a report or paste (nvml.gpus, torch.devices, driver.pci_gpus).
MAX_GPUS = 32_768
#: Findings in a saved report (they are re-judged, not trusted, but still read).
MAX_FINDINGS = 10_000
#: Lines in a pasted text.
MAX_LINES = 1_000_000
#: Nesting of JSON values in a report (a live report nests at most 6 levels; model.MAX_NESTING).
MAX_DEPTH = MAX_NESTING
_GPU_LISTS = ("nvml.gpus", "torch.devices", "driver.pci_gpus")

_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"),
         (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))
_SNIFF = 4096


def load(path: str, stdin: IO[bytes] | None = None, limit: int = MAX_INPUT_BYTES,
         findings: bool = True) -> Report | Facts:
    """``path`` (``-`` = standard input) -> a Report (saved JSON) or Facts (pasted text).
    ``findings=False``: the saved findings are not read (``diagnose`` judges again and would throw
    them away; reading them was half its time)."""
    return parse_report(read_text(path, stdin, limit), "standard input" if path == "-" else path, findings)


def read_text(path: str, stdin: IO[bytes] | None = None, limit: int = MAX_INPUT_BYTES) -> str:
    """The text of ``path`` (``-`` = stdin), in whatever encoding it was saved."""
    return decode(read_bytes(path, stdin, limit), "standard input" if path == "-" else path)


def read_bytes(path: str, stdin: IO[bytes] | None = None, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of ``path`` (``-`` = stdin), bounded in size; a directory, FIFO or device is refused
    before it is opened (a FIFO would block the read forever)."""
    if path == "-":
        import sys

        stream: Any = stdin if stdin is not None else getattr(sys.stdin, "buffer", None)
        if stream is None:
            raise ReportError("standard input is closed; pass a file, or redirect one to stdin")
        try:
            data = stream.read(limit + 1)
        except OSError as exc:
            raise ReportError(f"cannot read standard input ({exc.strerror or exc})") from None
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
    else:
        data = _read_file(Path(path), path, limit)
    if len(data) > limit:
        raise ReportError(f"input is larger than {limit // (1 << 20)} MiB; a report is far smaller")
    return bytes(data)


def _read_file(p: Path, path: str, limit: int) -> bytes:
    try:
        if p.is_dir():
            raise ReportError(f"{path} is a directory, not a report file")
        st = p.stat()
        if not stat.S_ISREG(st.st_mode):
            raise ReportError(f"{path} is not a regular file; to read a pipe, pass - and redirect it to stdin")
        if st.st_size > limit:
            raise ReportError(f"{path} is {st.st_size / 1e6:.0f} MB; a report is at most {limit // (1 << 20)} MiB. "
                              "Is this the right file?")
        with p.open("rb") as fh:
            # Sized by the stat (a read sized by the limit allocates 64 MiB per file); a file that
            # grew since is read on, up to the limit.
            data = fh.read(st.st_size + 1)
            if len(data) > st.st_size:
                data += fh.read(limit + 1 - len(data))
            return data
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file") from None
    except PermissionError:
        raise ReportError(f"{path}: permission denied") from None
    except OSError as exc:
        raise ReportError(f"{path}: cannot read ({exc.strerror or exc})") from None


def encoding_of(data: bytes) -> tuple[str, int]:
    """(codec, BOM length) of a saved text: its byte-order mark, else UTF-16 told by the NUL bytes that
    ASCII text has in every other position, else UTF-8."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return codec, len(bom)
    pairs = min(len(data), _SNIFF) // 2
    if pairs >= 2:
        head = data[:2 * pairs]
        odd, even = head[1::2].count(0), head[0::2].count(0)  # counted in C, not byte by byte
        if odd >= 0.9 * pairs and even == 0:
            return "utf-16-le", 0
        if even >= 0.9 * pairs and odd == 0:
            return "utf-16-be", 0
    return "utf-8", 0


def decode(data: bytes, name: str = "input") -> str:
    """Bytes -> text in the encoding they were saved in; undecodable bytes become U+FFFD (they
    survive parsing). Empty input and binary data are refused."""
    codec, skip = encoding_of(data)
    text = data[skip:].decode(codec, errors="replace")
    if not text.strip():
        raise ReportError(f"{name} is empty")
    head = text[:8192]
    if "\x00" in head or head.count("\ufffd") > len(head) // 10 + 8:
        raise ReportError(f"{name} is binary data, not a JSON report or pasted text")
    return text.lstrip("\ufeff")


def parse_report(text: str, name: str = "input", findings: bool = True) -> Report | Facts:
    """A saved JSON report -> Report; anything else -> Facts parsed from a pasted text. Size and count
    limits (README, "Limits") and JSON that envdoctor never writes (NaN, Infinity) are refused."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        nan: list[str] = []
        try:
            data = json.loads(stripped, parse_constant=lambda t: _not_a_number(t, nan),
                              parse_float=lambda t: _finite_float(t, nan))
        except json.JSONDecodeError as exc:
            if stripped.startswith("{"):
                raise ReportError(f"{name} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
                                  "was it truncated?") from None
        except RecursionError:
            raise ReportError(f"{name} is nested too deeply to be an envdoctor report") from None
        except _NotJsonValue as exc:
            raise ReportError(f"{name} contains {exc}, which is not a JSON value; it was not written by envdoctor") from None
        else:
            # No secret can hide in a text without a single hint of one (and without escapes, which
            # could spell one): then the loaded facts need no redaction scan of their own.
            clean = "\\" not in stripped and not may_hold_secret(stripped)
            del stripped, text
            if nan:
                data = _missing_numbers(data, nan[0])
            return report_from_json(data, name, clean, findings)
    lines = text.count("\n")
    if lines > MAX_LINES:
        raise ReportError(f"{name} has {lines:,} lines; envdoctor reads at most {MAX_LINES:,} lines of pasted text. "
                          "Paste the collect_env / nvidia-smi output and the error, not a whole log")
    from .parsers import ParseError, parse_text

    try:
        facts = parse_text(text)
    except ParseError as exc:
        raise ReportError(f"{name}: {exc}") from None
    _check_counts(facts, name, raw=False)
    return facts


def _check_counts(facts: Mapping[str, Any], name: str, raw: bool) -> None:
    """The GPU limit, on a report's fact objects (``raw``) or on parsed Facts."""
    for key in _GPU_LISTS:
        entry = facts.get(key)
        value = (entry.get("value") if isinstance(entry, dict) else None) if raw else (
            entry.value if entry is not None else None)
        if isinstance(value, (list, tuple)) and len(value) > MAX_GPUS:
            raise ReportError(f"{name} lists {len(value):,} GPUs in {key}; envdoctor judges at most {MAX_GPUS:,} "
                              "GPUs per report. Is this the right file?")


class _NotJsonValue(ValueError):
    pass


class _NotANumber:
    """Where a report held NaN, Infinity or a number out of range (1e999)."""


_NAN = _NotANumber()


def _not_a_number(token: str, seen: list[str]) -> Any:
    # NaN and Infinity are not JSON (json.dumps writes them, strict readers refuse them), and a
    # NaN would pass every range check: each is read as a missing value, the rest of the report kept.
    seen.append(token)
    return _NAN


def _finite_float(token: str, seen: list[str]) -> Any:
    value = float(token)
    if value - value != 0.0:  # 1e999 reads as inf
        seen.append(f"{token[:40]} (out of range)")
        return _NAN
    return value


def _has_nan(value: Any) -> bool:
    if value is _NAN:
        return True
    if isinstance(value, dict):
        return any(_has_nan(v) for v in value.values())
    return isinstance(value, list) and any(_has_nan(v) for v in value)


def _scrub(value: Any) -> Any:
    if value is _NAN:
        return None
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def _missing_numbers(data: Any, token: str) -> Any:
    """A report with NaN/Infinity: each fact holding one becomes missing (``failed``, saying so),
    every other NaN (in findings, probes) a null."""
    if isinstance(data, dict) and isinstance(data.get("facts"), dict):
        facts = {}
        for key, entry in data["facts"].items():
            if _has_nan(entry):
                source = entry.get("source") if isinstance(entry, dict) and isinstance(entry.get("source"), str) else None
                entry = {"value": None, "reason": "not_in_report", "source": source or "report",
                         "detail": f"the report holds {token}, which is not a JSON value, here: read as missing"}
            facts[key] = entry
        data = {**data, "facts": facts}
    return _scrub(data)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def shown_name(text: object) -> str:
    """A file name (or a message naming one) as it may reach a terminal: control characters
    (ESC, BEL, an OSC sequence's parts, C1, bidi overrides) as escapes, never raw. Not a string (a
    damaged store's column): its text."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


def schema_problem(data: Any, name: str) -> str | None:
    """Why ``data`` is no report this envdoctor reads (the one test ``diagnose``, ``diff`` and
    ``fleet`` share), or None."""
    if not isinstance(data, dict):
        return f"{name} is JSON but not an envdoctor report (expected an object)"
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        return f"{name} has no integer 'schema_version'; it is not an envdoctor report"
    if version > SCHEMA_VERSION:
        return (f"{name} uses report schema {version}, newer than this envdoctor understands "
                f"({SCHEMA_VERSION}); upgrade envdoctor: {remedies.envdoctor_upgrade()}")
    if version < 1:
        return f"{name} has an invalid schema_version {version}"
    if not isinstance(data.get("facts"), dict):
        return f"{name} has no 'facts' object; it is not an envdoctor report"
    return None


def _ignored_findings(saved: Any, name: str) -> str:
    """The warning for saved findings that are not envdoctor findings ('' when they all are, or none
    were saved). They are not refused: a saved report is judged again from its facts (probe once,
    judge anywhere), so its old findings are never the verdict and the facts are still worth reading."""
    if saved is None:
        return ""
    if not isinstance(saved, list):
        what = "its 'findings' is not a list"
    else:
        statuses = {s.value for s in Status}
        bad = sum(1 for f in saved if not isinstance(f, dict) or not isinstance(f.get("id"), str)
                  or f.get("status") not in statuses)
        if not bad:
            return ""
        what = f"{bad:,} of its {len(saved):,} saved findings are not envdoctor findings"
    return f"{name}: {what}; ignored (a saved report's facts are judged again, its old findings are never read)"


def report_from_json(data: Any, name: str = "input", clean: bool = False, findings: bool = True) -> Report:
    """A parsed JSON value -> Report; ``clean``: the text held nothing a secret could be (no redaction
    scan needed). ``findings=False``: the saved findings are not read (they are judged again) and the
    report's ``warnings`` are only what loading found (the saved ones belong to the old judgement)."""
    problem = schema_problem(data, name)
    if problem is not None:
        raise ReportError(problem)
    saved = data.get("findings")
    if isinstance(saved, list) and len(saved) > MAX_FINDINGS:
        raise ReportError(f"{name} has {len(saved):,} findings; envdoctor reads at most {MAX_FINDINGS:,}")
    _check_counts(data["facts"], name, raw=True)
    try:
        report = Report.from_dict(data, clean, findings)
        if not findings:  # judged again: what was saved is no verdict, its garbage only worth a word
            from dataclasses import replace

            ignored = _ignored_findings(saved, name)
            report = replace(report, warnings=(ignored,) if ignored else ())
        return report
    except TooDeep:  # found while freezing, which walks every value anyway
        raise ReportError(f"{name} is nested deeper than {MAX_DEPTH} levels; an envdoctor report nests a few") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ReportError(f"{name} is not a well-formed envdoctor report ({type(exc).__name__}: {exc})") from None
