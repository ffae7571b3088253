"""Every screen a user meets, through the CLI as a user runs it: on a pipe, on a terminal (a pty of a
given size), a closed pipe, shell completion, usage errors, a box without a GPU, containers."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX", "COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TERM"):
        env.pop(var, None)
    env.update(extra or {})
    return env


def run(*args: str, stdin: bytes | None = None, env: dict[str, str] | None = None, timeout: float = 120,
        cwd: str | None = None) -> subprocess.CompletedProcess[bytes]:
    """``python -m envdoctor ARGS`` with stdout and stderr on pipes."""
    return subprocess.run([sys.executable, "-m", "envdoctor", *args], input=stdin, capture_output=True,
                          env=_env(env), timeout=timeout, cwd=cwd, stdin=None if stdin is not None else subprocess.DEVNULL)


def run_pty(*args: str, columns: int = 80, lines: int = 24, env: dict[str, str] | None = None,
            send: bytes | None = None, timeout: float = 120) -> tuple[int, str]:
    """``python -m envdoctor ARGS`` on a terminal of ``columns`` x ``lines`` (stdin, stdout and stderr
    the pty, as in an xterm); ``send`` is typed once the first whole line arrived (then Ctrl-D)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the pty is its controlling terminal
        try:
            os.execve(sys.executable, [sys.executable, "-m", "envdoctor", *args],
                      _env({"TERM": "xterm-256color", **(env or {})}))
        finally:
            os._exit(127)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    out = b""
    deadline = time.monotonic() + timeout
    sent = send is None
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError as exc:  # EIO: the child closed the terminal
                    if exc.errno != errno.EIO:
                        raise
                    break
                if not chunk:
                    break
                out += chunk
                # Typed once a whole first line is on the screen: a first chunk may hold half of it, and the
                # terminal's echo of what is typed would land inside it (seen under load).
                if not sent and b"\n" in out:
                    os.write(fd, send + b"\n")
                    os.write(fd, b"\x04")
                    sent = True
        else:
            os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"no exit within {timeout} s: {out[-2000:]!r}")
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode("utf-8", "replace").replace("\r\n", "\n")


_CSI = __import__("re").compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def screen(out: str) -> list[str]:
    """The lines a terminal shows at the end: escape sequences dropped, the progress spinner
    (stderr, erased as it goes) left out."""
    return [line.split("\r")[-1] for line in _CSI.sub("", out).split("\n") if "probing" not in line]


# -- quiet where tools are quiet ---------------------------------------------------------------
def test_a_reader_that_closes_the_pipe_ends_the_run_quietly():
    """A reader that went away: exit 141 and nothing on stderr, as git and coreutils. The pipe's read end is
    closed before envdoctor starts, so its first write meets EPIPE whatever the machine's load (with `| head -1`
    a loaded machine let envdoctor write all of `list` into the pipe's buffer first: exit 0, also quiet)."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "envdoctor", "list"], stdout=write, stderr=subprocess.PIPE,
                              env=_env(), timeout=120)
    finally:
        os.close(write)
    assert proc.returncode == 141 and proc.stderr == b"", proc
    piped = subprocess.run(f"{sys.executable} -m envdoctor list | head -1; echo rc=${{PIPESTATUS[0]}}", shell=True,
                           executable="/bin/bash", capture_output=True, env=_env(), timeout=120)
    assert piped.stdout.decode().splitlines()[-1] in ("rc=141", "rc=0") and piped.stderr == b"", piped


def test_a_full_disk_is_still_exit_3_with_its_cause():
    with open("/dev/full", "wb") as full:
        proc = subprocess.run([sys.executable, "-m", "envdoctor", "list"], stdout=full, stderr=subprocess.PIPE,
                              env=_env(), timeout=120)
    assert proc.returncode == 3
    assert proc.stderr.decode().strip() == ("envdoctor: error: cannot write to standard output (No space left on "
                                            "device); the output is incomplete")


# -- shell completion ----------------------------------------------------------------------------
@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_shell_completion_scripts_are_written(shell):
    proc = run(env={"_ENVDOCTOR_COMPLETE": f"{shell}_source"})
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    assert "_envdoctor_completion" in proc.stdout.decode()


def test_bash_completion_answers_a_word():
    proc = run(env={"_ENVDOCTOR_COMPLETE": "bash_complete", "COMP_WORDS": "envdoctor dia", "COMP_CWORD": "1"})
    assert proc.returncode == 0 and proc.stdout.decode().split() == ["plain,diagnose"], proc


def test_bash_completion_script_completes_in_a_real_bash(tmp_path):
    """The script `eval`s in bash and its function asks envdoctor for the words."""
    script = run(env={"_ENVDOCTOR_COMPLETE": "bash_source"}).stdout.decode()
    shim = tmp_path / "envdoctor"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m envdoctor \"$@\"\n")
    shim.chmod(0o755)
    test = (script + "\nCOMP_WORDS=(envdoctor he); COMP_CWORD=1; _envdoctor_completion envdoctor; "
            "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    proc = subprocess.run(["bash", "-c", test], capture_output=True, timeout=60,
                          env=_env({"PATH": f"{tmp_path}:{os.environ['PATH']}"}))
    assert proc.stdout.decode().split() == ["healthcheck"], proc


# -- usage errors: one format -------------------------------------------------------------------
@pytest.mark.parametrize("args", [
    ["check", "--bogus"], ["nosuch"], ["check", "--timeout", "x"], ["diff", "a"], ["fleet"], ["exec"],
    ["check", "--device", "gpu"], ["check", "--only", "torch-verson"], ["diagnose", "/nonexistent/r.json"],
    ["report", "-o", "/nonexistent/r.json"], ["check", "--python", "/bin/true"], ["check", "--min-busbw", "5"],
    ["check", "--distributed"], ["diagnose", "--markdown", "a", "b"], ["healthcheck", "--max-seconds", "0"],
    ["exec", "--micro", "--", "true"],  # its target discovery fails (VIRTUAL_ENV without an interpreter)
])
def test_every_usage_error_is_one_line_in_one_format(args, tmp_path):
    proc = run(*args, cwd=str(tmp_path), env={"VIRTUAL_ENV": "/nonexistent"} if args[0] == "exec" else None)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and proc.stdout == b"", (args, err)
    assert len(err.splitlines()) == 1 and err.startswith("envdoctor: error: "), (args, err)
    assert "Usage:" not in err and "Try " not in err and "\nError:" not in err


@pytest.mark.parametrize("columns", [80, 200])
def test_top_level_help_cuts_no_command_short_help(columns):
    code, out = run_pty("--help", columns=columns)
    assert code == 0
    commands = out.split("Commands:", 1)[1].strip().splitlines()
    assert {line.split()[0] for line in commands} == {"check", "diagnose", "diff", "exec", "fix", "fleet", "healthcheck",
                                                      "list", "report"}
    for line in commands:
        assert line.rstrip().endswith(".") and "..." not in line and "(e.g" not in line, line


def test_check_help_offers_only_what_works_without_distributed():
    out = run("check", "--help").stdout.decode()
    assert "--expect-gpus" in out and "--json" in out and "Also write the report" in out


# -- check --json, -o and --expect-gpus without --distributed ------------------------------------
def test_check_json_prints_the_report_and_o_writes_it(tmp_path):
    target = tmp_path / "r.json"
    proc = run("check", "--json", "-o", str(target), "--no-micro", "--timeout", "20", "--skip", "exposed-services",
               "--skip", "jupyter-auth")
    assert proc.returncode in (0, 1), proc.stderr.decode()
    printed = json.loads(proc.stdout.decode())
    written = json.loads(target.read_text())
    assert printed["$schema"] == written["$schema"] == "urn:envdoctor:schema:report:1"
    assert printed["findings"] == written["findings"] and printed["origin"] == "live"
    assert proc.stderr.decode().strip().endswith(f"envdoctor: wrote {target}")


def test_check_o_keeps_the_screen(tmp_path):
    target = tmp_path / "r.json"
    proc = run("check", "-o", str(target), "--no-micro", "--only", "torch-cpu-build")
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().startswith("envdoctor 0.1.0") and json.loads(target.read_text())["findings"]


# -- a box without an NVIDIA GPU says so ---------------------------------------------------------
def test_a_box_without_a_gpu_names_it_in_the_header_and_expect_gpus_fails():
    """This machine has no NVIDIA GPU and no driver: the header says so; --expect-gpus 1 fails."""
    proc = run("check", "--no-micro", "--expect-gpus", "1", "--only", "expect-gpus", "--only", "torch-cpu-build")
    head = proc.stdout.decode().splitlines()[0]
    assert " · no NVIDIA GPU" in head, head
    assert proc.returncode == 1 and "✖ fail   expect-gpus" in proc.stdout.decode()
    assert run("check", "--no-micro", "--expect-gpus", "0", "--only", "expect-gpus").returncode == 0


def test_the_header_on_a_terminal_names_no_gpu_too():
    code, out = run_pty("check", "--no-micro", "--only", "torch-cpu-build", columns=200)
    assert code == 0 and " · no NVIDIA GPU" in screen(out)[0], out


# -- the cluster report on a pipe (a Slurm output file, `torchrun … | tee`, `kubectl logs`) ------
def test_cluster_report_on_a_pipe_is_plain_lines_from_a_real_torchrun(tmp_path):
    from tests.test_distributed import DEADLINES, base_env, finish, free_port, torchrun

    env = base_env()
    env.pop("COLUMNS")  # a pipe has no width: nothing may depend on one
    code, out, err = finish(torchrun(2, free_port(), [*DEADLINES, "--no-micro"], env, cwd=str(tmp_path)))
    assert code in (0, 1), out + err
    lines = out.splitlines()
    assert lines[0].startswith("envdoctor 0.1.0 cluster check · 2 rank(s) · launcher torchrun · rendezvous "
                               "127.0.0.1:") and lines[0].endswith("backend gloo"), lines[0]
    assert all(line == line.rstrip() for line in lines), [line for line in lines if line != line.rstrip()]
    ranks = [line for line in lines if line.startswith("rank ")]
    assert [r.split(" · ")[0] for r in ranks] == ["rank 0", "rank 1"]
    assert all(" · torch 2.13.0+cpu · " in r and " · all-reduce " in r for r in ranks), ranks
    sizes = [line for line in lines if line.endswith(" · exact")]
    assert [s.split(" · ")[0] for s in sizes] == ["64 KiB", "1 MiB", "4 MiB"]
    assert any(line.startswith("✔ ok     cluster-rendezvous") for line in lines)
    summary = lines[-1]
    assert summary.startswith("Cluster summary: ") and " · 0 error · " in summary, summary
    assert "│" not in out and "─" not in out  # no table or panel borders


# -- `-v` facts and fleet's differences at any width --------------------------------------------
LONG_PATH = "/usr/local/cuda-12.8/targets/x86_64-linux/lib/libcudart.so.12.8.90"


def _report_with_long_facts(tmp_path: Path) -> Path:
    from envdoctor.report import Report, to_json
    from tests.builders import facts

    data = json.loads(to_json(Report(facts=facts(), findings=())))
    data["facts"]["cuda.runtime_path"] = {"value": LONG_PATH, "source": "probe:libraries"}
    data["facts"]["torch.loaded_libraries"] = {"value": {"cudart": [LONG_PATH, LONG_PATH + ".copy"]},
                                               "source": "child:torch_probe"}
    path = tmp_path / "long.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("columns", [80, 200])
def test_verbose_facts_are_whole_key_value_lines_on_a_terminal(tmp_path, columns):
    report = _report_with_long_facts(tmp_path)
    code, out = run_pty("diagnose", str(report), "-v", columns=columns, env={"NO_COLOR": "1"})
    lines = screen(out)
    facts = lines[lines.index("Facts") + 1:]
    assert f"  cuda.runtime_path = {LONG_PATH}  (probe:libraries)" in facts, facts
    assert (f'  torch.loaded_libraries = {{"cudart": ["{LONG_PATH}", "{LONG_PATH}.copy"]}}  (child:torch_probe)'
            in facts)
    assert "…" not in "\n".join(facts) and "┃" not in out


def test_verbose_facts_on_a_pipe_are_whole(tmp_path):
    report = _report_with_long_facts(tmp_path)
    out = run("diagnose", str(report), "-v").stdout.decode()
    assert f"  cuda.runtime_path = {LONG_PATH}  (probe:libraries)\n" in out
    assert f'"{LONG_PATH}.copy"]}}  (child:torch_probe)\n' in out


def test_fleet_differences_are_whole_lines_at_80_columns(tmp_path):
    from tests.test_fleet import write_report

    d = tmp_path / "reports"
    d.mkdir()
    for i in range(4):
        write_report(d / f"node{i}.json", **({"torch__version": "2.5.1+cu124"} if i == 3 else {}))
    code, out = run_pty("fleet", str(d), columns=80, env={"NO_COLOR": "1"})
    lines = screen(out)
    assert code == 1, out
    differs = [line for line in lines if "differs from the majority:" in line]
    assert len(differs) == 1 and differs[0].startswith("#2 differs from the majority: torch: 2.5.1+cu124 (majority "), lines
    assert not any(line.strip() in ("the", "majority", "from") for line in lines), lines


def test_diagnose_dash_on_a_terminal_asks_for_the_paste_before_waiting():
    paste = b"RuntimeError: CUDA error: no kernel image is available for execution on the device"
    code, out = run_pty("diagnose", "-", columns=120, env={"NO_COLOR": "1"}, send=paste)
    lines = screen(out)
    assert lines[0] == ("envdoctor: paste the text (a report, collect_env or nvidia-smi output, error lines), then "
                        "Ctrl-D on an empty line"), lines
    assert any(line.startswith("envdoctor 0.1.0 · re-judging paste:") for line in lines), lines
    assert code in (0, 1)


def test_diagnose_dash_on_a_pipe_says_nothing_first():
    proc = run("diagnose", "-", stdin=b"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")
    assert b"paste the text" not in proc.stderr and proc.returncode in (0, 1)


# -- containers: exec's log lines and its bypass ------------------------------------------------
def test_exec_says_one_line_when_healthy():
    proc = run("exec", "--", sys.executable, "-c", "print('started')")
    err = proc.stderr.decode().splitlines()
    assert proc.returncode == 0 and proc.stdout.decode() == "started\n"
    assert len(err) == 1 and err[0].startswith("envdoctor exec: preflight passed in "), err


def test_exec_bypass_variable_starts_the_shell_on_a_failing_node():
    """`docker run -it -e ENVDOCTOR_SKIP_PREFLIGHT=1 IMAGE bash`: the command starts unchecked."""
    failing = run("exec", "--expect-gpus", "8", "--", "sh", "-c", "echo started")
    assert failing.returncode == 78 and failing.stdout == b""
    assert failing.stderr.decode().splitlines()[-1].endswith("(exit 78; ENVDOCTOR_SKIP_PREFLIGHT=1 starts it unchecked)")
    assert "-v lists them" not in failing.stderr.decode()  # exec has no -v
    skipped = run("exec", "--expect-gpus", "8", "--", "sh", "-c", "echo started", env={"ENVDOCTOR_SKIP_PREFLIGHT": "1"})
    assert skipped.returncode == 0 and skipped.stdout == b"started\n"
    assert skipped.stderr.decode() == "envdoctor exec: preflight skipped (ENVDOCTOR_SKIP_PREFLIGHT=1); starting sh\n"


# -- remedies as printed: each command once per screen ------------------------------------------
def test_an_empty_cuda_visible_devices_prints_unset_once_and_no_template_leftover():
    proc = run("check", "--no-micro", env={"CUDA_VISIBLE_DEVICES": ""})
    out = proc.stdout.decode()
    assert out.count("    unset CUDA_VISIBLE_DEVICES\n") == 1, out
    assert "`the command below`" not in out and "UUIDs from the command below" in out, out


def test_a_command_two_blocks_share_is_printed_once_and_pointed_to_after(tmp_path):
    from rich.console import Console

    from envdoctor.model import Finding, Remediation, Status
    from envdoctor.output.render import render_terminal
    from envdoctor.report import Report
    from tests.builders import facts

    dmesg = "sudo dmesg | grep -iE 'nvrm|nvidia'"
    findings = (Finding("a-check", Status.FAIL, "The driver is not loaded",
                        remediation=Remediation("Load it.", ("sudo modprobe nvidia", dmesg))),
                Finding("b-check", Status.WARN, "A GPU fell off the bus",
                        remediation=Remediation("Read the kernel log.", (dmesg,))))
    for terminal in (True, False):
        console = Console(force_terminal=terminal, width=80, record=True, color_system=None, highlight=False)
        render_terminal(Report(facts=facts(), findings=findings), console)
        text = console.export_text()
        assert text.count(dmesg) == 1, text
        assert "Read the kernel log. (command above)" in text, text


def test_the_fabric_manager_remedy_pins_exactly_the_drivers_version():
    """nv-fabricmanager's own mismatch line (Ubuntu/NVIDIA package nvidia-fabricmanager-<branch>,
    versions <driver version>-1 / -0ubuntu…): the printed command installs that version, not the branch's latest."""
    text = (b"Nov 05 13:55:26 node1 nv-fabricmanager[104230]: fabric manager NVIDIA GPU driver interface version "
            b"550.127.05 don't match with driver version 550.120. Please update with matching NVIDIA driver package.\n")
    out = run("diagnose", "-", stdin=text).stdout.decode()
    assert "    sudo apt install 'nvidia-fabricmanager-550=550.120-*'   # exactly the driver's version 550.120\n" in out, out
    assert "apt install nvidia-fabricmanager-550 " not in out and "apt install nvidia-fabricmanager-550\n" not in out


# -- PEP 668: an externally-managed system Python gets a venv, not a pip install that fails ----
def test_the_python_probe_reads_whether_the_target_is_externally_managed(tmp_path):
    target = "/usr/bin/python3"
    if not os.path.exists(target):
        target = sys.executable
    probe = subprocess.run([target, "-c", "import sys, sysconfig; print(sysconfig.get_path('stdlib')); "
                            "print(sys.prefix != sys.base_prefix)"], capture_output=True, text=True, timeout=60)
    stdlib, in_venv = probe.stdout.split()
    expected = in_venv == "False" and os.path.isfile(os.path.join(stdlib, "EXTERNALLY-MANAGED"))
    out = tmp_path / "r.json"
    proc = run("report", "--python", target, "--no-micro", "--only", "torch-import", "-o", str(out))
    assert proc.returncode in (0, 1), proc.stderr.decode()
    assert json.loads(out.read_text())["facts"]["python.externally_managed"]["value"] is expected
    venv = json.loads(run("check", "--json", "--no-micro", "--only", "torch-cpu-build").stdout)  # this venv: never
    assert venv["facts"]["python.externally_managed"]["value"] is False


def test_a_torch_install_for_an_externally_managed_python_goes_into_a_venv(tmp_path):
    from envdoctor.report import Report, to_json
    from tests.builders import facts

    data = json.loads(to_json(Report(facts=facts(), findings=())))
    data["facts"].update({
        "python.executable": {"value": "/usr/bin/python3"}, "python.externally_managed": {"value": True},
        "torch.version": {"value": None, "reason": "absent", "detail": "torch is not installed for /usr/bin/python3"}})
    path = tmp_path / "debian12.json"
    path.write_text(json.dumps(data))
    out = run("diagnose", str(path), "--only", "torch-import").stdout.decode()
    commands = [line.strip() for line in out.splitlines() if line.startswith("    ")]
    assert commands and all(c.startswith("/usr/bin/python3 -m venv .venv && .venv/bin/python -m pip install ")
                            for c in commands), out
    assert "/usr/bin/python3 -m pip install" not in out and "PEP 668" in out
    data["facts"]["python.externally_managed"] = {"value": False}
    path.write_text(json.dumps(data))
    assert "/usr/bin/python3 -m pip install" in run("diagnose", str(path), "--only", "torch-import").stdout.decode()
