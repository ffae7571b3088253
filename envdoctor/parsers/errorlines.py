"""Every line that reports an error, whether or not any signature knows it.

A line reports an error when it is a traceback's exception line (``RuntimeError: …``, ``torch.OutOfMemoryError``),
says ``error:`` / ``Error`` / ``ERROR``, ``failed``, ``cannot`` / ``can't``, a system call's failure in the C
library's words (``No such file or directory``, ``Permission denied``, …) or a shell's ``command not found``, is an
``NCCL WARN`` line, or names
a fatal signal or exit (``Segmentation fault``, ``Bus error``, ``Killed``, ``core dumped``, a non-zero exit status).
:func:`error_lines` finds them, each with the package of the traceback's last frame above it (``File
"…/site-packages/xformers/ops/fmha/__init__.py"`` -> ``xformers``), ranked worst first. Which of them a
catalogue row or a signature explains is the signature table's business (``signatures.scan_messages``);
the rest become ``text.error_lines``, judged by the ``unexplained-error`` check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envdoctor.knowledge.messages import package_of_path

from ..lazyre import lazy_re

__all__ = ["ErrorLine", "MAX_LINES", "error_lines"]

#: Findings about unexplained lines are capped: a log looping over one failure says it once.
MAX_LINES = 5

# Rank 0: a fatal signal or a process killed; 1: a traceback's exception line; 2: an error word; 3: failed/cannot.
_FATAL_RE = lazy_re(r"Segmentation fault|Bus error|\bKilled\b|core dumped|\bSIG(?:SEGV|BUS|KILL|ABRT)\b|"
                    r"Fatal Python error|\bexit(?:ed)?\s+(?:with\s+)?(?:status|code)\s*[:=]?\s*-?[1-9]\d*|"
                    r"non-zero exit status -?[1-9]\d*|\bexitcode\s*:\s*-?[1-9]\d*|Aborted \(core dumped\)")
# "RuntimeError: …", "torch.OutOfMemoryError: …", "jaxlib.xla_extension.XlaRuntimeError: …", "ImportError" alone
_EXCEPTION_RE = lazy_re(r"^(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception)(?::\s|$)")
_ERROR_WORD_RE = lazy_re(r"\berror\b\s*[:!]|\bError\b|\bERROR\b|\bNCCL WARN\b|\bFATAL\b|\bfatal error\b")
_FAILED_RE = lazy_re(r"\bfailed\b|\bcannot\b|\bcan't\b|\bcould not\b|\bunable to\b", re.IGNORECASE)
#: The C library's own words for the failures a system call reports (glibc's errno strings, stdio-common/errlist.c
#: / sysdeps/gnu/errlist.h, as strerror and perror print them), and the shells' "no such command": bash's
#: "%s: command not found" (execute_cmd.c), dash's "%s: not found", cmd.exe's "… is not recognized as an internal
#: or external command". A line that says one reports a failure, whatever else it says.
_SYSTEM_FAILURES = ("no such file or directory", "permission denied", "operation not permitted",
                    "no space left on device", "device or resource busy", "no such device", "connection refused",
                    "connection timed out", "address already in use", "too many open files", "read-only file system",
                    "broken pipe", "command not found", "is not recognized as an internal or external command")
_SHELL_NOT_FOUND_RE = lazy_re(r"^(?:/bin/)?(?:ba|da|z|k)?sh: (?:\d+: )?[\w./-]+: not found$")
# Words that say an error did not happen ("0 errors", "error_count: 0", "Errors: None", "no error"), read on the
# lower-cased line; collect_env's placeholder and build flags are no errors either.
_BENIGN_RE = lazy_re(r"(?:\b0 |\bno )errors?\b|errors?\s*[:=]\s*(?:0|none|n/a)\b|error_?count\s*[:=]\s*0\b|"
                     r"failed\s*[:=]\s*0\b|\b0 failed\b")
_BENIGN_WORDS = ("could not collect", "ignore_errors", "on_error", "errors='", "-werror", "is debug build", " ecc ",
                 "ecc errors", "ecc mode")
#: A heading that introduces the error below it ("Last error:", "Error log:", "# ERROR").
_HEADINGS = ("error", "errors", "error log", "error message", "error output", "error trace")
#: Words one of which a fatal line holds (the regex runs only then).
_FATAL_WORDS = ("segmentation fault", "bus error", "killed", "core dumped", "sigsegv", "sigbus", "sigkill", "sigabrt",
                "fatal python error", "exit",
                "aborted")


def _benign(lowered: str) -> bool:
    if any(w in lowered for w in _BENIGN_WORDS):
        return True
    tail = lowered.rstrip(" :.")
    for heading in _HEADINGS:
        if tail.endswith(heading) and (len(tail) == len(heading) or not tail[-len(heading) - 1].isalnum()):
            return True
    return bool(_BENIGN_RE.search(lowered))


# A traceback's frame: Python's ('File "/…/x.py", line 5, in f'), IPython's before 8 ("~/…/x.py in <module>()")
# and from 8 on ("File ~/…/x.py:5, in <module>").
_FRAME_RE = lazy_re(r'^\s*(?:File "([^"]{1,500})", line \d+|File\s+([^\s"]{1,500}\.py):\d+(?:,?\s+in\s|\s*$)|'
                    r'([^\s"]{1,500}\.py)\s+in\s+\S{1,80}\()')
# A logger's prefix says who logged the line, not what it says: vLLM's "ERROR 02-20 16:43:12 engine.py:389] ",
# glog's "E0508 03:34:06.237713 14701 cuda_dnn.cc:522] ", torchrun's "[rank0]: ", docker compose's "web-1  | ".
# The line is judged by what follows it (a traceback's frames under an ERROR prefix are frames).
_LOG_PREFIX_RE = lazy_re(r"^(?:\[[\w ./:-]{1,40}\]:?\s*|[a-z0-9][\w.-]{0,60}[-_]\d+\s+\|\s|"
                         r"(?:\(\w+ pid=\d+\)\s*))*"
                         r"(?:(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\s+\d[\d/:. -]{4,30}\s*[\w.-]*:\d+\]\s?|"
                         r"[DIWEF]\d{4}\s+\d{2}:\d{2}:\d{2}[.\d]*\s+\d+\s+[\w.-]+:\d+\]\s?)?")
# collect_env's placeholder for a field it could not read ("cuDNN version: Could not collect"), cut or whole.
_PLACEHOLDER_FIELD_RE = lazy_re(r"^[\w .()/-]{1,60}:\s*Could not col")
_TRACEBACK = "Traceback (most recent call last)"
#: IPython prints each frame's source around the failing line: "    146   line", "--> 148   line" (line numbers padded).
_SOURCE_LINE_RE = lazy_re(r"^(?:-+>\s*)?\d{1,6} {2,}\S")
#: A markdown heading or rule of the reporter's ("### Error / output", "**Error log**", "---"): no error line.
_MARKDOWN_HEADING_RE = lazy_re(r"^(?:#{1,6}\s|\*\*[^*]{1,100}\*\*:?\s*$|__[^_]{1,100}__:?\s*$|[=-]{3,}\s*$)")
#: The reporter's own sentence ("Update - my gpu is detected but …", "I can't get CUDA to work"): the first person,
#: which no emitter's message speaks in. Only for error words and failures; an exception or a fatal line is kept.
_FIRST_PERSON_RE = lazy_re(r"(?<![/\\.\w-])(?:I|I'm|I've|I'd|I'll|my|My|we|We|we're|We're|our|Our)(?![/\\.\w-])")
#: A line longer than this is a payload (a base64 blob, a JSON dump), never one error sentence.
_MAX_LEN = 2000


@dataclass(frozen=True)
class ErrorLine:
    line: str
    rank: int  # 0 worst
    package: str | None  # the package of the traceback's last frame above the line, when it is in one


def _content(line: str) -> str:
    """The line without its logger's prefix."""
    m = _LOG_PREFIX_RE.match(line)
    return line[m.end():].strip() if m and m.end() else line


#: Lower-case words one of which every error line holds: a line without any is not looked at again.
_TRIGGERS = ("error", "exception", "fail", "cannot", "can't", "could not", "unable to", "warn", "fatal",
             "segmentation", "killed", "core dumped", "sigsegv", "sigbus", "sigkill", "sigabrt", "exit",
             "not found", "denied", "not permitted", "no space", "busy", "no such", "refused", "timed out",
             "in use", "too many", "read-only", "broken pipe", "not recognized")


def _rank(line: str) -> int | None:
    if len(line) > _MAX_LEN or not line.strip():
        return None
    lowered = line.lower()
    if not any(t in lowered for t in _TRIGGERS):
        return None
    if any(w in lowered for w in _FATAL_WORDS) and _FATAL_RE.search(line):
        rank = 0
    elif _EXCEPTION_RE.match(line):
        rank = 1
    elif _ERROR_WORD_RE.search(line):
        rank = 2
    elif (_FAILED_RE.search(line) or any(w in lowered for w in _SYSTEM_FAILURES)
          or _SHELL_NOT_FOUND_RE.match(line.strip())):
        rank = 3
    else:
        return None
    if rank and (_benign(lowered) or _PLACEHOLDER_FIELD_RE.match(line)):
        return None
    if _MARKDOWN_HEADING_RE.match(line.strip()):
        return None
    if rank >= 2 and _FIRST_PERSON_RE.search(line):
        return None
    return rank


def _frame_package(path: str) -> str | None:
    """``…/site-packages/torch/cuda/__init__.py`` -> ``torch``; a user's own file -> its name (``train.py``)."""
    parts = path.replace("\\", "/").rsplit("/", 2)
    if len(parts) == 3 and parts[2] == "__init__.py" and parts[1].isidentifier():
        return package_of_path(path) or parts[1]  # a package's own __init__ (a source checkout's too) is that package
    return package_of_path(path) or parts[-1] or None


def error_lines(lines: list[str]) -> list[ErrorLine]:
    """Each distinct error line, worst first (in text order within a rank)."""
    found: dict[str, ErrorLine] = {}
    seen: set[str] = set()
    package: str | None = None
    for raw in lines:
        line = raw.strip()
        if not line or (line in seen and package is None):
            continue
        seen.add(line)
        content = _content(line)
        if content.startswith(_TRACEBACK):
            package = None
            continue
        if frame := _FRAME_RE.match(content):
            package = _frame_package(frame.group(1) or frame.group(2) or frame.group(3))
            continue
        if package and not content.strip():
            continue
        if package and _SOURCE_LINE_RE.match(content):
            continue  # IPython's listing of the frame's source ("147     err.strerror += …", "--> 148 raise err")
        rank = _rank(content)
        if rank is not None and line not in found:
            found[line] = ErrorLine(line, rank, package if rank <= 1 else None)
        if rank == 1:
            package = None  # the exception line closes its traceback
    return sorted(found.values(), key=lambda e: e.rank)


def frame_packages(lines: list[str]) -> dict[str, str]:
    """Line -> the package of the traceback frame right above it, for the lines inside a traceback."""
    out: dict[str, str] = {}
    package: str | None = None
    for raw in lines:
        line = raw.strip()
        content = _content(line)
        if content.startswith(_TRACEBACK):
            package = None
        elif frame := _FRAME_RE.match(content):
            package = _frame_package(frame.group(1) or frame.group(2) or frame.group(3))
        elif package and line:
            out.setdefault(line, package)
            if _EXCEPTION_RE.match(content):
                package = None
    return out
