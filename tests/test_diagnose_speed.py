"""The parts of diagnose's speed that are behaviour: what one ``diagnose FILE --json`` imports, the
data files read without importlib.resources, and the shared values judging reuses (never one
report's value for another's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from envdoctor.kit import fail
from envdoctor.knowledge import datafiles
from envdoctor.model import Facts, Reason
from envdoctor.report import Report, to_json

from . import builders


@pytest.mark.parametrize("name", ["compat.json", "errors.json", "report.schema.json", "compat.schema.json",
                                  "gpus.json", "gpus.schema.json"])
def test_a_data_file_reads_the_same_as_through_importlib_resources(name: str) -> None:
    assert datafiles.read_text(name) == resources.files("envdoctor").joinpath(f"data/{name}").read_text(encoding="utf-8")


def test_a_package_not_on_the_file_system_is_read_through_importlib_resources(monkeypatch: pytest.MonkeyPatch,
                                                                                 tmp_path: Path) -> None:
    monkeypatch.setattr(datafiles, "_HERE", str(tmp_path / "not-there"))
    assert json.loads(datafiles.read_text("errors.json"))


def test_diagnose_file_json_imports_no_renderer_writer_or_resource_machinery(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    report.write_text(to_json(Report(facts=builders.facts(), findings=())))
    code = ("import sys\n"
            "from envdoctor.process import lifecycle\n"
            "def finish(code):\n"
            "    sys.stdout.flush()\n"
            "    sys.__stderr__.write(repr(sorted(m for m in sys.modules if m in ('rich', 'tempfile', 'envdoctor.output.render',"
            " 'importlib.resources', 'envdoctor.parsers', 'pynvml', 'psutil'))))\n"
            "    sys.__stderr__.flush()\n"
            "    lifecycle.os._exit(code)\n"
            "lifecycle.finish = finish\n"
            f"sys.argv = ['envdoctor', 'diagnose', {str(report)!r}, '--json']\n"
            "from envdoctor.__main__ import run\n"
            "run()\n")
    env = {**os.environ, "NO_COLOR": "1", "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads(proc.stdout)["schema_version"] >= 1
    assert proc.stderr.strip().splitlines()[-1] == "[]"


def test_a_missing_fact_reads_the_same_shared_reading_naming_its_own_key() -> None:
    facts = Facts({})
    a, b = facts.get("torch.version"), Facts({}).get("torch.version")
    assert a is b and a.reason is Reason.NOT_COLLECTED and "torch.version" in a.detail
    assert "nvml.gpus" in facts.get("nvml.gpus").detail


def test_a_finding_never_shares_its_evidence_with_the_check_that_wrote_it() -> None:
    evidence = {"paths": ["/a"], "n": 1}
    f = fail("x", evidence=evidence, id="x")
    evidence["n"] = 2
    evidence["paths"].append("/b")
    assert f.evidence == {"paths": ("/a",), "n": 1}


def test_a_lazy_pattern_answers_as_the_compiled_one() -> None:
    import re

    from envdoctor.lazyre import LazyPattern, lazy_re

    text = "cuda runtime error (2) : out of memory at x.cu:1; CUDA_ERROR_NO_DEVICE, cuda runtime error (3) : y"
    for pattern, flags in ((r"cuda runtime error \((\d+)\)\s?: (\w+)", 0), (r"CUDA_ERROR_(?P<name>[A-Z_]+)", re.I)):
        lazy, eager = lazy_re(pattern, flags), re.compile(pattern, flags)
        assert isinstance(lazy, LazyPattern) and not lazy.is_compiled
        assert lazy.search(text).groups() == eager.search(text).groups()  # type: ignore[union-attr]
        assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in eager.finditer(text)]
        assert lazy.findall(text) == eager.findall(text) and lazy.split(text) == eager.split(text)
        assert lazy.sub("<x>", text) == eager.sub("<x>", text) and lazy.subn(lambda m: "", text) == eager.subn(
            lambda m: "", text)
        first, second = lazy.match(text), eager.match(text)
        assert (first and first.span()) == (second and second.span())
        assert (lazy.groups, lazy.groupindex, lazy.flags) == (eager.groups, eager.groupindex, eager.flags)
        assert lazy.is_compiled


def test_importing_the_parsers_and_messages_compiles_none_of_their_patterns_and_loads_no_probe() -> None:
    code = ("import gc\n"
            "import envdoctor.parsers, envdoctor.knowledge.messages, envdoctor.redact\n"
            "from envdoctor.lazyre import LazyPattern\n"
            "every = [o for o in gc.get_objects() if type(o) is LazyPattern]\n"
            "import sys\n"
            "probes = any(m.startswith(('envdoctor.probes', 'envdoctor.process.host')) for m in sys.modules)\n"
            "print(len(every), sum(o.is_compiled for o in every), int(probes))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    total, compiled, probes = map(int, out.split())
    assert total > 100 and compiled == 0 and probes == 0  # a paste's parsers need no probe (nor its subprocess)


def test_every_lazy_pattern_of_the_tables_compiles() -> None:
    """A typo in a pattern fails here, not on the first paste that reaches it."""
    import gc
    import re

    import envdoctor.knowledge.messages
    import envdoctor.parsers
    import envdoctor.redact  # noqa: F401
    from envdoctor.lazyre import LazyPattern

    for rx in (o for o in gc.get_objects() if type(o) is LazyPattern):
        # Equal, not identical: a pattern compiled by an earlier test may have left re's 512-entry cache
        # since (the catalogue alone compiles hundreds of rows), and re.compile then builds a new one.
        assert rx.compiled() == re.compile(rx.pattern, rx.flags_given)
