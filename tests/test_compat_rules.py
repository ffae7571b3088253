"""Compatibility rules at the facts level: a healthy node, change one thing, assert the finding."""

from __future__ import annotations

from typing import Any

import pytest
from envdoctor.checks import compat as rules
from envdoctor.checks.torch_build import suggested_variant

from envdoctor import views
from envdoctor.knowledge import compat, recommend
from envdoctor.model import Facts, Reason, Status, missing
from envdoctor.registry import CheckSpec

from .builders import facts
from .judging import judge, worst

AS_OF = compat.as_of()


def gpu(name: str, cc: str | None, index: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"index": index, "name": name}
    if cc:
        out["compute_capability"] = cc
    return out


def torch26_on(name: str, cc: str, **changes: Any) -> Facts:
    """The healthy node (torch 2.6.0+cu126, driver 570.124.06) with another GPU."""
    major, minor = (int(p) for p in cc.split("."))
    base: dict[str, Any] = {
        "nvml__gpus": [gpu(name, cc)],
        "torch__devices": [{"index": 0, "name": name, "capability": [major, minor]}],
    }
    base.update(changes)
    return facts(**base)


def pasted(**changes: Any) -> dict[str, Any]:
    """What a collect_env paste leaves out: arch list, CC, the driver's CUDA, loaded libraries."""
    gone = missing(Reason.NOT_IN_REPORT)
    base: dict[str, Any] = {"torch__arch_list": gone, "torch__devices": gone, "nvml__cuda_driver_version": gone,
                            "torch__loaded_libraries": gone}
    base.update(changes)
    return base


@pytest.mark.parametrize("spec", rules.CHECKS, ids=lambda s: s.id)
def test_healthy_node_has_no_complaint(spec: CheckSpec) -> None:
    for finding in judge(spec, facts()):
        assert finding.status in (Status.OK, Status.SKIP), (finding.title, finding.detail)


# ------------------------------------------------------------------------------- torch-arch-support

def test_rtx_5090_on_cu126_gets_the_cu128_wheel() -> None:
    f = torch26_on("NVIDIA GeForce RTX 5090", "12.0")
    found = worst(rules.torch_arch_support, f)
    assert found.status is Status.FAIL
    assert "GeForce RTX 5090 is sm_120" in found.detail
    assert "torch 2.6.0+cu126 carries sm_50…sm_90 and no PTX that can run on it" in found.detail
    cmd = "/opt/venv/bin/python -m pip install --force-reinstall torch==2.7.1 --index-url https://download.pytorch.org/whl/cu128"
    assert cmd in found.detail and found.remediation.commands == (cmd,)
    assert "your driver 570.124.06 supports CUDA 12.8" in found.detail
    assert found.gpus == (0,)


def test_rtx_5090_from_a_paste_uses_the_table_and_says_as_of() -> None:
    f = facts(**pasted(nvml__gpus=[gpu("NVIDIA GeForce RTX 5090", None)]))
    found = worst(rules.torch_arch_support, f)
    # the table's 2.6 cu126 row is unverified, but CUDA 12.6 cannot target sm_120 at all (measured ptxas range)
    assert found.status is Status.FAIL
    assert AS_OF in found.detail
    assert "torch==2.7.1" in found.remediation.commands[0] and "/whl/cu128" in found.remediation.commands[0]


def test_companions_are_reinstalled_with_torch() -> None:
    f = torch26_on("NVIDIA GeForce RTX 5090", "12.0",
                   python__packages={"torch": "2.6.0+cu126", "torchvision": "0.21.0+cu126"})
    assert worst(rules.torch_arch_support, f).remediation.commands[0].startswith(
        "/opt/venv/bin/python -m pip install --force-reinstall torch==2.7.1 torchvision --index-url")


def test_pascal_on_cu130_gets_cu126_of_the_same_release() -> None:
    f = torch26_on("NVIDIA GeForce GTX 1080 Ti", "6.1", torch__version="2.13.0+cu130", torch__cuda_version="13.0",
                   torch__arch_list=["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"],
                   nvml__driver_version="580.95.05", nvml__cuda_driver_version=13000)
    found = worst(rules.torch_arch_support, f)
    assert found.status is Status.FAIL
    assert "dropped" in found.detail
    assert found.remediation.commands == (
        "/opt/venv/bin/python -m pip install --force-reinstall torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126",)


def test_same_major_lower_minor_sass_runs() -> None:
    f = torch26_on("NVIDIA GeForce RTX 4090", "8.9")  # sm_86 SASS runs on 8.9
    assert worst(rules.torch_arch_support, f).status is Status.OK


def test_ptx_only_is_a_warning() -> None:
    # H100 (sm_90) with only sm_80 SASS + compute_80 PTX from CUDA 12.6, which itself targets sm_90: JIT works.
    f = torch26_on("NVIDIA H100 80GB HBM3", "9.0", torch__arch_list=["sm_80", "compute_80"])
    found = worst(rules.torch_arch_support, f)
    assert found.status is Status.WARN and "JIT" in found.title


def test_ptx_from_a_cuda_older_than_the_architecture_does_not_count() -> None:
    # CUDA 12.6 reaches sm_90: its bundled libraries predate Blackwell, so compute_90 PTX does not make
    # a cu126 wheel work on an RTX 5090 (what users saw with torch 2.6+cu126; cu102 wheels on Ampere alike).
    f = torch26_on("NVIDIA GeForce RTX 5090", "12.0", torch__arch_list=["sm_80", "sm_90", "compute_90"])
    found = worst(rules.torch_arch_support, f)
    assert found.status is Status.FAIL and "reaches only sm_90" in found.detail
    assert "/whl/cu12" in found.remediation.commands[0] or "/whl/cu13" in found.remediation.commands[0]


def test_arch_specific_target_does_not_run_elsewhere() -> None:
    f = torch26_on("NVIDIA GeForce RTX 5090", "12.0", torch__arch_list=["sm_90", "sm_100a"])
    assert worst(rules.torch_arch_support, f).status is Status.FAIL


def test_empty_arch_list_falls_back_to_the_table() -> None:
    # get_arch_list() is [] whenever CUDA is unavailable: not evidence of "no kernels"
    f = facts(torch__arch_list=[])
    assert worst(rules.torch_arch_support, f).status is Status.OK


def test_jetson_is_a_warning_pointing_to_jetpack() -> None:
    f = torch26_on("Orin (nvgpu)", "8.7", torch__arch_list=["sm_90"], host__arch="aarch64")
    found = worst(rules.torch_arch_support, f)
    assert found.status is Status.WARN and "JetPack" in found.detail


def test_future_versions_are_noted_never_failed() -> None:
    f = facts(**pasted(torch__version="2.99.0+cu150", torch__cuda_version="15.0",
                       nvml__gpus=[gpu("NVIDIA Quantum Z9", None)], nvml__driver_version="700.10.01",
                       python__packages={"torch": "2.99.0+cu150", "torchvision": "0.99.0+cu150"}))
    for spec in rules.CHECKS:
        for finding in judge(spec, f):
            assert finding.status not in (Status.FAIL, Status.ERROR), (spec.id, finding.title, finding.detail)
    assert "not in envdoctor's compatibility table as of" in worst(rules.torch_arch_support, f).detail


def test_malformed_versions_do_not_crash() -> None:
    f = facts(torch__version="garbage", nvml__driver_version="n/a", nvml__cuda_driver_version="12.8",
              python__version="three", nvml__gpus=[{"name": None, "compute_capability": "x"}])
    for spec in rules.CHECKS:
        judge(spec, f)


# ------------------------------------------------------------------------------- driver-too-old

def test_driver_older_major_fails_and_offers_an_older_cuda_wheel() -> None:
    f = facts(nvml__driver_version="470.82.01", nvml__cuda_driver_version=11040)
    found = worst(rules.driver_too_old, f)
    assert found.status is Status.FAIL
    assert "supports CUDA up to 11.4" in found.detail and "525.60.13" in found.detail
    # Either the wheel for this driver or a newer driver: alternatives, the wheel first.
    wheel, driver = found.remediation.alternatives
    assert "/whl/cu118" in wheel.commands[0] and "torch==2.6.0" in wheel.commands[0]
    assert any(c.startswith("sudo apt install nvidia-driver-") for c in driver.commands)
    assert "525.60.13" in driver.text and not found.remediation.commands


def test_driver_cuda_derived_from_version_string_in_a_paste() -> None:
    # A real paste of this machine says "Is CUDA available: No"; the verified CUDA 12 floor decides.
    f = facts(**pasted(nvml__driver_version="470.82.01", torch__cuda_available=False))
    found = worst(rules.driver_too_old, f)
    assert found.status is Status.FAIL and AS_OF in found.detail
    assert "CUDA 12.x needs driver ≥ 525.60.13" in found.detail


def test_driver_from_the_table_never_fails_when_torch_says_cuda_works() -> None:
    # Verified floor says 470 cannot run CUDA 12 natively, yet CUDA initialised: forward compatibility.
    f = facts(**pasted(nvml__driver_version="470.82.01"))
    found = worst(rules.driver_too_old, f)
    assert found.status is Status.WARN and "forward-compatibility" in found.detail
    # Only unverified rows speak (CUDA 10.2 on R410): the observation wins outright.
    f = facts(**pasted(torch__version="1.5.0", torch__cuda_version="10.2", nvml__driver_version="410.104"))
    assert worst(rules.driver_too_old, f).status is Status.OK


# ------------------------------------------------------------------------------- CUDA 8.0-10.2 era

def test_cu102_on_a_driver_reporting_cuda_101_fails_without_minor_version_compatibility() -> None:
    # The driver's CUDA is read (nvidia-smi "CUDA Version: 10.1"), and NVIDIA's minor-version
    # compatibility starts with CUDA 11: a verified rule, so a fail whatever the table rows say.
    f = facts(**pasted(torch__version="1.6.0", torch__cuda_version="10.2", nvml__driver_version="418.67",
                       nvml__cuda_driver_version=10010, nvml__gpus=[gpu("Tesla V100-PCIE-16GB", None)]))
    found = worst(rules.driver_too_old, f)
    assert found.status is Status.FAIL
    assert "supports CUDA up to 10.1" in found.detail and "no minor-version compatibility" in found.detail
    assert "≥ 440.33" in found.remediation.text and "unconfirmed" in found.detail


def test_same_minor_gap_from_cuda_11_on_is_still_minor_version_compatibility() -> None:
    assert compat.driver_runs("10.2", 10010) is None
    assert compat.driver_runs("11.8", 11040) == "mvc"
    assert compat.driver_runs("10.1", 10020) == "native"


@pytest.mark.parametrize(("version", "cuda", "driver"), [
    ("1.5.0", "10.2", "410.104"),  # a release the table does not list: judged by its CUDA alone
    ("1.3.1", "10.1.243", "410.48"),
    ("1.12.1+cu102", "10.2", "418.67"),
])
def test_old_torch_on_an_older_driver_branch_fails_when_cuda_is_unavailable(version: str, cuda: str,
                                                                               driver: str) -> None:
    f = facts(**pasted(torch__version=version, torch__cuda_version=cuda, nvml__driver_version=driver,
                       torch__cuda_available=False, nvml__gpus=[gpu("TITAN Xp", None)]))
    found = worst(rules.driver_too_old, f)
    assert found.status is Status.FAIL, found.detail
    assert "derived from its version with the table" in found.detail
    assert "torch.cuda.is_available() is False here" in found.detail


def test_unverified_rows_alone_only_warn() -> None:
    # Same machine, but the paste does not say whether CUDA works: the unverified R410 row may only warn.
    f = facts(**pasted(torch__version="1.5.0", torch__cuda_version="10.2", nvml__driver_version="410.104",
                       torch__cuda_available=missing(Reason.NOT_IN_REPORT)))
    found = worst(rules.driver_too_old, f)
    assert found.status is Status.WARN and "unconfirmed" in found.detail


def test_cuda_version_alone_is_enough_for_the_driver_rule() -> None:
    f = facts(**pasted(torch__version=missing(Reason.NOT_IN_REPORT), torch__cuda_version="10.1",
                       nvml__driver_version="410.48", torch__cuda_available=False))
    found = worst(rules.driver_too_old, f)
    assert found.status is Status.FAIL and "CUDA 10.1" in found.title


def test_cu101_local_tag_on_an_r418_driver_is_native() -> None:
    f = facts(**pasted(torch__version="1.6.0+cu101", torch__cuda_version=missing(Reason.NOT_IN_REPORT),
                       nvml__driver_version="418.67"))
    found = worst(rules.driver_too_old, f)
    assert found.status is Status.OK and "CUDA 10.1" in found.title


def test_driver_older_than_every_toolkit_is_compared_with_the_need() -> None:
    f = facts(**pasted(torch__version="1.2.0", torch__cuda_version="10.0", nvml__driver_version="342.01",
                       host__os="Windows", torch__cuda_available=False,
                       nvml__gpus=[gpu("GeForce GTX 1080", None)]))
    found = worst(rules.driver_too_old, f)
    assert found.status is Status.FAIL
    assert "older than every toolkit in the table" in found.detail and "411.31" in found.detail


def test_same_major_older_minor_runs_through_minor_version_compatibility() -> None:
    f = facts(nvml__driver_version="535.183.01", nvml__cuda_driver_version=12020)
    found = worst(rules.driver_too_old, f)
    assert found.status is Status.WARN and "minor-version compatibility" in found.detail


def test_blackwell_needs_r570() -> None:
    f = torch26_on("NVIDIA GeForce RTX 5090", "12.0", torch__version="2.7.1+cu128", torch__cuda_version="12.8",
                   nvml__driver_version="560.35.03", nvml__cuda_driver_version=12060)
    statuses = [x.status for x in judge(rules.driver_too_old, f)]
    assert Status.FAIL in statuses


def test_windows_driver_numbers_apply_under_wsl() -> None:
    f = facts(**pasted(nvml__driver_version="560.94", host__wsl=True))
    assert views.driver_cuda(f) == 12060
    assert worst(rules.driver_too_old, f).status is Status.OK


# ------------------------------------------------------------------------------- gpu-eol

def test_kepler_is_end_of_life_with_the_last_release() -> None:
    f = torch26_on("Tesla K80", "3.7")
    found = worst(rules.gpu_eol, f)
    assert found.status is Status.WARN
    assert "2.7.1" in found.title and "/whl/cu118" in found.remediation.commands[0]


def test_pre_kepler_gpu_from_a_paste_is_plainly_end_of_life() -> None:
    f = facts(**pasted(torch__version="1.2.0", torch__cuda_version="10.0", nvml__driver_version="342.01",
                       host__os="Windows", torch__cuda_available=False, nvml__gpus=[gpu("GeForce 210", None)]))
    found = worst(rules.gpu_eol, f)
    assert found.status is Status.FAIL
    assert "No current torch wheel supports GeForce 210" in found.detail
    assert "no release in the table ever carried sm_12" in found.detail and "Tesla" in found.title
    # The driver is too old as well, but a newer one would not help: a warning pointing at gpu-eol.
    drv = worst(rules.driver_too_old, f)
    assert drv.status is Status.WARN and "see gpu-eol" in drv.detail


def test_unverified_gpu_row_alone_only_warns_for_eol() -> None:
    f = facts(**pasted(torch__version="1.2.0", torch__cuda_version="10.0", nvml__driver_version="342.01",
                       host__os="Windows", torch__cuda_available=missing(Reason.NOT_IN_REPORT),
                       nvml__gpus=[gpu("GeForce 210", None)]))
    assert worst(rules.gpu_eol, f).status is Status.WARN


def test_fermi_names_its_last_cuda_and_driver_branch() -> None:
    f = torch26_on("NVIDIA GeForce GTX 580", "2.0")
    found = worst(rules.gpu_eol, f)
    assert found.status is Status.FAIL
    assert "Fermi" in found.title and "8.0" in found.detail and "R390" in found.detail


def test_arch_list_without_a_torch_version_is_judged() -> None:
    # torch's own warning: "The current PyTorch install supports CUDA capabilities sm_37 sm_50 sm_60 sm_70"
    f = facts(**pasted(torch__version=missing(Reason.NOT_IN_REPORT), torch__cuda_version=missing(Reason.NOT_IN_REPORT),
                       torch__arch_list=["sm_37", "sm_50", "sm_60", "sm_70"], nvml__driver_version="450.119.03",
                       nvml__cuda_driver_version=11000, nvml__gpus=[gpu("A100-SXM4-40GB", None)]))
    found = worst(rules.torch_arch_support, f)
    assert found.status is Status.FAIL
    assert "A100-SXM4-40GB is sm_80" in found.detail and "sm_37…sm_70" in found.detail
    assert "/whl/cu11" in found.remediation.commands[0]


def test_gpu_without_any_wheel_fails() -> None:
    f = torch26_on("Tesla K40m", "3.5")
    assert worst(rules.gpu_eol, f).status in (Status.WARN, Status.FAIL)  # unverified GPU row: warn at least


def test_pascal_still_has_current_wheels() -> None:
    assert worst(rules.gpu_eol, torch26_on("Tesla P100-PCIE-16GB", "6.0")).status is Status.OK


# ------------------------------------------------------------------------------- cudnn / nccl

def cu124(**changes: Any) -> Facts:
    """torch 2.6.0+cu124 from PyPI (measured pins: cuDNN 9.1.0.70, NCCL 2.21.5)."""
    base: dict[str, Any] = {"torch__version": "2.6.0+cu124", "torch__cuda_version": "12.4",
                            "torch__cudnn_version": 90100, "torch__nccl_version": "2.21.5",
                            "python__packages": {"torch": "2.6.0", "nvidia-cudnn-cu12": "9.1.0.70",
                                                 "nvidia-nccl-cu12": "2.21.5"}}
    base.update(changes)
    return facts(**base)


def test_cudnn_matching_is_ok() -> None:
    assert worst(rules.cudnn_mismatch, cu124()).status is Status.OK


def test_cudnn_other_major_fails() -> None:
    found = worst(rules.cudnn_mismatch, cu124(torch__cudnn_version=8902))
    assert found.status is Status.FAIL and "8.9.2" in found.title and "9.1.0" in found.title


def test_cudnn_from_the_system_is_a_warning() -> None:
    found = worst(rules.cudnn_mismatch, cu124(torch__loaded_libraries={"cudnn": ["/usr/lib/x86_64-linux-gnu/libcudnn.so.9"]}))
    assert found.status is Status.WARN and "LD_LIBRARY_PATH" in found.remediation.commands[0]


def test_cudnn_package_older_than_the_pin_fails_in_a_paste() -> None:
    f = cu124(torch__cudnn_version=missing(Reason.NOT_IN_REPORT),
              python__packages={"torch": "2.6.0", "nvidia-cudnn-cu12": "8.9.2.26"})
    assert worst(rules.cudnn_mismatch, f).status is Status.FAIL


def test_nccl_older_than_built_with_fails() -> None:
    found = worst(rules.nccl_mismatch, cu124(torch__nccl_version="2.18.1",
                                            python__packages={"torch": "2.6.0", "nvidia-nccl-cu12": "2.18.1"}))
    assert found.status is Status.FAIL and "nvidia-nccl-cu12==2.21.5" in found.remediation.commands[0]


def test_nccl_other_copy_loaded_warns() -> None:
    found = worst(rules.nccl_mismatch, cu124(torch__nccl_version="2.19.3"))
    assert found.status is Status.WARN


# ------------------------------------------------------------------------------- toolkit-mismatch

def test_nvcc_other_major_is_informational() -> None:
    assert worst(rules.toolkit_mismatch, facts(toolkit__nvcc_version="11.8.89")).status is Status.OK


def test_nvcc_other_major_warns_when_extensions_are_built() -> None:
    found = worst(rules.toolkit_mismatch, facts(toolkit__nvcc_version="11.8.89",
                                                env__vars={"CUDA_HOME": "/usr/local/cuda-11.8"}))
    assert found.status is Status.WARN and "CUDA_HOME" in found.detail


# ------------------------------------------------------------------------------- torch-companions

@pytest.mark.parametrize(("vision", "status"), [
    ("0.21.0+cu126", Status.OK), ("0.21.0", Status.OK), ("0.20.1+cu126", Status.FAIL),
    ("0.21.0+cu124", Status.WARN), ("0.21.0+cpu", Status.FAIL), ("0.99.0", Status.WARN),
    ("0.12.0", Status.FAIL), ("0.1.6", Status.FAIL),
])
def test_torchvision_pairs(vision: str, status: Status) -> None:
    f = facts(python__packages={"torch": "2.6.0+cu126", "torchvision": vision})
    found = worst(rules.torch_companions, f)
    assert found.status is status, found.detail
    if status is not Status.OK:
        assert "torchvision" in found.remediation.commands[0] and "/whl/cu126" in found.remediation.commands[0]


def test_torchaudio_on_the_stable_abi_runs_with_newer_torch_only() -> None:
    # torchaudio >= 2.11 is built against torch's stable ABI (docs.pytorch.org/audio/2.11.0/installation.html).
    f = facts(torch__version="2.13.0+cu130", torch__cuda_version="13.0",
              python__packages={"torch": "2.13.0+cu130", "torchaudio": "2.11.1"})
    found = worst(rules.torch_companions, f)
    assert found.status is Status.OK and "stable ABI" in found.detail
    older = facts(python__packages={"torch": "2.6.0+cu126", "torchaudio": "2.11.1"})
    assert worst(rules.torch_companions, older).status is Status.FAIL


def test_companions_outside_the_table_are_not_called_a_match() -> None:
    # torch 1.3 is not in the companions table: nothing is judged, and the headline does not say "match".
    f = facts(torch__version="1.3.1", torch__cuda_version="10.1",
              python__packages={"torch": "1.3.1", "torchvision": "0.4.2"})
    found = worst(rules.torch_companions, f)
    assert found.status is Status.SKIP and "not judged" in found.title


def test_old_pairs_come_from_the_versions_table() -> None:
    # pytorch/pytorch wiki "PyTorch Versions": torch 1.9 pairs with torchvision 0.10, 1.6 with 0.7.
    bad = facts(torch__version="1.9.0+cu102", torch__cuda_version="10.2",
                python__packages={"torch": "1.9.0", "torchvision": "0.7.0"})
    assert worst(rules.torch_companions, bad).status is Status.FAIL
    good = facts(torch__version="1.9.0+cu102", torch__cuda_version="10.2",
                 python__packages={"torch": "1.9.0", "torchvision": "0.10.0", "torchaudio": "0.9.0"})
    assert worst(rules.torch_companions, good).status is Status.OK


# ------------------------------------------------------------------------------- cuda-major-mix

def test_cu13_leftovers_next_to_a_cu12_torch_warn() -> None:
    pkgs = {"torch": "2.6.0+cu126", "nvidia-cublas-cu12": "12.6.4.1", "nvidia-cublas-cu13": "13.0.0.19"}
    found = worst(rules.cuda_major_mix, facts(python__packages=pkgs))
    assert found.status is Status.WARN and "nvidia-cublas-cu13" in found.remediation.commands[0]
    # Copy-pasteable, in the target interpreter: no "pip show <name>" placeholder.
    assert found.remediation.commands[:2] == (
        "/opt/venv/bin/python -m pip show nvidia-cublas-cu13   # Required-by: what still needs them",
        "/opt/venv/bin/python -m pip uninstall -y nvidia-cublas-cu13")


def test_cupy_for_cuda_11_next_to_torch_cu12() -> None:
    found = worst(rules.cuda_major_mix, facts(python__packages={"torch": "2.6.0+cu126", "cupy-cuda11x": "13.3.0"}))
    assert found.status is Status.WARN
    assert ("/opt/venv/bin/python -m pip uninstall -y cupy-cuda11x && /opt/venv/bin/python -m pip install "
            "cupy-cuda12x") in found.remediation.commands


# ------------------------------------------------------------------------------- python-supported

def test_python_newer_than_the_release_warns_when_torch_imports() -> None:
    found = worst(rules.python_supported, facts(python__version="3.14.0"))
    assert found.status is Status.WARN and "3.9, 3.10, 3.11, 3.12, 3.13" in found.detail
    # Either another torch for this Python, or another Python for this torch.
    other_torch, other_python = found.remediation.alternatives
    assert other_torch.commands == ("/opt/venv/bin/python -m pip install torch==2.9.1 --index-url https://download.pytorch.org/whl/cu126",)
    assert "Use Python 3.13" in other_python.text and not other_python.commands


def test_python_unsupported_and_import_failing_fails() -> None:
    f = facts(python__version="3.14.0", torch__version=missing(Reason.FAILED, detail="ImportError"),
              python__packages={"torch": "2.6.0"})
    assert worst(rules.python_supported, f).status is Status.FAIL


def test_no_wheel_for_this_python_at_all() -> None:
    f = facts(python__version="3.99.0", torch__version=missing(Reason.ABSENT))
    assert worst(rules.python_supported, f).status is Status.WARN


# ------------------------------------------------------------------------------- lookups used by other checks

def test_suggested_variant_fits_gpu_and_driver() -> None:
    variant, why = suggested_variant(torch26_on("NVIDIA GeForce RTX 5090", "12.0"))
    assert variant == "cu128" and "12.8" in why


def test_variant_for_driver_keeps_its_contract() -> None:
    variant, why = recommend.variant_for_driver(12060)
    assert variant == "cu126" and "12.6" in why
    assert recommend.variant_for_driver(None)[0].startswith("cu")


def test_highest_cuda_for_a_driver_newer_than_the_table() -> None:
    ans = compat.highest_cuda_for_driver("999.1.2")
    assert ans.at_least and AS_OF in ans.note


# ------------------------------------------------------------ torch-arch-support: toolkit proof

def old_wheel_on(name: str, torch_version: str, cuda: str, driver: str = "450.80.02", **changes: Any) -> Facts:
    """A pasted collect_env of an old torch (not in the table) on a GPU named without "NVIDIA "."""
    base = pasted(torch__version=torch_version, torch__cuda_version=cuda, nvml__driver_version=driver,
                  nvml__gpus=[gpu(name, None)], python__version="3.8.10", python__packages={})
    base.update(changes)
    return facts(**base)


def test_cu102_wheel_not_in_the_table_fails_on_an_a100() -> None:
    f = old_wheel_on("A100-SXM4-40GB", "1.6.0+cu102", "10.2")
    assert compat.arch_list("1.6.0", "cu102") is None  # the release is not in the table (1.7-1.12 cu102 are)
    found = worst(rules.torch_arch_support, f)
    assert found.status is Status.FAIL
    assert "CUDA 10.2 compiles SASS for sm_30…sm_75 only" in found.detail
    assert "A100-SXM4-40GB is sm_80" in found.detail
    # The nearest release with sm_80 kernels whose CUDA this R450 driver runs (11.x minor-version compatibility).
    assert found.remediation.commands == (
        "/opt/venv/bin/python -m pip install --force-reinstall torch==1.10.2 --index-url https://download.pytorch.org/whl/cu113",)


@pytest.mark.parametrize(("name", "torch_version", "cuda"), [
    ("GeForce RTX 3090", "1.7.1+cu101", "10.1"), ("NVIDIA H100 PCIe", "1.11.0+cu115", "11.5"),
    ("A100-PCIE-40GB", "1.4.0+cu92", "9.2"),
])
def test_toolkit_too_old_for_the_gpu_fails(name: str, torch_version: str, cuda: str) -> None:
    found = worst(rules.torch_arch_support, old_wheel_on(name, torch_version, cuda, driver="535.104.05"))
    assert found.status is Status.FAIL and f"CUDA {cuda} compiles SASS" in found.detail


@pytest.mark.parametrize(("name", "torch_version", "cuda"), [
    ("GeForce RTX 2080 Ti", "1.8.1+cu102", "10.2"),  # sm_75 is inside CUDA 10.2's range: not provable
    ("A100-SXM4-40GB", "1.7.1+cu110", "11.0"),  # CUDA 11.0 can target sm_80
    ("GeForce RTX 3090", "1.9.0+cu111", "11.1"),
    ("A100-SXM4-40GB", "1.8.1+cu102", "7.5"),  # a toolkit the table does not know proves nothing
])
def test_toolkit_that_can_target_the_gpu_is_not_a_fail(name: str, torch_version: str, cuda: str) -> None:
    for finding in judge(rules.torch_arch_support, old_wheel_on(name, torch_version, cuda)):
        assert finding.status is not Status.FAIL, finding.title


def test_gpu_no_wheel_supports_is_left_to_gpu_eol() -> None:
    f = old_wheel_on("GeForce 210", "1.4.0+cu101", "10.1", driver="340.108")
    assert all(x.status is not Status.FAIL for x in judge(rules.torch_arch_support, f))
    assert worst(rules.gpu_eol, f).status in (Status.WARN, Status.FAIL)  # unverified GPU row: warn at least


def test_torch_1_10_cu102_in_the_table_fails_on_an_a100_and_recommends_cu113() -> None:
    f = old_wheel_on("A100-SXM4-40GB", "1.10.2+cu102", "10.2")
    found = worst(rules.torch_arch_support, f)
    # The 1.10 row is unverified, but CUDA 10.2 cannot target sm_80 at all: proof, so a fail.
    assert found.status is Status.FAIL
    assert "torch==1.10.2 --index-url https://download.pytorch.org/whl/cu113" in found.remediation.commands[0]


def test_no_1x_release_in_the_table_runs_on_hopper() -> None:
    assert compat.last_release_for((9, 0)) is not None
    for variant in ("cu102", "cu111", "cu113"):
        arch = compat.arch_list("1.10", variant)
        assert arch is not None and not compat.runs_on(arch, (9, 0)).runs


def test_untagged_companions_are_judged_by_what_pypi_ships_on_the_platform() -> None:
    # PyPI's Linux torchvision is the release's default CUDA build; its Windows wheel is a CPU build.
    cpu_torch_linux = facts(torch__version="2.6.0+cpu", torch__cuda_version=None,
                            python__packages={"torch": "2.6.0+cpu", "torchvision": "0.21.0"})
    assert worst(rules.torch_companions, cpu_torch_linux).status is Status.FAIL
    cuda_torch_windows = facts(host__os="Windows", python__packages={"torch": "2.6.0+cu126", "torchvision": "0.21.0"})
    assert worst(rules.torch_companions, cuda_torch_windows).status is Status.FAIL
    # Platform not in the report: say what to check, do not fail.
    unknown = facts(host__os=None, python__packages={"torch": "2.6.0+cu126", "torchvision": "0.21.0"})
    found = worst(rules.torch_companions, unknown)
    assert found.status is Status.WARN and "pip show torchvision" in found.detail


def test_nightlies_pair_by_date_not_by_release_table() -> None:
    same_day = facts(torch__version="1.8.0.dev20201023", torch__cuda_version="10.2",
                     python__packages={"torch": "1.8.0.dev20201023", "torchvision": "0.8.0.dev20201023"})
    assert worst(rules.torch_companions, same_day).status is Status.OK
    apart = facts(torch__version="2.5.0.dev20240720+cu124", torch__cuda_version="12.4",
                  python__packages={"torch": "2.5.0.dev20240720+cu124", "torchvision": "0.20.0.dev20240601+cu124"})
    assert worst(rules.torch_companions, apart).status is Status.WARN


def test_a_newer_minor_that_runs_is_minor_version_compatibility_not_forward_compat() -> None:
    # torch 2.7.0+cu128 on driver 550 (CUDA 12.4 read from the table), CUDA available: MVC, not cuda-compat.
    f = facts(torch__version="2.7.0+cu128", torch__cuda_version="12.8", nvml__driver_version="550.54.15",
              nvml__cuda_driver_version=missing(Reason.NOT_IN_REPORT), torch__cuda_available=True,
              python__packages={"torch": "2.7.0+cu128"})
    found = worst(rules.driver_too_old, f)
    assert found.status is Status.WARN and "minor-version compatibility" in found.detail
    assert "forward-compatibility" not in found.detail


def test_driver_upgrades_name_a_branch_that_still_supports_the_gpu() -> None:
    from envdoctor.checks.compat_driver import driver_upgrade_commands

    k80 = facts(nvml__gpus=[{"index": 0, "name": "Tesla K80", "compute_capability": "3.7"}], torch__devices=[])
    assert driver_upgrade_commands(k80, "450.80.02")[0].startswith("sudo apt install nvidia-driver-470")
    assert "last branch for this GPU" in driver_upgrade_commands(k80, "450.80.02")[0]
    h100 = facts()
    first = driver_upgrade_commands(h100, "570.26")[0]
    assert first.startswith("sudo apt install nvidia-driver-580") and "ubuntu-drivers" in first
    assert driver_upgrade_commands(facts(host__os="Windows"), "570.26")[0].startswith("nvidia-smi")
    # A GPU the table does not know (no compute capability anywhere) may be a Kepler that R580 dropped:
    # the oldest branch new enough, never the newest, with the distribution's own pick beside it.
    mystery = facts(nvml__gpus=[{"index": 0, "name": "NVIDIA Graphics Device"}], torch__devices=[])
    first = driver_upgrade_commands(mystery, "450.80.02")[0]
    assert first.startswith("sudo apt install nvidia-driver-470 ") and "R470 is the last for Kepler" in first
    assert "NVIDIA Graphics Device is not in envdoctor's GPU table" in first and "ubuntu-drivers install" in first
    # The GPU catalogue (pci.ids + the driver's list) knows a GRID K520: GK104, Kepler, last branch R470.
    grid = facts(nvml__gpus=[{"index": 0, "name": "GRID K520"}], torch__devices=[])
    first = driver_upgrade_commands(grid, "450.80.02")[0]
    assert first.startswith("sudo apt install nvidia-driver-470 ") and "last branch for this GPU" in first
    # The driver-too-old finding carries them.
    old = facts(torch__version="2.6.0+cu126", torch__cuda_version="12.6", nvml__driver_version="470.82.01",
                nvml__cuda_driver_version=11040)
    found = worst(rules.driver_too_old, old)
    assert found.status is Status.FAIL and any(c.startswith("sudo apt install nvidia-driver-") for c in
                                               found.remediation.command_lines())


def test_a_torch_newer_than_the_table_is_never_a_companion_fail() -> None:
    # "torch 7.0+cu118" (a typo in a real ticket, or a future release): warn with the table's date, never fail.
    f = facts(torch__version="7.0.0+cu118", torch__cuda_version="11.8",
              python__packages={"torch": "7.0.0+cu118", "torchaudio": "2.7.0+cu118"})
    found = worst(rules.torch_companions, f)
    assert found.status is Status.WARN and "not in envdoctor's compatibility table" in found.detail


def test_reinstall_variant_defaults_to_the_release_s_own_build():
    from envdoctor.checks.compat_libs import _default_variant

    pick = _default_variant("2.7.1")
    assert pick == compat.release_default_variant("2.7") and pick in compat.release_variants("2.7")
    assert _default_variant(None) == "cu126" and _default_variant("99.0") == "cu126"
