"""Facts-model tests: readings carry reasons, everything round-trips through JSON exactly."""

from __future__ import annotations

import json

import pytest

from envdoctor.model import Facts, Finding, Reading, Reason, Remediation, Status, missing, ok, summarize, worst


def test_reading_round_trip_keeps_value_reason_source_detail():
    readings = {
        "torch.version": ok("2.6.0+cu126", "child:torch_probe"),
        "nvml.driver_version": missing(Reason.TIMEOUT, "child:nvml_probe", "no answer within 5.0 s (stuck in nvmlInit)"),
        "nvml.gpus": ok([{"index": 0, "name": "NVIDIA H100", "pcie": {"gen": 5}}], "nvml"),
        "torch.cuda_version": ok(None, "child:torch_probe"),
    }
    facts = Facts(readings)
    text = json.dumps(facts.to_dict())
    again = Facts.from_dict(json.loads(text))
    assert again.to_dict() == facts.to_dict()
    assert again["nvml.driver_version"].reason is Reason.TIMEOUT
    assert again["nvml.driver_version"].detail.startswith("no answer")
    assert again.value("nvml.gpus")[0]["pcie"]["gen"] == 5
    # A legitimately-null value is read fine; a missing one says why.
    assert again["torch.cuda_version"].ok and again.value("torch.cuda_version") is None


def test_unprobed_key_reads_as_not_collected():
    facts = Facts({})
    assert facts.get("nvml.driver_version").reason is Reason.NOT_COLLECTED
    assert "nvml.driver_version" in facts.get("nvml.driver_version").detail  # never missing without a why
    assert facts.value("nvml.driver_version", "x") == "x"


def test_facts_are_immutable():
    facts = Facts({"a.b": ok({"k": [1, 2]})})
    with pytest.raises(TypeError):
        facts["a.b"].value["k"] = 3  # type: ignore[index]
    with pytest.raises(TypeError):
        facts._data["c.d"] = ok(1)  # type: ignore[index]


def test_finding_round_trip_and_summary():
    f = Finding("driver-too-old", Status.FAIL, "Driver too old", "detail", {"nvml.driver_version": "470.82"},
                Remediation("Upgrade", ("sudo apt install nvidia-driver-570",), ("https://example.org",)), (0, 1))
    again = Finding.from_dict(json.loads(json.dumps(f.to_dict())))
    assert again == f
    assert summarize([f])["fail"] == 1
    assert worst([f, Finding("x", Status.ERROR, "t")]) is Status.ERROR


def test_bad_reading_shapes_are_rejected_with_value_error():
    with pytest.raises(ValueError):
        Facts.from_dict({"a.b": "not an object"})
    with pytest.raises(ValueError):
        Reading.from_dict({"value": 1, "reason": "exploded"})


def test_probe_run_status_is_a_closed_vocabulary_saved_as_the_same_words():
    from pathlib import Path

    from envdoctor.model import ProbeRun, ProbeStatus

    run = ProbeRun("nvml", "timeout", 2.5, "stuck in nvmlInit")
    assert run.status is ProbeStatus.TIMEOUT and f"{run.status}" == "timeout"
    assert run.to_dict() == {"name": "nvml", "status": "timeout", "seconds": 2.5, "detail": "stuck in nvmlInit"}
    assert ProbeRun.from_dict(json.loads(json.dumps(run.to_dict()))) == run
    with pytest.raises(ValueError):
        ProbeRun("nvml", "hung")
    assert ProbeStatus.of([None, Reason.CRASHED, Reason.TIMEOUT]) is ProbeStatus.TIMEOUT
    assert ProbeStatus.of([None, Reason.CRASHED]) is ProbeStatus.CRASHED and ProbeStatus.of([]) is ProbeStatus.OK
    schema = json.loads((Path(__file__).resolve().parent.parent / "envdoctor" / "data" / "report.schema.json").read_text())
    assert schema["properties"]["probes"]["items"]["properties"]["status"]["enum"] == [s.value for s in ProbeStatus]
