"""The one input loader: any encoding a saved report or paste arrives in, from a file or stdin,
through the same path the CLI uses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envdoctor.inputs import decode, encoding_of, load
from envdoctor.model import Facts
from envdoctor.report import Report, ReportError

CORPUS = Path(__file__).resolve().parent / "corpus"
PASTE = (CORPUS / "pytorch-150733-rtx5090d-cu126.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("codec", ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_every_encoding_a_paste_is_saved_in_decodes_to_the_same_text(codec: str) -> None:
    assert decode(PASTE.encode(codec)) == PASTE


def test_bomless_utf16_is_told_by_its_nul_bytes() -> None:
    assert encoding_of("PyTorch version: 2.6.0\n".encode("utf-16-le")) == ("utf-16-le", 0)
    assert encoding_of("PyTorch version: 2.6.0\n".encode("utf-16-be")) == ("utf-16-be", 0)
    assert encoding_of(b"PyTorch version: 2.6.0\n") == ("utf-8", 0)


def test_binary_and_empty_inputs_are_refused_in_one_line() -> None:
    with pytest.raises(ReportError, match="binary data"):
        decode(b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00>\x00")
    with pytest.raises(ReportError, match="empty"):
        decode(b"  \n")
    assert decode(b"PyTorch version: 2.1\xff\n").endswith("\ufffd\n")


def test_load_reads_reports_and_pastes_in_any_encoding(tmp_path: Path) -> None:
    paste = tmp_path / "paste.txt"
    paste.write_bytes(PASTE.encode("utf-16"))
    facts = load(str(paste))
    assert isinstance(facts, Facts) and facts.value("torch.version") == "2.6.0+cu126"
    report = tmp_path / "report.json"
    report.write_bytes(json.dumps({"schema_version": 1, "facts": {}, "findings": []}).encode("utf-16"))
    assert isinstance(load(str(report)), Report)


def _cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run([sys.executable, "-m", "envdoctor", *args], input=stdin, capture_output=True, env=env,
                          timeout=120)


def test_diagnose_a_powershell_utf16_paste_through_the_cli(tmp_path: Path) -> None:
    """PowerShell's `python -m torch.utils.collect_env > env.txt` writes UTF-16 with a BOM."""
    saved = tmp_path / "env.txt"
    saved.write_bytes(PASTE.encode("utf-16"))
    for args, stdin in (((str(saved),), None), (("-",), saved.read_bytes())):
        proc = _cli("diagnose", *args, "--json", stdin=stdin)
        assert proc.returncode == 1, proc.stderr.decode()
        fails = [f["id"] for f in json.loads(proc.stdout)["findings"] if f["status"] == "fail"]
        assert fails == ["torch-arch-support"]
