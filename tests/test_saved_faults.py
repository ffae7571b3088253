"""Issue 26 item 8: fleet, diff and diagnose of saved reports and folders."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from envdoctor.commands.saved import fleet, summarize_file
from envdoctor.inputs import parse_report, shown_name
from envdoctor.model import Reason

from .faults import cli_env


@pytest.mark.parametrize("version", ["2", "99", "true", "0", '"1"'])
def test_fleet_refuses_the_schemas_diagnose_refuses(tmp_path, version):
    path = tmp_path / "r.json"
    path.write_text(f'{{"schema_version": {version}, "facts": {{}}}}')
    assert summarize_file(str(path)).error
    assert fleet([str(tmp_path)])["reports"] == 0


def test_nan_and_infinity_are_missing_values_not_a_refused_report():
    report = parse_report('{"schema_version": 1, "facts": {"torch.version": {"value": NaN}, '
                          '"nvml.device_count": {"value": 1e999}, "python.version": {"value": "3.12.1"}}}')
    assert report.facts.value("python.version") == "3.12.1"
    for key in ("torch.version", "nvml.device_count"):
        reading = report.facts.get(key)
        assert reading.value is None and reading.reason is Reason.NOT_IN_REPORT and "not a JSON value" in reading.detail


def test_control_characters_of_a_name_are_escaped():
    assert shown_name("a\x1b]0;x\x07b\u202e.json") == "a\\x1b]0;x\\x07b\\u202e.json"
    assert shown_name("plain/report.json") == "plain/report.json"


def test_fleet_masks_variables_it_does_not_judge(tmp_path):
    for i, key in enumerate(("nvapi-AAAAsecret", "nvapi-AAAAsecret", "nvapi-BBBBsecret")):
        (tmp_path / f"r{i}.json").write_text(json.dumps({"schema_version": 1, "facts": {
            "env.vars": {"value": {"NVIDIA_API_KEY": key, "NCCL_IB_HCA": f"mlx5_{i // 2}", "NCCL_DEBUG": "WARN"}}}}))
    text = json.dumps(fleet([str(tmp_path)]))
    assert "secret" not in text


@pytest.mark.parametrize("command", ["diagnose", "fleet"])
def test_an_empty_folder_says_so(tmp_path, command):
    out = subprocess.run([sys.executable, "-m", "envdoctor", command, str(tmp_path)], env=cli_env(), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.strip() == f"envdoctor: error: no reports in {tmp_path}"


@pytest.mark.parametrize("findings, bad", [([{"id": "x", "status": "bogus"}], "1 of its 1"),
                                           ([{"id": "torch-import", "status": "ok"}, 7, {"status": "fail"}], "2 of its 3"),
                                           ("garbage", "'findings' is not a list")])
def test_garbage_findings_are_ignored_with_a_warning_since_they_are_judged_again(tmp_path, findings, bad):
    from envdoctor.pipeline.many import judge_path

    path = tmp_path / "r.json"
    path.write_text(json.dumps({"schema_version": 1, "facts": {"torch.version": {"value": "2.6.0"}},
                                "findings": findings}))
    judged = judge_path(str(path))
    assert judged.report is not None, judged.error  # read, not refused: the facts are what is judged
    assert judged.report.facts.value("torch.version") == "2.6.0"
    assert all(f.status.value in ("ok", "skip", "warn", "fail", "error") for f in judged.report.findings)
    warned = [w for w in judged.report.warnings if "ignored" in w]
    assert len(warned) == 1 and bad in warned[0]


def test_well_formed_saved_findings_give_no_warning(tmp_path):
    from envdoctor.pipeline.many import judge_path

    path = tmp_path / "r.json"
    path.write_text(json.dumps({"schema_version": 1, "facts": {"torch.version": {"value": "2.6.0"}},
                                "findings": [{"id": "torch-import", "status": "ok", "title": "t"}],
                                "warnings": ["an old registry warning"]}))
    judged = judge_path(str(path))
    assert judged.report is not None and not any("ignored" in w or "old registry" in w for w in judged.report.warnings)
