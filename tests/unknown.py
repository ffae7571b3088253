"""Finding the facts a check's verdict rests on, and whether an ``ok`` rests on facts never read.

"Unknown is never ok": only a fact that was read can make a check pass. This module is the tool
``tests/test_unknown_never_ok.py`` (and anyone measuring the rule over a corpus) uses to hold every
registered check to it, without a list of checks or keys written by hand:

- :class:`RecordingFacts` is a :class:`~envdoctor.model.Facts` that logs every key a check asks for
  (``get``, ``value``, ``[]``, ``in``), views included, so the keys a check *actually* reads are
  discovered by running it, next to the ones it declares in ``needs=``.
- :func:`mutations` gives, for one key, the facts with that key absent, ``not_collected``,
  ``not_in_report`` and (where the registry's type says null is not a reading) null, and for a key
  holding GPU-style entries (a list of objects, an object) each field of them deleted and null.
- :func:`unread_ok` says whether an ``ok`` finding cites only facts that were not read.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from envdoctor.knowledge import factkeys
from envdoctor.model import Facts, Finding, Reading, Reason, Status, missing, ok, thaw
from envdoctor.pipeline.diagnose import run_check
from envdoctor.registry import CheckSpec


class RecordingFacts(Facts):
    """Facts that remember every key asked for (in the order first asked)."""

    __slots__ = ("reads",)

    def __init__(self, readings: Mapping[str, Reading]) -> None:
        super().__init__(readings)
        self.reads: dict[str, None] = {}

    def get(self, key: str, default: Any = None) -> Reading:
        self.reads[key] = None
        return super().get(key, default)

    def value(self, key: str, default: Any = None) -> Any:
        self.reads[key] = None
        return super().value(key, default)

    def __getitem__(self, key: str) -> Reading:
        self.reads[key] = None
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.reads[key] = None
        return key in self._data


class RecordingRecord(Mapping[str, Any]):
    """One record of a fact (a GPU of ``nvml.gpus``) that logs the fields asked for by name
    (``get``, ``[]``, ``in``); walking it whole (``items``, ``values``: quoting it as evidence) is not
    a read of each field."""

    def __init__(self, data: Mapping[str, Any], log: dict[str, None]) -> None:
        self._d = data
        self._log = log

    def __getitem__(self, name: str) -> Any:
        self._log[name] = None
        return self._d[name]

    def get(self, name: str, default: Any = None) -> Any:
        self._log[name] = None
        return self._d.get(name, default)

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str):
            self._log[name] = None
        return name in self._d

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def items(self) -> Any:
        return self._d.items()

    def values(self) -> Any:
        return self._d.values()


def _recording(reading: Reading, log: dict[str, None]) -> Reading:
    """``reading`` with each of its records wrapped in a :class:`RecordingRecord` writing to ``log``."""
    value = reading.value
    if isinstance(value, tuple) and any(isinstance(v, Mapping) for v in value):
        wrapped: Any = tuple(RecordingRecord(v, log) if isinstance(v, Mapping) else v for v in value)
    elif isinstance(value, Mapping) and value and all(isinstance(v, Mapping) for v in value.values()):
        wrapped = MappingProxyType({k: RecordingRecord(v, log) for k, v in value.items()})
    else:
        return reading
    copy_ = Reading(None, reading.reason, reading.source, reading.detail)
    object.__setattr__(copy_, "value", wrapped)  # past the freezing: the wrapper must stay what checks see
    return copy_


@dataclass
class Run:
    """What one check gave on some facts, and what it read there: the keys, and per key the fields
    of its records."""

    findings: list[Finding]
    keys: tuple[str, ...]
    fields: dict[str, tuple[str, ...]]


def run(spec: CheckSpec, readings: Mapping[str, Reading]) -> Run:
    """``spec`` judged on ``readings`` through the product's runner, recording what it read."""
    logs: dict[str, dict[str, None]] = {}
    wrapped = {}
    for key, reading in readings.items():
        if reading.ok and isinstance(reading.value, (tuple, Mapping)):
            logs[key] = {}
            wrapped[key] = _recording(reading, logs[key])
        else:
            wrapped[key] = reading
    facts = RecordingFacts(wrapped)
    found = run_check(spec, facts)
    return Run(found, tuple(facts.reads), {k: tuple(v) for k, v in logs.items() if v})


def _null_is_a_reading(key: str) -> bool:
    entry = factkeys.lookup(key)
    return entry is None or entry.type.endswith("|null")


def mutations(readings: Mapping[str, Reading], key: str,
              fields: tuple[str, ...] | None = None) -> Iterator[tuple[str, dict[str, Reading]]]:
    """``(what, readings)`` with ``key`` made unknown in each way a report can leave it unknown; for a
    key holding records, also each of ``fields`` (default: every field) of every record deleted and
    null, one at a time and all together."""
    base = dict(readings)
    absent = dict(base)
    absent.pop(key, None)
    yield f"{key} absent", absent
    for reason in (Reason.NOT_COLLECTED, Reason.NOT_IN_REPORT):
        yield f"{key} {reason.value}", {**base, key: missing(reason, "test", f"{key} made unknown")}
    if not _null_is_a_reading(key):
        yield f"{key} null", {**base, key: ok(None, "test")}
    reading = base.get(key)
    if reading is None or not reading.ok:
        return
    value = thaw(reading.value)
    # Records (a GPU, a device, a package on PCI) have fields a probe can fail to read; an object
    # like env.vars or python.packages lists what is there, and a name it lacks is a read "no".
    entries = records(value)
    present = dict.fromkeys(f for e in entries for f in e if f != "missing")
    wanted = [f for f in fields if f in present] if fields is not None else list(present)
    groups = [(name,) for name in wanted] + ([tuple(wanted)] if len(wanted) > 1 else [])
    for names in groups:
        for how in ("absent", "null"):
            changed = copy.deepcopy(value)
            for entry in records(changed):
                for name in names:
                    if name in entry:
                        if how == "absent":
                            del entry[name]
                        else:
                            entry[name] = None
            label = names[0] if len(names) == 1 else "{" + ",".join(names) + "}"
            yield f"{key}[].{label} {how}", {**base, key: ok(changed, reading.source, reading.detail)}


def records(value: Any) -> list[dict[str, Any]]:
    """The records a (thawed) value holds: the objects of a list (``nvml.gpus``), or the values of an
    object whose every value is an object (``micro.matmul``: one record per device)."""
    if isinstance(value, list):
        return [v for v in value if isinstance(v, dict)]
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        return list(value.values())
    return []


def is_read(readings: Mapping[str, Reading], key: str) -> bool:
    """Whether ``key`` was read: a reading with no reason, whose value is not null unless the registry
    says null is a reading of it (``host.container: null`` is "not in a container")."""
    found = readings.get(key)
    return found is not None and found.ok and (found.value is not None or _null_is_a_reading(key))


def unread_ok(finding: Finding, readings: Mapping[str, Reading], needs: tuple[str, ...]) -> bool:
    """True for an ``ok`` that rests on nothing read: every fact it cites as evidence (and every
    fact its check declares in ``needs=``) is absent, null or carries a reason."""
    if finding.status is not Status.OK:
        return False
    cited = [k for k in finding.evidence if factkeys.lookup(k) is not None]
    keys = list(dict.fromkeys([*needs, *cited]))
    return bool(keys) and not any(is_read(readings, k) for k in keys)


__all__ = ["RecordingFacts", "is_read", "mutations", "run", "unread_ok"]
