"""Each fault of issue 13, by cause: signals, output streams, option types, nesting, redaction in
every format, ``-o`` targets, child output floods, cleanup hangs, --python, UTF-16, C1 controls,
size/count limits. Every test here failed before its fix."""

from __future__ import annotations

import json
import os
import signal
import stat
import time
from pathlib import Path

import pytest

from envdoctor.inputs import parse_report
from envdoctor.inputs import read_text as read_input
from envdoctor.model import Facts, Finding, Reason, Remediation, Status, missing, ok
from envdoctor.report import Report, ReportError, to_json

from .fakes.nvidia_fakes import fake_nvml, host_with
from .faults import alive, fake_torch, pidfile, run_cli

ROOT = Path(__file__).resolve().parent.parent


def _no_traceback(out) -> None:
    assert "Traceback" not in out.text and "Error:" not in out.stderr.decode().replace("envdoctor: error:", ""), out.text


def _small_report(tmp_path: Path, **facts: object) -> Path:
    base = {"torch.version": {"value": "2.6.0+cu126"}, "python.version": {"value": "3.12.1"}}
    base.update({k: v for k, v in facts.items()})
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"schema_version": 1, "facts": base}))
    return path


# -- 1. signals --------------------------------------------------------------------------------
@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_mid_run_ends_every_child_group_and_exits_128_plus_n(tmp_path, signum, code):
    folder = fake_torch(tmp_path, "hangs-ignoring-sigterm")
    pid_file = pidfile(folder)
    env = {"PYTHONPATH": str(folder), **{k: v for k, v in fake_nvml(tmp_path, {"init_hang": 1}).items()
                                         if k != "_LIB_DIRS"}}
    env["LD_LIBRARY_PATH"] = str(tmp_path / "nvml")
    out = run_cli(["check", "--no-micro", "--timeout", "30"], env=env, timeout=20,
                  signal_after=(lambda: pid_file.exists(), signum))
    assert not out.timed_out, out.text
    assert out.rc == code, out.text
    assert out.seconds < 15
    err = out.stderr.decode().strip().splitlines()
    assert len(err) == 1 and err[0].startswith("envdoctor: interrupted"), err
    assert "Aborted" not in out.text and "Traceback" not in out.text
    child = int(pid_file.read_text())
    for _ in range(50):
        if not alive(child):
            break
        time.sleep(0.05)
    assert not alive(child), "the hung torch child outlived envdoctor"


# -- 2. output streams ------------------------------------------------------------------------
@pytest.mark.parametrize("args", [["list"], ["list", "--json"], ["diagnose", "{report}"], ["diagnose", "{report}", "--json"],
                                  ["diagnose", "{report}", "--markdown"]])
def test_a_full_disk_on_stdout_is_one_line_and_exit_3(tmp_path, args):
    report = _small_report(tmp_path)
    with open("/dev/full", "wb") as full:
        out = run_cli([a.replace("{report}", str(report)) for a in args], stdout=full.fileno())
    assert out.rc == 3, out.text
    lines = out.stderr.decode().strip().splitlines()
    assert lines and lines[-1].startswith("envdoctor: error: cannot write to standard output"), out.text
    assert "Traceback" not in out.text and "Exception ignored" not in out.text


def test_a_closed_stdout_is_one_line_and_exit_3(tmp_path):
    report = _small_report(tmp_path)
    out = run_cli(["diagnose", str(report)], preexec=lambda: os.close(1), stdout=subprocess_devnull())
    assert out.rc == 3, out.text
    assert "standard output" in out.stderr.decode() and "Traceback" not in out.text


def subprocess_devnull() -> int:
    import subprocess

    return subprocess.DEVNULL


def test_a_reader_that_goes_away_is_a_quiet_exit_141(tmp_path):
    """As git, pip and coreutils: a closed pipe (`| head -1`) is no error of envdoctor's."""
    import subprocess
    import sys

    report = _small_report(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "envdoctor", "diagnose", str(report), "-v"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"})
    proc.stdout.close()  # the reader left before the first line (`| head -0`)
    err = proc.stderr.read().decode()
    assert proc.wait(30) == 141
    assert err == ""


def test_healthcheck_with_stdout_closed_still_answers_by_its_exit_code(tmp_path):
    out = run_cli(["healthcheck", "--max-seconds", "3"], preexec=lambda: os.close(1), stdout=subprocess_devnull())
    assert out.rc in (0, 1) and "Traceback" not in out.text, out.text


def test_diagnose_stdin_closed_is_a_usage_error():
    out = run_cli(["diagnose", "-"], preexec=lambda: os.close(0))
    assert out.rc == 2 and "standard input is closed" in out.stderr.decode(), out.text


# -- 3. NaN and infinite options ---------------------------------------------------------------
@pytest.mark.parametrize("args", [["check", "--timeout", "nan"], ["report", "--timeout", "NaN"],
                                  ["check", "--timeout", "inf"], ["healthcheck", "--max-seconds", "nan"],
                                  ["healthcheck", "--max-seconds", "-inf"]])
def test_nan_and_infinite_seconds_are_usage_errors(args):
    out = run_cli(args, timeout=30)
    assert out.rc == 2, out.text
    assert "finite" in out.stderr.decode() and "Traceback" not in out.text


# -- 4. nesting depth ---------------------------------------------------------------------------
def test_a_deeply_nested_fact_is_refused_with_one_line(tmp_path):
    deep = "[" * 500 + "]" * 500
    path = tmp_path / "deep.json"
    path.write_text('{"schema_version": 1, "facts": {"torch.version": {"value": ' + deep + '}}}')
    with pytest.raises(ReportError, match="nested deeper than"):
        parse_report(read_input(str(path)), "deep.json")
    out = run_cli(["diagnose", str(path)])
    assert out.rc == 2 and "nested deeper than" in out.stderr.decode() and "Traceback" not in out.text


# -- 5. redaction in every format ---------------------------------------------------------------
TOKEN = "ghp_CanaryCanaryCanaryCanary0123456789"
HF = "hf_CanaryTokenAAAAAAAAAAAAAAAAAAAA"
PROXY_PASSWORD = "Pr0xyPassw0rd"


def _leaky_report() -> Report:
    facts = Facts({
        "torch.version": missing(Reason.FAILED, "child:torch_probe",
                                 f"ImportError: cannot fetch https://alice:{PROXY_PASSWORD}@proxy.corp:3128/simple "
                                 f"with token {HF}"),
        "python.executable": ok(f"/home/alice/{TOKEN}/venv/bin/python"),
        "env.vars": ok({"LD_LIBRARY_PATH": f"/opt/{TOKEN}/lib", "PYTHONPATH": f"/srv/{HF}"}),
    })
    finding = Finding("torch-import", Status.FAIL, f"import torch fails in /home/alice/{TOKEN}/venv",
                      detail=f"https://alice:{PROXY_PASSWORD}@proxy.corp:3128 said no; {HF}",
                      evidence={"python.executable": f"/home/alice/{TOKEN}/venv/bin/python"},
                      remediation=Remediation(f"Reinstall into /home/alice/{TOKEN}/venv",
                                              (f"/home/alice/{TOKEN}/venv/bin/python -m pip install torch",),
                                              (f"https://alice:{PROXY_PASSWORD}@example.org/x",)))
    return Report(facts=facts, findings=(finding,), warnings=(f"plugin at /opt/{TOKEN} failed",),
                  origin=f"report:{TOKEN}.json")


def _terminal(report: Report, verbose: bool) -> str:
    import io

    from rich.console import Console

    from envdoctor.output.render import render_terminal

    buf = io.StringIO()
    render_terminal(report, Console(file=buf, width=60, color_system=None), verbose=verbose)
    return buf.getvalue()


@pytest.mark.parametrize("fmt", ["terminal", "terminal-v", "markdown", "json", "healthcheck"])
def test_secrets_in_paths_and_error_texts_are_redacted_in_every_format(fmt):
    from envdoctor.output.render import healthcheck_line, render_markdown

    rep = _leaky_report()
    text = {"terminal": lambda: _terminal(rep, False), "terminal-v": lambda: _terminal(rep, True),
            "markdown": lambda: render_markdown(rep), "json": lambda: to_json(rep),
            "healthcheck": lambda: healthcheck_line(rep.findings, 0.1)[1]}[fmt]()
    flat = text.replace("\n", "").replace(" ", "").replace("│", "")
    for secret in (TOKEN, HF, PROXY_PASSWORD):
        assert secret not in flat, (fmt, text)


# -- 6. -o targets -------------------------------------------------------------------------------
def test_output_refuses_fifos_devices_and_links_to_them(tmp_path):
    from envdoctor.report import OutputTargetError, write_atomic

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link_dev = tmp_path / "to-null"
    link_dev.symlink_to("/dev/null")
    link_fifo = tmp_path / "to-fifo"
    link_fifo.symlink_to(fifo)
    for target in (fifo, link_dev, link_fifo):
        with pytest.raises(OutputTargetError):
            write_atomic(target, "x")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and link_dev.is_symlink() and link_fifo.is_symlink()
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_output_through_a_link_to_a_regular_file_keeps_the_link(tmp_path):
    from envdoctor.report import write_atomic

    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert not list(tmp_path.glob(".*.tmp"))


def test_report_o_to_a_fifo_is_exit_2(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    folder = fake_torch(tmp_path, "healthy")
    out = run_cli(["report", "--no-micro", "-o", str(fifo)], env={"PYTHONPATH": str(folder)})
    assert out.rc == 2 and "not a regular file" in out.stderr.decode(), out.text
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


# -- 7. child output floods ----------------------------------------------------------------------
def test_a_torch_that_prints_50_mb_and_imports_is_a_flood_not_a_failed_import(tmp_path):
    from envdoctor.probes import Options
    from envdoctor.probes.python_probe import probe_python

    folder = fake_torch(tmp_path, "prints-50mb-then-ok")
    r = probe_python(host_with(PYTHONPATH=str(folder)), Options(timeout=10))
    assert r["torch.version"].ok and r["torch.version"].value == "2.6.0+cpu", r["torch.version"]
    assert r["torch.import_noise_bytes"].value >= 50 << 20


def test_the_torch_import_check_calls_a_flood_a_flood():
    from envdoctor.checks.torch_build import torch_import

    facts = Facts({"torch.version": ok("2.6.0+cpu"), "torch.import_noise_bytes": ok(50 << 20)})
    f = torch_import(facts)
    assert f.status is Status.WARN and "52.4 MB" in f.title


def test_nvml_output_is_linear_in_the_gpu_count_and_every_gpu_is_read(tmp_path):
    from envdoctor.probes import Options
    from envdoctor.probes.nvidia import probe_nvml

    r = probe_nvml(host_with(fake_nvml(tmp_path, {"count": 128})), Options(timeout=10))
    assert r["nvml.gpus"].ok, r["nvml.gpus"]
    assert len(r["nvml.gpus"].value) == 128


def test_the_nvml_child_emits_each_gpu_once(tmp_path):
    import subprocess
    import sys

    from envdoctor.process.host import CHILD_DIR

    env = fake_nvml(tmp_path, {"count": 64})
    full = {**os.environ, "FAKE_NVML_CONFIG": env["FAKE_NVML_CONFIG"], "LD_LIBRARY_PATH": env["_LIB_DIRS"]}
    out = subprocess.run([sys.executable, str(CHILD_DIR / "nvml_probe.py"), "{}"], capture_output=True, env=full,
                         timeout=60).stdout
    assert out.count(b'"uuid"') == 64  # once per GPU: output grows with the count, not its square


# -- 8. cleanup hangs ------------------------------------------------------------------------------
def test_a_hang_in_nvml_shutdown_is_reported_and_does_not_take_the_deadline(tmp_path):
    from envdoctor.checks.driver import nvml_init

    from envdoctor.probes import Options
    from envdoctor.probes.nvidia import probe_nvml

    began = time.monotonic()
    r = probe_nvml(host_with(fake_nvml(tmp_path, {"count": 2, "shutdown_hang": 1})), Options(timeout=6))
    assert time.monotonic() - began < 10  # the probe's own deadline is 6 * scale
    assert r["nvml.gpus"].ok and len(r["nvml.gpus"].value) == 2
    assert r["nvml.init"].value["shutdown"]["status"] == "timeout"
    f = nvml_init(Facts(r))
    assert f.status is Status.WARN and "nvmlShutdown" in f.title


# -- 9. --python --------------------------------------------------------------------------------
@pytest.mark.parametrize("python", ["/nonexistent/python3", "no-such-python-anywhere", "{plain}", "/tmp", "{dangling}"])
def test_an_unusable_python_is_a_usage_error(tmp_path, python):
    plain = tmp_path / "python3"
    plain.write_text("not executable")
    plain.chmod(0o644)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    python = python.replace("{plain}", str(plain)).replace("{dangling}", str(tmp_path / "dangling"))
    out = run_cli(["check", "--python", python], timeout=30)
    assert out.rc == 2, out.text
    assert "--python" in out.stderr.decode() and "Traceback" not in out.text
    assert len(out.stdout) == 0


# -- 10. UTF-16 ----------------------------------------------------------------------------------
@pytest.mark.parametrize("encoding, bom", [("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff"), ("utf-16-le", b""),
                                           ("utf-8", b"\xef\xbb\xbf"), ("utf-32-le", b"\xff\xfe\x00\x00")])
def test_reports_and_pastes_saved_as_utf16_are_read(tmp_path, encoding, bom):
    report = json.dumps({"schema_version": 1, "facts": {"torch.version": {"value": "2.6.0+cu126"}}})
    path = tmp_path / "r.json"
    path.write_bytes(bom + report.encode(encoding))
    loaded = parse_report(read_input(str(path)), "r.json")
    assert isinstance(loaded, Report) and loaded.facts.value("torch.version") == "2.6.0+cu126"
    paste = "PyTorch version: 2.6.0+cu126\nIs debug build: False\nCUDA used to build PyTorch: 12.6\n"
    path.write_bytes(bom + paste.encode(encoding))
    facts = parse_report(read_input(str(path)), "paste.txt")
    assert isinstance(facts, Facts) and facts.value("torch.version") == "2.6.0+cu126"


def test_utf16_binary_is_still_refused(tmp_path):
    path = tmp_path / "bin"
    path.write_bytes(b"\xff\xfe" + bytes(range(256)) * 40)
    with pytest.raises(ReportError):
        parse_report(read_input(str(path)), "bin")


# -- 11. C1 controls -----------------------------------------------------------------------------
def test_c1_controls_are_escaped_in_markdown_and_json():
    from envdoctor.output.render import render_markdown

    name = "NVIDIA \x9b31mH100\x1b[0m \u202eevil"
    facts = Facts({"nvml.gpus": ok([{"index": 0, "name": name}]), "torch.version": ok("2.6.0\x9b2J")})
    rep = Report(facts=facts, findings=(Finding("x", Status.FAIL, name, detail=name),))
    for text in (render_markdown(rep), to_json(rep)):
        assert "\x9b" not in text and "\x1b" not in text and "\u202e" not in text
    assert json.loads(to_json(rep))["facts"]["torch.version"]["value"] == "2.6.0\x9b2J"  # data kept, only escaped


# -- 12. limits ------------------------------------------------------------------------------------
def test_a_paste_over_the_line_limit_is_refused_quickly(tmp_path):
    from envdoctor.inputs import MAX_LINES

    path = tmp_path / "lines.txt"
    path.write_bytes(b"PyTorch version: 2.6.0\n" + b"\n" * (MAX_LINES + 1))
    began = time.monotonic()
    with pytest.raises(ReportError, match="lines"):
        parse_report(read_input(str(path)), "lines.txt")
    assert time.monotonic() - began < 5


def test_a_report_over_the_gpu_limit_is_refused(tmp_path):
    from envdoctor.inputs import MAX_GPUS

    gpus = [{"index": i, "name": "G"} for i in range(MAX_GPUS + 1)]
    path = _small_report(tmp_path, **{"nvml.gpus": {"value": gpus}})
    with pytest.raises(ReportError, match="GPUs"):
        parse_report(read_input(str(path)), "r.json")


def test_a_report_over_the_findings_limit_is_refused(tmp_path):
    from envdoctor.inputs import MAX_FINDINGS

    data = {"schema_version": 1, "facts": {}, "findings": [{"id": "x", "status": "ok"}] * (MAX_FINDINGS + 1)}
    with pytest.raises(ReportError, match="findings"):
        parse_report(json.dumps(data), "r.json")


def test_the_limits_are_documented():
    readme = (ROOT / "README.md").read_text()
    from envdoctor.inputs import MAX_FINDINGS, MAX_GPUS, MAX_LINES

    for n in (MAX_GPUS, MAX_FINDINGS, MAX_LINES):
        assert f"{n:,}" in readme

