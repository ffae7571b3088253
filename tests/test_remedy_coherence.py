"""Coherent remedies, through the CLI: no pin of a torch the table does not list, no impossible fix (and
what is possible instead, per OS), either/or as alternatives, provenance in words with the source in the
JSON, a remedy a more severe finding rules out left out, and one "current torch"."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from envdoctor.knowledge import compat, remedies
from envdoctor.model import Finding, Remediation, Status
from envdoctor.parsers import parse_text
from envdoctor.pipeline.diagnose import cohere
from tests.test_cpu_only import by_id, cpu_box, diagnose

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run([sys.executable, "-m", "envdoctor", *args], capture_output=True, env=env, timeout=timeout)


def rejudge(path: Path, *args: str) -> dict[str, Any]:
    proc = run("diagnose", str(path), "--json", *args)
    assert proc.returncode in (0, 1), proc.stderr.decode()
    return json.loads(proc.stdout)


def commands(rem: dict[str, Any]) -> list[str]:
    out = list(rem["commands"])
    for alt in rem.get("alternatives", ()):
        out += commands(alt)
    return out


def test_a_typod_torch_version_never_becomes_a_pin(tmp_path):
    # "torch 7.0" (a typo in a real ticket) on a CPU box with a CUDA build: the CPU wheel, unpinned.
    code, report = diagnose(tmp_path, cpu_box(**{"torch.version": {"value": "7.0+cu118"},
                                                  "torch.cuda_version": {"value": "11.8"},
                                                  "python.packages": {"value": {"torch": "7.0+cu118"}}}))
    every = [c for f in report["findings"] for c in commands(f["remediation"])]
    assert not [c for c in every if "torch==7" in c]
    assert any(c.endswith("install --force-reinstall torch --index-url https://download.pytorch.org/whl/cpu") for c in every)


def test_every_pinned_torch_on_the_corpus_is_a_release_of_the_table():
    from tests.corpus_judged import judged

    pins: set[str] = set()
    for name, facts, findings in judged():
        assert facts is not None, f"{name}: the parser refused a corpus paste"
        for f in findings:
            for c in f.remediation.command_lines():
                pins.update(re.findall(r"\btorch==(\S+)", c))
    assert pins and all(compat.known_patch(p) == p for p in pins), sorted(pins)


def test_a_geforce_210_on_windows_gets_the_cpu_and_no_impossible_build():
    report = rejudge(CORPUS / "pytorch-31876-geforce-210.txt")
    found = by_id(report)
    every = " ".join(c for f in report["findings"] for c in commands(f["remediation"]))
    assert "TORCH_CUDA_ARCH_LIST" not in every and "setup.py" not in every
    eol = found["gpu-eol"]
    assert eol["status"] == "fail" and "not even one built from source" in eol["remediation"]["text"]
    (cpu,) = commands(eol["remediation"])
    assert cpu.endswith("--index-url https://download.pytorch.org/whl/cpu") and "torch==1.13.1" in cpu  # Python 3.7
    # A newer driver cannot help: driver-too-old's upgrade is left out, naming the finding that decided.
    driver = found["driver-too-old"]["remediation"]
    assert commands(driver) == [] and "gpu-eol (fail) rules out" in driver["text"]


def _kepler(tmp_path: Path, os_name: str) -> dict[str, Any]:
    """A GeForce GTX 660 Ti (Kepler, CC 3.0: no wheel ever carried it) with torch 2.6.0+cu124 on ``os_name``."""
    gpu = {"index": 0, "name": "NVIDIA GeForce GTX 660 Ti", "compute_capability": "3.0"}
    code, report = diagnose(tmp_path, cpu_box(**{
        "host.os": {"value": os_name}, "host.container": {"value": None}, "host.container_evidence": {"value": []},
        "driver.pci_gpus": {"value": [{"address": "0000:01:00.0", "vendor": "0x10de", "device": "0x1183",
                                       "class": "0x030000", "driver": "nvidia"}]},
        "nvml.gpus": {"value": [gpu]}, "nvml.device_count": {"value": 1}, "nvml.driver_version": {"value": "470.82.01"},
        "torch.version": {"value": "2.6.0+cu124"}, "torch.cuda_version": {"value": "12.4"}}))
    return by_id(report)["gpu-eol"]


def test_what_is_possible_for_a_gpu_without_wheels_depends_on_the_os(tmp_path):
    linux = _kepler(tmp_path, "Linux")
    assert linux["status"] == "fail"
    build, cpu = linux["remediation"]["alternatives"]
    assert "git clone --recursive --branch v1.12.1" in build["commands"][0]  # the last release built with CUDA 10.2
    assert any(c.startswith("export TORCH_CUDA_ARCH_LIST=3.0 CUDA_HOME=/usr/local/cuda-10.2") for c in build["commands"])
    assert cpu["commands"][0].endswith("/whl/cpu")
    # No Windows release was built with a CUDA that targets CC 3.0: no build is offered there.
    windows = _kepler(tmp_path, "Windows")
    assert "alternatives" not in windows["remediation"]
    assert "not even one built from source" in windows["remediation"]["text"]
    assert [c for c in commands(windows["remediation"]) if "export " in c or "TORCH_CUDA_ARCH_LIST" in c] == []
    assert commands(windows["remediation"])[0].endswith("/whl/cpu")


def test_downgrade_torch_or_upgrade_the_driver_are_alternatives():
    path = CORPUS / "pytorch-112553-cu121-driver-470.txt"
    rem = by_id(rejudge(path))["driver-too-old"]["remediation"]
    wheel, driver = rem["alternatives"]
    assert rem["commands"] == []
    assert wheel["commands"][0].startswith("pip install --force-reinstall torch==") and "/whl/cu11" in wheel["commands"][0]
    assert any(c.startswith("sudo apt install nvidia-driver-") for c in driver["commands"])
    out = run("diagnose", str(path)).stdout.decode()
    either, orr = out.index("either: Install torch"), out.index("or: Upgrade the NVIDIA driver")
    assert either < out.index(wheel["commands"][0]) < orr < out.index(driver["commands"][0])


def test_provenance_is_in_words_and_the_source_stays_in_the_json():
    path = CORPUS / "DeepSeek-VL2-59-rtx5090-sm120.txt"
    out = run("diagnose", str(path)).stdout.decode()
    assert "table row from" not in out and "unverified" not in out
    assert "unconfirmed" in out
    rem = by_id(rejudge(path))["torch-arch-support"]["remediation"]
    (source,) = rem["sources"]
    assert source["id"] in compat.data()["sources"] and source["id"] not in out
    assert source["verified"] is False and source["said"].startswith("from ") and source["said"].endswith("unconfirmed")
    assert source["said"] in rem["text"]


def test_gpu_eol_and_python_supported_name_the_same_current_torch(tmp_path):
    current = compat.current_release()
    gpu = {"index": 0, "name": "NVIDIA GeForce RTX 4090", "compute_capability": "8.9"}
    absent = {"value": None, "reason": "absent", "detail": "torch is not installed"}
    facts = cpu_box(**{"driver.pci_gpus": {"value": [{"address": "0000:01:00.0", "vendor": "0x10de", "device": "0x2684",
                                                       "class": "0x030000", "driver": "nvidia"}]},
                       "nvml.gpus": {"value": [gpu]}, "nvml.device_count": {"value": 1},
                       "torch.version": absent, "torch.cuda_version": absent, "python.packages": {"value": {}}})
    code, report = diagnose(tmp_path, facts)
    found = by_id(report)
    assert found["gpu-eol"]["title"].startswith(f"torch {current} still ships wheels")
    assert f"(newest: torch {compat.latest_patch(current)})" in found["python-supported"]["title"]
    assert compat.newest_release() != current  # the table knows a newer, unconfirmed release: never "current"


def _finding(id: str, status: Status, *commands: str, alternatives: tuple[Remediation, ...] = ()) -> Finding:
    return Finding(id, status, id, remediation=Remediation("Do this.", commands, (), alternatives))


def test_the_most_severe_finding_decides_which_torch_to_install():
    def pip(version: str, variant: str) -> str:
        return remedies.torch_install(None, version, variant)

    arch = _finding("torch-arch-support", Status.FAIL, pip("2.7.1", "cu128"))
    libs = _finding("cudnn-mismatch", Status.WARN, remedies.env_unset("LD_LIBRARY_PATH"), pip("2.6.0", "cu126"))
    driver = _finding("driver-too-old", Status.WARN, alternatives=(
        Remediation("Install torch 2.6.0+cu118.", (pip("2.6.0", "cu118"),)),
        Remediation("Upgrade the driver.", (remedies.driver_install(580),))))
    same = _finding("torch-companions", Status.WARN, remedies.torch_install(None, "2.7.1", "cu128", ("torchvision",),
                                                                          force=False))
    out = {f.id: f for f in cohere([libs, driver, arch, same])}
    assert out["torch-arch-support"] == arch and out["torch-companions"] == same
    assert out["cudnn-mismatch"].remediation.commands == ("unset LD_LIBRARY_PATH",)
    assert "torch-arch-support (fail) rules out" in out["cudnn-mismatch"].remediation.text
    left = out["driver-too-old"].remediation
    assert not left.alternatives and left.commands == ("sudo apt install nvidia-driver-580",)


def test_cohere_reads_the_types_not_the_words():
    """Two installs agree or not by their packages and index, however they are spelled: another
    interpreter, other flags, a note. A line that only looks like an install (a plain string, as a
    saved report holds) is not read: cohere runs on what the checks just built, which is typed."""
    decider = _finding("torch-arch-support", Status.FAIL, remedies.torch_install("/opt/py/bin/python", "2.7.1", "cu128"))
    agrees = _finding("cuda-libraries", Status.WARN, remedies.pip_install(None, ["torchvision", "torch==2.7.1"],
                                                                         upgrade=True, variant="cu128", note="same"))
    other = _finding("cudnn-mismatch", Status.WARN, remedies.pip_install(None, "torch", no_deps=True, variant="cu118"))
    words = _finding("nccl-version", Status.WARN,
                     "pip install --force-reinstall torch==2.6.0 --index-url https://download.pytorch.org/whl/cu126")
    elsewhere = _finding("gpu-eol", Status.WARN,
                         remedies.elsewhere("on Linux", remedies.torch_install(None, "2.6.0", "cu118")))
    out = {f.id: f for f in cohere([decider, agrees, other, words, elsewhere])}
    assert out["cuda-libraries"] == agrees and out["nccl-version"] == words and out["gpu-eol"] == elsewhere
    assert out["cudnn-mismatch"].remediation.commands == ()
    assert "torch-arch-support (fail) rules out" in out["cudnn-mismatch"].remediation.text


def test_a_cpu_build_decision_leaves_out_typed_driver_installs():
    cpu = _finding("gpu-eol", Status.FAIL, remedies.torch_install(None, None, "cpu"))
    ubuntu = _finding("driver-installed", Status.WARN, "lspci -nn | grep -i nvidia", remedies.ubuntu_drivers_install())
    windows = _finding("driver-too-old", Status.WARN, remedies.driver_install_windows())
    reset = _finding("gpu-health", Status.WARN, remedies.gpu_reset(0))
    out = {f.id: f for f in cohere([cpu, ubuntu, windows, reset])}
    assert out["driver-installed"].remediation.commands == () and out["driver-too-old"].remediation.commands == ()
    assert out["gpu-health"] == reset


def test_rejudging_a_saved_report_coheres_the_same(tmp_path):
    """A saved report's remedies are strings; re-judging it runs the checks on its facts again, so the
    remedies cohere from their types exactly as when the report was made."""
    path = CORPUS / "pytorch-31876-geforce-210.txt"
    first = rejudge(path)
    saved = tmp_path / "report.json"
    saved.write_bytes(run("diagnose", str(path), "--json").stdout)
    again = rejudge(saved)
    assert again["findings"] == first["findings"]
    assert "gpu-eol (fail) rules out" in by_id(again)["driver-too-old"]["remediation"]["text"]


_CPU_TORCH_CUDA_TORCHVISION = """\
PyTorch version: 2.5.1+cpu
Is debug build: False
CUDA used to build PyTorch: None
ROCM used to build PyTorch: N/A

OS: Ubuntu 22.04.4 LTS (x86_64)
Python version: 3.11.9 (main, Apr  6 2024, 17:59:24) [GCC 11.4.0] (64-bit runtime)
Python platform: Linux-5.15.0-105-generic-x86_64-with-glibc2.35
Is CUDA available: False
CUDA runtime version: No CUDA
GPU models and configuration: GPU 0: NVIDIA GeForce RTX 3090
Nvidia driver version: 550.54.15

Versions of relevant libraries:
[pip3] numpy==1.26.4
[pip3] torch==2.5.1+cpu
[pip3] torchvision==0.20.1+cu121
"""


def test_a_cpu_torch_with_a_cuda_torchvision_on_a_gpu_gets_one_cuda_install_of_both():
    # Once torch-companions (it comes first) decided for torch's own CPU index, so cohere emptied
    # torch-cpu-build's remedy: the screen said to reinstall torchvision from the cpu index on a GPU box.
    from envdoctor.pipeline.diagnose import diagnose as judge
    from envdoctor.pipeline.fixplan import Environment, plan_fix
    from envdoctor.registry import load_registry

    findings = judge(parse_text(_CPU_TORCH_CUDA_TORCHVISION), load_registry(plugins=False))
    found = {f.id: f for f in findings}
    cpu, companions = found["torch-cpu-build"], found["torch-companions"]
    assert cpu.status is Status.FAIL and companions.status is Status.FAIL
    every = [c for f in findings for c in f.remediation.command_lines()]
    assert not [c for c in every if "/whl/cpu" in c], every
    assert "Left out here" not in cpu.remediation.text
    assert cpu.remediation.commands == companions.remediation.commands
    uninstall, install = cpu.remediation.commands
    assert uninstall == "python -m pip uninstall -y torch torchvision"
    assert install.startswith("python -m pip install torch==2.5.1 torchvision --index-url https://download.pytorch.org/whl/cu")
    # fix runs them once, each answering both findings.
    plan = plan_fix(findings, Environment(python="python", prefix="/v"))
    assert [s.command.render() for s in plan.steps] == [uninstall, install]
    assert all(set(s.findings) == {"torch-cpu-build", "torch-companions"} for s in plan.steps)
