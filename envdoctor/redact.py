"""Secrets never leave the machine: which environment variables are reported, and redaction.

Only allow-listed variables are collected at all; of those, a value is shown only when its name
is on the exact list of variables envdoctor judges (:mod:`envdoctor.knowledge.envvars`), every
other value is ``<redacted>``; and credential-shaped *values* (tokens, a URL's ``user@`` or
``user:pass@``, a password holding ``@`` or ``/`` included) are masked wherever they appear in a report.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from .lazyre import lazy_re

REDACTED = "<redacted>"

ALLOW_PREFIXES = ("CUDA_", "NVIDIA_", "NCCL_", "PYTORCH_", "TORCH_", "CUDNN_", "CUBLAS_", "TORCHINDUCTOR_",
                  "TRITON_", "NV_", "OMPI_", "SLURM_", "HF_", "TF_", "XLA_", "JAX_", "KUBERNETES_", "GLOO_",
                  "UCX_", "FI_", "NVSHMEM_")
ALLOW_NAMES = frozenset({
    "LD_LIBRARY_PATH", "LD_PRELOAD", "PATH", "PYTHONPATH", "CUDA_HOME", "CUDA_PATH", "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV", "VIRTUAL_ENV", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
    "LOCAL_WORLD_SIZE", "GROUP_RANK", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "container", "WSL_DISTRO_NAME",
})
_SECRET_NAME = lazy_re(r"TOKEN|KEY|SECRET|PASSW|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|SIGNATURE|_PAT\b|BEARER",
                          re.IGNORECASE)
_SECRET_VALUE = [
    lazy_re(r"\b(hf_[A-Za-z0-9]{20,})"),  # Hugging Face
    lazy_re(r"\b(gh[pousr]_[A-Za-z0-9]{20,})"),  # GitHub
    lazy_re(r"\b(github_pat_[A-Za-z0-9_]{20,})"),
    lazy_re(r"\b(sk-[A-Za-z0-9_-]{20,})"),  # OpenAI-style
    lazy_re(r"\b(AKIA[0-9A-Z]{16})\b"),  # AWS access key id
    lazy_re(r"\b(xox[abprs]-[A-Za-z0-9-]{10,})"),  # Slack
    lazy_re(r"\b(eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})"),  # JWT
]
#: A token glued to a word by "_" (``mlx5_ghp_…``, a device or file name built from it): there is no
#: word boundary before it, so only a token of its issuer's exact length, ending at a non-word
#: character, and random-looking (a digit, or two capitals in a row, and a lower-case letter) is
#: masked; ``cls_hf_AutoModelForSequenceClassification`` (34 letters, CamelCase) is an identifier.
#: Lengths: GitHub's ghp_/gho_/ghu_/ghs_/ghr_ + 36 and github_pat_ + 82 (GitHub's "Behind GitHub's new
#: authentication token formats", 2021, and fine-grained PATs), Hugging Face hf_ + 34, AWS AKIA + 16.
_GLUED = lazy_re(r"(?<=[A-Za-z0-9]_)(?P<tok>gh[pousr]_(?P<b1>[A-Za-z0-9]{36})|hf_(?P<b2>[A-Za-z0-9]{34})"
                 r"|github_pat_(?P<b3>[A-Za-z0-9_]{82})|AKIA(?P<b4>[0-9A-Z]{16}))(?![A-Za-z0-9])")
_RANDOM = lazy_re(r"^(?=.*[a-z])(?=.*(?:[0-9]|[A-Z]{2}))")


def _glued(m: re.Match[str]) -> str:
    body = m.group("b1") or m.group("b2") or m.group("b3")
    if body is not None:
        return REDACTED if _RANDOM.search(body) else m.group(0)
    return REDACTED if any(c.isdigit() for c in m.group("b4")) else m.group(0)

# Bounded and anchored (no scheme character before it): an unbounded scheme/credential run
# backtracks quadratically, and whole reports pass through here (64 KB took seconds).
# The credentials are a user part (``https://TOKEN@host``) or ``user:password`` where the password
# may hold "@" and "/" unencoded (``https://u:p@ss/w@host``): the password runs to the last "@" of
# the URL. A ``host.name:port/path@x`` (a pip ``git+https://host.example:443/org/repo@v1``) is no
# password: after a dotted host the digits after the colon end at "/". A user without a dot is no host
# name, so ``https://user:12/34@host`` is a password of digits and "/" (masked; masking a dotless
# ``localhost:8080/repo@v1`` is the safe side of that ambiguity).
_URL_CREDENTIALS = lazy_re(
    r"(?<![a-zA-Z0-9+.-])(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]{0,31}://)"
    r"(?P<cred>[^/@\s:\"'<>]{1,256}|[^/@\s:.\"'<>]{0,256}:[^\s\"'<>]{1,256}"
    r"|[^/@\s:\"'<>]{0,256}:(?!\d{1,5}(?:[/?#\s\"'<>]|$))[^\s\"'<>]{1,256})@")


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def is_reported(name: str) -> bool:
    return name in ALLOW_NAMES or name.startswith(ALLOW_PREFIXES)


# Credentials written as key=value or key: value in free text (a proxy error quoting its URL
# query, an exception quoting a config line), and HTTP bearer tokens. Bounded runs only.
_KEYED = lazy_re(r"(?i)\b(?P<key>[a-z0-9_.-]{0,32}(?:passw(?:or)?d|pwd|secret|token|api[_-]?key|access[_-]?key|"
                    r"private[_-]?key|auth))(?P<sep>[\"']?\s{0,3}[=:]\s{0,3}[\"']?)(?P<value>[^\s\"',;&)}\]]{3,512})")
_BEARER = lazy_re(r"(?i)\b(bearer\s{1,3})[A-Za-z0-9._~+/-]{8,2048}=*")
# One cheap scan first: most strings of a report (GPU names, versions, paths) contain none of
# these, and a 50 MB report has millions of strings. Substring tests on the lower-cased text are
# ten times faster than one case-insensitive alternation.
_HINTS = ("hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "sk-", "akia", "xox", "eyj", "://", "bearer",
          # _KEYED's words; its api_key / access_key / private_key all contain "key"
          "passw", "pwd", "secret", "token", "private", "auth",
          # _SECRET_NAME's words that no other hint holds (PASSPHRASE has no "passw")
          "passphrase",
          # secret-looking variable names (is_secret_name), for a mapping of environment variables
          "key", "credential", "cookie", "session", "signature")


#: The hints as one alternation of literals, searched once in the lower-cased text: one C call
#: instead of a Python loop of 28 substring tests (which was a third of ``diagnose``'s time).
#: ``_pat`` only where _SECRET_NAME matches it, at the end of a word: as a bare substring it is in
#: every ``library_path`` and ``nvcc_path`` of a report, and sent every one through the walk.
_HINT_WORDS = "|".join(re.escape(h) for h in _HINTS) + r"|_pat\b"
_HINT = re.compile(_HINT_WORDS)  # every text meets it: compiled now
#: For text that is not ASCII: the patterns' own case-insensitive matching (``re.IGNORECASE``
#: folds e.g. U+017F, U+0131 and U+212A onto s, i and k, which ``str.lower`` leaves alone).
_HINT_FOLDED = re.compile(_HINT_WORDS, re.IGNORECASE)


def may_hold_secret(text: str) -> bool:
    """False when no pattern of this module can match ``text`` (a superset test, lower-cased)."""
    if _HINT.search(text.lower()) is not None:
        return True
    return not text.isascii() and _HINT_FOLDED.search(text) is not None


def _plain(value: Any) -> Any:
    """``default`` of the scanning serialiser: frozen and other mappings as dicts; anything else
    that is not JSON raises, so the caller takes the walk (a ``str()`` of an object could spell what
    a string of the same text would need masked, and must not share a memo entry with it)."""
    if type(value) is MappingProxyType:  # copy() copies the underlying dict in C
        return value.copy()
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(type(value).__name__)


def json_blob(value: Any) -> str | None:
    """The compact JSON text the redaction scans of a JSON-like value (frozen mappings and tuples
    included), or None when it holds something that is not JSON (then only the walk is safe)."""
    try:
        return json.dumps(value, ensure_ascii=False, default=_plain)
    except (TypeError, ValueError, RecursionError):
        return None


class UnchangedMemo:
    """Texts known to need nothing masked, keyed by the exact text (never a hash, a prefix or an
    identity): whether redaction changes a JSON value is a function of its JSON text alone, so a
    value met again (the same evidence in every finding of a fleet's reports) is scanned once.
    Only texts redaction left unchanged are remembered; bounded in entries and in characters
    held (emptied when either is full), so hostile input cannot grow it past ``budget``."""

    __slots__ = ("_held", "_seen", "budget", "longest", "size")

    def __init__(self, size: int = 8192, longest: int = 1 << 16, budget: int = 8 << 20) -> None:
        self._seen: dict[str, None] = {}
        self._held = 0
        self.size, self.longest, self.budget = size, longest, budget

    def __contains__(self, text: object) -> bool:
        return text in self._seen

    def add(self, text: str) -> None:
        if len(text) > self.longest:
            return
        if len(self._seen) >= self.size or self._held + len(text) > self.budget:
            self.clear()
        self._seen[text] = None
        self._held += len(text)

    def clear(self) -> None:
        self._seen.clear()
        self._held = 0


#: JSON texts of values :func:`redact_tree` left unchanged.
UNCHANGED = UnchangedMemo()


def redact_tree(value: Any, key: str = "") -> Any:
    """:func:`redact_value` for a big value: one scan of its JSON text first (C speed), and the
    walk string by string only when that scan finds a hint and the same text was not already
    found clean. A 50 MB fact with no secret costs one serialisation, not millions of pattern tests."""
    if isinstance(value, str):
        return redact_value(value, key)
    blob = json_blob(value)
    if blob is None:
        return redact_value(value, key)
    if not may_hold_secret(blob) or blob in UNCHANGED:
        return value
    out = redact_value(value, key)
    if out is value:
        UNCHANGED.add(blob)
    return out


def redact_text(text: str) -> str:
    """Mask credential-shaped substrings of a free-form string (paths and error texts too)."""
    if not may_hold_secret(text):
        return text
    out = _redact_short(text) if len(text) <= _MEMO_LONGEST else _redact(text)
    return text if out == text else out  # unchanged is the same object: callers test identity


#: Short texts that hold a hint (a remedy quoting a URL, a title naming a token) recur in every
#: report a batch judges: they are redacted once.
_MEMO_LONGEST = 4096


@functools.lru_cache(maxsize=4096)
def _redact_short(text: str) -> str:
    return _redact(text)


def _redact(text: str) -> str:
    text = _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)
    for rx in _SECRET_VALUE:
        text = rx.sub(REDACTED, text)
    text = _GLUED.sub(_glued, text)
    text = _KEYED.sub(lambda m: m.group("key") + m.group("sep") + (m.group("value") if m.group("value") == REDACTED
                                                                      else REDACTED), text)
    return _BEARER.sub(lambda m: m.group(1) + REDACTED, text)


def is_shown(name: str) -> bool:
    """Whether an environment variable's value may be shown: its name is on the exact list of
    the variables envdoctor judges (:data:`envdoctor.knowledge.envvars.SHOWN`)."""
    from envdoctor.knowledge.envvars import SHOWN

    return name in SHOWN and not is_secret_name(name)


def env_value(name: str, value: Any) -> Any:
    """One variable's value as a report may show it: ``<redacted>`` unless :func:`is_shown`, and a
    shown text with its credential-shaped parts masked."""
    if not is_shown(name):
        return value if value is None or value == REDACTED else REDACTED
    return redact_text(value) if isinstance(value, str) else value


def select_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The allow-listed variables; only the values of those envdoctor judges are kept."""
    return {name: env_value(name, environ[name]) for name in sorted(environ) if is_reported(name)}


def mask_env(env: Any) -> Any:
    """An ``env.vars`` value (from a probe, a paste or a saved report, which may come from an older
    envdoctor or be hostile) with :func:`env_value` applied to every entry; the same object when
    nothing changes."""
    if not isinstance(env, Mapping):
        return env
    out = {k: env_value(str(k), v) for k, v in env.items()}
    if all(out[k] is v for k, v in env.items()):
        return env
    return MappingProxyType(out) if isinstance(env, MappingProxyType) else out


def redact_value(value: Any, key: str = "") -> Any:
    """Deep redaction of a JSON-like value. Containers keep their type (a frozen mapping stays
    frozen) and an unchanged value is returned as the same object, so redacting a big report
    that holds no secret copies nothing."""
    if isinstance(value, str):
        return REDACTED if key and is_secret_name(key) and is_reported(key) else redact_text(value)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        changed = False
        for k, v in value.items():
            new = redact_value(v, str(k))
            name = redact_text(k) if isinstance(k, str) else k  # a path can be a key too
            changed = changed or new is not v or name is not k
            out[name] = new
        if not changed:
            return value
        return MappingProxyType(out) if isinstance(value, MappingProxyType) else out
    if isinstance(value, (list, tuple)):
        items = [redact_value(v) for v in value]
        if all(a is b for a, b in zip(items, value, strict=False)):
            return value
        return tuple(items) if isinstance(value, tuple) else items
    return value
