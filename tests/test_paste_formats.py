"""More of what people paste: Ultralytics' banner, kernel NVRM lines, other frameworks' CUDA errors,
re-wrapped warnings, and where the paste shows it came from a container. Each is parsed into facts
and judged by the same checks as a live probe."""

from __future__ import annotations

from envdoctor.model import Status
from envdoctor.parsers import detect_formats, parse_text
from envdoctor.pipeline.diagnose import diagnose, sort_findings
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


def test_ultralytics_banner_tags_decode_through_the_variant_codec() -> None:
    # The +cuNNN tag means what a wheel variant means (envdoctor.knowledge.versions.variant_cuda), old tags too.
    for tag, cuda in (("cu92", "9.2"), ("cu102", "10.2"), ("cu128", "12.8"), ("cu130", "13.0")):
        f = parse_text(f"YOLOv5 🚀 v7.0 Python-3.8.10 torch-1.7.1+{tag} CUDA:0 (Tesla T4, 15110MiB)")
        assert f.value("torch.cuda_version") == cuda, tag
    assert not parse_text("YOLOv5 🚀 v7.0 Python-3.8.10 torch-2.0.0+rocm5.4.2 CPU").get("torch.cuda_version").ok


def test_ultralytics_banner_with_a_cpu_build() -> None:
    text = ("Ultralytics YOLOv8.1.3 🚀 Python-3.10.11 torch-2.1.0+cpu\n"
            "torch.cuda.is_available(): False\ntorch.cuda.device_count(): 0")
    f = parse_text(text)
    assert f.value("torch.cuda_version") is None and f.get("torch.cuda_version").ok
    assert f.value("torch.cuda_available") is False
    # No GPU is shown, so a CPU build is not proven wrong here: a warning, not a fail.
    assert verdicts(text)["torch-cpu-build"] is Status.WARN


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
          "Product Name: a" + " " * 7980 + "b", "a" + " " * 7980 + "b.py:1", "nvidia-container-cli: " * 360,
          "Error loading " * 570, "os.environ['CUDA_VISIBLE_DEVICES'] " * 220, "/python3.8/site-packages/ " * 300,
          "Microsoft Windows [Version 10.0." * 240, "WSL " * 1990, "a::" * 2660, "could not load NVML library " * 280,
          "a in " * 1590, "### a" + " " * 7980, "Jun 30 11:07:05 h kernel: " + "#012" * 1990, '\\"' * 3990]
for line in shapes:
    parse_text("PyTorch version: 2.1.0\nIs CUDA available: True\n" + "\n".join([line] * 480))
print("done")
'''
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr[-2000:]


def test_pip_list_freeze_and_detectron2_rows_are_a_package_report() -> None:
    table = "torch       2.14.0+cu130\ntorchvision 0.28.0+cu129\ntorchaudio  2.11.0+cu129\ntriton      3.8.0\n"
    assert detect_formats(table) == ["package-list"]
    f = parse_text(table)
    assert f.value("torch.version") == "2.14.0+cu130" and f.value("python.packages")["torchvision"] == "0.28.0+cu129"
    assert first_fail(table) == "torch-companions"
    freeze = "torch==2.1.0+cu121\ntorchaudio==2.1.0+cu121\ntorchvision==0.16.0+cu118\n"
    assert first_fail(freeze) == "torch-companions"
    # detectron2's table names the copy Python imports; it wins over a conda list row.
    d2 = ("torchvision               0.5.0                py36_cu100    pytorch\n"
          "PyTorch                1.4.0 @/envs/detectron2/lib/python3.6/site-packages/torch\n"
          "torchvision            0.2.1 @/envs/CenterNet/lib/python3.6/site-packages/torchvision\n")
    assert parse_text(d2).value("python.packages")["torchvision"] == "0.2.1"
    assert first_fail(d2) == "torch-companions"


def test_torchvision_and_torchaudio_refusals_name_both_cudas() -> None:
    vision = ("RuntimeError: Detected that PyTorch and torchvision were compiled with different CUDA major versions. "
              "PyTorch has CUDA Version=12.1 and torchvision has CUDA Version=11.8. Please reinstall the torchvision "
              "that matches your PyTorch install.")
    f = parse_text(vision)
    assert f.value("torch.companion_cuda") == {"torchvision": "11.8"} and f.value("torch.cuda_version") == "12.1"
    found = next(x for x in diagnose(f, load_registry(plugins=False)) if x.id == "torch-companions")
    assert found.status is Status.FAIL and "/whl/cu121" in found.remediation.commands[0]
    audio = ("RuntimeError: Detected that PyTorch and TorchAudio were compiled with different CUDA versions. PyTorch "
             "has CUDA version 11.7 whereas TorchAudio has CUDA version 11.6.")
    assert first_fail(audio) == "torch-companions"


def test_container_runtime_refusals_blame_the_host_driver() -> None:
    cli = ("docker: Error response from daemon: OCI runtime create failed: … nvidia-container-cli: requirement error: "
           "unsatisfied condition: cuda>=12.4, please update your driver to a newer version, or use an earlier cuda "
           "container: unknown.")
    f = parse_text(cli)
    assert f.value("container.cuda_requirement") == "12.4"
    found = next(x for x in diagnose(f, load_registry(plugins=False)) if x.id == "driver-too-old")
    assert found.status is Status.FAIL and "12.4" in found.title and "550.54" in found.detail  # CUDA 12.4 GA driver
    v1 = "$ nvidia-docker run --rm nvidia/cuda nvidia-smi\nnvidia-docker | 2016/04/09 00:07:59 Error: unsupported CUDA version: 7.5 < 6.5"
    assert first_fail(v1) == "driver-too-old" and parse_text(v1).value("cuda.driver_version") == 6050
    insufficient = "CUDA Error at onnx_to_trt.cpp:120 - CUDA driver version is insufficient for CUDA runtime version"
    assert first_fail(insufficient) == "driver-too-old"


def test_container_without_the_driver_is_blamed_on_the_container() -> None:
    ngc = ("WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available.\n"
           "   Use 'nvidia-docker run' to start this container; see\n")
    assert parse_text(ngc).value("host.container") == "docker" and first_fail(ngc) == "container-gpu"
    compose = ("Creating vqgan-clip-docker_generate_run ... done\nTraceback (most recent call last):\n"
               "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
               "installed a driver from http://www.nvidia.com/Download/index.aspx\n")
    assert first_fail(compose) == "container-gpu"
    selinux = "$ docker run --rm --runtime=nvidia nvidia/cuda nvidia-smi\nFailed to initialize NVML: Insufficient Permissions\n"
    assert first_fail(selinux) == "container-gpu"


def test_pythons_banner_names_the_platform() -> None:
    text = ("$ pip list | grep torch\ntorch      2.9.0+cpu\ntorchvision     0.24.0\n$ python\n"
            "Python 3.11.14 (main, Oct 10 2025, 08:54:03) [GCC 11.4.0] on linux\n")
    f = parse_text(text)
    assert f.value("host.os") == "Linux" and f.value("python.version") == "3.11.14"
    # PyPI's Linux torchvision 0.24.0 is a CUDA build; torch is +cpu.
    assert first_fail(text) == "torch-companions"


def test_repeated_gpu_lines_are_one_gpu_and_mixed_gpus_are_counted_apiece(tmp_path) -> None:
    import subprocess
    import sys

    loop = "$ kubectl logs smi-loop\n" + "GPU 0: NVIDIA A100-PCIE-40GB (UUID: GPU-551720f0-caf0-22b7-f525-2a51a6ab478d)\n" * 4
    assert len(parse_text(loop).value("nvml.gpus")) == 1
    mixed = tmp_path / "mixed.txt"
    mixed.write_text("PyTorch version: 1.9.0\nIs CUDA available: True\nGPU models and configuration:\n"
                     "GPU 0: GeForce RTX 2070 SUPER\nGPU 1: GeForce GTX 1070 Ti\nNvidia driver version: 460.32.03\n")
    out = subprocess.run([sys.executable, "-m", "envdoctor", "diagnose", str(mixed)], capture_output=True, text=True,
                         env={"NO_COLOR": "1", "COLUMNS": "200", "PATH": "/usr/bin:/bin"}).stdout
    assert "1× GeForce GTX 1070 Ti, 1× GeForce RTX 2070 SUPER" in out


def test_ngc_driver_check_and_nvidia_docker_wording() -> None:
    ngc = ("ERROR: This container was built for NVIDIA Driver Release 535.86 or later, but\n"
           "       version 510.85.02 was detected and compatibility mode is UNAVAILABLE.\n")
    f = parse_text(ngc)
    assert f.value("container.driver_requirement") == "535.86" and f.value("nvml.driver_version") == "510.85.02"
    assert first_fail(ngc) == "driver-too-old"
    v1 = "nvidia-docker | 2018/01/10 Error: unsupported CUDA version: driver 8.0 < image 9.0.176"
    assert parse_text(v1).value("container.cuda_requirement") == "9.0" and first_fail(v1) == "driver-too-old"
    nospace = "AssertionError: The NVIDIA driver on your system is too old(found version 8000)."
    assert parse_text(nospace).value("cuda.driver_version") == 8000


def test_error_35_is_the_driver_unless_the_container_asked_for_no_gpu() -> None:
    sample = "cudaGetDeviceCount returned 35\n-> CUDA driver version is insufficient for CUDA runtime version\n"
    assert first_fail(sample) == "driver-too-old"
    named = "CUDA error at deviceQuery.cpp:85 code=35(cudaErrorInsufficientDriver) \"cudaGetDeviceCount(&n)\""
    assert parse_text(named).value("cuda.init")["code"] == 35
    plain = ("$ docker run --rm -it fastertransformer:latest bash\n"
             "[ERROR] CUDA runtime error: CUDA driver version is insufficient for CUDA runtime version\n")
    f = parse_text(plain)
    assert f.value("container.gpus_requested") is False and first_fail(plain) == "container-gpu"
    asked = plain.replace("docker run --rm", "docker run --gpus all --rm")
    assert parse_text(asked).value("container.gpus_requested") is True and first_fail(asked) == "driver-too-old"


def test_a_domain_library_extension_missing_a_torch_symbol() -> None:
    text = ("OSError: /opt/conda/lib/python3.10/site-packages/torchaudio/lib/libtorchaudio.so: undefined symbol: "
            "_ZNK5torch8autograd4Node4nameB5cxx11Ev\n\ntorch-2.1.1\ntorchaudio-2.0.1\n")
    assert parse_text(text).value("python.packages") == {"torch": "2.1.1", "torchaudio": "2.0.1"}
    assert first_fail(text) == "torch-companions"
