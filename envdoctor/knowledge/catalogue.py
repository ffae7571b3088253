"""The message catalogue: the sentences the GPU stack prints, each from its emitter's own source, in one
data file (``envdoctor/data/messages.json``, shape ``messages.schema.json``), plus the rows for every
cudaError_t / CUresult / nvmlReturn_t string, built at load from ``envdoctor/data/errors.json`` (the one
home of those codes), never copied.

A row's ``format`` is the emitter's format string. :func:`pattern_of` compiles it into a pattern over its
fixed words, one capture group per argument (printf ``%s %d %zu %ld …``, Python ``{}`` / ``{name}``):
glibc's ``"%s: error while loading shared libraries: %s: %s"`` matches any program, object and reason.
A row whose facts a code signature writes names the check that judges them (``judged_by``); the others are
judged by the ``known-message`` check, which names the row's cause. :func:`match_line` is what the
signature table (``envdoctor/parsers/signatures.py``) runs over each line.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from typing import Any

from envdoctor.knowledge import datafiles, errors
from envdoctor.lazyre import lazy_re
from envdoctor.record import Record

__all__ = ["Cause", "Message", "causes", "judged_rows", "match_line", "messages", "pattern_of", "placeholders", "render",
           "role_of"]

#: printf conversions (``%s``, ``%d``, ``%zu``, ``%ld``, ``%.*s``, ``%5.2f``) and Python replacement fields.
_PLACEHOLDER_RE = lazy_re(r"%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|z|j|t|L)?[sdiuxXfgcp]|\{[^{}]*\}")
_MIDDLE_ARG = r"(.{1,400}?)"
_LAST_ARG = r"(.{1,400})"
_SPACE_RE = lazy_re(r"\s+")


class Cause(Record):
    id: str
    title: str
    severity: str  # "fail" | "warn" | "info" (explained and harmless: no finding)
    role: str = "cause"  # "cause" | "symptom" (what a cause leads to: it follows its cause, never rivals it)
    #: a symptom's other reading, said (marked as the alternative) when it is folded into the cause another check
    #: inferred ("a DataLoader worker died": the container's small /dev/shm, or else the out-of-memory killer)
    alternative: str = ""
    #: what leads to it (a symptom's, or a cause's symptom rows'): catalogue cause ids and check ids. A symptom is
    #: folded only into a finding of one of them; beside anything else it stands, after the causes.
    led_by: tuple[str, ...] = ()


class Message(Record):
    """One row: where the sentence comes from, its pattern, what it means."""

    id: str
    emitter: str
    source: dict[str, str]
    format: str
    cause: str
    severity: str
    facts: tuple[str, ...]
    judged_by: str | None
    remedy: str | None
    anchor: str  # the longest fixed run of the format, lower-cased: a line without it is not this message
    pattern: re.Pattern[str]
    code: int | None = None  # generated rows: the code of errors.json they stand for
    verified: bool = True  # the format was read in the emitter's source (else a finding on it can at most warn)
    role: str = "cause"  # the row's role, else its cause's: "cause" | "symptom"
    #: (fact key, argument number from 1): the values the format carries, written as those facts
    writes: tuple[tuple[str, int], ...] = ()

    def written(self, m: re.Match[str]) -> dict[str, str]:
        """The facts this row's match carries: fact key -> the argument's text (stripped)."""
        out: dict[str, str] = {}
        for key, arg in self.writes:
            value = m.group(arg) if arg <= (m.re.groups or 0) else None
            if value is not None and value.strip(" '\"`.,;"):
                out[key] = value.strip(" '\"`.,;")
        return out

    def match(self, line: str, words: frozenset[str] | None = None) -> re.Match[str] | None:
        if self.anchor not in (words if words is not None else words_of(line)):
            return None
        return self.pattern.search(line)


def _chunks(fmt: str) -> list[str | None]:
    """The format as fixed chunks and placeholders (None), ``%%`` as a literal ``%``."""
    out: list[str | None] = []
    pos = 0
    for m in _PLACEHOLDER_RE.finditer(fmt):
        if m.start() > 0 and fmt[m.start() - 1] == "%" and (m.start() < 2 or fmt[m.start() - 2] != "%"):
            continue  # "%%s" is a literal "%s"
        out.append(fmt[pos:m.start()].replace("%%", "%"))
        out.append(None)
        pos = m.end()
    out.append(fmt[pos:].replace("%%", "%"))
    return [c for c in out if c != ""]


def placeholders(fmt: str) -> int:
    """How many arguments ``fmt`` takes."""
    return sum(c is None for c in _chunks(fmt))


def _literal(text: str) -> str:
    """Fixed words: a run of spaces matches any whitespace (none before punctuation: "failed : x" and
    "failed: x" are one wording, printed by two releases)."""
    if not text.strip():
        return r"\s*"
    parts = _SPACE_RE.split(text)
    out = re.escape(parts[0])
    for part in parts[1:]:
        out += (r"\s*" if part[:1] in ":,.;)" else r"\s+") + re.escape(part)
    return out


def pattern_of(fmt: str) -> tuple[re.Pattern[str], str]:
    """``(pattern, anchor)`` of a format string: its fixed words in order (whitespace runs match any
    whitespace, case is ignored), a capture group for each argument between or after them. Leading
    arguments (the program, the object a message is about) are context, not matched: the pattern starts
    at the first fixed word, so a line is found by its fixed words alone."""
    chunks = _chunks(fmt)
    while chunks and chunks[0] is None:
        chunks.pop(0)
    parts: list[str] = []
    for i, chunk in enumerate(chunks):
        if chunk is None:
            parts.append(_LAST_ARG if i == len(chunks) - 1 else _MIDDLE_ARG)
        else:
            text = chunk if i else chunk.lstrip()
            parts.append(_literal(text) if i < len(chunks) - 1 else _literal(text.rstrip()))
    return re.compile("".join(parts), re.IGNORECASE), _anchor(chunks)


#: The words a line is cut into for the anchor test (the same cut for the format and the line).
_WORD_RE = re.compile(r"[\w/-]+(?:\.[\w/-]+)*")


def _anchor(chunks: list[str | None]) -> str:
    """The longest whole word of the format's fixed text (lower-cased): a line whose words do not include it
    cannot be the message. A word touching a placeholder (``.dll`` in ``%s.dll``) is only part of one."""
    best = ""
    for i, chunk in enumerate(chunks):
        if chunk is None:
            continue
        found = list(_WORD_RE.finditer(chunk))
        for j, m in enumerate(found):
            glued_before = j == 0 and m.start() == 0 and i > 0 and chunks[i - 1] is None
            glued_after = j == len(found) - 1 and m.end() == len(chunk) and i + 1 < len(chunks) and chunks[i + 1] is None
            if not glued_before and not glued_after and len(m.group(0)) > len(best):
                best = m.group(0)
    return best.lower()


def words_of(line: str) -> frozenset[str]:
    """The anchor test's words of a line."""
    return frozenset(_WORD_RE.findall(line.lower()))


def render(fmt: str, args: list[str]) -> str:
    """``fmt`` with its placeholders replaced by ``args`` in order (the tests' way of printing a message)."""
    out: list[str] = []
    it = iter(args)
    for chunk in _chunks(fmt):
        out.append(next(it) if chunk is None else chunk)
    return "".join(out)


@functools.lru_cache(maxsize=1)
def _load() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(datafiles.read_text("messages.json"))
    return data


def explains_sentence(led: list[tuple[str, str]]) -> str:
    """The one wording of a cause's finding taking its symptoms: each symptom's title (its first letter lowered
    unless it begins a name, "CUDA sees no GPU", "JAX could not …") and the line that showed it."""
    return "It explains what the text shows next: " + "; ".join(
        f"{title if title[1:2].isupper() else title[:1].lower() + title[1:]} (\"{line[:160]}\")"
        for title, line in led) + "."


@functools.lru_cache(maxsize=1)
def causes() -> dict[str, Cause]:
    """Cause id -> its title and severity."""
    return {cid: Cause(cid, str(c["title"]), str(c["severity"]), str(c.get("role", "cause")), str(c.get("alternative", "")),
                       tuple(str(x) for x in c.get("led_by", ())))
            for cid, c in _load()["causes"].items()}


def _row(raw: dict[str, Any], source: dict[str, str], code: int | None = None) -> Message:
    pattern, anchor = pattern_of(str(raw["format"]))
    cause = str(raw["cause"])
    writes = tuple((str(key), _argument_group(str(raw["format"]), int(arg)))
                   for key, arg in sorted((raw.get("writes") or {}).items()))
    return Message(str(raw["id"]), str(raw["emitter"]), source, str(raw["format"]), cause,
                   str(raw.get("severity") or causes()[cause].severity), tuple(raw.get("facts", ())),
                   raw.get("judged_by"), raw.get("remedy"), anchor, pattern, code, bool(raw.get("verified", True)),
                   str(raw.get("role") or causes()[cause].role), writes)


def _argument_group(fmt: str, arg: int) -> int:
    """The capture group of the format's ``arg``-th argument (from 1): leading arguments are not matched
    (:func:`pattern_of`), so the groups start at the first argument after a fixed word."""
    chunks = _chunks(fmt)
    leading = 0
    while leading < len(chunks) and chunks[leading] is None:
        leading += 1
    if arg <= leading or arg > placeholders(fmt):
        raise ValueError(f"format {fmt!r} has no matched argument {arg}")
    return arg - leading


def _generated() -> list[Message]:
    """A row for each code string of errors.json: torch's ``CUDA error: <cudaGetErrorString>`` for every
    cudaError_t, each CUresult's and nvmlReturn_t's symbolic name. A code whose meaning a check judges
    (torch's initialisation codes: cuda.init; nvidia-smi's NVML failures: nvml.init) names that check."""
    src = errors.sources()
    init = errors.cuda_init_codes()
    out: list[Message] = []

    def judged(code: int, facts: str, check: str | None) -> dict[str, Any]:
        return {"facts": [facts], "judged_by": check} if check else {"facts": [], "judged_by": None}

    # A code errors.json only names (no check of envdoctor's judges it) is a CUDA call the program made that failed:
    # said, with the way to find the call, as a warning: its cause may be the program's own (an illegal address).
    def named(info: errors.CodeInfo) -> dict[str, Any]:
        return {} if info.judged else {"severity": "warn"}

    # A string a data row words itself (with a cause of its own: "no kernel image …" is the architecture's) is
    # that row's, here and in NCCL's wording below.
    worded = {str(raw["format"]).lower() for raw in _load()["messages"]}
    for code, info in sorted(errors.cuda_runtime().items()):
        by = "cuda-init" if info.as_cuinit else None
        for n, words in enumerate(info.wordings):
            if f"CUDA error: {words}".lower() in worded:
                continue
            out.append(_row({"id": f"cuda-runtime-{code}" + (f"-{n}" if n else ""),
                             "emitter": "torch (c10 CUDA check), the CUDA runtime",
                             "format": f"CUDA error: {words}", "cause": "cuda-runtime-error",
                             "remedy": "cuda-error", **judged(code, "cuda.init", by), **named(info)},
                            {"url": src["cuda_runtime"]}, code))
        out.append(_row({"id": f"cuda-runtime-name-{code}", "emitter": "the CUDA runtime (cudaGetErrorName)",
                         "format": info.name, "cause": "cuda-runtime-error", "remedy": "cuda-error",
                         **judged(code, "cuda.init", by if "name" in info.recognise else None), **named(info)},
                        {"url": src["cuda_runtime"]}, code))
    # NCCL's CUDACHECK: WARN("Cuda failure '%s'", cudaGetErrorString(err)) (src/include/checks.h): the CUDA error NCCL
    # met is the cause its "unhandled cuda error" is the symptom of. A string a data row words itself (with a cause of
    # its own: "no kernel image …" is NCCL's architecture) is that row's.
    nccl = _load()["sources"].get("nccl_checks")
    for code, info in sorted(errors.cuda_runtime().items()):
        for n, words in enumerate(info.wordings):
            fmt = f"Cuda failure '{words}'"
            if nccl and fmt.lower() not in worded:
                out.append(_row({"id": f"nccl-cuda-failure-{code}" + (f"-{n}" if n else ""), "emitter": "NCCL",
                                 "format": fmt, "cause": "cuda-runtime-error", "remedy": "cuda-error",
                                 **judged(code, "cuda.init", "cuda-init" if info.as_cuinit else None), **named(info)},
                                dict(nccl), code))
    for code, info in sorted(errors.cuda_driver().items()):
        # A CUresult name is what cuInit returned in every message that prints one (XLA's "failed call to cuInit").
        out.append(_row({"id": f"cuda-driver-{code}", "emitter": "the CUDA driver API (cuGetErrorName)",
                         "format": info.name, "cause": "cuda-driver-error", "remedy": "cuda-error",
                         **judged(code, "cuda.init", "cuda-init" if code in init else None),
                         **({} if code in init or info.judged else {"severity": "warn"})},
                        {"url": src["cuda_driver"]}, code))
    for code, info in sorted(errors.nvml().items()):
        # errors.json's reason: an "unsupported" code is a query the GPU does not answer, never a failure.
        quiet = {"severity": "info"} if info.reason == "unsupported" else {}
        out.append(_row({"id": f"nvml-{code}", "emitter": "NVML (nvmlErrorString)", "format": info.name,
                         "cause": "nvml-error", "remedy": "nvml-error", **quiet}, {"url": src["nvml"]}, code))
        for i, words in enumerate(info.printed_as):
            out.append(_row({"id": f"nvml-{code}-printed-{i}", "emitter": "nvidia-smi",
                             "format": f"Failed to initialize NVML: {words}", "cause": "nvml-error",
                             "facts": ["nvml.init"], "judged_by": "nvml-init"}, {"url": src["nvml"]}, code))
    return out


@functools.lru_cache(maxsize=1)
def messages() -> tuple[Message, ...]:
    """Every row: the data file's, then the generated ones (verified: errors.json cites NVIDIA's own tables)."""
    data = _load()
    rows = [_row(raw, data["sources"][raw["source"]]) for raw in data["messages"]]
    return (*rows, *_generated())


@functools.lru_cache(maxsize=1)
def _by_anchor() -> dict[str, tuple[Message, ...]]:
    out: dict[str, list[Message]] = {}
    for row in messages():
        out.setdefault(row.anchor, []).append(row)
    return {anchor: tuple(rows) for anchor, rows in out.items()}


def _quoted_by(inner: re.Match[str], outer: re.Match[str]) -> bool:
    """True when ``inner`` lies within ``outer``'s match, is shorter, and is not inside one of ``outer``'s arguments."""
    if not (outer.start() <= inner.start() and inner.end() <= outer.end()
            and outer.end() - outer.start() > inner.end() - inner.start()):
        return False
    return not any(outer.start(g) <= inner.start() and inner.end() <= outer.end(g)
                   for g in range(1, outer.re.groups + 1) if outer.start(g) >= 0)


def match_line(line: str) -> list[tuple[Message, re.Match[str]]]:
    """Every row ``line`` is an instance of, with its match (the arguments in its groups), in catalogue order.
    Only the rows whose anchor word the line holds are tried: one cut of the line, whatever the row count."""
    index = _by_anchor()
    words = words_of(line)
    candidates = [row for word in words & index.keys() for row in index[word]]
    order = {row.id: i for i, row in enumerate(messages())} if len(candidates) > 1 else {}
    found = [(row, m) for row in candidates if (m := row.pattern.search(line)) is not None]
    if len(found) > 1:
        # A message whose own fixed words quote another's (nvidia-container-cli's "load library failed: %s: cannot
        # open shared object file …" spells glibc's dlerror out) is one message: a row matched inside another row's
        # match, across that row's fixed words, is part of it. (One inside an argument of a wrapper, torch's "NCCL
        # error in: %s:%d, %s", is the wrapper's content, and stays a message.)
        found = [(row, m) for row, m in found if not any(_quoted_by(m, o) for _, o in found)]
    return sorted(found, key=lambda rm: order.get(rm[0].id, 0))


def role_of(cause: str | None) -> str:
    """``"symptom"`` for a cause the data marks as what another cause leads to, else ``"cause"``."""
    found = causes().get(str(cause)) if cause else None
    return found.role if found else "cause"


def judged_rows(said: Any, check_id: str) -> list[dict[str, Any]]:
    """The rows of ``text.messages`` (its value: the rows a text holds) whose facts ``check_id`` judges
    (``judged_by``): a check that judges what a message wrote reads its rows (the line, the arguments) here."""
    return [dict(row) for row in said or () if isinstance(row, Mapping) and row.get("judged_by") == check_id]
