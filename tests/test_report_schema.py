"""The JSON contract: the schema shipped in the package, ``$schema`` in every report naming its ``$id``,
the id resolving to the shipped file, and tight types, checked on real reports made through the CLI."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema  # the [test] extra: never skipped
import pytest
from referencing import Registry, Resource

from envdoctor.knowledge import schema as report_schema
from envdoctor.model import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, env=env, timeout=timeout)


def validator() -> jsonschema.Draft202012Validator:
    """A validator that follows a report's own ``$schema`` through envdoctor's resolver (not a path)
    and asserts formats (RFC 3339 times), which JSON Schema leaves optional."""
    registry: Registry[Any] = Registry(retrieve=lambda uri: Resource.from_contents(report_schema.retrieve(uri)))
    return jsonschema.Draft202012Validator({"$ref": report_schema.SCHEMA_ID}, registry=registry,
                                           format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def errors(report: dict[str, Any]) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator().iter_errors(report)]


@pytest.fixture
def live(saved_report: Path) -> dict[str, Any]:
    """A real report made through the CLI (the session's one, tests/conftest.py), fresh per test."""
    return json.loads(saved_report.read_text())


def test_the_schema_is_shipped_in_the_package_and_names_itself():
    shipped = resources.files("envdoctor").joinpath("data/report.schema.json")
    data = json.loads(shipped.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(data)
    assert data["$id"] == report_schema.SCHEMA_ID == f"urn:envdoctor:schema:report:{SCHEMA_VERSION}"
    assert data["properties"]["$schema"]["const"] == report_schema.SCHEMA_ID
    assert data["properties"]["schema_version"]["const"] == SCHEMA_VERSION
    assert "$schema" in data["required"]
    assert report_schema.retrieve(report_schema.SCHEMA_ID) == data
    with pytest.raises(KeyError):
        report_schema.retrieve("https://github.com/envdoctor/envdoctor/report.schema.json")


def test_python_m_envdoctor_schema_prints_the_shipped_file_and_its_path():
    proc = run("envdoctor.knowledge.schema")
    assert proc.returncode == 0 and json.loads(proc.stdout)["$id"] == report_schema.SCHEMA_ID
    where = run("envdoctor.knowledge.schema", "--path")
    path = Path(where.stdout.decode().strip())
    assert path.is_file() and path.read_bytes() == proc.stdout
    assert run("envdoctor.knowledge.schema", "--id").stdout.decode().strip() == report_schema.SCHEMA_ID
    assert run("envdoctor.knowledge.schema", "--nonsense").returncode == 2


def test_a_live_report_names_its_schema_and_validates(live):
    assert next(iter(live)) == "$schema" and live["$schema"] == report_schema.SCHEMA_ID
    assert errors(live) == []
    stamp = datetime.fromisoformat(live["created_at"])
    assert stamp.utcoffset() is not None


def test_rejudged_reports_and_pastes_validate(tmp_path, live):
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(live))
    for source in (saved, CORPUS / "DeepSeek-VL2-59-rtx5090-sm120.txt", CORPUS / "ChatGLM3-100-driver-11060.txt"):
        proc = run("envdoctor", "diagnose", str(source), "--json")
        assert proc.returncode in (0, 1), proc.stderr.decode()
        report = json.loads(proc.stdout)
        assert report["$schema"] == report_schema.SCHEMA_ID
        assert errors(report) == [], source.name


@pytest.mark.parametrize("path, bad, says", [
    (("summary", "warn"), -1, "less than the minimum"),
    # The pattern holds RFC 3339 whether or not a format checker for date-time is installed.
    (("created_at",), "2026-12-01 12:00", "does not match"),
    (("created_at",), "2026-12-01T12:00:00", "does not match"),  # no UTC offset
    (("created_at",), "yesterday", "does not match"),
    (("schema_version",), 2, "was expected"),
    (("$schema",), "https://github.com/envdoctor/envdoctor/report.schema.json", "was expected"),
    (("probes", 0, "seconds"), -0.5, "less than the minimum"),
    (("findings", 0, "gpus"), [-1], "less than the minimum"),
    (("findings", 0, "remediation", "alternatives"), [{"text": "only one", "commands": [], "links": []}],
     "too short"),
])
def test_tighter_types_refuse_what_envdoctor_never_writes(live, path, bad, says):
    report = copy.deepcopy(live)
    target: Any = report
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = bad
    found = errors(report)
    assert found and any(says in e for e in found), found


def test_a_report_without_schema_is_not_valid(live):
    report = copy.deepcopy(live)
    del report["$schema"]
    assert any("'$schema' is a required property" in e for e in errors(report))
