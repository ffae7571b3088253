"""Unknown is never ok, for every registered check (built-in or added later), without a list by hand.

For each check, on realistic facts where it passes (the healthy node of ``tests/builders.py``, the
NVIDIA node of ``tests/fakes/nvidia_facts.py``, the microchecks' healthy node, the nvidia-smi -q
fixture, a torchrun rank in a container read by the launch probe, and the corpus cases it passes on), each fact it needs or actually reads (found by running it
on :class:`tests.unknown.RecordingFacts`) is made unknown: absent, ``not_collected``,
``not_in_report`` and, where null is not a reading, null. A key holding records (GPUs, devices) has
the fields the check read deleted and nulled, one at a time and all together. The check must then
not pass on what it was not shown:

1. an ``ok`` must not cite, as its deciding (first) evidence, a fact that was not read;
2. an ``ok`` must not stand when none of the facts the check needs or cites was read;
3. for a verdict about records (its first evidence is a needed key holding them: ``nvml.gpus``),
   with every field it reads of them gone, no ``ok`` stands;
4. for such a verdict, when a field the check quotes as evidence and that was shown as "nothing wrong"
   (0, False, empty) becomes unknown, the ``ok`` must not read word for word the same: absence is
   not that zero (``ecc_uncorrected: null`` is not "no uncorrectable errors").

And over every case of ``tests/corpus/``: no ``ok`` rests on facts that were all unread, or cites an
unread fact as the one that decided it.

Run ``python -m tests.test_unknown_never_ok`` to print every violation.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from envdoctor.inputs import decode
from envdoctor.knowledge import factkeys
from envdoctor.model import Finding, Reading, Status, ok, thaw
from envdoctor.parsers import ParseError, parse_text
from envdoctor.registry import CheckSpec, load_registry

from .builders import healthy_readings
from .fakes.nvidia_facts import healthy_nvidia_readings
from .unknown import is_read, mutations, records, run, unread_ok

CORPUS = Path(__file__).parent / "corpus"
FIXTURES = Path(__file__).parent / "fixtures"
#: Corpus cases per check used as bases for the mutations (the first ones it passes on, one per shape).
CORPUS_BASES = 3


@functools.lru_cache(maxsize=1)
def registry() -> tuple[CheckSpec, ...]:
    return tuple(load_registry(plugins=False))


@functools.lru_cache(maxsize=1)
def corpus() -> tuple[tuple[str, str, dict[str, Reading]], ...]:
    """``(file, shape, readings)`` of every corpus case that parses."""
    out = []
    for case in json.loads((CORPUS / "cases.json").read_text(encoding="utf-8"))["cases"]:
        try:
            facts = parse_text(decode((CORPUS / case["file"]).read_bytes(), case["file"]))
        except ParseError:
            continue
        out.append((case["file"], str(case.get("shape", "")), dict(facts)))
    return tuple(out)


def _launched(nvidia: dict[str, Reading]) -> dict[str, Reading]:
    """Rank 1 of a torchrun job on the NVIDIA node, as the launch probe reads it (a fake /sys/class/net
    and a name table instead of DNS), with a Jupyter server on the loopback and a docker container."""
    import tempfile

    from .test_launch import TORCHRUN, _probe

    with tempfile.TemporaryDirectory() as tmp:
        env = {**TORCHRUN, "MASTER_ADDR": "master.test", "NCCL_SOCKET_IFNAME": "=eth0"}
        launched = dict(_probe(Path(tmp), env))
    jupyter = {"service": "jupyter", "pid": 4242, "listen": [{"address": "127.0.0.1", "port": 8888}],
               "all_interfaces": False, "auth": "token", "auth_from": "a generated token"}
    return {**nvidia, **launched, "exposure.services": ok([jupyter], "probe:exposure"),
            "host.container": ok("docker"), "host.is_root": ok(False)}


@functools.lru_cache(maxsize=1)
def built_bases() -> tuple[tuple[str, dict[str, Reading]], ...]:
    from .test_micro_checks import facts_from, healthy_child

    nvidia = healthy_nvidia_readings()
    smi = dict(parse_text((FIXTURES / "nvidia_smi_q_a100_synthetic.txt").read_text(encoding="utf-8")))
    return (("builders.healthy", healthy_readings()), ("nvidia_facts.healthy", nvidia),
            ("micro.healthy", {**nvidia, **dict(facts_from(healthy_child()))}), ("nvidia-smi -q fixture", smi),
            ("launched rank in a container", _launched(nvidia)))


def bases(spec: CheckSpec) -> Iterator[tuple[str, dict[str, Reading]]]:
    """The facts ``spec`` is held to the rule on: the built ones, then up to CORPUS_BASES corpus cases
    it passes on, of different shapes."""
    yield from built_bases()
    shapes: set[str] = set()
    for name, shape, readings in corpus():
        if len(shapes) >= CORPUS_BASES:
            return
        if shape in shapes:
            continue
        if any(f.status is Status.OK for f in run(spec, readings).findings):
            shapes.add(shape)
            yield f"corpus {name}", readings


def _words(f: Finding) -> tuple[str, str]:
    return f.title, f.detail


def _first_cited(f: Finding) -> str | None:
    first = next(iter(f.evidence), None)
    return first if first is not None and factkeys.lookup(first) is not None else None


def _zero_like(value: object) -> bool:
    """A value that reads as "nothing wrong" (0, False, an empty list, an object of such): the value a
    check that mistakes absence for health would also get from a field that is not there."""
    if isinstance(value, Mapping):
        return all(_zero_like(v) for v in value.values())
    return value in (0, False) or value == [] or value == ()


def _cites(evidence: object, name: str) -> bool:
    """Whether a finding's evidence quotes a record field ``name`` (``{"nvml.gpus[0]": {"ecc_…": 0}}``)."""
    if isinstance(evidence, Mapping):
        return name in evidence or any(_cites(v, name) for v in evidence.values())
    if isinstance(evidence, (list, tuple)):
        return any(_cites(v, name) for v in evidence)
    return False


#: Fields that number a record rather than say anything about it (GPU 0's ``index`` is 0).
NUMBERING = frozenset({"index", "cuda", "nvml_index", "position"})


def _about(f: Finding, key: str) -> bool:
    """Whether the verdict is about ``key``'s records: its first evidence is the key or one record of it."""
    first = next(iter(f.evidence), "")
    return first == key or first.startswith(key + "[")


def _field_values(readings: Mapping[str, Reading], key: str, name: str) -> list[object]:
    value = thaw(readings[key].value)
    return [r[name] for r in records(value) if name in r]


def violations_of(spec: CheckSpec) -> list[str]:
    out: list[str] = []
    for base_name, base in bases(spec):
        shown = run(spec, base)
        said = {_words(f) for f in shown.findings if f.status is Status.OK}
        if not said:
            continue
        for key in dict.fromkeys([*spec.needs, *shown.keys]):
            for what, changed in mutations(base, key, shown.fields.get(key, ())):
                field = what.split("[].", 1)[1].split()[0] if "[]." in what else None
                for f in run(spec, changed).findings:
                    if f.status is Status.ERROR and f.title.startswith("Check crashed"):
                        out.append(f"{spec.id}: crashed on {base_name} with {what}: {f.detail}")
                    if f.status is not Status.OK:
                        continue
                    why = ""
                    first = _first_cited(f)
                    if first is not None and not is_read(changed, first):
                        why = f"its deciding evidence {first} was not read"
                    elif unread_ok(f, changed, spec.needs):
                        why = "none of the facts it needs or cites was read"
                    elif field is None or key not in spec.needs or not _about(f, key):
                        pass  # a record the verdict is not about (a GPU's name in a driver check)
                    elif field.startswith("{"):
                        why = "every field it reads of the records is gone"
                    elif (field not in NUMBERING and _words(f) in said and _cites(f.evidence, field)
                          and all(_zero_like(v) for v in _field_values(base, key, field))):
                        why = f"it reads the same as when {field} was shown as nothing wrong"
                    if why:
                        out.append(f"{spec.id}: ok {f.title!r} on {base_name} with {what}: {why}")
    return out


@pytest.mark.parametrize("spec", registry(), ids=lambda s: s.id)
def test_unknown_is_never_ok(spec: CheckSpec) -> None:
    found = violations_of(spec)
    assert not found, "\n".join(found[:20]) + (f"\n… {len(found) - 20} more" if len(found) > 20 else "")


def corpus_violations() -> list[str]:
    out = []
    for name, _shape, readings in corpus():
        for spec in registry():
            for f in run(spec, readings).findings:
                first = _first_cited(f)
                if unread_ok(f, readings, spec.needs) or (f.status is Status.OK and first is not None
                                                          and not is_read(readings, first)):
                    out.append(f"{name}: {spec.id} ok {f.title!r} from facts the text does not show")
    return out


def test_no_check_passes_on_what_a_corpus_case_does_not_show() -> None:
    found = corpus_violations()
    assert not found, "\n".join(found[:30]) + (f"\n… {len(found) - 30} more" if len(found) > 30 else "")


def test_the_rule_is_held_on_facts_where_checks_pass() -> None:
    """The mutations mean something only where a check passes: most checks pass on some base."""
    passing = [s.id for s in registry() if any(any(f.status is Status.OK for f in run(s, b).findings)
                                               for _n, b in bases(s))]
    assert len(passing) >= len(registry()) * 3 // 4, sorted({s.id for s in registry()} - set(passing))


def _main() -> None:
    for spec in registry():
        for line in violations_of(spec):
            print(line)
    for line in corpus_violations():
        print(line)


if __name__ == "__main__":
    _main()


__all__: list[str] = []

