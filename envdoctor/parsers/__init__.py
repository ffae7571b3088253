"""Turn what people paste into bug trackers (``python -m torch.utils.collect_env`` output, vLLM's
variant of it, plain ``nvidia-smi``, Ultralytics' environment banner, ``pip list`` / ``pip freeze``
package listings, or only torch's own CUDA warnings and errors) into the same Facts a live probe
writes.

``parse_text`` cleans the paste (markdown fences and quote markers, HTML ``<details>`` tags,
Windows line endings, NULs from UTF-16 files read as UTF-8), detects which reports it holds,
parses each, and marks every fact the paste does not speak about as ``not_in_report``. Anything
it cannot read raises :class:`ParseError` with one line a user can act on; nothing else escapes.
"""

from __future__ import annotations

from collections.abc import Iterator

from envdoctor.knowledge.factkeys import validate_fact_keys

from ..lazyre import lazy_re
from ..model import Facts, Reading, Reason, missing, ok
from . import collect_env, evidence, nvidia_smi, packages, prose, signatures, statements, toollines, ultralytics
from .containers import CONTAINER_CMD_RE as _CONTAINER_CMD_RE
from .containers import container_evidence as _container_evidence

__all__ = ["MAX_CHARS", "PARSERS", "PASTE_KEYS", "ParseError", "detect_formats", "parse_text"]

#: Keys :func:`parse_text` writes itself, whatever the format (Python's banner, container evidence).
PASTE_KEYS = ("host.os", "python.version", "host.container", "host.container_evidence", "container.gpus_requested")
#: Each parser's producer name in envdoctor/knowledge/factkeys.py -> the keys it declares.
PARSERS: dict[str, tuple[str, ...]] = {
    "collect_env": collect_env.KEYS, "nvidia_smi": (*nvidia_smi.KEYS, *nvidia_smi.WRITES_WHEN_SHOWN),
    "ultralytics": ultralytics.KEYS, "packages": packages.KEYS, "parse_text": PASTE_KEYS,
    "statements": statements.KEYS, "evidence": evidence.KEYS, "toollines": toollines.KEYS, "prose": prose.KEYS,
}
for _name, _keys in PARSERS.items():
    validate_fact_keys(_keys, f"parser {_name!r} KEYS", producer=f"parser:{_name}")

#: A collect_env report is 5-20 KB; nvidia-smi of an 8-GPU box with processes a few KB more.
#: Beyond this the input is a log or the wrong file, and parsing it would only be slow.
MAX_CHARS = 4_000_000
#: lscpu's "Flags" line is ~1.5 KB; longer lines are cut so no line-level regex runs long.
MAX_LINE = 8_000
#: A ticket is a few thousand lines at most; a longer text is a log. Its head (where collect_env and
#: the command sit) and its tail (where the decisive error sits) are read, the middle is dropped, so
#: the cost of any text is bounded (bench/hostile_paste.py: 4 MB of any shape in under 2 s).
HEAD_LINES, TAIL_LINES = 2_000, 8_000

_FENCE_RE = lazy_re(r"^\s*(```|~~~)")
_QUOTE_RE = lazy_re(r"^\s*(?:>\s?)+")
_TAG_LINE_RE = lazy_re(r"^\s*(?:</?(?:details|summary|pre|code|br|p)\b[^>]*>\s*)+")
_BULLET_RE = lazy_re(r"^\s*[-*]\s+(?=\S.*:)")
_PY_BANNER_RE = lazy_re(r"^Python (\d+\.\d+\.\d+)\S* \(.{0,120}\) ?\[.{0,80}\] on (linux|win32|darwin)$")


_GPU_REQUEST_WORDS = ("--gpus", "--runtime=nvidia", "--runtime nvidia", "nvidia-docker", "nvidia.com/gpu",
                      "NVIDIA_VISIBLE_DEVICES")


def _gpus_requested(lines: list[str]) -> tuple[bool, str] | None:
    """Whether the `docker|podman run|create` command in the paste asked for GPUs (its continuation
    lines included); None when no such command is shown."""
    for i, line in enumerate(lines):
        m = _CONTAINER_CMD_RE.match(line.strip())
        if not m or m.group(1) == "kubectl" or not m.group(2).startswith(("run", "create")) and m.group(1) != "nvidia-docker":
            continue
        command = [line.strip()]
        while command[-1].endswith("\\") and i + len(command) < len(lines):
            command.append(lines[i + len(command)].strip())
        text = " ".join(command)
        asked = m.group(1) == "nvidia-docker" or any(w in text for w in _GPU_REQUEST_WORDS)
        return asked, f"`{text[:120]}` {'requests' if asked else 'does not request'} GPUs"
    return None


class ParseError(ValueError):
    """The text is not a report this module can read (empty, garbage, too large)."""


# A syslog line ("Jun 30 11:07:05 gpu-0 kernel: …"): rsyslog writes the control characters of a message as '#' and
# three octal digits (its EscapeControlCharactersOnReceive default), so a kernel message's newlines come as "#012".
_SYSLOG_RE = lazy_re(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ ")


def _unescaped(raws: list[str]) -> Iterator[str]:
    """The lines as their emitter wrote them: a syslog line's "#012" newlines split, and a line quoted inside a
    JSON or Python string (a notebook's error output: 'Error loading \\"c:\\\\…\\\\fbgemm.dll\\"') unescaped."""
    for raw in raws:
        if "#01" in raw and _SYSLOG_RE.match(raw):
            yield from raw.replace("#011", " ").split("#012")
        elif '\\"' in raw:
            yield raw.replace('\\"', '"').replace("\\\\", "\\")
        else:
            yield raw


def _clean(text: str) -> list[str]:
    # NULs appear when a UTF-16 file was decoded as UTF-8; dropping them recovers ASCII text.
    text = text.replace("\x00", "").replace("\ufeff", "")
    # Pastes typed through CJK input methods carry full-width colons ("GPU 0： Tesla P100").
    text = text.replace("\uff1a", ":")
    # Text pasted through word processors and chat apps gets typographic quotes ("couldn‘t").
    text = text.replace("\u2018", "'").replace("\u2019", "'")
    lines: list[str] = []
    raws = list(_unescaped(text.splitlines()))
    if len(raws) > HEAD_LINES + TAIL_LINES:
        raws = [*raws[:HEAD_LINES], "", *raws[-TAIL_LINES:]]
    for raw in raws:
        line = raw[:MAX_LINE]
        line = _QUOTE_RE.sub("", line)
        if fence := _FENCE_RE.match(line):
            # A fence's info string is one word ("text", "shell"); more words are the paste's first line,
            # typed right after the backticks ("```NVIDIA GeForce RTX 5090 with CUDA capability …").
            rest = line[fence.end():].lstrip("`~").strip()
            if len(rest.split()) < 2:
                continue
            line = rest
        line = _TAG_LINE_RE.sub("", line)
        line = _BULLET_RE.sub("", line).replace("**", "")
        lines.append(line.rstrip().lstrip(" \t"))
    return lines


def detect_formats(text: str) -> list[str]:
    """The report formats found in ``text``: ``"collect_env"``, ``"nvidia-smi"`` (possibly both)."""
    lines = _clean(text)
    found = []
    if collect_env.looks_like(lines):
        found.append("collect_env")
    if nvidia_smi.looks_like(lines):
        found.append("nvidia-smi")
    if not found and ultralytics.looks_like(lines):
        found.append("ultralytics")
    if "collect_env" not in found and packages.looks_like(lines):
        found.append("package-list")
    if not found and signatures.has_messages(lines):
        found.append("torch-messages")
    return found


def _has_evidence(readings: dict[str, Reading]) -> bool:
    """Anything at all was read: a fact (the OS or Python alone included: the answer then says what the text
    does not show), an error line, a known tool's line, or a read that failed was shown (collect_env's "Could
    not collect" is not one). Only a text in which nothing is read is refused."""
    return any(r.ok or (r.reason is not None and r.reason.value in ("failed", "absent")
                        and r.detail not in ("Could not collect", "No CUDA")) for r in readings.values())


def parse_text(text: str) -> Facts:
    """Facts from a pasted report. Raises :class:`ParseError` (one clear line) for anything else."""
    if not isinstance(text, str):
        raise ParseError(f"expected text, got {type(text).__name__}")
    if not text.strip():
        from envdoctor.knowledge.remedies import COLLECT_ENV

        raise ParseError(f"the report is empty: paste the output of `{COLLECT_ENV}` "
                         "or `nvidia-smi`")
    if len(text) > MAX_CHARS:
        raise ParseError(f"the input is {len(text) / 1e6:.1f} MB, more than any environment report "
                         f"({MAX_CHARS / 1e6:.0f} MB limit): pass only the collect_env or nvidia-smi output")
    try:
        return _parse(text)
    except ParseError:
        raise
    except Exception as exc:
        raise ParseError(f"could not read the report ({type(exc).__name__}: {exc}); please report this "
                         "paste to envdoctor") from exc


def _read_reports(lines: list[str]) -> tuple[dict[str, Reading], str]:
    """The readings of every report format the text holds, and the name of the first one."""
    is_collect_env = collect_env.looks_like(lines)
    is_smi = nvidia_smi.looks_like(lines)
    is_banner = not is_collect_env and ultralytics.looks_like(lines)
    is_list = not is_collect_env and packages.looks_like(lines)
    readings: dict[str, Reading] = {}
    if is_collect_env:
        readings.update(collect_env.parse(lines))
    if is_smi:
        smi = nvidia_smi.parse(lines)
        for key, reading in smi.items():
            # nvidia-smi's own table is the better source for nvml.* (it has the driver's CUDA
            # version and memory), unless it failed where collect_env's own call worked.
            if reading.ok or key not in readings or not readings[key].ok:
                readings[key] = reading
    if is_banner:
        for key, reading in ultralytics.parse(lines).items():
            readings.setdefault(key, reading)
    if is_list:
        for key, reading in packages.parse(lines).items():
            readings.setdefault(key, reading)
    source = ("collect_env" if is_collect_env else "nvidia-smi" if is_smi else "Ultralytics banner" if is_banner
              else "package list" if is_list else "the pasted text")
    return readings, source


def _parse(text: str) -> Facts:
    lines = _clean(text)
    readings, source = _read_reports(lines)
    is_collect_env = source == "collect_env"
    if not is_collect_env:
        # Evidence wherever it appears: every line is offered to the signature table (torch's,
        # CUDA's, NCCL's, the loader's and the system tools' own lines); collect_env reads them itself.
        signatures.scan_messages(lines, readings, nvidia_smi.explained_lines(lines))
    # Version statements in any list form; a report's own reading wins over a statement.
    statements.parse(lines, readings, statements.COLLECT_ENV_OWN if is_collect_env else frozenset())
    # Known tools' start-up lines and command lines, then prose: each fills only what nothing above read.
    toollines.parse(lines, readings)
    if not is_collect_env:
        prose.parse(lines, readings)
    if not readings.get("host.os", Reading(None, Reason.NOT_IN_REPORT)).ok:
        # The interactive interpreter's banner names the platform: "Python 3.11.14 (main, …) [GCC 11.4.0] on linux".
        banner = next((m for line in lines if (m := _PY_BANNER_RE.match(line.strip()))), None)
        if banner:
            readings["host.os"] = ok({"linux": "Linux", "win32": "Windows", "darwin": "Darwin"}[banner.group(2)],
                                     "paste", f"Python's banner: \"… on {banner.group(2)}\"")
            if not readings.get("python.version", Reading(None, Reason.NOT_IN_REPORT)).ok:
                readings["python.version"] = ok(banner.group(1), "paste", "Python's banner")
    if "host.container" not in readings:
        found = _container_evidence(lines)
        if found:
            kind, why = found
            readings["host.container"] = ok(kind, "paste", why)
            readings["host.container_evidence"] = ok([why], "paste")
            requested = _gpus_requested(lines)
            if requested is not None:
                readings["container.gpus_requested"] = ok(requested[0], "paste", requested[1])
    if not _has_evidence(readings):
        printable = sum(ch.isprintable() or ch in "\t" for ch in text[:2000]) / max(1, len(text[:2000]))
        what = "binary or garbled data" if printable < 0.9 else "text"
        raise ParseError(f"no environment evidence in the {what}: envdoctor looks for version statements "
                         "('torch: 2.3.1', 'Driver Version: 550.54'), collect_env or nvidia-smi output, and the "
                         "messages torch, CUDA, cuDNN, NCCL, the loader, the kernel and the container runtime print")
    for key in (*collect_env.KEYS, *nvidia_smi.KEYS):
        if key not in readings:
            readings[key] = missing(Reason.NOT_IN_REPORT, source, "the pasted report does not include it")
    return Facts(readings)
