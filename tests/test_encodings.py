"""Issue 26 items 4-5: an output encoding that cannot hold a character degrades it (ASCII
symbols, JSON escapes), never fails the run; JSON stays valid; a value that is not UTF-8 is
shown as escapes; COLUMNS=0 is no width."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from envdoctor.process.encoding import NAME, console_width

from .faults import cli_env


def test_the_handler_degrades_symbols_and_escapes_the_rest():
    assert "✖ fail · café 😀".encode("ascii", NAME) == b"x fail - caf\\u00e9 \\ud83d\\ude00"
    assert json.loads('"' + "café 😀".encode("ascii", NAME).decode() + '"') == "café 😀"
    assert "a\udcffb".encode("utf-8", NAME) == "a\ufffdb".encode()
    assert "a\udcffb".encode("ascii", NAME) == b"a\\ufffdb"


@pytest.mark.parametrize("value, width", [("0", 80), ("-3", 80), ("wide", 80), ("120", None), (None, None)])
def test_columns_that_is_no_width_is_ignored(monkeypatch, value, width):
    if value is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", value)
    monkeypatch.setattr("shutil.get_terminal_size", lambda fallback=(80, 24): type("S", (), {"columns": 80})())
    assert console_width() == width


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envdoctor", *args], env=cli_env(env), capture_output=True,
                          timeout=120)


@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "ascii"}, {"PYTHONIOENCODING": "latin-1"},
                                 {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""}],
                         ids=["ascii", "latin-1", "C-locale"])
def test_a_narrow_encoding_prints_the_whole_report(env):
    out = _run(["check", "--no-micro"], **env)
    assert out.returncode in (0, 1), out.stderr.decode("utf-8", "replace")
    assert b"Summary:" in out.stdout and b"cannot write" not in out.stderr
    report = _run(["report", "--no-micro"], PATH="/usr/bin:/bin:/opt/caf\udce9", **env)
    assert report.returncode in (0, 1, 3), report.stderr[-500:]
    assert json.loads(report.stdout.decode("ascii" if "latin" not in str(env) else "latin-1"))["facts"]


def test_a_value_that_is_not_utf8_keeps_the_json_valid(tmp_path):
    out = _run(["report", "--no-micro", "-o", str(tmp_path / "r.json")], PATH="/usr/bin:/bin:/opt/caf\udce9")
    assert out.returncode in (0, 1, 3), out.stderr[-500:]
    data = json.loads((tmp_path / "r.json").read_bytes().decode("utf-8"))
    assert data["facts"]["env.vars"]["value"]["PATH"].endswith("/opt/caf\\xe9")
    printed = _run(["report", "--no-micro"], PATH="/usr/bin:/bin:/opt/caf\udce9")
    assert json.loads(printed.stdout.decode("utf-8"))


def test_columns_zero_still_prints(tmp_path):
    (tmp_path / "r.json").write_text('{"schema_version": 1, "facts": {}}')
    out = _run(["diagnose", str(tmp_path / "r.json")], COLUMNS="0")
    assert out.returncode in (0, 1) and b"Summary" in out.stdout, out.stderr
