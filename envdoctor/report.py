"""The Report (facts + findings + how each probe went), its JSON form, and safe writing.

Reading one back (a saved report or a pasted text) is :mod:`envdoctor.inputs`' job.
"""

from __future__ import annotations

import json
import os
import re
import stat
import weakref
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Any

from envdoctor.knowledge.schema import SCHEMA_ID
from envdoctor.process.lifecycle import ExitCode

from . import __version__
from .kit import EVIDENCE_ITEMS, capped
from .model import SCHEMA_VERSION, Facts, Finding, ProbeRun, ProbeStatus, Reading, Remediation, Status, summarize, worst
from .redact import UnchangedMemo, json_blob, mask_env, may_hold_secret, redact_text, redact_tree


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

    def __post_init__(self) -> None:
        # The one place every output is redacted: terminal, Markdown, JSON and the healthcheck
        # line all render a Report, so none of them can show what this did not mask (paths,
        # error texts, remedies and evidence included, not only environment values).
        object.__setattr__(self, "facts", _redact_facts(self.facts))
        object.__setattr__(self, "findings", tuple(_redact_finding(f) for f in self.findings))
        object.__setattr__(self, "probes", tuple(p if redact_text(p.detail) is p.detail else
                                                 replace(p, detail=redact_text(p.detail)) for p in self.probes))
        object.__setattr__(self, "warnings", tuple(redact_text(str(w)) for w in self.warnings))
        object.__setattr__(self, "origin", redact_text(self.origin))

    @property
    def summary(self) -> dict[str, Any]:
        """Counts per status, the worst, and how many could not be judged; computed once per Report
        (a render asks for it many times). A copy, so a caller's edit cannot change the next answer."""
        cached = self.__dict__.get("_summary")
        if cached is None:
            cached = self._summarize()
            object.__setattr__(self, "_summary", cached)
        return dict(cached)

    def _summarize(self) -> dict[str, Any]:
        from envdoctor.output.examined import Examined

        counts = summarize(self.findings)
        # "worst" is "skip", not "ok", when nothing passed and nothing is wrong: nothing was judged.
        # "unjudged": the skips that could not be judged because the facts they need were not read
        # (a paste's "not in the text"), apart from the checks that do not apply here.
        found = worst(self.findings).value
        return {**counts, "worst": "skip" if found == "ok" and not counts["ok"] else found,
                "unjudged": Examined.of(self.findings, self.facts, self.origin).unjudged_count}

    def exit_code(self, fail_on: str = "fail") -> int:
        return exit_code(self.findings, fail_on)

    def not_run(self) -> list[dict[str, str]]:
        """Probes that did not complete and checks that were skipped, with why."""
        out = [{"what": f"probe {p.name}", "why": p.status + (f": {p.detail}" if p.detail else "")}
               for p in self.probes if p.status is not ProbeStatus.OK]
        out += [{"what": f"check {f.id}", "why": f.detail or f.title} for f in self.findings if f.status is Status.SKIP]
        return out

    def to_dict(self, thawed: bool = True) -> dict[str, Any]:
        data = {
            "$schema": SCHEMA_ID,
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
            "facts": self.facts.to_dict(thawed),
        }
        return data  # already redacted (__post_init__)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], clean: bool = False, findings: bool = True) -> Report:
        """``clean``: the caller proved no string in ``data`` can hold a secret (see parse_report);
        ``findings=False`` leaves the saved findings unread (they are about to be judged again)."""
        facts = _facts_consuming(data.get("facts") or {})
        if clean:
            _CLEAN[:] = [weakref.ref(facts), *_CLEAN[:3]]
        return cls(
            facts=facts,
            findings=tuple(Finding.from_dict(f) for f in data.get("findings") or ()) if findings else (),
            probes=tuple(ProbeRun.from_dict(p) for p in data.get("probes") or ()),
            created_at=str(data.get("created_at", "")),
            envdoctor_version=str(data.get("envdoctor_version", "")),
            schema_version=int(data.get("schema_version", SCHEMA_VERSION)),
            origin=str(data.get("origin", "live")),
            compat_as_of=data.get("compat_as_of"),
            warnings=tuple(str(w) for w in data.get("warnings") or ()),
        )


def _facts_consuming(raw: Any) -> Facts:
    """Facts from a report's ``facts`` object, emptying a plain dict as it goes: each raw fact
    is dropped once frozen, so a 50 MB report is not held twice at the peak."""
    if not isinstance(raw, dict):
        return Facts.from_dict(raw)
    readings = {}
    while raw:
        key, value = raw.popitem()
        readings[str(key)] = Reading.from_dict(value)
    return Facts(dict(sorted(readings.items())))


def exit_code(findings: Iterable[Finding], fail_on: str = "fail") -> int:
    """3 if envdoctor could not complete (an ``error``), else 1 on a failure (or a warning with
    ``--fail-on warn``), else 0."""
    statuses = {f.status for f in findings}
    if Status.ERROR in statuses:
        return ExitCode.INCOMPLETE
    if Status.FAIL in statuses or (fail_on == "warn" and Status.WARN in statuses):
        return ExitCode.FAIL
    return ExitCode.OK


#: Facts objects already redacted (by identity; a few, weakly held): a report loaded for
#: diagnose becomes a second Report with the same Facts, which need not be scanned again. Weakly:
#: a strong hold kept the first of two 58 MB reports alive while `diff` read the second.
_CLEAN: list[weakref.ref[Facts]] = []


def mask_env_facts(facts: Facts) -> Facts:
    """``facts`` with the values of ``env.vars`` that envdoctor does not judge replaced by
    ``<redacted>`` (:func:`envdoctor.redact.mask_env`); the same object when nothing changes."""
    r = facts.get("env.vars")
    value = mask_env(r.value) if r is not None else None
    if r is None or value is r.value:
        return facts
    return facts.merged({"env.vars": Reading(value, r.reason, r.source, r.detail)})


def _redact_facts(facts: Facts) -> Facts:
    facts = mask_env_facts(facts)  # even in a report found clean: a plain word can be a secret's value
    if any(f() is facts for f in _CLEAN):
        return facts
    changed: dict[str, Reading] = {}
    for key, r in facts.items():
        value, source, detail = redact_tree(r.value), redact_text(r.source), redact_text(r.detail)
        if value is not r.value or source is not r.source or detail is not r.detail:
            changed[key] = Reading(value, r.reason, source, detail)
    clean = facts.merged(changed) if changed else facts
    _CLEAN[:] = [weakref.ref(clean), *_CLEAN[:3]]
    return clean


#: Longest title / other text of a finding: a 1 MB torch version quoted by every check would
#: otherwise make every output (and its redaction) grow with checks x that size.
MAX_TITLE, MAX_TEXT = 500, 20_000


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def _redact_remedy(r: Remediation) -> Remediation:
    rem = Remediation(redact_text(_clip(r.text, MAX_TEXT)), tuple(redact_text(_clip(c, MAX_TEXT)) for c in r.commands),
                      tuple(redact_text(_clip(c, MAX_TEXT)) for c in r.links),
                      tuple(_redact_remedy(a) for a in r.alternatives), r.sources)
    same = (rem.text is r.text and all(a is b for a, b in zip(rem.commands + rem.links, r.commands + r.links, strict=False))
            and all(a is b for a, b in zip(rem.alternatives, r.alternatives, strict=False)))
    return r if same else rem


def _remedy_parts(r: Remediation) -> list[Any]:
    return [r.text, r.commands, r.links, [_remedy_parts(a) for a in r.alternatives]]


#: Findings' JSON texts (title, detail, evidence, remedy) that capping and redaction leave as they are.
_UNCHANGED_FINDINGS = UnchangedMemo(size=4096, longest=1 << 14)
#: A finding's JSON text shorter than this holds no string that reaches a cap but the title's
#: (evidence strings are cut at EVIDENCE_ITEMS * 64 characters, other texts at MAX_TEXT).
_UNCAPPABLE = min(EVIDENCE_ITEMS * 64, MAX_TEXT)


def _needs_nothing(f: Finding) -> bool:
    """True when :func:`_redact_finding` would return ``f`` itself, decided from one compact JSON text
    of everything it reads: too short to reach any cap (a title within MAX_TITLE, fewer characters than
    the shortest other string cap, fewer commas than items in the shortest list cap), and with no hint of
    a secret, or the same text found clean before (the memo is keyed by that exact text)."""
    blob = _uncappable_blob(f)
    return blob is not None and (not may_hold_secret(blob) or blob in _UNCHANGED_FINDINGS)


def _uncappable_blob(f: Finding) -> str | None:
    """The finding's JSON text when nothing in it can reach a cap, else None."""
    if len(f.title) > MAX_TITLE:
        return None
    blob = json_blob([f.title, f.detail, f.evidence, _remedy_parts(f.remediation)])
    if blob is None or len(blob) >= _UNCAPPABLE or blob.count(",") >= EVIDENCE_ITEMS:
        return None
    return blob


def _redact_finding(f: Finding) -> Finding:
    if _needs_nothing(f):
        return f
    out = _redact_finding_walk(f)
    if out is f and (blob := _uncappable_blob(f)) is not None:
        _UNCHANGED_FINDINGS.add(blob)
    return out


def _redact_finding_walk(f: Finding) -> Finding:
    r = f.remediation
    rem = _redact_remedy(r)
    title, detail = redact_text(_clip(f.title, MAX_TITLE)), redact_text(_clip(f.detail, MAX_TEXT))
    # Capped here too, whoever built it: a check that writes its own evidence from a 260,000-path fact
    # must not make every output that big.
    evidence = redact_tree(capped(f.evidence))
    if title is f.title and detail is f.detail and evidence is f.evidence and rem is r:
        return f
    return replace(f, title=title, detail=detail, evidence=evidence, remediation=rem)


# Characters that are data in JSON but actions on a terminal or in a rendered page: DEL and the
# C1 controls (U+009B is a one-character CSI), line/paragraph separators and bidi overrides.
# json.dumps escapes C0 controls itself; these are escaped the same way, so the value is kept.
_UNSAFE_IN_TEXT = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


#: Above this many characters (compact), JSON is written one entry of each top-level object or
#: list per line: json.dumps with ``indent`` runs in pure Python, four times slower than the
#: compact C encoder, and a 50 MB report would take seconds just to print.
_PRETTY_LIMIT = 1 << 20


def _plain(value: Any) -> Any:
    if type(value) is MappingProxyType:  # a frozen mapping: its dict copied in C, not item by item
        return value.copy()
    if isinstance(value, Mapping):
        return dict(value)
    return str(value)


def json_text(value: Any, indent: int = 2) -> str:
    """``json.dumps`` for output: UTF-8 kept readable, unsafe controls written as ``\\uXXXX``;
    frozen mappings are written as they are. Big values are laid out by :func:`_layered`."""
    return "".join(json_chunks(value, indent))


def json_chunks(value: Any, indent: int = 2) -> Iterator[str]:
    """:func:`json_text` in pieces, for a writer that need not hold a 50 MB string twice."""
    def dumps(v: Any) -> str:
        return json.dumps(v, ensure_ascii=False, default=_plain)

    # Each second-level entry compact, once: their sizes decide the layout, and the big layout
    # reuses them (a 50 MB report is serialised once).
    entries: dict[Any, Any] = {}
    size = 0
    items = value.items() if isinstance(value, Mapping) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for k, v in items:
        if isinstance(v, Mapping):
            entries[k] = [(kk, dumps(vv)) for kk, vv in v.items()]
        elif isinstance(v, (list, tuple)):
            entries[k] = [(None, dumps(vv)) for vv in v]
        else:
            entries[k] = dumps(v)
        size += sum(len(e[1]) for e in entries[k]) if isinstance(entries[k], list) else len(entries[k])
    if size <= _PRETTY_LIMIT or not isinstance(value, (Mapping, list, tuple)):
        del entries
        pieces: Iterable[str] = (json.dumps(value, indent=indent, ensure_ascii=False, default=_plain),)
    else:
        pieces = _layered(value, entries, indent)
    for piece in pieces:
        yield _UNSAFE_IN_TEXT.sub(lambda m: f"\\u{ord(m.group()):04x}", piece) if _UNSAFE_IN_TEXT.search(piece) else piece


def _layered(value: Any, entries: dict[Any, Any], indent: int) -> Iterator[str]:
    """Two levels indented, everything deeper compact (each fact, finding or probe on one line)."""
    one, two = " " * indent, " " * indent * 2
    is_map = isinstance(value, Mapping)
    yield "{\n" if is_map else "[\n"
    keys = list(entries)
    for n, k in enumerate(keys):
        entry, v = entries.pop(k), value[k]
        head = f"{one}{json.dumps(str(k), ensure_ascii=False)}: " if is_map else one
        tail = ",\n" if n < len(keys) - 1 else "\n"
        if isinstance(entry, list) and entry:
            sub_map = isinstance(v, Mapping)
            yield head + ("{\n" if sub_map else "[\n")
            last = len(entry) - 1
            for i, (kk, text) in enumerate(entry):
                key = f"{json.dumps(str(kk), ensure_ascii=False)}: " if sub_map else ""
                yield f"{two}{key}{text}{',' if i < last else ''}\n"
            yield one + ("}" if sub_map else "]") + tail
        else:
            yield head + (entry if isinstance(entry, str) else ("{}" if isinstance(v, Mapping) else "[]")) + tail
    yield "}" if is_map else "]"


def to_json(report: Report) -> str:
    return "".join(to_json_chunks(report))


def to_json_chunks(report: Report) -> Iterator[str]:
    yield from json_chunks(report.to_dict(thawed=False))
    yield "\n"


class OutputTargetError(Exception):
    """``-o`` names something that is not a regular file (a device, a FIFO, a socket, a link to
    one): refused, never replaced. The message is shown as is."""


def _kind(mode: int) -> str:
    return ("a FIFO" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a directory" if stat.S_ISDIR(mode) else "a special file")


def _regular_target(path: str | os.PathLike[str]) -> Path:
    """The file to replace: ``path`` itself, or the regular file a link points to (the link is
    kept). Raises OutputTargetError for anything else."""
    target = Path(path)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None  # a new file (or a dangling link: the file it names is created)
    if mode is not None and not stat.S_ISREG(mode):
        via = f" (a link to {os.path.realpath(target)})" if target.is_symlink() else ""
        raise OutputTargetError(f"{path}{via} is {_kind(mode)}, not a regular file: not replaced. Name a file, or "
                                "leave out -o to print to standard output")
    return Path(os.path.realpath(target)) if target.is_symlink() else target


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)  # no /proc: read it by setting it, and put it back at once
    os.umask(old)
    return old


def _keep_mode(fd: int, existing: os.stat_result | None) -> None:
    """The written file's mode as the file it replaces had it (and its owner and group, where we
    may set them), or a new file's as the umask says (mkstemp makes 0600: `fleet` run by another
    user could not read what `srun` wrote)."""
    try:
        if existing is None:
            os.fchmod(fd, 0o666 & ~_umask())
            return
        try:
            os.fchown(fd, existing.st_uid, existing.st_gid)
        except OSError:
            pass  # not ours to give away: the mode still is
        os.fchmod(fd, stat.S_IMODE(existing.st_mode))
    except OSError:
        pass


def check_target(path: str | os.PathLike[str]) -> None:
    """Raises OutputTargetError when ``-o`` names something that is not a regular file (asked
    before probing, so a FIFO is refused before seconds of work, not after)."""
    _regular_target(path)


def standard_stream(path: str | os.PathLike[str]) -> int | None:
    """1 or 2 when ``-o`` names this process's standard output or error (``-o /dev/stdout``, a
    common idiom, or ``/dev/fd/2``) and that is no regular file: written there, not replaced."""
    for fd in (1, 2):
        try:
            mine, named = os.fstat(fd), os.stat(path)
        except OSError:
            continue
        if (mine.st_dev, mine.st_ino) == (named.st_dev, named.st_ino) and not stat.S_ISREG(named.st_mode):
            return fd
    return None


def write_atomic(path: str | os.PathLike[str], text: str | Iterable[str], mode: int | None = None) -> None:
    """Write via a temporary file in the same folder and rename: readers never see half a file.
    Only regular files are written (see :func:`_regular_target`); concurrent writers each rename
    a complete file, the last one wins. The file follows the umask and keeps an existing file's mode,
    or takes ``mode`` (an engine's file that another user's daemon reads: 0644)."""
    import tempfile  # only a writer needs it (diagnose FILE --json prints)

    target = _regular_target(path)
    try:
        existing: os.stat_result | None = os.stat(target)
    except OSError:
        existing = None
    # The temporary name stays within NAME_MAX (255) whatever the target's: a 250-character name is legal.
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name[:64]}.", suffix=".tmp", dir=target.parent or ".")
    try:
        from envdoctor.process.encoding import NAME as DEGRADE  # a lone surrogate: U+FFFD, the file stays UTF-8

        with os.fdopen(fd, "w", encoding="utf-8", errors=DEGRADE) as fh:
            for piece in ((text,) if isinstance(text, str) else text):
                fh.write(piece)
            fh.flush()
            if mode is None:
                _keep_mode(fh.fileno(), existing)
            else:
                os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        _regular_target(target)  # again, just before the rename: it may have changed meanwhile
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
