"""Usage errors exit 2 with one line before anything is probed: unknown check ids (with the
nearest one), an ``-o`` folder that is missing; ``diagnose`` reads a pipe without ``-``."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import make_exe
from tests.faults import run_cli


def _stand_in_probe(tmp_path):
    """A stand-in ldconfig (the library probe runs it on every check) that records being run."""
    log = tmp_path / "probed"
    make_exe(tmp_path / "bin", "ldconfig", f"#!/bin/sh\ntouch {log}\nexit 9\n")
    return log, {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}


@pytest.mark.parametrize("args, words", [
    (["check", "--only", "torch-imprt"], "--only 'torch-imprt': no such check (did you mean 'torch-import'?"),
    (["report", "--skip", "gpu-eccc"], "--skip 'gpu-eccc': no such check (did you mean 'gpu-ecc'?"),
    (["check", "--only", "torch-import", "--only", "zzzzzzzz"], "--only 'zzzzzzzz': no such check (`envdoctor list`"),
    (["report", "--json", "-o", "{tmp}/no/such/dir/r.json"], "the folder {tmp}/no/such/dir does not exist"),
])
def test_usage_errors_exit_2_with_one_line_before_any_probe(tmp_path, args, words):
    log, env = _stand_in_probe(tmp_path)
    args = [a.format(tmp=tmp_path) for a in args]
    out = run_cli(args, env=env, cwd=str(tmp_path), timeout=60)
    err = out.stderr.decode()
    assert out.rc == 2, out.text
    assert len(err.strip().splitlines()) == 1 and words.format(tmp=tmp_path) in err, err
    assert out.stdout == b"" and not log.exists()


def test_diagnose_with_an_unknown_id_is_a_usage_error(tmp_path):
    paste = tmp_path / "p.txt"
    paste.write_text("PyTorch version: 2.6.0+cu126\n")
    out = run_cli(["diagnose", str(paste), "--skip", "torch-imports"], timeout=60)
    assert out.rc == 2 and "did you mean 'torch-import'?" in out.stderr.decode(), out.text


def test_diagnose_reads_a_pipe_without_a_dash(tmp_path):
    paste = b"PyTorch version: 2.6.0+cu126\nIs CUDA available: False\n"
    out = run_cli(["diagnose", "--json"], stdin=paste, timeout=60)
    assert out.rc in (0, 1), out.text
    data = json.loads(out.stdout)
    assert data["origin"] == "paste:stdin" and data["facts"]["torch.version"]["value"] == "2.6.0+cu126"


def test_diagnose_without_a_file_on_a_terminal_says_what_to_give():
    import pty
    import subprocess
    import sys

    from tests.faults import cli_env

    parent, child = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "envdoctor", "diagnose"], stdin=child, capture_output=True,
                              env=cli_env(), timeout=60)
    finally:
        os.close(parent)
        os.close(child)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and len(err.strip().splitlines()) == 1 and "pipe one in" in err, err
