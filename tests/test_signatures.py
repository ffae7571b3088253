"""The signature table (envdoctor/parsers/signatures.py) reads the same facts as the scanner it
replaced: tests/fixtures/signatures_corpus.json holds what the old ``collect_env.scan_messages`` and
``has_messages`` returned for every corpus paste (recorded before the move), and the table's flags
keep the two uses (facts, "is this a report") in step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envdoctor.model import Reading
from envdoctor.parsers import _clean, parse_text, signatures

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
RECORDED = json.loads((ROOT / "tests" / "fixtures" / "signatures_corpus.json").read_text(encoding="utf-8"))["cases"]
CASES = json.loads((CORPUS / "cases.json").read_text(encoding="utf-8"))["cases"]


#: Keys issue 21 added to what a paste's lines write (tests/test_message_catalogue.py judges them).
ISSUE_21_KEYS = ("text.messages", "text.error_lines", "torch.loader_failures")


def _scan(lines: list[str], out: dict[str, Reading] | None = None) -> dict[str, dict]:
    readings: dict[str, Reading] = dict(out or {})
    signatures.scan_messages(lines, readings)
    return {key: reading.to_dict() for key, reading in readings.items()}


def _record(names: list[str]) -> None:
    """Add what today's table reads from the named corpus pastes to the fixture (a new corpus case
    has no old-scanner reading to compare with: its first reading becomes the one to hold)."""
    path = ROOT / "tests" / "fixtures" / "signatures_corpus.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    for name in names:
        lines = _clean((CORPUS / name).read_text(encoding="utf-8", errors="replace"))
        data["cases"][name] = {"facts": _scan(lines), "has_messages": signatures.has_messages(lines)}
    path.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n", encoding="utf-8")


def test_every_recorded_case_is_still_in_the_corpus() -> None:
    # Cases added after the move (issue 10's shapes) are judged by tests/test_corpus.py instead.
    assert set(RECORDED) <= {c["file"] for c in CASES}


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_the_table_reads_what_the_old_scanner_read(name: str) -> None:
    from envdoctor.parsers import evidence

    lines = _clean((CORPUS / name).read_text(encoding="utf-8", errors="replace"))
    scanned = _scan(lines)
    # Everything the old scanner read is read the same; issue 10's evidence signatures may add facts
    # of their own keys (nvcc --version, /proc/driver/nvidia/version lines inside an old paste).
    assert {k: v for k, v in scanned.items() if k in RECORDED[name]["facts"]} == RECORDED[name]["facts"]
    added = set(scanned) - set(RECORDED[name]["facts"])
    # issue 21: the message catalogue's rows, the unexplained error lines and the structured loader failures.
    assert added <= {*evidence.KEYS, *ISSUE_21_KEYS}
    # A paste becomes "a report on its own" only through a fact one of the new signatures read.
    # (An unexplained error line is evidence for parse_text, but it is no sentence of the table.)
    assert signatures.has_messages(lines) is (RECORDED[name]["has_messages"] or bool(added - {"text.error_lines"}))


def test_signatures_are_named_once_and_flagged_consistently() -> None:
    names = [sig.name for sig in signatures.LINE_SIGNATURES]
    assert len(names) == len(set(names))
    for sig in signatures.LINE_SIGNATURES:
        # A line that is nothing else must not be a message or evidence on its own either.
        assert not (sig.final and (sig.message or sig.evidence)), sig.name
    assert {sig.name for sig in signatures.PASTE_SIGNATURES} <= set(names)


@pytest.mark.parametrize(("line", "key"), [
    ("RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
     "NumCudaDevices() that might have already set an error? Error 802: system not yet initialized", "cuda.init"),
    ("UserWarning: The NVIDIA driver on your system is too old (found version 11040).", "cuda.driver_version"),
    ("NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.",
     "torch.devices"),
    ("ImportError: libcudart.so.12: cannot open shared object file: No such file or directory", "torch.library_errors"),
    ("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, please update your driver",
     "container.cuda_requirement"),
])
def test_an_evidence_line_alone_is_a_report_and_writes_its_fact(line: str, key: str) -> None:
    assert signatures.has_messages([line])
    assert parse_text(line).get(key).ok


def test_a_message_without_a_fact_is_kept_but_is_no_report() -> None:
    # ("Torch not compiled with CUDA enabled" carries a fact since issue 10: torch.version.cuda is None.)
    # (Since issue 21 round 2 "no kernel image …" is a catalogue row, cuda-no-kernel-image: a paste of it alone is
    # said by known-message, or judged by torch-arch-support when the GPU and torch are known.)
    line = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
    assert _scan([line])["torch.cuda_available_messages"]["value"] == [line]
    assert "cuda-no-kernel-image" in {m["id"] for m in _scan([line])["text.messages"]["value"]}


def test_a_code_cc_line_is_read_as_nothing_else() -> None:
    found = _scan(["Found GPU0 Tesla V100-PCIE-32GB which is of compute capability (CC) 7.0.",
                   "- 7.5 which supports hardware CC >=7.5,<8.0", "- 8.0 which supports hardware CC >=8.0"])
    assert found["torch.arch_list"]["value"] == ["sm_75", "sm_80"]
    assert found["torch.devices"]["value"] == [{"index": 0, "name": "Tesla V100-PCIE-32GB", "capability": [7, 0]}]
    assert len(found["torch.cuda_available_messages"]["value"]) == 1


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] != ["--record"] or not sys.argv[2:]:
        sys.exit("usage: python -m tests.test_signatures --record FILE… (names in tests/corpus/)")
    _record([Path(name).name for name in sys.argv[2:]])
