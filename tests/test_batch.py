"""`diagnose FILE…` / `diagnose DIR`: many saved reports and pastes judged in one process, one
result per file, the exit code the worst of theirs; and the loader's batch-friendly parts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from envdoctor.inputs import load
from envdoctor.report import Report, to_json

from . import builders


def run(*args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run([sys.executable, "-m", "envdoctor", *args], capture_output=True, env=env, timeout=120)


def saved(path: Path, **changes: object) -> Path:
    path.write_text(to_json(Report(facts=builders.facts(**changes), findings=(), probes=())))
    return path


def test_a_folder_is_judged_in_one_process_one_line_per_file_exit_code_the_worst(tmp_path: Path) -> None:
    saved(tmp_path / "a-healthy.json")
    saved(tmp_path / "b-old-driver.json", nvml__cuda_driver_version=11040)
    (tmp_path / "c-garbage.txt").write_bytes(b"\x00\x01binary")
    (tmp_path / ".hidden.json").write_text("{}")
    proc = run("diagnose", str(tmp_path))
    lines = proc.stdout.decode().splitlines()
    assert [ln.split(":")[0] for ln in lines] == [str(tmp_path / n) for n in
                                                  ("a-healthy.json", "b-old-driver.json", "c-garbage.txt")]
    assert "fail" in lines[1] and "unusable" in lines[2]
    assert proc.returncode == 2  # the worst: an unusable file (2) over a failure (1)
    assert "Traceback" not in proc.stderr.decode()


def test_json_batch_gives_one_object_per_file_with_its_exit_code(tmp_path: Path) -> None:
    a = saved(tmp_path / "a.json")
    b = saved(tmp_path / "b.json", nvml__cuda_driver_version=11040)
    proc = run("diagnose", str(a), str(b), "--json")
    records = json.loads(proc.stdout)
    assert [r["file"] for r in records] == [str(a), str(b)]
    assert records[0]["exit_code"] == 0 and records[1]["exit_code"] == 1
    assert any(f["status"] == "fail" for f in records[1]["findings"])
    assert proc.returncode == 1


def test_one_file_keeps_the_full_report(tmp_path: Path) -> None:
    proc = run("diagnose", str(saved(tmp_path / "a.json")), "--json")
    assert json.loads(proc.stdout)["schema_version"] >= 1 and proc.returncode == 0


def test_saved_findings_are_not_read_when_they_are_judged_again(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    data = json.loads(to_json(Report(facts=builders.facts(), findings=(), probes=())))
    data["findings"] = [{"id": "x", "status": "fail", "title": "old"}]
    path.write_text(json.dumps(data))
    full, bare = load(str(path)), load(str(path), findings=False)
    assert isinstance(full, Report) and isinstance(bare, Report)
    assert [f.id for f in full.findings] == ["x"] and bare.findings == ()
    assert bare.facts.to_dict() == full.facts.to_dict()
