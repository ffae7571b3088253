"""More of what people paste: Ultralytics' banner, kernel NVRM lines, other frameworks' CUDA errors,
re-wrapped warnings, and where the paste shows it came from a container. Each is parsed into facts
and judged by the same checks as a live probe."""

from __future__ import annotations

from envdoctor.diagnose import diagnose, sort_findings
from envdoctor.model import Status
from envdoctor.parsers import detect_formats, parse_text
from envdoctor.registry import load_registry


def verdicts(text: str) -> dict[str, Status]:
    return {f.id: f.status for f in diagnose(parse_text(text), load_registry(plugins=False))}


def first_fail(text: str) -> str | None:
    fails = [f.id for f in sort_findings(diagnose(parse_text(text), load_registry(plugins=False)))
             if f.status is Status.FAIL]
    return fails[0] if fails else None


def test_ultralytics_banner_with_a_cuda_device() -> None:
    text = "YOLOv5 🚀 2022-9-1 Python-3.9.13 torch-1.12.1+cu113 CUDA:0 (NVIDIA GeForce RTX 3090, 24268MiB)"
    assert detect_formats(text) == ["ultralytics"]
    f = parse_text(text)
    assert f.value("torch.version") == "1.12.1+cu113" and f.value("torch.cuda_version") == "11.3"
    assert f.value("python.version") == "3.9.13" and f.value("torch.cuda_available") is True
    [dev] = f.value("torch.devices")
    assert dev["name"] == "NVIDIA GeForce RTX 3090" and dev["total_memory"] == 24268 << 20
    assert first_fail(text) is None


def test_ultralytics_banner_with_a_cpu_build() -> None:
    text = ("Ultralytics YOLOv8.1.3 🚀 Python-3.10.11 torch-2.1.0+cpu\n"
            "torch.cuda.is_available(): False\ntorch.cuda.device_count(): 0")
    f = parse_text(text)
    assert f.value("torch.cuda_version") is None and f.get("torch.cuda_version").ok
    assert f.value("torch.cuda_available") is False
    # No GPU is shown, so a CPU build is not proven wrong here: a warning at most, never a fail.
    assert verdicts(text).get("torch-cpu-build") in (Status.WARN, Status.OK, Status.SKIP)


def test_kernel_nvrm_api_mismatch_is_a_driver_version_mismatch() -> None:
    text = ("Aug 26 14:08:07 host kernel: NVRM: API mismatch: the client has the version 367.44, but\n"
            "                             NVRM: this kernel module has the version 367.35.  Please\n"
            "                             NVRM: make sure that this kernel module and all NVIDIA driver\n")
    f = parse_text(text)
    assert (f.value("driver.userspace_version"), f.value("driver.kernel_module_version")) == ("367.44", "367.35")
    assert first_fail(text) == "driver-version-mismatch"


def test_nvml_function_not_found_from_nvidia_smi_is_a_userspace_mismatch() -> None:
    text = "$ nvidia-smi\nFailed to initialize NVML: Function Not Found\n"
    assert parse_text(text).value("nvml.init")["code"] == 13
    assert first_fail(text) == "driver-version-mismatch"


def test_other_frameworks_cuda_errors_are_read() -> None:
    xla = ("2023-10-04 12:33:47.594219: E external/xla/xla/stream_executor/cuda/cuda_driver.cc:268] failed call to "
           "cuInit: CUDA_ERROR_UNKNOWN: unknown error")
    assert parse_text(xla).value("cuda.init")["code"] == 999 and first_fail(xla) == "cuda-init"
    sample = "Failed to allocate device vector A (error code system not yet initialized)!"
    assert first_fail(sample) == "fabric-manager"


def test_cudnn_linked_against_wording_without_a_torch_version() -> None:
    text = ("RuntimeError: cuDNN version incompatibility: PyTorch was compiled against (8, 3, 2) but linked against "
            "(8, 0, 3)")
    assert first_fail(text) == "cudnn-mismatch"


def test_a_capability_warning_wrapped_across_lines_is_read() -> None:
    text = ("NVIDIA H100 PCIe with CUDA capability\nsm_90 is not compatible with the current PyTorch installation.\n"
            "The current PyTorch\ninstall supports CUDA capabilities sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86.\n")
    f = parse_text(text)
    assert f.value("torch.devices")[0]["name"] == "NVIDIA H100 PCIe"
    assert first_fail(text) == "torch-arch-support"


def test_container_evidence_from_the_command_that_produced_the_output() -> None:
    k8s = "$ kubectl logs cuda-nvidia-smi-loop\n\nFailed to initialize NVML: Unknown Error\n"
    f = parse_text(k8s)
    assert f.value("host.container") == "kubernetes"
    assert first_fail(k8s) == "container-gpu"
    # The host's own nvidia-smi came first: its output is the host's, not a container's.
    host = "$ nvidia-smi\nFailed to initialize NVML: Unknown Error\n$ docker run --rm --gpus all ubuntu nvidia-smi\n"
    assert not parse_text(host).get("host.container").ok
    compose = ("qna-transformers_1  |     torch._C._cuda_init()\n"
               "qna-transformers_1  | RuntimeError: Found no NVIDIA driver on your system. Please check that you "
               "have an NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx\n")
    assert parse_text(compose).value("host.container") == "docker"
    assert first_fail(compose) == "container-gpu"


def test_a_container_prompt_with_a_working_gpu_is_not_called_gpu_less() -> None:
    # Device nodes are never in a paste: their absence from the report is not their absence.
    text = "\n".join(["root@bde82b12a79f:/app# python -m torch.utils.collect_env", "PyTorch version: 1.12.1+cu113",
                      "Is CUDA available: True", "CUDA used to build PyTorch: 11.3",
                      "GPU models and configuration: GPU 0: NVIDIA A100-SXM4-40GB", "Nvidia driver version: 515.65.01"])
    assert verdicts(text)["container-gpu"] is Status.OK
    bare = "root@bde82b12a79f:/app# python -m torch.utils.collect_env\nPyTorch version: 1.12.1+cu113\n"
    assert verdicts(bare)["container-gpu"] is Status.SKIP


def test_hostile_long_lines_do_not_stall_the_parser() -> None:
    """Each shape once made a regex backtrack quadratically (minutes on a 4 MB paste). A hang
    guard, not a speed target: the child gets a deadline far above the ~1 s these take now."""
    import subprocess
    import sys

    script = r'''
import sys
from envdoctor.parsers import parse_text
shapes = ["a" * 7990, "a" + " " * 7988 + "b", "ab.so" * 1598, " with CUDA capability sm_" * 300, "Found GPU0 " * 700,
          ": undefined symbol: " * 380, "GPU 0: " + "a " * 3990, "- " + "a" * 7990, "YOLOv5 " * 1100,
          "Unexpected error from cudaGetDeviceCount() " * 180, "THCudaCheck FAIL " * 460, "cuInit " * 1100,
          "Product Name: a" + " " * 7980 + "b"]
for line in shapes:
    parse_text("PyTorch version: 2.1.0\nIs CUDA available: True\n" + "\n".join([line] * 480))
print("done")
'''
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr[-2000:]
