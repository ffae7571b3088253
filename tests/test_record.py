"""Record: a frozen value type defined without exec, behaving as the frozen dataclass it replaces; and the
start-up and judging paths kept free of dataclass definitions they do not need (their cost is start-up)."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import subprocess
import sys

import pytest

from envdoctor.record import Record, field


class Base(Record):
    note: str = field(default="", kw_only=True)


class Pair(Base):
    a: str
    b: tuple[str, ...] = ()
    c: int | None = None


@dataclasses.dataclass(frozen=True)
class DBase:
    note: str = dataclasses.field(default="", kw_only=True)


@dataclasses.dataclass(frozen=True)
class DPair(DBase):
    a: str
    b: tuple[str, ...] = ()
    c: int | None = None


CALLS = [(("x",), {}), (("x", ("y",)), {"note": "n"}), ((), {"a": "x", "c": 3}), (("x",), {"b": (), "c": None})]


@pytest.mark.parametrize(("args", "kwargs"), CALLS)
def test_a_record_is_built_compared_hashed_and_printed_as_the_frozen_dataclass(args: tuple, kwargs: dict) -> None:
    r, d = Pair(*args, **kwargs), DPair(*args, **kwargs)
    assert repr(r) == repr(d).replace("DPair", "Pair")
    assert r == Pair(*args, **kwargs) and hash(r) == hash(Pair(*args, **kwargs))
    assert (r.note, r.a, r.b, r.c) == (d.note, d.a, d.b, d.c)
    assert Pair.__match_args__ == DPair.__match_args__ == ("a", "b", "c")
    assert r != Pair("other") and r != d and (r == d) is False


def test_a_record_refuses_what_the_dataclass_refuses() -> None:
    r = Pair("x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.a = "y"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del r.a
    for args, kwargs in (((), {}), (("x", (), 1, "extra"), {}), (("x",), {"a": "y"}), (("x",), {"nope": 1}),
                         (("x", (), 1), {"note": 2, "zz": 3})):
        with pytest.raises(TypeError):
            Pair(*args, **kwargs)
        with pytest.raises(TypeError):
            DPair(*args, **kwargs)
    with pytest.raises(TypeError):
        type("Bad", (Record,), {"__annotations__": {"a": "int", "b": "int"}, "a": 1})
    with pytest.raises(ValueError):
        type("Bad", (Record,), {"__annotations__": {"a": "list[int]"}, "a": []})


def test_a_record_pickles_copies_and_replaces() -> None:
    r = Pair("x", ("y",), note="n")
    assert pickle.loads(pickle.dumps(r)) == r and copy.deepcopy(r) == r and copy.copy(r) == r
    assert r.replace(c=4) == Pair("x", ("y",), 4, note="n") and r.c is None


def test_every_typed_remedy_is_a_record_not_a_dataclass() -> None:
    # A command type added with @dataclass would lose `note` (its base is no dataclass) and bring back the cost.
    from envdoctor.knowledge import remedies

    todo, seen = [remedies.Command], []
    while todo:
        cls = todo.pop()
        seen.append(cls)
        todo.extend(cls.__subclasses__())
        assert issubclass(cls, Record) and not dataclasses.is_dataclass(cls), cls
    assert len(seen) > 10
    line = remedies.pip_install("py", "torch")
    assert pickle.loads(pickle.dumps(line)).command == line.command and line.command.note == ""


#: The modules whose value types are Records: importing one defines no dataclass.
_RECORDS = ("envdoctor.knowledge.remedies", "envdoctor.knowledge.catalogue", "envdoctor.knowledge.compat",
            "envdoctor.knowledge.errors", "envdoctor.knowledge.factkeys", "envdoctor.knowledge.launch",
            "envdoctor.output.examined", "envdoctor.pipeline.plan", "envdoctor.pipeline.startup")
_DEFINED = ("import dataclasses, sys\n"
            "made = []\n"
            "real = dataclasses._process_class\n"
            "def spy(cls, *a, **k):\n"
            "    made.append(cls.__module__ + '.' + cls.__qualname__)\n"
            "    return real(cls, *a, **k)\n"
            "dataclasses._process_class = spy\n"
            "@dataclasses.dataclass(frozen=True)\n"  # the control: the spy sees a dataclass being made
            "class Control:\n    x: int = 0\n"
            "assert made == ['__main__.Control'], made\n"
            f"import {', '.join(_RECORDS + ('envdoctor.process.target',))}\n"
            f"print([m for m in made if m.startswith({_RECORDS + ('envdoctor.process.target',)!r})])\n")


def test_the_record_modules_define_no_dataclass() -> None:
    out = subprocess.run([sys.executable, "-c", _DEFINED], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


def test_start_up_imports_neither_dataclasses_nor_inspect() -> None:
    # Start-up builds the Plan and starts the early children before anything else: importing dataclasses
    # (and with it inspect) there delays the healthcheck's driver child by ~13 ms.
    code = ("import sys\nimport envdoctor.pipeline.startup as s\ns.plan_from_argv(['check'])\n"
            "print(sorted(m for m in ('dataclasses', 'inspect', 'click', 'envdoctor.model') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"
