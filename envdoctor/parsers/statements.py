"""Version statements in any list form: the environment blocks of issue templates (Hugging Face's
``transformers env`` / ``accelerate env`` / ``diffusers-cli env``, Lightning's, ComfyUI's "System
Information" and start-up log) and hand-written lists, whatever their punctuation:

    - PyTorch version (GPU?): 2.1.0+cu121 (True)       **CUDA**: 12.1          * **GPU**: RTX 4090
    | Driver | 535.104.05 |                            torch==2.3.1            torch = "2.3.1"
    pytorch version: 2.3.1+cu121                        Python version 3.10.12  PyTorch<TAB>2.3.1
    Pytorch Version        (ComfyUI: the key on one line, its value on the next)
    2.5.1+cu124
    {"torch": "2.5.1", "gpu": "NVIDIA A100-SXM4-80GB"}  (JSON, also one key per line; YAML and TOML
                                                         sections name the key's subject: ``[torch]``)
    >>> torch.version.cuda                              (an interpreter's prompt and what it echoed, or a shell's
    '12.1'                                               `python -c "import torch; print(torch.version.cuda)"`)

Each line is split into a key and a value (at ``:``, ``==``, ``=``, a table's ``|``, a TAB, or a key
ending in ``version``), the key is looked up in :data:`ALIASES` (the one table of the keys people
write for each fact), and the value must have the fact's form (a version, a driver number, a GPU
product, a compute capability): a key the table knows with a value of another form, and every word
of prose, say nothing. A statement is evidence, never a finding: the checks judge the facts.

A stated GPU becomes what collect_env's "GPU models and configuration" becomes (``nvml.gpus``,
``nvml.device_count``; ``torch.devices`` where CUDA's availability is stated too), its compute
capability, where stated (``(compute capability 6.1)``, ``sm_61``, ``8.6``, ``capability (8, 6)``),
in the GPU's ``compute_capability``.

A real report's own reading always wins over a statement (collect_env's, nvidia-smi's), and the
first statement of a fact wins over later ones, except that a CUDA stated without saying whose
("CUDA: 12.4", often the toolkit on the system) gives way to the CUDA of torch's own version tag
(``2.9.0+cu130``) and to a torch-qualified key ("torch.version.cuda"); every conflicting statement
is kept in the reading's detail, so both stay evidence.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from envdoctor.knowledge import compat, versions
from envdoctor.knowledge.versions import cudnn_to_int

from ..lazyre import lazy_re
from ..model import Reading, ok

SOURCE = "version statement"
KEYS = ("torch.version", "text.frameworks", "torch.cuda_version", "nvml.driver_version", "python.version", "torch.cudnn_version",
        "torch.nccl_version", "host.os", "host.distro", "host.wsl", "torch.cuda_available",
        "nvml.gpus", "nvml.device_count", "torch.devices", "torch.device_count", "host.arch")

#: The alias table: what a statement's key says, for each fact, as people and tools write it (any case,
#: punctuation, ``**bold**``, "version" or not: :func:`norm_key` folds those). Two entries are no fact key:
#: ``gpu`` is a GPU's product name and ``gpu.cc`` its compute capability (together: ``nvml.gpus``), and
#: ``cuda`` a CUDA that does not say whose (``torch.cuda_version`` unless torch's own tag says otherwise).
#: ``tensorflow`` is TensorFlow's version (``text.frameworks``; a tool's own line for it wins, see toollines).
#: ``gpu.device`` keys ("Name") count only with ComfyUI's device value ``cuda:0 NAME : cudaMallocAsync``.
ALIASES: Mapping[str, tuple[str, ...]] = {
    "torch.version": ("pytorch", "torch", "pytorch torch", "torch pytorch", "pytorch gpu?", "pytorch build",
                      "torch.__version__", "pytorch versions", "installed pytorch", "pytorch version",
                      "torch version", "pt version", "pytorch lightning torch"),
    "torch.cuda_version": ("cuda used to build pytorch", "torch.version.cuda", "torch cuda", "pytorch cuda",
                           "cuda pytorch", "cuda torch", "torch built with cuda", "pytorch built with cuda",
                           "torch cuda version", "cuda version torch", "pytorch cuda version"),
    "cuda": ("cuda", "cuda version", "cuda runtime", "cuda runtime version", "cuda used", "cuda build",
             "cuda compiled", "cuda wheel"),
    "nvml.driver_version": ("nvidia driver", "driver", "gpu driver", "nvidia gpu driver", "cuda driver",
                            "graphics driver", "display driver", "nvidia-driver", "nvidia driver version",
                            "driver version", "nvidia driver version nvidia-smi", "nvidia-smi driver"),
    "gpu": ("gpu", "gpus", "device", "gpu model", "gpu models", "gpu name", "gpu type", "gpu device", "graphics card",
            "graphics", "graphics adapter", "video card", "gpu card", "nvidia gpu", "gpu hardware", "device name", "cuda device",
            "torch.cuda.get_device_name()", "torch.cuda.get_device_name", "hardware gpu", "card", "gpu s",
            "gpu models and configuration", "accelerator", "cuda gpu", "gpu model and memory"),
    "gpu.device": ("name", "devices name", "device 0", "cuda device name"),
    "gpu.cc": ("compute capability", "cuda capability", "gpu compute capability", "capability", "cc",
               "sm", "cuda arch", "gpu arch", "cuda compute capability", "torch.cuda.get_device_capability()",
               "torch.cuda.get_device_capability", "device capability", "compute cap", "compute_cap",
               "gpu capability"),
    "python.version": ("python", "python3", "python interpreter"),
    "torch.cudnn_version": ("cudnn", "torch.backends.cudnn", "torch.backends.cudnn.version()", "cudnn runtime"),
    "torch.nccl_version": ("nccl", "torch.cuda.nccl", "torch.cuda.nccl.version()"),
    "host.os": ("os", "operating system", "platform", "os platform and distribution", "system", "os version",
                "distribution", "linux distribution", "distro", "platform.system()", "sys.platform"),
    "host.arch": ("arch", "architecture", "cpu architecture", "machine", "platform.machine()", "cpu arch",
                  "host architecture"),
    "torch.cuda_available": ("is cuda available", "torch.cuda.is_available()", "cuda available", "gpu available",
                             "cuda is available"),
    "tensorflow": ("tensorflow", "tensorflow-gpu", "tf", "tf.__version__", "tensorflow installed from"),
}

#: Words a key may carry that change nothing ("the", "version", "installed", "my"…).
_NOISE = frozenset({"version", "versions", "the", "your", "my", "of", "used", "installed", "number", "info", "v",
                    "e.g."})
_SEP_RE = lazy_re(r"[\s,/.:-]+")
_PAREN_RE = lazy_re(r"\([^)]*\)")


def norm_key(key: str) -> str:
    """A key as the alias table holds it: lower case, no parentheses' contents, ``__``, ``_``, ``.``, ``*``,
    backticks or noise words (``torch.__version__`` and ``Torch Version`` are both ``torch``)."""
    key = _PAREN_RE.sub(" ", key.lower().replace("()", "")).replace("_", " ").replace("*", " ").replace("`", " ")
    return " ".join(w for w in _SEP_RE.split(key) if w and w not in _NOISE)


@functools.cache  # built at the first statement read, not at import (no pattern compiles then)
def _synonyms() -> dict[str, str]:
    out: dict[str, str] = {}
    for fact, names in ALIASES.items():
        for name in names:
            key = norm_key(name)
            if out.setdefault(key, fact) != fact:
                raise ValueError(f"statement alias {name!r} ({key!r}) names both {out[key]!r} and {fact!r}")
    return out


#: Which fact each table entry writes, and its precedence (lower wins; the first statement breaks a tie).
_WRITES: dict[str, tuple[str, int]] = {"cuda": ("torch.cuda_version", 2), "gpu": ("gpu", 0), "gpu.device": ("gpu", 0)}
_TAG_RANK = 1  # the CUDA of torch's own version tag: over an unqualified CUDA, under a torch-qualified key

#: A line longer than this is prose or a log payload, not a statement.
_MAX_STATEMENT = 200

_LEAD_RE = lazy_re(r"^[\s>*+•|#-]*")
# A quoted key (JSON, TOML, YAML): "torch": … / 'torch' = …
_QUOTED_KEY_RE = lazy_re(r"^[{\[,\s]*([\"'])(?P<key>[^\"']{1,60})\1\s*(?=[:=])")
# key, separator, value. The key is letters, digits, spaces and a few marks; no sentence punctuation.
_SPLIT_RE = lazy_re(r"^(?P<key>[A-Za-z][\w .()/?,'+-]{0,60}?)\s*(?::|==|=|\||\t)\s*(?P<value>\S.*)$")
# "PyTorch version 2.1.0" / "CUDA Version 12.1" (no separator, the key ends in "version").
# (A package listing's "cuda-version   12.9" is conda's package of that name, no statement.)
# The value is the version and at most a parenthesis: "Torch version 2.0.1 did not work, so I upgraded" is prose.
_VERSION_WORD_RE = lazy_re(r"^(?P<key>[A-Za-z][\w .+-]{0,40}? version)\s+(?P<value>v?\d[\w.+-]*(?:\s*\([^()]{0,60}\))?)"
                           r"\s*$", re.IGNORECASE)
# A key alone: "Pytorch Version" (ComfyUI), "- GPU:" (Lightning), "torch:" / "[torch]" / "\"torch\": {" (a section).
_KEY_ONLY_RE = lazy_re(r"^(?:\[(?P<section>[A-Za-z][\w .-]{0,40})\]|(?P<key>[A-Za-z][\w .()/?'+-]{0,60}?)\s*"
                       r"(?P<colon>[:=]\s*\{?)?)$")
_VERSION_RE = lazy_re(r"\d+(?:\.\d+)+(?:(?:\.?(?:post|dev|a|b|rc)\d+)*)(?:\+[\w.]+)?")
_DRIVER_RE = lazy_re(r"\b\d{3}(?:\.\d{1,3}){1,2}\b")
# ComfyUI's device: "cuda:0 NVIDIA GeForce RTX 4090 : cudaMallocAsync" (the allocator after " : ").
_DEVICE_RE = lazy_re(r"^cuda:(?P<index>\d{1,2})\s+(?P<name>[^:]{2,120}?)(?:\s+:\s+\w+)?\s*$")
# The same device in ComfyUI's start-up log, after its timestamp: "… - INFO - Device: cuda:0 NAME : native".
_DEVICE_LOG_RE = lazy_re(r"\bDevice:\s+(?P<device>cuda:\d{1,2}\s+[^:]{2,120}?(?:\s+:\s+\w+)?)\s*$")
# A compute capability in a GPU's value or its own: "(compute capability 6.1)", "sm_61", "capability (8, 6)", "8.6".
_CC_IN_RE = lazy_re(r"[(,;]?\s*\b(?:(?:cuda\s+|compute\s+)?capability|cc|compute_cap)\s*[:=]?\s*"
                    r"(?P<cc>\(\s*\d{1,2}\s*,\s*\d\s*\)|\d{1,2}\.\d)\s*\)?|[(,]?\s*\b(?P<sm>sm_?\d{2,3})\b\s*\)?",
                    re.IGNORECASE)
_CC_VALUE_RE = lazy_re(r"^\(?\s*(?P<maj>\d{1,2})\s*[.,]\s*(?P<min>\d)\s*\)?$|^(?P<sm>sm_?\d{2,3}[af]?)$", re.IGNORECASE)
# A compute capability's own value: "6.1", "sm_61", "(8, 6)", "8.6 (Ampere)".
_CC_START_RE = lazy_re(r"^(\(\s*\d{1,2}\s*,\s*\d\s*\)|\d{1,2}\.\d(?!\d)|sm_?\d{2,3}[af]?)(?![\w.])", re.IGNORECASE)
# "2x RTX 4090", "RTX 4090 x 2", "4 × A100".
# (A lower-case x only: "Tegra X1" and "TITAN X" are products.)
_COUNT_RE = lazy_re(r"^(?P<n>\d{1,2})\s*[xX×]\s+|\s+[x×]\s*(?P<m>\d{1,2})$")
_UUID_RE = lazy_re(r"\s*\(UUID:[^)]*\)\s*$")
#: Words of a GPU product name; any of them, or the catalogue's name, and a model number make a GPU value.
_GPU_WORDS = frozenset({"nvidia", "geforce", "quadro", "tesla", "titan", "rtx", "gtx", "jetson", "grid", "dgx", "tegra",
                        "xavier", "orin", "ion"})
_APPLE_CHIPS = frozenset({"m1", "m2", "m3", "m4"})
_NOT_GPU_WORDS = frozenset({"amd", "radeon", "intel", "arc", "apple", "mps", "cpu", "none", "not", "no", "n/a", "iris",
                            "uhd", "vega", "instinct", "mi300x", "gaudi", "tpu", "xpu", "m1", "m2", "m3", "m4"})

_ARCHES = {"x86_64": "x86_64", "amd64": "x86_64", "x64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64",
           "ppc64le": "ppc64le"}
_OS_WORDS = (("windows", "Windows"), ("win32", "Windows"), ("win64", "Windows"), ("macos", "Darwin"),
             ("darwin", "Darwin"), ("ubuntu", "Linux"), ("debian", "Linux"), ("centos", "Linux"), ("linux", "Linux"),
             ("fedora", "Linux"), ("rocky", "Linux"), ("rhel", "Linux"), ("red hat", "Linux"), ("arch", "Linux"),
             ("wsl", "Linux"), ("almalinux", "Linux"), ("opensuse", "Linux"), ("amazon linux", "Linux"))


# Python logging's prefix on a start-up log's line (ComfyUI's: "2024-10-19 01:10:47,703 - root - INFO - ",
# its newer "2025-03-22T07:27:35.946123 - ").
_LOG_PREFIX_RE = lazy_re(r"^\d{4}-\d\d-\d\d[T ][\d:.,]{5,20}\s+-\s+(?:[\w.]{1,40}\s+-\s+(?:DEBUG|INFO|WARNING|ERROR)\s+-\s+)?")


def _clean_text(line: str) -> str:
    if line[:1].isdigit():
        line = _LOG_PREFIX_RE.sub("", line)
    text = _LEAD_RE.sub("", line)
    if "**" in text or "__" in text or "`" in text:
        text = text.replace("**", "").replace("__", "").replace("`", "")
    text = text.strip()
    if text[:1] in "\"'{[," and (m := _QUOTED_KEY_RE.match(text)):
        text = m.group("key") + text[m.end():]
    return text


def _clean_value(value: str) -> str:
    value = value.strip().rstrip(",").strip().strip("|*` ").strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1].strip()
    return value


def split_statement(line: str) -> tuple[str, str] | None:
    """``(normalised key, value)`` of a statement line, or None. Linear in the line's length."""
    if len(line) > _MAX_STATEMENT or not line:
        return None
    text = _clean_text(line)
    m = _SPLIT_RE.match(text) or _VERSION_WORD_RE.match(text)
    if m is None:
        return None
    value = _clean_value(m.group("value"))
    key = m.group("key")
    if "version" in key.lower() and "(" not in key:
        # "torch version: x" keeps its subject; "version of torch" too.
        key = key.replace("version of", "")
    return norm_key(key), value


def _key_only(line: str) -> tuple[str, bool] | None:
    """``(normalised key, is a section)`` of a line that is a key with no value: ``Pytorch Version``,
    ``GPU:``, ``[torch]``, ``"torch": {``; None for anything else."""
    if len(line) > 80 or not line.strip():
        return None
    m = _KEY_ONLY_RE.match(_clean_text(line))
    if m is None:
        return None
    if m.group("section"):
        return norm_key(m.group("section")), True
    return norm_key(m.group("key")), bool(m.group("colon"))


#: collect_env labels whose meaning differs from the statement's: its "cuDNN version" is a search for
#: libcudnn files (libs.cudnn_copies), not the cuDNN torch loads; its "CUDA runtime version" is nvcc's.
COLLECT_ENV_OWN = frozenset({"cudnn version", "cuda runtime version"})

_PATH_RE = lazy_re(r"[\\/]")


def gpu_value(value: str) -> tuple[str, int, int, versions.CC | None] | None:
    """``(product name, first index, count, stated compute capability)`` of a GPU value, or None when
    the value is no GPU product (prose, "cpu", an AMD or Apple GPU, "not detected")."""
    index, count = 0, 1
    text = _UUID_RE.sub("", value.strip())
    if m := _DEVICE_RE.match(text):
        index, text = int(m.group("index")), m.group("name")
    cc: versions.CC | None = None
    while m := _CC_IN_RE.search(text):  # "GTX 1650 (sm_75, compute capability 7.5)": every mention
        cc = cc or _cc(m.group("cc") or m.group("sm") or "")
        text = (text[:m.start()] + " " + text[m.end():]).strip(" ,;()")
    if m := _COUNT_RE.search(text):
        count = int(m.group("n") or m.group("m"))
        text = (text[:m.start()] + " " + text[m.end():]).strip()
    text = " ".join(text.split())
    if _LIST_RE.search(text) or not _only_product_words(text):
        return None  # "RTX 4090 and RTX 3090", "planning to buy an RTX 5090": no one product named
    words = text.lower().replace("-", " ").split()
    branded = any(w in _GPU_WORDS for w in words)
    if not words or len(text) > 100 or len(words) > 12 or count < 1 or any(
            w.strip("(),") in _NOT_GPU_WORDS and not (branded and w.strip("(),") in _APPLE_CHIPS) for w in words):
        return None  # "Tesla M4" is NVIDIA's; a bare "M4" is Apple's
    has_digit = any(ch.isdigit() for ch in text)
    known = compat.gpu_by_name(text) is not None if has_digit or branded else False
    if not branded and not known and (bare := _bare_model(text)) is not None:
        return bare, index, count, cc
    if not ((branded and (has_digit or known)) or (known and has_digit)):
        return None
    return text, index, count, cc


# A GeForce model number alone, as people write it under a GPU key: "1050ti 4 GB", "3090", "4060 Ti 16GB".
_BARE_MODEL_RE = lazy_re(r"^(\d{3,4})\s*(ti|super|m)?(?:\s+\d{1,3}\s*gb)?$", re.IGNORECASE)


def _bare_model(text: str) -> str | None:
    """The one catalogue product a bare model number names (GTX/RTX/GT before it), or None (none, or more than one)."""
    m = _BARE_MODEL_RE.match(text.strip())
    if m is None:
        return None
    suffix = {"ti": " Ti", "super": " SUPER", "m": "M"}.get((m.group(2) or "").lower(), "")
    named = [f"{prefix} {m.group(1)}{suffix}" for prefix in ("GTX", "RTX", "GT")
             if (info := compat.gpu_by_name(f"{prefix} {m.group(1)}{suffix}")) is not None
             and re.search(rf"\b{prefix}\b", info.name) and m.group(1)[:2] in info.name]
    return named[0] if len(named) == 1 else None


# Two products in one value: "RTX 4090 and RTX 3090", "2x RTX 3090, 1x A100", "A100 & H100".
_LIST_RE = lazy_re(r",|;|\s(?:and|or|&|\+|vs\.?)\s", re.IGNORECASE)
_WORD_RE = lazy_re(r"[^\W\d_]+(?:'[a-z]+)?|\S*\d\S*", re.IGNORECASE)
#: Words a GPU value may hold beside the catalogue's own (its product names' words): the vendor's, the
#: memory's and the board partners' names people paste ("MSI GeForce RTX 3080 Gaming X Trio").
_BOARD_WORDS = frozenset({
    "corporation", "corp", "inc", "device", "memory", "vram", "mib", "gib", "founders", "fe", "reference", "asus",
    "msi", "gigabyte", "evga", "zotac", "pny", "palit", "gainward", "inno3d", "galax", "kfa", "colorful", "asrock",
    "rog", "strix", "tuf", "gaming", "trio", "aorus", "eagle", "windforce", "ventus", "suprim", "oc", "amp", "twin",
    "edge", "dual", "fan", "xlr8", "phoenix", "jetstream", "gamerock", "master", "vision", "extreme", "ftw", "ftw3",
    "sc", "xc", "xlr", "lhr", "blower", "turbo", "aero", "mini", "itx", "vulcan", "igame", "advanced", "ichill",
    "frostbite", "verto", "uprising", "revel", "epic", "hof", "speedster", "mech", "armor", "gaming_x", "noctua",
    "proart", "prime", "astral", "ti", "super", "gpu", "nvidia", "geforce", "rtx", "gtx", "card", "graphics"})


@functools.cache
def _product_vocabulary() -> frozenset[str]:
    """Every word of a product name the catalogue knows (its names and aliases), lower case."""
    from envdoctor.knowledge import compat as tables

    words: set[str] = set(_BOARD_WORDS) | set(_GPU_WORDS)
    for row in [*tables.data()["gpus"]["rows"], *tables.gpu_products()]:
        for name in (row["name"], *row.get("aliases", ())):
            words.update(w.lower() for w in _WORD_RE.findall(str(name)) if not any(c.isdigit() for c in w))
    return frozenset(words)


def _only_product_words(text: str) -> bool:
    """Whether every word of ``text`` could be part of a GPU's name: a model number or memory size (it has a
    digit), or a word of the catalogue's product names or the board makers'. Prose has others ("planning",
    "buy", "yet")."""
    vocabulary = _product_vocabulary()
    return all(any(c.isdigit() for c in w) or w.lower().strip(".") in vocabulary for w in _WORD_RE.findall(text))


def _cc(text: str) -> versions.CC | None:
    m = _CC_VALUE_RE.match(text.strip())
    if m is None:
        return None
    cc = versions.parse_cc(m.group("sm").lower().replace("sm", "sm_").replace("__", "_").rstrip("af")) if m.group("sm") \
        else (int(m.group("maj")), int(m.group("min")))
    return cc if cc is not None and 1 <= cc[0] <= 15 else None


#: GPU values a text may offer before the rest are not looked at: each is a catalogue lookup, and the first counts.
_GPU_TRIES = 64


def _gpu(fact: str, value: str, budget: list[int] | None) -> object | None:
    if budget is not None:
        if budget[0] <= 0:
            return None
        budget[0] -= 1
    if fact == "gpu.device" and not _DEVICE_RE.match(value.strip()):
        return None  # "Name" is a GPU's only in ComfyUI's "cuda:0 NAME : cudaMallocAsync"
    return gpu_value(value)


_OS_TOKEN_RE = lazy_re(r"[a-z0-9]+")
_NEGATIONS = frozenset({"not", "no", "without", "non"})


def _os_name(low: str) -> str | None:
    """The operating system a value names, by whole words, the first one said (``Ubuntu 22.04 (not
    Windows)`` is Linux; a negated word counts for nothing); WSL is Linux, whatever Windows hosts it."""
    tokens = _OS_TOKEN_RE.findall(low)
    if any(t.startswith("wsl") for t in tokens):
        return "Linux"
    words = {word: name for word, name in _OS_WORDS}
    for i, token in enumerate(tokens):
        pair = " ".join(tokens[i:i + 2])
        name = words.get(pair) or words.get(token)
        if name is not None and not (i and tokens[i - 1] in _NEGATIONS):
            return name
    return None


def _value(fact: str, value: str, budget: list[int] | None = None) -> object | None:
    low = value.lower()
    if fact in ("gpu", "gpu.device"):
        return _gpu(fact, value, budget)
    if fact == "gpu.cc":
        m = _CC_START_RE.match(value.strip())
        return _cc(m.group(1)) if m else None
    if fact != "host.os" and _PATH_RE.search(value.split()[0] if value.split() else value):
        # A path ("C:\\…\\CUDA\\v12.5\\bin\\cudnn_ops64_9.dll", "/usr/lib/…/libcudnn.so.8") names a file,
        # not the version of the thing: its digits belong to something else.
        return None
    if fact == "host.os":
        if low.strip() in ("nt", "posix"):  # Python's os.name, as ComfyUI prints it
            return "Windows" if low.strip() == "nt" else None
        return _os_name(low)
    if fact == "host.arch":
        word = low.strip().split()[0] if low.split() else ""
        return _ARCHES.get(word.strip("(),"))
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
    if fact in ("torch.cuda_version", "cuda"):
        parts = version.split("+")[0].split(".")
        return ".".join(parts[:2])
    if fact in ("python.version", "torch.nccl_version"):
        return version.split("+")[0]
    return version


# An interactive interpreter's echo: ">>> torch.__version__" (or IPython's "In [3]: …", a print() of it) and,
# on the next line, what it printed ("'2.1.0+cpu'", "False", "None", "'NVIDIA GeForce RTX 4090'", "(8, 6)"):
# the pair is the statement "torch.__version__: 2.1.0+cpu".
# (parse_text has taken the ">>>" off already, as it takes quote markers off.)
_PROMPT_RE = lazy_re(r"^(?:>>>|In \[\d+\]:)?\s*(?:print\((?P<printed>[\w.()]{3,60})\)|(?P<expr>[a-z_]+\.[\w.()]{2,60}))\s*$")
_ECHO_RE = lazy_re(r"^(?:Out\[\d+\]:\s*)?(?:'(?P<q1>[^']{1,80})'|\"(?P<q2>[^\"]{1,80})\"|(?P<tuple>\(\s*\d{1,2}\s*,\s*\d\s*\))"
                   r"|(?P<value>[\w.+-]{1,40}))$")


# A shell running one print: `python -c "import torch; print(torch.__version__)"`, its output on the next line.
_PYTHON_C_RE = lazy_re(r"^(?:\S*[$#>]\s+)?python[\d.]*\s+-c\s+([\"'])(?:[^\"';]{0,200};\s*){0,4}"
                       r"print\((?P<printed>[\w.()]{3,60})\)\s*;?\s*\1\s*$")


def _repl_pairs(lines: Sequence[str]) -> list[tuple[str, str, str]]:
    """The interpreter's prompt-and-echo pairs whose expression names a fact: ``(table entry, value, the pair)``."""
    out: list[tuple[str, str, str]] = []
    for i, line in enumerate(lines[:-1]):
        if "." not in line or len(line) > 400:
            continue
        prompt = _PROMPT_RE.match(line.strip()) if len(line) <= 80 else None
        printed = lines[i + 1].strip()
        if prompt is None and "-c" in line and "print(" in line and 0 < len(printed) <= 80:
            # print() writes the value bare ("NVIDIA GeForce RTX 2080 Ti"): the whole next line is the value.
            if prompt := _PYTHON_C_RE.match(line.strip()):
                printed = repr(printed) if printed[:1] not in "'\"(" else printed
        echo = _ECHO_RE.match(printed) if prompt else None
        if prompt and echo:
            expr = prompt.group("printed") or (prompt.groupdict().get("expr") or "")
            fact = _synonyms().get(norm_key(re.sub(r"\(\s*\d*\s*\)$", "()", expr)))
            said = echo.group("q1") or echo.group("q2") or echo.group("tuple") or echo.group("value")
            if fact:
                out.append((fact, said, f"{line.strip()} -> {lines[i + 1].strip()}"))
    return out


def _json_pairs(lines: Sequence[str]) -> Iterator[tuple[str, str, str]]:
    """``(normalised key, value, the object's text)`` of every JSON object written on one line: nested keys
    are joined to their parents' (``{"torch": {"cuda": "12.1"}}`` -> ``torch cuda``)."""
    for line in lines:
        text = line.strip()
        if not (text.startswith("{") and text.endswith("}")) or len(text) > 20_000:
            continue
        try:
            obj = json.loads(text)
        except ValueError:
            continue
        for key, value in _flatten(obj, ""):
            yield key, value, text


def _flatten(obj: Any, parent: str, depth: int = 0) -> Iterator[tuple[str, str]]:
    if depth > 4:
        return
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            yield from _flatten(value, f"{parent} {key}".strip(), depth + 1)
    elif isinstance(obj, list):
        for value in obj[:16]:
            yield from _flatten(value, parent, depth + 1)
    elif isinstance(obj, (str, int, float, bool)) and parent:
        yield parent, str(obj)


def _entries(key: str, parent: str | None) -> list[str]:
    """The table entries a key may be: its own, then the one it is in its section (``[torch]`` +
    ``version``, ``gpu:`` + ``name:``); the first whose value has the right form counts."""
    out = [e for e in (_synonyms().get(key), _synonyms().get(norm_key(f"{parent} {key}")) if parent else None) if e]
    return list(dict.fromkeys(out))


_Found = dict[str, list[tuple[object, str, int]]]


def statements(lines: Sequence[str], reserved: frozenset[str] = frozenset()) -> dict[str, list[tuple[object, str]]]:
    """Every statement in the text: fact -> [(value, the line)], the one that counts first (see :func:`_ranked`)."""
    return {fact: [(v, line) for v, line, _ in said] for fact, said in _ranked(lines, reserved).items()}


def _ranked(lines: Sequence[str], reserved: frozenset[str] = frozenset()) -> _Found:
    """Every statement in the text: fact -> [(value, the line)], the one that counts first (precedence, then
    order of appearance). ``gpu`` holds ``(name, index, count, cc)`` and ``gpu.cc`` a stated compute
    capability; :func:`parse` turns them into ``nvml.gpus``. ``reserved``: labels a report parser already
    read with their own meaning (collect_env's "cuDNN version" is a file search, not torch's cuDNN), skipped."""
    found: _Found = {}
    budget = [_GPU_TRIES]
    for entry, said, pair in _repl_pairs(lines):
        if (echoed := _value(entry, said, budget)) is not None or (entry == "torch.cuda_version" and said == "None"):
            _add(found, entry, echoed, said, pair)
    parent: str | None = None
    unique = list(lines)
    seen: set[tuple[str, str, str | None]] = set()  # a repeated line (with its next and its section) says it again
    for i, line in enumerate(unique):
        if not line.strip() or line.strip() in ("}", "},", "]", "],"):
            parent = None
            continue
        nxt = _next_value_line(unique, i)
        if (line, nxt, parent) in seen:
            continue
        seen.add((line, nxt, parent))
        if reserved and " ".join(line.split(":", 1)[0].lower().split()) in reserved:
            continue
        if len(line) <= 400 and "Device:" in line and (log := _DEVICE_LOG_RE.search(line)) and \
                (gpu := _value("gpu", log.group("device"), budget)):
            _add(found, "gpu", gpu, log.group("device"), line)
            continue
        split = split_statement(line)
        if split is not None and not _DEVICE_RE.match(line.strip()):
            read = next(((entry, value) for entry in _entries(split[0], parent)
                         if (value := _value(entry, split[1], budget)) is not None), None)
            if read is not None:
                _add(found, read[0], read[1], split[1], line)
                continue
            if split[1] not in ("{", "["):
                continue  # a key and a value: no key alone
        parent = _key_alone(found, budget, line, nxt) or parent
    for key, said, text in _json_pairs(unique):
        named = _synonyms().get(norm_key(key))
        if named is not None and (value := _value(named, said, budget)) is not None:
            _add(found, named, value, said, text)
    return {fact: sorted(said, key=lambda s: s[2]) for fact, said in found.items()}  # stable: order breaks ties


# A markdown heading: GitHub's issue forms write each field as "### Field", a blank line, then its value.
_HEADING_RE = lazy_re(r"^\s{0,3}#{2,6}\s+\S")


def _next_value_line(lines: Sequence[str], i: int) -> str:
    """The line a key alone on line ``i`` would have its value on: the next one; after a markdown heading
    (an issue form's ``### Tensorflow Version``), the next non-blank one, across at most two blank lines."""
    nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
    if nxt or not _HEADING_RE.match(lines[i]):
        return nxt
    for j in range(i + 2, min(i + 4, len(lines))):
        if lines[j].strip():
            return "" if _HEADING_RE.match(lines[j]) else lines[j].strip()
    return ""


def _key_alone(found: _Found, budget: list[int], line: str, nxt: str) -> str | None:
    """A key with no value: its value on the next line is its statement (ComfyUI's System Information,
    Lightning's lists); else, if it opens a section (``torch:``, ``[torch]``), the section's name."""
    alone = _key_only(line)
    if alone is None:
        return None
    key, section = alone
    alias = _synonyms().get(key)
    if alias is not None and nxt and (split_statement(nxt) is None or _DEVICE_RE.match(_clean_text(nxt))):
        said = _clean_value(_clean_text(nxt))
        if (value := _value(alias, said, budget)) is not None:
            _add(found, alias, value, said, f"{line.strip()} / {nxt}")
            return None
    return key if section else None


def _add(found: _Found, entry: str, value: object, said: str, line: str) -> None:
    """One statement, and what it says besides (an OS's distro and WSL, a torch version's CUDA)."""
    fact, rank = _WRITES.get(entry, (entry, 0))
    where = line.strip()[:120]
    found.setdefault(fact, []).append((value, where, rank))
    if fact == "host.os":
        found.setdefault("host.distro", []).append((said[:80], where, 0))
        if "wsl" in said.lower() or "microsoft" in said.lower():
            found.setdefault("host.wsl", []).append((True, where, 0))
    if fact == "torch.version" and isinstance(value, str):
        if cuda := versions.variant_cuda(versions.local_tag(value.split()[0] if value.split() else value)):
            found.setdefault("torch.cuda_version", []).append((cuda, where, _TAG_RANK))
        elif value.endswith("+cpu"):
            found.setdefault("torch.cuda_version", []).append((None, where, _TAG_RANK))


def has_statements(lines: Sequence[str]) -> bool:
    return bool(statements(lines))


def _gpu_readings(said: dict[str, list[tuple[object, str]]]) -> dict[str, Reading]:
    """``nvml.gpus`` / ``nvml.device_count`` as collect_env writes them, from the first GPU stated and its
    compute capability (the GPU's own value's, else a capability stated beside it)."""
    gpu = said.get("gpu")
    cc_said = said.get("gpu.cc")
    if not gpu and not cc_said:
        return {}
    stated: Any = gpu[0][0] if gpu else ("", 0, 1, None)
    name: str = stated[0]
    index: int = stated[1]
    count: int = stated[2]
    cc: versions.CC | None = stated[3]
    line = gpu[0][1] if gpu else ""
    if cc is None and cc_said:
        cc = cc_said[0][0]  # type: ignore[assignment]
        line = f"{line}; {cc_said[0][1]}".strip("; ")
    records: list[dict[str, Any]] = []
    for n in range(index, index + count):
        record: dict[str, Any] = {"index": n, "name": name} if name else {"index": n}
        if cc is not None:
            record["compute_capability"] = versions.cc_text(cc)
        records.append(record)
    detail = f"stated: {line!r}"
    return {"nvml.gpus": ok(records, SOURCE, detail), "nvml.device_count": ok(len(records), SOURCE, detail)}


_TF_VERSION_RE = lazy_re(r"[12]\.\d{1,2}(?:\.\d{1,2})?$")


def _tensorflow_version(said: dict[str, list[tuple[object, str]]]) -> tuple[str, str] | None:
    """(version, statement) of the keys that name TensorFlow ("Tensorflow Version: 2.11.0", an issue form's field),
    when they all say one 1.x or 2.x version."""
    versions_said = {str(v) for v, _ in said.get("tensorflow", ())}
    if len(versions_said) != 1 or not _TF_VERSION_RE.match(next(iter(versions_said))):
        return None
    value, line = said["tensorflow"][0]
    return str(value), line


def parse(lines: Sequence[str], readings: dict[str, Reading], reserved: frozenset[str] = frozenset()) -> None:
    """Write each stated fact into ``readings`` unless a report already read it; keep conflicts as evidence."""
    ranked = _ranked(lines, reserved)
    torch_read = readings.get("torch.version")
    if torch_read is not None and torch_read.ok and torch_read.source != SOURCE and \
            versions.local_tag(str(torch_read.value or "").split(" ")[0]):
        # torch's version, read by a report, names its build ("+cu118"): a CUDA stated without saying
        # whose is not torch's.
        ranked["torch.cuda_version"] = [s for s in ranked.get("torch.cuda_version", []) if s[2] < 2]
        if not ranked["torch.cuda_version"]:
            del ranked["torch.cuda_version"]
    said_all = {fact: [(v, line) for v, line, _ in said] for fact, said in ranked.items()}
    stated = {k: v for k, v in said_all.items() if k not in ("gpu", "gpu.cc", "tensorflow")}
    for fact, said in stated.items():
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
    if (tf := _tensorflow_version(said_all)) is not None:
        readings["text.frameworks"] = ok({"tensorflow": tf[0]}, SOURCE, f"stated: {tf[1]!r}")
    for fact, reading in _gpu_readings(said_all).items():
        current = readings.get(fact)
        if current is None or not current.ok:
            readings[fact] = reading
    gpus = readings.get("nvml.gpus")
    avail = readings.get("torch.cuda_available")
    if gpus is not None and gpus.source == SOURCE and avail is not None and avail.ok \
            and not (readings.get("torch.devices") and readings["torch.devices"].ok):
        # As collect_env: torch sees the GPUs listed when CUDA is available, and none when it is not.
        devices = [{k: v for k, v in g.items() if k in ("index", "name")} for g in gpus.value] if avail.value else []
        readings["torch.devices"] = ok(devices, SOURCE, "the GPUs stated, CUDA available stated")
        readings["torch.device_count"] = ok(len(devices), SOURCE)


__all__ = ["ALIASES", "COLLECT_ENV_OWN", "KEYS", "SOURCE", "gpu_value", "has_statements", "norm_key", "parse",
           "split_statement", "statements"]
