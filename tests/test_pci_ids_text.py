"""PCI ids in pasted text: `lspci -nn` lines and the kernel's PCI scan name each NVIDIA GPU by its id
(``pci.nvidia_devices``), the GPU catalogue resolves it, and the checks judge that GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envdoctor.parsers import parse_text

from .judging import judge_one  # noqa: F401  (the judging helpers import the checks)
from .test_cli import run

LSPCI = ("01:00.0 VGA compatible controller [0300]: NVIDIA Corporation GP102 [GeForce GTX 1080 Ti] [10de:1b06] (rev a1)\n"
         "01:00.1 Audio device [0403]: NVIDIA Corporation GP102 HDMI Audio Controller [10de:10ef] (rev a1)\n")


def _devices(text: str) -> list[dict[str, object]]:
    reading = parse_text(text).get("pci.nvidia_devices")
    return [dict(d) for d in reading.value] if reading.ok else []


def test_lspci_nn_gives_the_display_controller_not_its_audio_function() -> None:
    assert _devices(LSPCI) == [{"address": "01:00.0", "device": "1b06", "name": "GP102 [GeForce GTX 1080 Ti]"}]


@pytest.mark.parametrize("line", [
    "[    0.345123] pci 0000:02:00.0: [10de:2684] type 00 class 0x030000",
    "Dec 01 10:00:00 host kernel: pci 0000:02:00.0: [10de:2684] type 00 class 0x030200 PCIe Legacy Endpoint",
    "02:00.0 3D controller [0302]: NVIDIA Corporation AD102 [GeForce RTX 4090] [10de:2684] (rev a1)",
])
def test_the_kernels_pci_scan_and_3d_controllers_are_read(line: str) -> None:
    found = _devices(line + "\n")
    assert [(d["address"], d["device"]) for d in found] == [("02:00.0", "2684")]


@pytest.mark.parametrize("line", [
    "01:00.1 Audio device [0403]: NVIDIA Corporation GP102 HDMI Audio Controller [10de:10ef] (rev a1)",
    "pci 0000:01:00.1: [10de:10ef] type 00 class 0x040300",
    "00:02.0 VGA compatible controller [0300]: Intel Corporation UHD Graphics 630 [8086:3e92]",
])
def test_other_functions_and_vendors_are_not_gpus(line: str) -> None:
    assert _devices("torch: 2.8.0+cu128\n" + line + "\n") == []


@pytest.mark.slow
def test_a_paste_with_only_lspci_and_torch_is_judged_by_the_catalogue(tmp_path: Path) -> None:
    paste = tmp_path / "ticket.txt"
    paste.write_text("PyTorch: 2.8.0+cu128\n\n$ lspci -nn | grep -i nvidia\n" + LSPCI)
    proc = run("diagnose", str(paste), "--json")
    assert proc.returncode == 1, proc.stderr
    findings = {f["id"]: f for f in json.loads(proc.stdout)["findings"]}
    arch = findings["torch-arch-support"]
    assert arch["status"] == "fail" and "sm_61" in arch["title"] and "GTX 1080 Ti" in arch["title"]
    assert any("cu126" in c for c in arch["remediation"]["commands"])
