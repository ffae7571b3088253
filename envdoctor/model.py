"""The data model: fact readings, Facts, Findings, Remediations and the Report; no I/O.

Everything here is frozen and round-trips through plain JSON (``to_dict``/``from_dict``),
so a report written on a GPU node is re-judged byte-for-byte the same on a laptop.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

SCHEMA_VERSION = 1


class Reason(str, enum.Enum):
    """Why a fact has no value. A reading with ``reason=None`` was read fine."""

    ABSENT = "absent"  # the thing is not there (no driver, no torch, file missing)
    DENIED = "denied"  # permission denied
    TIMEOUT = "timeout"  # the probe did not answer within its deadline
    CRASHED = "crashed"  # the child died (signal, segfault) while reading it
    UNSUPPORTED = "unsupported"  # the device/driver/platform does not offer it
    FAILED = "failed"  # the read returned an error (detail says which)
    SKIPPED = "skipped"  # deliberately not probed (option, not applicable)
    NOT_COLLECTED = "not_collected"  # no probe produced this key
    NOT_IN_REPORT = "not_in_report"  # a parsed paste did not contain it


class Status(str, enum.Enum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"  # the check or the probe it needed crashed or hung


class ProbeStatus(str, enum.Enum):
    """How one probe run went. Its failures use the words of :class:`Reason` (``timeout``,
    ``crashed``); ``error`` is a probe that raised (a bug), as :attr:`Status.ERROR` is a check's."""

    OK = "ok"
    TIMEOUT = "timeout"  # the probe, or a fact it reads, hit its deadline
    CRASHED = "crashed"  # a child it ran died while reading a fact
    ERROR = "error"  # the probe itself raised
    SKIPPED = "skipped"  # not run

    def __str__(self) -> str:  # f"{status}" is the word saved reports and the terminal show
        return self.value

    @classmethod
    def of(cls, reasons: Iterable[Reason | None]) -> ProbeStatus:
        """The run status of a probe whose readings have these reasons: a hang outranks a crash."""
        found = set(reasons)
        return cls.TIMEOUT if Reason.TIMEOUT in found else cls.CRASHED if Reason.CRASHED in found else cls.OK


#: Order used for sorting and for ``--fail-on``; ``error`` is kept apart from ``fail``.
SEVERITY = {Status.OK: 0, Status.SKIP: 0, Status.WARN: 1, Status.FAIL: 2, Status.ERROR: 3}


_SCALARS = (str, int, float, bool, type(None))
_SCALAR_TYPES = frozenset(_SCALARS)


#: Deepest nesting a value may have (a live fact nests at most 6 levels). Deeper is refused when
#: frozen, before anything recursive (rendering, redaction) can overflow on it.
MAX_NESTING = 64


class TooDeep(ValueError):
    pass


def _all_str(values: Iterable[Any]) -> bool:
    """True when every value is a str: ``join`` checks that in C (a 900,000-entry package list)."""
    try:
        "".join(values)
    except TypeError:
        return False
    return True


def _freeze(value: Any, depth: int = 0) -> Any:
    """Deep-immutable copy of a JSON value. A mapping this module already froze is returned as
    is (its contents are frozen too), so evidence drawn from facts costs no copy, whatever its size."""
    kind = type(value)
    if kind in _SCALAR_TYPES or kind is MappingProxyType:
        return value
    if depth >= MAX_NESTING:
        raise TooDeep(f"a value is nested deeper than {MAX_NESTING} levels")
    deeper = depth + 1
    if kind is dict:  # what json.loads gives: the common case, tested first (ABC checks are slow)
        if len(value) > 64 and _all_str(value.values()) and _all_str(value.keys()):
            return MappingProxyType(value.copy())  # a big flat object (a package list): one C copy
        out = {}
        for k, v in value.items():  # scalars and frozen values inline: most evidence is a few of them
            kv = type(v)
            out[k if type(k) is str else str(k)] = v if kv in _SCALAR_TYPES or kv is MappingProxyType else _freeze(v, deeper)
        return MappingProxyType(out)
    if kind is list:
        if len(value) > 64 and _all_str(value):
            return tuple(value)
        return tuple([_freeze(v, deeper) for v in value])
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): _freeze(v, deeper) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v, deeper) for v in value)
    if isinstance(value, tuple):
        items = tuple(_freeze(v, deeper) for v in value)
        return value if all(a is b for a, b in zip(items, value, strict=False)) else items
    return value


def thaw(value: Any) -> Any:
    """Turn a frozen value back into plain JSON types (dict/list)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class Reading:
    """One fact: its value, or the reason it could not be read, and where it came from."""

    value: Any = None
    reason: Reason | None = None
    source: str = ""
    detail: str = ""

    def __post_init__(self) -> None:
        kind = type(self.value)
        if kind not in _SCALAR_TYPES and kind is not MappingProxyType:
            object.__setattr__(self, "value", _freeze(self.value))
        if self.reason is not None and not isinstance(self.reason, Reason):
            object.__setattr__(self, "reason", Reason(self.reason))

    @property
    def ok(self) -> bool:
        return self.reason is None

    def describe(self) -> str:
        """Short human text: the value, or why there is none."""
        if self.reason is None:
            return _short(thaw(self.value))
        text = self.reason.value
        return f"{text}: {self.detail}" if self.detail else text

    def to_dict(self, thawed: bool = True) -> dict[str, Any]:
        """Plain JSON types; ``thawed=False`` keeps the frozen value as is (no copy) for a writer
        that can serialise mappings itself (report.json_text)."""
        out: dict[str, Any] = {"value": thaw(self.value) if thawed else self.value}
        if self.reason is not None:
            out["reason"] = self.reason.value
        if self.source:
            out["source"] = self.source
        if self.detail:
            out["detail"] = self.detail
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reading:
        if not isinstance(data, Mapping):
            raise ValueError("a fact must be an object with 'value' and optional 'reason'")
        reason = data.get("reason")
        return cls(
            value=data.get("value"),
            reason=Reason(reason) if reason is not None else None,
            source=str(data.get("source", "")),
            detail=str(data.get("detail", "")),
        )


def ok(value: Any, source: str = "", detail: str = "") -> Reading:
    return Reading(value=value, source=source, detail=detail)


def missing(reason: Reason | str, source: str = "", detail: str = "") -> Reading:
    return Reading(value=None, reason=Reason(reason), source=source, detail=detail)


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else repr(value) if not isinstance(value, (dict, list)) else _json(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json(value: Any) -> str:
    import json

    return json.dumps(value, sort_keys=True, default=str)


#: The ``not_collected`` reading of each key asked for and absent (frozen, so one is shared): a check
#: asks for facts a report may lack on every report it judges.
_NOT_COLLECTED: dict[str, Reading] = {}


def not_collected(key: str) -> Reading:
    found = _NOT_COLLECTED.get(key)
    if found is None:
        found = Reading(reason=Reason.NOT_COLLECTED, detail=f"nothing in this report reads {key}")
        if len(_NOT_COLLECTED) >= 4096:  # keys come from checks, but a plugin could ask for anything
            _NOT_COLLECTED.clear()
        _NOT_COLLECTED[key] = found
    return found


class Facts(Mapping[str, Reading]):
    """The snapshot of the world: dotted key (``torch.version``) -> Reading. Immutable."""

    __slots__ = ("_data", "__weakref__")  # weakly referenced by report._CLEAN

    def __init__(self, readings: Mapping[str, Reading] | Iterable[tuple[str, Reading]] = ()) -> None:
        self._data: Mapping[str, Reading] = MappingProxyType(dict(readings))

    def __getitem__(self, key: str) -> Reading:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: str, default: Any = None) -> Reading:
        """The reading for ``key``; a key nobody probed reads as ``not_collected``."""
        found = self._data.get(key)
        if found is not None:
            return found
        return default if default is not None else not_collected(key)

    def value(self, key: str, default: Any = None) -> Any:
        """The value of ``key`` when it was read, else ``default``."""
        found = self._data.get(key)
        if found is None or found.reason is not None or found.value is None:
            return default
        return found.value

    def merged(self, other: Mapping[str, Reading]) -> Facts:
        data = dict(self._data)
        data.update(other)
        return Facts(data)

    def to_dict(self, thawed: bool = True) -> dict[str, Any]:
        return {key: self._data[key].to_dict(thawed) for key in sorted(self._data)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Facts:
        if not isinstance(data, Mapping):
            raise ValueError("'facts' must be an object mapping fact names to readings")
        return cls({str(k): Reading.from_dict(v) for k, v in data.items()})

    def __repr__(self) -> str:
        return f"Facts({len(self)} readings)"


@dataclass(frozen=True)
class Source:
    """Where a remedy's compatibility knowledge comes from: a source id of ``data/compat.json``, whether
    the table row was confirmed against it, and the same in words a user reads (``said``)."""

    id: str
    verified: bool
    said: str = ""
    url: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "verified": self.verified}
        if self.said:
            out["said"] = self.said
        if self.url:
            out["url"] = self.url
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Source:
        return cls(str(data["id"]), bool(data.get("verified", False)), str(data.get("said", "")),
                   str(data.get("url", "")))


@dataclass(frozen=True)
class Remediation:
    """What to do: words, copy-paste commands and links (Homebrew's finding shape).

    ``alternatives``: ways to fix the same finding, each complete on its own (either downgrade torch
    *or* upgrade the driver), the preferred first; ``text``/``commands``/``links`` are then what they
    share. ``sources``: where the table rows behind it come from. Both are left out of the JSON when
    empty, so a reader of the older shape sees the same report."""

    text: str = ""
    commands: tuple[str, ...] = ()
    links: tuple[str, ...] = ()
    alternatives: tuple[Remediation, ...] = ()
    sources: tuple[Source, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "commands", tuple(self.commands))
        object.__setattr__(self, "links", tuple(self.links))
        object.__setattr__(self, "alternatives", tuple(self.alternatives))
        object.__setattr__(self, "sources", tuple(self.sources))

    def __bool__(self) -> bool:
        return bool(self.text or self.commands or self.links or self.alternatives)

    def command_lines(self) -> tuple[str, ...]:
        """Every command to print, in order: the shared ones, then each alternative's under an
        ``# either: …`` / ``# or: …`` line, for a renderer that prints commands one per line."""
        lines = list(self.commands)
        for n, alt in enumerate(self.alternatives):
            lines.append(f"# {'either' if n == 0 else 'or'}: {alt.text}" if alt.text else
                         f"# {'either' if n == 0 else 'or'}:")
            lines.extend(alt.command_lines())
        return tuple(lines)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"text": self.text, "commands": list(self.commands), "links": list(self.links)}
        if self.alternatives:
            out["alternatives"] = [a.to_dict() for a in self.alternatives]
        if self.sources:
            out["sources"] = [s.to_dict() for s in self.sources]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Remediation:
        if not data:
            return cls()
        return cls(
            text=str(data.get("text", "")),
            commands=tuple(str(c) for c in data.get("commands", ()) or ()),
            links=tuple(str(c) for c in data.get("links", ()) or ()),
            alternatives=tuple(cls.from_dict(a) for a in data.get("alternatives", ()) or () if isinstance(a, Mapping)),
            sources=tuple(Source.from_dict(s) for s in data.get("sources", ()) or () if isinstance(s, Mapping)),
        )


@dataclass(frozen=True)
class Finding:
    """A judgement. ``id`` is the stable kebab-case id of the check that made it."""

    id: str
    status: Status
    title: str
    detail: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict)
    remediation: Remediation = field(default_factory=Remediation)
    gpus: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if type(self.status) is not Status:
            object.__setattr__(self, "status", Status(self.status))
        # Evidence this module already froze (a finding copied by ``replace``, facts quoted as
        # evidence) is kept as is; a mapping is frozen into a new one (never the caller's dict).
        evidence = self.evidence
        if type(evidence) is not MappingProxyType:
            object.__setattr__(self, "evidence", _freeze(evidence if isinstance(evidence, Mapping) else dict(evidence)))
        if self.gpus or type(self.gpus) is not tuple:
            object.__setattr__(self, "gpus", tuple(int(g) for g in self.gpus))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status.value,
            "title": self.title,
            "detail": self.detail,
            "evidence": thaw(self.evidence),
            "remediation": self.remediation.to_dict(),
            "gpus": list(self.gpus),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        return cls(
            id=str(data["id"]),
            status=Status(data["status"]),
            title=str(data.get("title", "")),
            detail=str(data.get("detail", "")),
            evidence=dict(data.get("evidence") or {}),
            remediation=Remediation.from_dict(data.get("remediation")),
            gpus=tuple(data.get("gpus") or ()),
        )


@dataclass(frozen=True)
class ProbeRun:
    """How one probe went (a :class:`ProbeStatus`; the plain word is accepted and converted)."""

    name: str
    status: ProbeStatus
    seconds: float = 0.0
    detail: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", ProbeStatus(self.status))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status.value, "seconds": round(self.seconds, 3),
                "detail": self.detail}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProbeRun:
        return cls(str(data["name"]), ProbeStatus(data["status"]), float(data.get("seconds", 0.0)),
                   str(data.get("detail", "")))


def summarize(findings: Iterable[Finding]) -> dict[str, int]:
    counts = {s.value: 0 for s in Status}
    for f in findings:
        counts[f.status.value] += 1
    return counts


def worst(findings: Iterable[Finding]) -> Status:
    result = Status.OK
    for f in findings:
        if SEVERITY[f.status] > SEVERITY[result]:
            result = f.status
    return result
