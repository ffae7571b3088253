"""torch's own error sentences become facts (envdoctor.messages), in live readings and in pastes,
and the checks that own each cause judge them."""

from __future__ import annotations

import pytest

from .builders import facts, missing
from envdoctor import messages
from envdoctor.diagnose import diagnose, sort_findings
from envdoctor.model import Reason, Status
from envdoctor.parsers import parse_text
from envdoctor.registry import load_registry

GET_COUNT = ("/usr/lib/python3/dist-packages/torch/cuda/__init__.py:107: UserWarning: CUDA initialization: Unexpected "
             "error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that "
             "might have already set an error? Error {code}: {text} (Triggered internally at "
             "../c10/cuda/CUDAFunctions.cpp:109.)")
UNKNOWN = ("UserWarning: CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up "
           "environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start. Setting the available "
           "devices to be zero. (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:109.)")
CUDNN = ("RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (8, 3, 2) but found runtime "
         "version (8, 0, 3). PyTorch already comes bundled with cuDNN. One option to resolving this error is to "
         "ensure PyTorch can find the bundled cuDNN.Looks like your LD_LIBRARY_PATH contains incompatible version "
         "of cudnnPlease either remove it from the path or install cudnn (8, 3, 2)")


def report(*before: str, torch: str = "1.13.1+cu117", cuda: str = "11.7", gpus: tuple[str, ...] = (
        "NVIDIA A100-SXM4-80GB",) * 2, driver: str = "515.65.01") -> str:
    lines = ["Collecting environment information...", *before, f"PyTorch version: {torch}", "Is debug build: False",
             f"CUDA used to build PyTorch: {cuda}", "ROCM used to build PyTorch: N/A", "",
             "Python version: 3.10.12 (main, Jun 11 2023, 05:26:28) [GCC 11.4.0] (64-bit runtime)",
             "Is CUDA available: False", "GPU models and configuration:",
             *(f"GPU {i}: {n}" for i, n in enumerate(gpus)), f"Nvidia driver version: {driver}",
             "cuDNN version: Could not collect"]
    return "\r\n".join(lines)


@pytest.mark.parametrize(("text", "code"), [
    (GET_COUNT.format(code=802, text="system not yet initialized"), 802),
    (GET_COUNT.format(code=804, text="forward compatibility was attempted on non supported HW"), 804),
    (GET_COUNT.format(code=100, text="no CUDA-capable device is detected"), 100),
    (UNKNOWN, 999),
    ("RuntimeError: cuda runtime error (999) : unknown error at /pytorch/aten/src/THC/THCGeneral.cpp:47", 999),
    ("THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=51 error=802 : system not yet initialized", 802),
])
def test_cuda_error_codes_are_read(text: str, code: int) -> None:
    found = messages.cuda_error(text)
    assert found is not None and found["code"] == code and found["name"] == messages.CUDA_RUNTIME_ERRORS[code]


@pytest.mark.parametrize("text", [
    # CUDA < 10.1 numbered "unknown error" 30: the code is not cuInit's, so it is not a fact.
    "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=50 error=30 : unknown error",
    # A code outside the table that means the same for cudart and cuInit.
    GET_COUNT.format(code=2, text="out of memory"),
    "999 unknown things happened", "",
])
def test_other_texts_are_not_cuda_init_facts(text: str) -> None:
    assert messages.cuda_error(text) is None


def test_cudnn_incompatibility_both_wordings() -> None:
    assert messages.cudnn_incompatibility(CUDNN) == ((8, 3, 2), (8, 0, 3))
    old = "RuntimeError: cuDNN version mismatch: PyTorch was compiled against 7102 but linked against 7005"
    assert messages.cudnn_incompatibility(old) == ((7, 1, 2), (7, 0, 5))
    assert messages.cudnn_int((8, 0, 3)) == 8003 and messages.cudnn_int((9, 1, 0)) == 90100
    assert messages.cudnn_incompatibility("cuDNN error: CUDNN_STATUS_NOT_INITIALIZED") is None


def first_fail(text: str) -> str | None:
    findings = sort_findings(diagnose(parse_text(text), load_registry(plugins=False)))
    fails = [f.id for f in findings if f.status is Status.FAIL]
    return fails[0] if fails else None


def test_paste_with_error_802_blames_the_fabric_manager() -> None:
    text = report(GET_COUNT.format(code=802, text="system not yet initialized"))
    f = parse_text(text)
    assert f.value("cuda.init")["code"] == 802
    assert first_fail(text) == "fabric-manager"
    found = [x for x in diagnose(f, load_registry(plugins=False)) if x.id in ("fabric-manager", "cuda-init")]
    fm = next(x for x in found if x.id == "fabric-manager")
    assert "nvidia-fabricmanager-515" in " ".join(fm.remediation.commands)
    # cuda-init names the owner instead of failing a second time for the same cause.
    ci = next(x for x in found if x.id == "cuda-init")
    assert ci.status is Status.SKIP and "fabric-manager" in ci.title


def test_paste_with_error_804_blames_forward_compat() -> None:
    text = report(GET_COUNT.format(code=804, text="forward compatibility was attempted on non supported HW"),
                  gpus=("NVIDIA GeForce RTX 3090",))
    assert first_fail(text) == "cuda-forward-compat"


def test_paste_with_unknown_error_fails_cuda_init_with_the_uvm_remedy() -> None:
    text = report(UNKNOWN, gpus=("NVIDIA GeForce RTX 3060 Laptop GPU",))
    assert first_fail(text) == "cuda-init"
    found = next(x for x in diagnose(parse_text(text), load_registry(plugins=False)) if x.id == "cuda-init")
    assert "nvidia_uvm" in " ".join(found.remediation.commands)


def test_paste_without_a_message_leaves_cuda_init_not_in_report() -> None:
    assert parse_text(report()).get("cuda.init").reason is Reason.NOT_IN_REPORT


def test_fabric_manager_judges_802_without_nvml_data() -> None:
    f = facts(cuda__init={"code": 802, "name": "CUDA_ERROR_SYSTEM_NOT_READY", "message": "system not yet initialized"},
              nvml__gpus=missing(Reason.NOT_IN_REPORT))
    found = diagnose(f, [s for s in load_registry(plugins=False) if s.id in ("fabric-manager", "cuda-init")])
    assert {x.id: x.status for x in found} == {"cuda-init": Status.SKIP, "fabric-manager": Status.FAIL}


def test_cudnn_incompatibility_in_a_paste_fails_from_torchs_own_versions() -> None:
    text = report(CUDNN, torch="1.11.0+cu113", cuda="11.3", gpus=("NVIDIA GeForce RTX 3090",), driver="510.47.03")
    f = parse_text(text)
    assert f.value("torch.cudnn_version") == 8003 and f.value("torch.cudnn_build_version") == "8.3.2"
    found = next(x for x in diagnose(f, load_registry(plugins=False)) if x.id == "cudnn-mismatch")
    assert found.status is Status.FAIL and "8.0.3" in found.title and "8.3.2" in found.title
    assert "unset LD_LIBRARY_PATH" in found.remediation.commands[0]


def test_live_cudnn_error_reading_is_judged() -> None:
    # Live: torch.backends.cudnn.version() raised; the reading's detail is torch's error text.
    f = facts(torch__cudnn_version=missing(Reason.FAILED, "python", CUDNN), torch__cudnn_build_version=None)
    found = [x for x in diagnose(f, [s for s in load_registry(plugins=False) if s.id == "cudnn-mismatch"])]
    assert found[0].status is Status.FAIL and "8.0.3" in found[0].title


def test_build_version_outranks_the_table() -> None:
    # torch says it was compiled against 9.5.1 and 9.1.0 is loaded: an older minor, refused.
    f = facts(torch__cudnn_version=90100, torch__cudnn_build_version="9.5.1")
    found = next(x for x in diagnose(f, [s for s in load_registry(plugins=False) if s.id == "cudnn-mismatch"]))
    assert found.status is Status.FAIL and "compiled against 9.5.1" in found.detail
    assert next(iter(diagnose(facts(torch__cudnn_build_version="9.5.1"),
                              [s for s in load_registry(plugins=False) if s.id == "cudnn-mismatch"]))).status is Status.OK
