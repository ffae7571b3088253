"""torch's own error sentences become facts (envdoctor.knowledge.messages), in live readings and in pastes,
and the checks that own each cause judge them."""

from __future__ import annotations

import pytest

from envdoctor.knowledge import errors, messages, versions
from envdoctor.model import Reason, Status
from envdoctor.parsers import parse_text
from envdoctor.pipeline.diagnose import diagnose, sort_findings
from envdoctor.registry import load_registry

from .builders import facts, missing

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
    # CUDA < 10.1 numbered cudaErrorUnknown 30 (999 since 10.1): the same error, read when its words say so.
    ("THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=50 error=30 : unknown error", 999),
])
def test_cuda_error_codes_are_read(text: str, code: int) -> None:
    found = messages.cuda_error(text)
    assert found is not None and found["code"] == code and found["name"] == errors.cuda_init_codes()[code]


@pytest.mark.parametrize("text", [
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
    assert versions.cudnn_to_int((8, 0, 3)) == 8003 and versions.cudnn_to_int((9, 1, 0)) == 90100
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


# -- dynamic-loader errors ------------------------------------------------------------------------------------
NVJITLINK = ("ImportError: /usr/local/lib/python3.10/dist-packages/torch/lib/../../nvidia/cusparse/lib/libcusparse.so.12: "
             "undefined symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12")


def test_loader_errors_are_read_from_any_wording() -> None:
    [e] = messages.loader_errors(NVJITLINK)
    assert (e["library"], e["symbol"], e["provider"], e["family"]) == (
        "libcusparse.so.12", "__nvJitLinkComplete_12_4", "nvJitLink", "cusparse")
    # An issue title wraps it in parentheses; a stored copy cuts it mid-word.
    [t] = messages.loader_errors(f"PyTorch >= 2.5.0 revive #111469 ({NVJITLINK.split(': ', 1)[1]})")
    assert t["version_node"] == "libnvJitLink.so.12"
    [cut] = messages.loader_errors("x/libcudnn_cnn_train.so.8: undefined symbol: _ZN5cudnn3cnn4abcd, vers")
    assert cut["provider"] == "cudnn" and cut["version_node"] is None
    [gone] = messages.loader_errors("OSError: libcudart.so.12: cannot open shared object file: No such file or directory")
    assert gone["kind"] == "missing-library" and gone["family"] == "cudart"
    assert messages.loader_errors("undefined symbol in my own code") == []


def paste_with(error: str, torch: str = "N/A", packages: tuple[str, ...] = ()) -> str:
    return "\n".join([error, "", "PyTorch version: " + torch, "Is debug build: N/A",
                      "CUDA used to build PyTorch: N/A" if torch == "N/A" else "CUDA used to build PyTorch: 12.4",
                      "GPU models and configuration: GPU 0: NVIDIA GeForce RTX 4090",
                      "Nvidia driver version: 550.54.14", "Versions of relevant libraries:",
                      *(f"[pip3] {p}" for p in packages)])


def finding(text: str, check_id: str):  # type: ignore[no-untyped-def]
    return next(x for x in diagnose(parse_text(text), load_registry(plugins=False)) if x.id == check_id)


def test_nvjitlink_undefined_symbol_blames_library_conflicts_with_the_wheel_to_update() -> None:
    text = paste_with(NVJITLINK, packages=("torch==2.5.1", "nvidia-nvjitlink-cu12==12.1.105"))
    assert first_fail(text) == "library-conflicts"
    f = finding(text, "library-conflicts")
    assert "CUDA 12.4 or newer" in f.detail
    assert any("'nvidia-nvjitlink-cu12>=12.4'" in c for c in f.remediation.commands)
    # torch-import still fails (torch does not import) but is not what a reader sees first.
    assert finding(text, "torch-import").status is Status.FAIL


def test_nccl_undefined_symbol_blames_nccl_and_removes_the_other_major() -> None:
    error = ("ImportError: /home/u/.env/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so: "
             "undefined symbol: ncclCommResume")
    text = paste_with(error, packages=("torch==2.10.0+cu130", "nvidia-nccl-cu12==2.29.3", "nvidia-nccl-cu13==2.29.7"))
    assert first_fail(text) == "nccl-mismatch"
    f = finding(text, "nccl-mismatch")
    assert any(c.endswith("pip uninstall -y nvidia-nccl-cu12") for c in f.remediation.commands)
    assert any("torch==2.10.0" in c and "/whl/cu130" in c for c in f.remediation.commands)


def test_a_system_cudnn_sub_library_blames_cudnn_mismatch() -> None:
    error = ("Could not load library libcudnn_cnn_train.so.8. Error: /usr/local/cuda/lib64/libcudnn_cnn_train.so.8: "
             "undefined symbol: _ZN5cudnn3cnn34layerNormFwd_execute_internal_implERKNS_7backend11VariantPackE, "
             "version libcudnn_cnn_infer.so.8")
    text = paste_with(error, torch="2.2.0+cu121")
    assert first_fail(text) == "cudnn-mismatch"
    f = finding(text, "cudnn-mismatch")
    assert "/usr/local/cuda/lib64" in f.detail and "/usr/local/cuda/lib64" in f.remediation.commands[0]


# -- torch's warnings alone are a (small) report --------------------------------------------------------------
SM120 = ["/venv/lib/python3.12/site-packages/torch/cuda/__init__.py:235: UserWarning: ",
         "NVIDIA GeForce RTX 5070 Ti with CUDA capability sm_120 is not compatible with the current PyTorch installation.",
         "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.",
         "If you want to use the NVIDIA GeForce RTX 5070 Ti GPU with PyTorch, please check the instructions at "
         "https://pytorch.org/get-started/locally/"]


def test_a_capability_warning_alone_is_judged_with_the_lowest_cuda_that_runs_the_gpu() -> None:
    from envdoctor.parsers import detect_formats

    text = "\n".join(SM120)
    assert detect_formats(text) == ["torch-messages"]
    f = parse_text(text)
    assert tuple(f.value("torch.devices")[0]["capability"]) == (12, 0) and f.value("torch.arch_list")[-1] == "sm_90"
    arch = finding(text, "torch-arch-support")
    assert arch.status is Status.FAIL
    # The driver is unknown: the wheel that asks least of it (CUDA 12.8 is the first with sm_120).
    assert "/whl/cu128" in arch.remediation.commands[0] and "570" in arch.detail


def test_a_quoted_warning_keeps_a_clean_gpu_name() -> None:
    text = ("`UserWarning: NVIDIA RTX A6000 with CUDA capability sm_86 is not compatible with the current PyTorch "
            "installation. The current PyTorch install supports CUDA capabilities sm_37 sm_50 sm_60 sm_70.`")
    assert parse_text(text).value("torch.devices")[0]["name"] == "NVIDIA RTX A6000"


def test_torch_2_11_compute_capability_block_is_read() -> None:
    text = "\n".join([
        "UserWarning: Found GPU0 Tesla V100-PCIE-32GB which is of compute capability (CC) 7.0.",
        "The following list shows the CCs this version of PyTorch was built for and the hardware CCs it supports:",
        "- 7.5 which supports hardware CC >=7.5,<8.0", "- 8.0 which supports hardware CC >=8.0,<9.0 except {8.7}",
        "- 12.0 which supports hardware CC >=12.0,<13.0",
        "Please follow the instructions at https://pytorch.org/get-started/locally/ to install a PyTorch release "
        "that supports one of these CUDA versions: 12.6, 12.8"])
    f = parse_text(text)
    assert f.value("torch.arch_list") == ("sm_75", "sm_80", "sm_120")
    assert tuple(f.value("torch.devices")[0]["capability"]) == (7, 0)
    assert first_fail(text) == "torch-arch-support"


def test_driver_too_old_message_alone_recommends_a_wheel_for_the_drivers_cuda() -> None:
    text = ("UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 11040). "
            "Please update your GPU driver by downloading and installing a new version from the URL: "
            "http://www.nvidia.com/Download/index.aspx")
    assert first_fail(text) == "driver-too-old"
    f = finding(text, "driver-too-old")
    assert "CUDA 11.4" in f.title and "/whl/cu11" in f.remediation.commands[0]


def test_no_kernel_image_with_a_known_gpu_blames_the_wheel_unless_no_wheel_exists() -> None:
    new = "\n".join(["UserWarning: NVIDIA GeForce RTX 5070 Ti with CUDA capability sm_120 is not compatible with "
                     "the current PyTorch installation.",
                     "RuntimeError: CUDA error: no kernel image is available for execution on the device"])
    assert first_fail(new) == "torch-arch-support"
    old = "\n".join(["Found GPU0 GeForce GTX 660 Ti which is of cuda capability 3.0.",
                     "PyTorch no longer supports this GPU because it is too old.",
                     "RuntimeError: CUDA error: no kernel image is available for execution on the device"])
    assert first_fail(old) == "gpu-eol"


def test_a_lone_torch_message_is_judged_and_garbage_is_still_refused() -> None:
    # Issue 10: one piece of evidence is judged (what it lacks stays not_in_report); only text
    # without any evidence is refused.
    from envdoctor.parsers import ParseError

    line = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
    assert parse_text(line).get("torch.cuda_available_messages").value == (line,)
    # Issue 21: an error line nothing explains is evidence too (judged by unexplained-error), never refused.
    said = parse_text("RuntimeError: something went wrong in my training loop").get("text.error_lines")
    assert said.ok and said.value[0]["line"] == "RuntimeError: something went wrong in my training loop"
    with pytest.raises(ParseError, match="no environment evidence"):
        parse_text("my training loop is slower than I expected")
