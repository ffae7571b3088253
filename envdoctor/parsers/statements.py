"""Version statements in any list form: the environment blocks of issue templates (Hugging Face's
``transformers env`` / ``accelerate env`` / ``diffusers-cli env``, Lightning's, ComfyUI's start-up
log) and hand-written Markdown lists, whatever their punctuation:

    - PyTorch version (GPU?): 2.1.0+cu121 (True)       **CUDA**: 12.1
    | Driver | 535.104.05 |                            torch==2.3.1
    pytorch version: 2.3.1+cu121                        Python version 3.10.12

Each line is split into a key and a value (at ``:``, ``==``, ``=``, a table's ``|``, or a key ending
in ``version``), the key is looked up among the synonyms projects use for one fact, and the value's
version becomes that fact. A statement is evidence, never a finding: the checks judge the facts.

A real report's own reading always wins over a statement (collect_env's, nvidia-smi's), and the
first statement of a fact wins over later ones; every conflicting statement is kept in the
reading's detail, so both stay evidence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from envdoctor.knowledge import versions
from envdoctor.knowledge.versions import cudnn_to_int

from ..lazyre import lazy_re
from ..model import Reading, ok

SOURCE = "version statement"
KEYS = ("torch.version", "torch.cuda_version", "nvml.driver_version", "python.version", "torch.cudnn_version",
        "torch.nccl_version", "host.os", "host.distro", "host.wsl", "torch.cuda_available")

#: A line longer than this is prose or a log payload, not a statement.
_MAX_STATEMENT = 200

_LEAD_RE = lazy_re(r"^[\s>*+•|#-]*")
# key, separator, value. The key is letters, digits, spaces and a few marks; no sentence punctuation.
_SPLIT_RE = lazy_re(r"^(?P<key>[A-Za-z][\w .()/?,'+-]{0,60}?)\s*(?::|==|=|\|)\s*(?P<value>\S.*)$")
# "PyTorch version 2.1.0" / "CUDA Version 12.1" (no separator, the key ends in "version").
_VERSION_WORD_RE = lazy_re(r"^(?P<key>[A-Za-z][\w .+-]{0,40}?\bversion)\s+(?P<value>v?\d.*)$", re.IGNORECASE)
_PAREN_RE = lazy_re(r"\([^)]*\)")
_VERSION_RE = lazy_re(r"\d+(?:\.\d+)+(?:(?:\.?(?:post|dev|a|b|rc)\d+)*)(?:\+[\w.]+)?")
_DRIVER_RE = lazy_re(r"\b\d{3}(?:\.\d{1,3}){1,2}\b")

# Normalised key (lower case, parentheses, "version", "the", separators removed) -> fact.
_SYNONYMS: dict[str, str] = {}
for _fact, _names in {
    "torch.version": ("pytorch", "torch", "pytorch torch", "torch pytorch", "pytorch gpu?", "pytorch build",
                      "torch.__version__", "torch __version__", "pytorch versions", "installed pytorch"),
    "torch.cuda_version": ("cuda used to build pytorch", "torch.version.cuda", "torch cuda", "pytorch cuda",
                           "cuda pytorch", "cuda torch", "torch built with cuda", "pytorch built with cuda"),
    "nvml.driver_version": ("nvidia driver", "driver", "gpu driver", "nvidia gpu driver", "cuda driver",
                            "graphics driver", "display driver", "nvidia-driver", "nvidia driver version"),
    "python.version": ("python", "python3", "python interpreter"),
    "torch.cudnn_version": ("cudnn", "torch.backends.cudnn", "torch.backends.cudnn.version()", "cudnn runtime"),
    "torch.nccl_version": ("nccl", "torch.cuda.nccl", "torch.cuda.nccl.version()"),
    "host.os": ("os", "operating system", "platform", "os platform and distribution", "system", "os version",
                "distribution", "linux distribution", "distro"),
    "torch.cuda_available": ("is cuda available", "torch.cuda.is_available()", "cuda available", "gpu available",
                             "cuda is available"),
}.items():
    for _name in _names:
        _SYNONYMS[_name] = _fact

_OS_WORDS = (("windows", "Windows"), ("win32", "Windows"), ("win64", "Windows"), ("macos", "Darwin"),
             ("darwin", "Darwin"), ("ubuntu", "Linux"), ("debian", "Linux"), ("centos", "Linux"), ("linux", "Linux"),
             ("fedora", "Linux"), ("rocky", "Linux"), ("rhel", "Linux"), ("red hat", "Linux"), ("arch", "Linux"),
             ("wsl", "Linux"), ("almalinux", "Linux"), ("opensuse", "Linux"), ("amazon linux", "Linux"))


def _norm(key: str) -> str:
    key = _PAREN_RE.sub(" ", key.lower()).replace("_", " ").replace("*", " ")
    words = [w for w in re.split(r"[\s,/-]+", key) if w and w not in ("version", "versions", "the", "your", "of", "used",
                                                                      "installed", "number", "info", "v")]
    return " ".join(words)


def split_statement(line: str) -> tuple[str, str] | None:
    """``(normalised key, value)`` of a statement line, or None. Linear in the line's length."""
    if len(line) > _MAX_STATEMENT or not line:
        return None
    text = _LEAD_RE.sub("", line).replace("**", "").replace("__", "").replace("`", "").strip()
    m = _SPLIT_RE.match(text) or _VERSION_WORD_RE.match(text)
    if m is None:
        return None
    value = m.group("value").strip().strip("|*` ").strip()
    key = m.group("key")
    if "version" in key.lower() and "(" not in key:
        # "torch version: x" keeps its subject; "version of torch" too.
        key = key.replace("version of", "")
    return _norm(key), value


#: collect_env labels whose meaning differs from the statement's: its "cuDNN version" is a search for
#: libcudnn files (libs.cudnn_copies), not the cuDNN torch loads.
COLLECT_ENV_OWN = frozenset({"cudnn version"})

_PATH_RE = lazy_re(r"[\\/]")


def _value(fact: str, value: str) -> object | None:
    low = value.lower()
    if fact != "host.os" and _PATH_RE.search(value.split()[0] if value.split() else value):
        # A path ("C:\\…\\CUDA\\v12.5\\bin\\cudnn_ops64_9.dll", "/usr/lib/…/libcudnn.so.8") names a file,
        # not the version of the thing: its digits belong to something else.
        return None
    if fact == "host.os":
        return next((name for word, name in _OS_WORDS if word in low), None)
    if fact == "torch.cuda_available":
        first = low.split()[0] if low.split() else ""
        return {"true": True, "yes": True, "false": False, "no": False}.get(first.strip(".,"))
    if fact == "nvml.driver_version":
        m = _DRIVER_RE.search(value)
        return m.group(0) if m else None
    m = _VERSION_RE.search(value)
    if m is None:
        return None
    version = m.group(0)
    if fact == "torch.cudnn_version":
        return cudnn_to_int(version.split("+")[0]) if version.count(".") >= 1 else None
    if fact == "torch.cuda_version":
        parts = version.split(".")
        return ".".join(parts[:2])
    if fact in ("python.version", "torch.nccl_version"):
        return version.split("+")[0]
    return version


# An interactive interpreter's echo: ">>> torch.__version__" (or IPython's "In [3]: …", a print() of it) and,
# on the next line, what it printed ("'2.1.0+cpu'", "False", "None"): the pair is the statement
# "torch.__version__: 2.1.0+cpu".
# (parse_text has taken the ">>>" off already, as it takes quote markers off.)
_PROMPT_RE = lazy_re(r"^(?:>>>|In \[\d+\]:)?\s*(?:print\((?P<printed>[\w.()]{3,60})\)|(?P<expr>[a-z_]+\.[\w.()]{2,60}))\s*$")
_ECHO_RE = lazy_re(r"^(?:Out\[\d+\]:\s*)?['\"]?(?P<value>[\w.+-]{1,40})['\"]?$")


def _repl_pairs(lines: Sequence[str]) -> list[tuple[str, str, str]]:
    """The interpreter's prompt-and-echo pairs whose expression names a fact: ``(fact, value, the pair)``."""
    out: list[tuple[str, str, str]] = []
    for i, line in enumerate(lines[:-1]):
        if "." not in line or len(line) > 80:
            continue
        prompt = _PROMPT_RE.match(line.strip())
        echo = _ECHO_RE.match(lines[i + 1].strip()) if prompt else None
        if prompt and echo:
            expr = prompt.group("printed") or prompt.group("expr")
            fact = _SYNONYMS.get(expr.lower())
            if fact:
                out.append((fact, echo.group("value"), f"{line.strip()} -> {lines[i + 1].strip()}"))
    return out


def statements(lines: Sequence[str], reserved: frozenset[str] = frozenset()) -> dict[str, list[tuple[object, str]]]:
    """Every statement in the text: fact -> [(value, the line)], in order of appearance. ``reserved``:
    labels a report parser already read with their own meaning (collect_env's "cuDNN version" is a
    file search, not torch's cuDNN), skipped here."""
    found: dict[str, list[tuple[object, str]]] = {}
    for said_fact, said, pair in _repl_pairs(lines):
        if (echoed := _value(said_fact, said)) is not None or (said_fact == "torch.cuda_version" and said == "None"):
            _add(found, said_fact, echoed, said, pair)
    for line in dict.fromkeys(lines):
        split = split_statement(line)
        if split is None or (reserved and " ".join(line.split(":", 1)[0].lower().split()) in reserved):
            continue
        fact = _SYNONYMS.get(split[0])
        if fact is None:
            continue
        value = _value(fact, split[1])
        if value is None:
            continue
        _add(found, fact, value, split[1], line)
    return found


def _add(found: dict[str, list[tuple[object, str]]], fact: str, value: object, said: str, line: str) -> None:
    """One statement of ``fact``, and what it says besides (an OS's distro and WSL, a torch version's CUDA)."""
    found.setdefault(fact, []).append((value, line.strip()[:120]))
    if fact == "host.os":
        found.setdefault("host.distro", []).append((said[:80], line.strip()[:120]))
        if "wsl" in said.lower() or "microsoft" in said.lower():
            found.setdefault("host.wsl", []).append((True, line.strip()[:120]))
    if fact == "torch.version" and isinstance(value, str):
        if cuda := versions.variant_cuda(versions.local_tag(value.split()[0] if value.split() else value)):
            found.setdefault("torch.cuda_version", []).append((cuda, line.strip()[:120]))
        elif value.endswith("+cpu"):
            found.setdefault("torch.cuda_version", []).append((None, line.strip()[:120]))


def has_statements(lines: Sequence[str]) -> bool:
    return bool(statements(lines))


def parse(lines: Sequence[str], readings: dict[str, Reading], reserved: frozenset[str] = frozenset()) -> None:
    """Write each stated fact into ``readings`` unless a report already read it; keep conflicts as evidence."""
    for fact, said in statements(lines, reserved).items():
        if fact == "host.distro" and "host.os" in readings and readings["host.os"].ok \
                and readings["host.os"].source != SOURCE:
            continue
        current = readings.get(fact)
        if current is not None and current.ok:
            differ = [line for v, line in said if v != current.value]
            if differ and current.value is not None:
                # The report's own reading is the more specific: it wins, the statement stays evidence.
                readings[fact] = ok(current.value, current.source,
                                    "; ".join(x for x in (current.detail, f"also stated: {differ[0]!r}") if x))
            continue
        value, line = said[0]
        others = [f"{w!r}" for v, w in said[1:] if v != value]
        detail = f"stated: {line!r}" + (f"; conflicting statements: {', '.join(others[:3])}" if others else "")
        readings[fact] = ok(value, SOURCE, detail)


__all__ = ["COLLECT_ENV_OWN", "KEYS", "SOURCE", "has_statements", "parse", "split_statement", "statements"]
