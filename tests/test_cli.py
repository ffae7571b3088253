"""End-to-end: the installed CLI as a user runs it (real processes, this real machine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envdoctor.model import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, stdin: bytes | None = None, env: dict[str, str] | None = None, timeout: float = 120):
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):  # the tester's active env would become the target
        full_env.pop(var, None)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "envdoctor", *args], input=stdin, capture_output=True,
                          env=full_env, timeout=timeout)


# saved_report: one real `report --json --no-micro` (tests/conftest.py, shared with test_report_schema).


def test_check_runs_end_to_end_on_this_machine():
    # --timeout 20: a library load slower than the default's 2.3 s on a busy machine is a (correct)
    # warn this test is not about; a healthy run answers in milliseconds either way.
    # The exposure checks judge every listening socket of the machine: test_exposure.py's fake servers (in
    # another xdist worker) are that file's subject, not this one's.
    quiet = ("--skip", "exposed-services", "--skip", "jupyter-auth")
    proc = run("check", "--no-micro", "--timeout", "20", *quiet)
    out = proc.stdout.decode()
    assert "Traceback" not in proc.stderr.decode()
    # A CPU-only box (this one) is a valid setup: no driver is needed, the CPU wheel fits, nothing nags.
    # "No problems found" is said about what was examined, with what could not be judged apart.
    assert "No problems found in what was examined (" in out and "Summary: 0 fail · 0 error · 0 warn" in out
    verbose = run("check", "--no-micro", "--timeout", "20", "-v").stdout.decode()
    assert "torch-cpu-build" in verbose and "CPU-only" in verbose
    assert "⁉ error" not in out  # nothing on this GPU-less machine is an envdoctor failure
    expected = 1 if "✖ fail" in out else 0
    assert proc.returncode == expected


def test_report_json_validates_against_the_shipped_schema(saved_report):
    import jsonschema  # a test dependency ([test] extra): never skipped
    schema = json.loads((ROOT / "envdoctor/data/report.schema.json").read_text())
    data = json.loads(saved_report.read_text())
    jsonschema.validate(data, schema)
    assert data["schema_version"] == SCHEMA_VERSION
    assert {"facts", "findings", "summary", "not_run", "probes"} <= set(data)
    assert data["facts"]["torch.version"]["value"].endswith("+cpu")


def test_diagnose_round_trips_to_the_same_findings(saved_report):
    proc = run("diagnose", str(saved_report), "--json")
    assert proc.returncode in (0, 1), proc.stderr.decode()
    again = json.loads(proc.stdout)
    original = json.loads(saved_report.read_text())

    def strip(fs: list[dict]) -> list[tuple]:
        return [(f["id"], f["status"], f["title"], f["detail"], f["evidence"], f["remediation"]) for f in fs]

    assert strip(again["findings"]) == strip(original["findings"])
    assert again["facts"] == original["facts"]
    assert again["origin"] == "report:report.json"


def test_markdown_report_is_ready_for_a_github_issue(tmp_path):
    out = tmp_path / "r.md"
    proc = run("report", "--markdown", "-o", str(out), "--no-micro")
    text = out.read_text()
    assert proc.returncode in (0, 1)
    assert text.startswith("<details><summary>envdoctor: ") and text.rstrip().endswith("</details>")
    assert "`torch-cpu-build`" in text


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    (b"", "is empty"),
    (b'{"schema_version": 1, "facts": {"a.b": {"val', "not valid JSON"),
    (b"[1, 2, 3]", "expected an object"),
    (b'{"schema_version": 99, "facts": {}}', "newer than this envdoctor understands"),
    (b'{"schema_version": 1, "facts": {"torch.version": "2.6"}}', "not a well-formed envdoctor report"),
    (b"\x7fELF\x02\x01\x01\x00\x00\x00\x00" + bytes(range(256)) * 8, "binary data"),
    (b"[" * 100000 + b"]" * 100000, None),
])
def test_diagnose_rejects_bad_input_with_one_clear_line(tmp_path, content, message):
    path = tmp_path / "input.json"
    if content is not None:
        path.write_bytes(content)
    proc = run("diagnose", str(path))
    err = proc.stderr.decode()
    assert proc.returncode == 2, (proc.stdout, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    if message:
        assert message in err


def test_diagnose_refuses_a_fifo_instead_of_blocking_on_it(tmp_path):
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    proc = run("diagnose", str(fifo), timeout=30)
    assert proc.returncode == 2 and "not a regular file" in proc.stderr.decode()


def test_diagnose_refuses_a_huge_file_without_reading_it(tmp_path):
    path = tmp_path / "huge.json"
    with open(path, "wb") as fh:
        fh.truncate(1 << 30)  # 1 GiB, sparse
    proc = run("diagnose", str(path), timeout=30)
    assert proc.returncode == 2 and "MiB" in proc.stderr.decode()


def test_strings_from_a_report_are_shown_literally(tmp_path):
    hostile = "[bold red]pwned[/bold red] \x1b[2J\x1b]0;title\x07"
    report = {
        "schema_version": 1, "envdoctor_version": "0.0", "created_at": "x", "facts": {},
        "findings": [], "summary": {},
    }
    report["facts"]["env.vars"] = {"value": {"CUDA_HOME": hostile}}
    report["facts"]["torch.version"] = {"value": hostile}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    proc = run("diagnose", str(path), "-v")
    out = proc.stdout.decode()
    assert "[bold red]pwned[/bold red]" in out
    assert "\x1b" not in out and "\\x1b[2J" in out and "\\x07" in out


def test_diagnose_reads_stdin(saved_report):
    proc = run("diagnose", "-", "--json", stdin=saved_report.read_bytes())
    assert proc.returncode in (0, 1) and json.loads(proc.stdout)["origin"] == "report:stdin"


def test_only_runs_just_the_named_checks(saved_report):
    proc = run("diagnose", str(saved_report), "--only", "torch-import", "--json")
    assert [f["id"] for f in json.loads(proc.stdout)["findings"]] == ["torch-import"]


def test_fail_on_warn_tightens_the_exit_code(saved_report):
    data = json.loads(saved_report.read_text())
    statuses = {f["status"] for f in data["findings"]}
    proc = run("diagnose", str(saved_report), "--fail-on", "warn", "--json")
    if "fail" in statuses or "warn" in statuses:
        assert proc.returncode == 1
    else:
        assert proc.returncode == 0


def test_healthcheck_is_one_line_and_exits_0_or_1():
    proc = run("healthcheck", "--max-seconds", "5")
    lines = proc.stdout.decode().strip().splitlines()
    assert len(lines) == 1 and proc.returncode in (0, 1)
    assert lines[0].startswith("healthy" if proc.returncode == 0 else "unhealthy")


def test_list_names_every_check_and_its_provider():
    proc = run("list", "--json")
    listing = json.loads(proc.stdout)
    assert listing["kind"] == "envdoctor-check-list" and listing["schema_version"] == 1
    assert listing["envdoctor_version"]
    rows = listing["checks"]
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)) and "host-shm-size" in ids
    assert all(r["provider"] == "envdoctor" for r in rows)


def test_usage_errors_exit_2():
    assert run("check", "--device", "gpu7").returncode == 2
    assert run("report", "--fail-on", "sometimes").returncode == 2
    assert run("frobnicate").returncode == 2


def test_unwritable_output_is_a_clear_error(tmp_path):
    proc = run("report", "--json", "-o", str(tmp_path / "no" / "such" / "dir" / "r.json"), "--no-micro")
    assert proc.returncode == 2 and "cannot write" in proc.stderr.decode()


def test_a_report_whose_facts_have_the_wrong_types_never_shows_a_traceback(saved_report, tmp_path):
    # A hostile or hand-edited report: every fact value replaced by a string, number, null or odd mapping.
    data = json.loads(saved_report.read_text())
    odd = ["570.86.16", 7, None, {"name": []}, ["x", 1]]
    for i, reading in enumerate(data["facts"].values()):
        if isinstance(reading, dict):
            reading["value"], reading["reason"] = odd[i % len(odd)], None
    bad = tmp_path / "odd.json"
    bad.write_text(json.dumps(data))
    for args in (("diagnose", str(bad)), ("diagnose", str(bad), "--json"), ("diagnose", str(bad), "--markdown")):
        proc = run(*args)
        assert "Traceback" not in proc.stderr.decode() + proc.stdout.decode(), args
        assert proc.returncode in (0, 1, 2, 3), args


def test_an_nvidia_smi_failure_followed_by_a_working_table_reads_the_table(tmp_path):
    paste = tmp_path / "smi.txt"
    paste.write_text("$ docker run --rm --gpus all ubuntu nvidia-smi\nFailed to initialize NVML: Unknown Error\n"
                     "$ docker run --rm --gpus all ubuntu nvidia-smi\n"
                     "| NVIDIA-SMI 570.86.16              Driver Version: 570.86.16      CUDA Version: 12.8     |\n")
    proc = run("diagnose", str(paste), "--json")
    assert proc.returncode in (0, 1), proc.stderr.decode()
    facts = json.loads(proc.stdout)["facts"]
    assert facts["nvml.driver_version"]["value"] == "570.86.16"
    assert facts["nvml.gpus"]["value"] is None and facts["nvml.gpus"]["reason"] == "not_in_report"


def test_the_readme_example_is_what_diagnose_prints():
    # The README shows a real re-judged paste; it must stay what envdoctor prints today.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    prompt = "$ envdoctor diagnose pytorch-150733-rtx5090d-cu126.txt\n"
    shown = readme[readme.index(prompt) + len(prompt):readme.index("$ echo $?", readme.index(prompt))]
    proc = run("diagnose", str(ROOT / "tests/corpus/pytorch-150733-rtx5090d-cu126.txt"))
    assert proc.returncode == 1 and readme[readme.index("$ echo $?"):].startswith("$ echo $?\n1\n")
    assert proc.stdout.decode().replace("paste:" + str(ROOT / "tests/corpus") + "/", "paste:") == shown


def test_list_on_a_pipe_is_one_whole_line_per_check():
    proc = run("list", env={**os.environ, "COLUMNS": "40"})
    lines = proc.stdout.decode().splitlines()
    assert proc.returncode == 0 and len(lines) > 40
    assert all(len(line.split("\t")) == 4 and line == line.rstrip() for line in lines)
    assert "host-shm-size\tShared memory (/dev/shm) is large enough for DataLoader workers\tenvdoctor\tyes" in lines


def test_a_bug_reaching_the_top_is_one_line_and_exit_3_never_a_traceback_or_1(monkeypatch, capfd) -> None:
    """Exit 1 means "a failure was found" (a prolog refuses the node for it): a crash of envdoctor must not."""
    from envdoctor.commands import cli

    def boom(*args, **kwargs):
        raise KeyError("facts")

    monkeypatch.setattr(cli.main, "main", boom)
    monkeypatch.setattr(cli.lifecycle, "finish", lambda code: (_ for _ in ()).throw(SystemExit(code)))
    with pytest.raises(SystemExit) as exited:
        cli.run()
    assert exited.value.code == 3
    err = capfd.readouterr().err
    assert "internal error (KeyError" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_saved_report_lists_its_problems_first(tmp_path: Path) -> None:
    from .faults import run_cli

    paste = tmp_path / "ticket.txt"
    paste.write_text("torch: 2.1.0+cpu\nGPU: NVIDIA GeForce RTX 4090\n", encoding="utf-8")
    shown = run_cli(["diagnose", "--json", str(paste)])
    from envdoctor.model import SEVERITY, Status

    order = [SEVERITY[Status(f["status"])] for f in json.loads(shown.stdout)["findings"]]
    assert order[0] == SEVERITY[Status.FAIL] and order == sorted(order, reverse=True)  # as the terminal shows them
