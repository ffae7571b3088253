"""Pasted-report parsing: the fact keys a live probe writes, from every collect_env layout,
nvidia-smi, and the mess real pastes come in; anything unreadable is a ParseError."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from envdoctor.inputs import decode
from envdoctor.knowledge.versions import cuda_to_int as cuda_api_int
from envdoctor.knowledge.versions import cudnn_to_int as cudnn_int
from envdoctor.model import Facts, Reason
from envdoctor.parsers import MAX_CHARS, ParseError, detect_formats, parse_text

CORPUS = Path(__file__).resolve().parent / "corpus"

# A torch 2.x report written for these tests in collect_env's exact layout (pretty_str output).
CLASSIC = """\
Collecting environment information...
PyTorch version: 2.6.0+cu126
Is debug build: False
CUDA used to build PyTorch: 12.6
ROCM used to build PyTorch: N/A

OS: Ubuntu 22.04.4 LTS (x86_64)
GCC version: (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0
Clang version: Could not collect
CMake version: version 3.22.1
Libc version: glibc-2.35

Python version: 3.11.9 (main, Apr 19 2024, 16:48:06) [GCC 11.2.0] (64-bit runtime)
Python platform: Linux-5.15.0-91-generic-x86_64-with-glibc2.35
Is CUDA available: True
CUDA runtime version: 12.4.131
CUDA_MODULE_LOADING set to: LAZY
GPU models and configuration: 
GPU 0: NVIDIA GeForce RTX 5090
GPU 1: NVIDIA GeForce RTX 5090

Nvidia driver version: 570.124.06
cuDNN version: Probably one of the following:
/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0
/usr/lib/x86_64-linux-gnu/libcudnn_adv.so.9.1.0
/usr/local/cuda-11.8/lib64/libcudnn.so.8.6.0
HIP runtime version: N/A
MIOpen runtime version: N/A
Is XNNPACK available: True

CPU:
Architecture:                         x86_64
Model name:                           AMD Ryzen 9 7950X 16-Core Processor

Versions of relevant libraries:
[pip3] numpy==1.26.4
[pip3] nvidia-cudnn-cu12==9.5.1.17
[pip3] torch==2.6.0+cu126
[pip3] torchvision==0.21.0+cu126
[conda] pytorch-cuda              12.1                 ha16c6d3_5    pytorch
[conda] torchaudio                2.1.0               py311_cu121    pytorch
"""

SMI = """\
Fri Jul 18 14:53:48 2025
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.153.02             Driver Version: 570.153.02     CUDA Version: 12.8     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA GeForce RTX 5090        Off |   00000000:41:00.0  On |                  N/A |
|  0%   47C    P1             61W /  575W |     765MiB /  32607MiB |      1%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+
|   1  NVIDIA GeForce RTX 4090        Off |   00000000:42:00.0 Off |                  Off |
|  0%   40C    P8             20W /  450W |       2MiB /  24564MiB |      0%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+

+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|    0   N/A  N/A            1234      C   python                                  750MiB |
+-----------------------------------------------------------------------------------------+
"""


def _value(facts: Facts, key: str):  # type: ignore[no-untyped-def]
    reading = facts.get(key)
    assert reading.ok, f"{key}: {reading.describe()}"
    from envdoctor.model import thaw

    return thaw(reading.value)


def test_classic_report_maps_to_probe_keys() -> None:
    facts = parse_text(CLASSIC)
    assert _value(facts, "torch.version") == "2.6.0+cu126"
    assert _value(facts, "torch.cuda_version") == "12.6"
    assert _value(facts, "torch.cuda_available") is True
    assert _value(facts, "torch.debug") is False
    assert _value(facts, "torch.hip_version") is None
    assert _value(facts, "python.version") == "3.11.9"
    assert _value(facts, "host.os") == "Linux"
    assert _value(facts, "host.distro") == "Ubuntu 22.04.4 LTS"
    assert _value(facts, "host.arch") == "x86_64"
    assert _value(facts, "host.glibc") == "2.35"
    assert _value(facts, "host.kernel") == "5.15.0-91-generic"
    assert _value(facts, "nvml.driver_version") == "570.124.06"
    assert _value(facts, "nvml.device_count") == 2
    assert _value(facts, "nvml.gpus") == [{"index": 0, "name": "NVIDIA GeForce RTX 5090"},
                                          {"index": 1, "name": "NVIDIA GeForce RTX 5090"}]
    # No capability in the text, so none is invented.
    assert _value(facts, "torch.devices")[0] == {"index": 0, "name": "NVIDIA GeForce RTX 5090"}
    # "CUDA runtime version" is nvcc's: the toolkit, not the runtime.
    assert _value(facts, "toolkit.nvcc_version") == "12.4.131"
    packages = _value(facts, "python.packages")
    assert packages["torch"] == "2.6.0+cu126" and packages["nvidia-cudnn-cu12"] == "9.5.1.17"
    assert packages["pytorch-cuda"] == "12.1" and packages["torchaudio"] == "2.1.0"
    copies = _value(facts, "libs.cudnn_copies")
    assert [(c["path"], c["version"]) for c in copies] == [
        ("/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0", "9.1.0"),
        ("/usr/local/cuda-11.8/lib64/libcudnn.so.8.6.0", "8.6.0")]
    # collect_env's cuDNN line is a file search, never the cuDNN torch loaded.
    assert facts.get("torch.cudnn_version").reason is Reason.NOT_IN_REPORT
    assert facts.get("nvml.cuda_driver_version").reason is Reason.NOT_IN_REPORT
    assert detect_formats(CLASSIC) == ["collect_env"]


def test_could_not_collect_is_a_failed_read_but_means_cpu_build_for_cuda() -> None:
    text = CLASSIC.replace("CUDA used to build PyTorch: 12.6", "CUDA used to build PyTorch: Could not collect") \
        .replace("Nvidia driver version: 570.124.06", "Nvidia driver version: Could not collect")
    facts = parse_text(text)
    assert facts.get("torch.cuda_version").ok and facts.get("torch.cuda_version").value is None
    driver = facts.get("nvml.driver_version")
    assert driver.reason is Reason.FAILED and driver.detail == "Could not collect"


def test_old_layout_yes_no_and_single_line_gpu() -> None:
    text = ("PyTorch version: 1.0.0\nIs debug build: No\nCUDA used to build PyTorch: 9.0.176\n\n"
            "OS: Ubuntu 16.04.5 LTS\nPython version: 3.6\nIs CUDA available: Yes\n"
            "GPU models and configuration: GPU 0: GeForce GTX 1080 Ti\nNvidia driver version: 390.48\n"
            "cuDNN version: /usr/lib/x86_64-linux-gnu/libcudnn.so.7.1.2\n\n"
            "Versions of relevant libraries:\n[pip] numpy (1.14.3)\n[pip] torch (1.0.0)\n")
    facts = parse_text(text)
    assert _value(facts, "torch.cuda_available") is True
    assert _value(facts, "torch.debug") is False
    assert _value(facts, "torch.cuda_version") == "9.0.176"
    assert _value(facts, "python.version") == "3.6"
    assert _value(facts, "nvml.gpus") == [{"index": 0, "name": "GeForce GTX 1080 Ti"}]
    assert _value(facts, "python.packages") == {"numpy": "1.14.3", "torch": "1.0.0"}
    assert _value(facts, "libs.cudnn_copies")[0]["version"] == "7.1.2"


def test_vllm_sectioned_variant() -> None:
    text = ("INFO 06-20 12:32:13 [__init__.py:244] Automatically detected platform cuda.\n"
            "Collecting environment information...\n==============================\n        System Info\n"
            "==============================\nOS                           : Ubuntu 22.04.5 LTS (x86_64)\n"
            "Libc version                 : glibc-2.35\n\n==============================\n       PyTorch Info\n"
            "==============================\nPyTorch version              : 2.7.0+cu128\n"
            "CUDA used to build PyTorch   : 12.8\n==============================\n       CUDA / GPU Info\n"
            "==============================\nIs CUDA available            : True\n"
            "GPU models and configuration :\nGPU 0: NVIDIA H100 80GB HBM3\nGPU 1: NVIDIA H100 80GB HBM3\n\n"
            "Nvidia driver version        : 570.133.20\n==============================\n         vLLM Info\n"
            "==============================\nvLLM Version                 : 0.9.1\n"
            "==============================\n     Environment Variables\n==============================\n"
            "NCCL_CUMEM_ENABLE=0\nCUDA_VISIBLE_DEVICES=0,1\n")
    facts = parse_text(text)
    assert _value(facts, "torch.version") == "2.7.0+cu128"
    assert _value(facts, "nvml.device_count") == 2
    assert _value(facts, "nvml.driver_version") == "570.133.20"
    assert _value(facts, "python.packages") == {"vllm": "0.9.1"}
    assert _value(facts, "env.vars") == {"NCCL_CUMEM_ENABLE": "0", "CUDA_VISIBLE_DEVICES": "0,1"}


def test_nvidia_smi_table() -> None:
    facts = parse_text(SMI)
    assert detect_formats(SMI) == ["nvidia-smi"]
    assert _value(facts, "nvml.driver_version") == "570.153.02"
    assert _value(facts, "nvml.cuda_driver_version") == 12080
    gpus = _value(facts, "nvml.gpus")
    assert [(g["index"], g["name"], g["memory_total"]) for g in gpus] == [
        (0, "NVIDIA GeForce RTX 5090", 32607 << 20), (1, "NVIDIA GeForce RTX 4090", 24564 << 20)]
    assert gpus[0]["processes"] == [{"pid": 1234, "type": "C", "name": "python", "memory_used": 750 << 20}]
    assert _value(facts, "nvml.device_count") == 2
    assert facts.get("torch.version").reason is Reason.NOT_IN_REPORT


def test_nvidia_smi_failure_is_a_failed_reading() -> None:
    facts = parse_text("$ nvidia-smi\nFailed to initialize NVML: Driver/library version mismatch\n"
                       "NVML library version: 570.124\n")
    reading = facts.get("nvml.driver_version")
    assert reading.reason is Reason.FAILED
    assert "Driver/library version mismatch" in reading.detail and "570.124" in reading.detail


def test_both_reports_in_one_paste_merge() -> None:
    facts = parse_text(CLASSIC + "\n" + SMI)
    assert _value(facts, "torch.version") == "2.6.0+cu126"
    assert _value(facts, "nvml.cuda_driver_version") == 12080
    assert _value(facts, "nvml.gpus")[0]["memory_total"] == 32607 << 20


def test_capability_warning_feeds_devices_and_arch_list() -> None:
    warning = ("/x/torch/cuda/__init__.py:235: UserWarning:\n"
               "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch "
               "installation.\nThe current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 "
               "sm_86 sm_90.\n")
    facts = parse_text(warning + CLASSIC)
    assert _value(facts, "torch.arch_list") == ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
    assert _value(facts, "torch.devices")[0]["capability"] == [12, 0]
    assert _value(facts, "nvml.gpus")[1]["compute_capability"] == "12.0"


def test_driver_too_old_message_gives_driver_cuda_version() -> None:
    text = ("UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 11040).\n"
            + CLASSIC.replace("Is CUDA available: True", "Is CUDA available: False"))
    facts = parse_text(text)
    assert _value(facts, "cuda.driver_version") == 11040
    assert _value(facts, "torch.devices") == []
    assert any("too old" in m for m in _value(facts, "torch.cuda_available_messages"))


@pytest.mark.parametrize("mangle", [
    pytest.param(lambda t: t.replace("\n", "\r\n"), id="crlf"),
    pytest.param(lambda t: "```text\n" + t + "```\n", id="fenced"),
    pytest.param(lambda t: "".join("> " + ln for ln in t.splitlines(True)), id="quoted"),
    pytest.param(lambda t: "<details>\n<summary>collect_env</summary>\n\n" + t + "\n</details>\n", id="details"),
    pytest.param(lambda t: "Traceback warnings first\nUserWarning: something\n" + t, id="warnings-before"),
    pytest.param(lambda t: t.replace("Ubuntu", "Ubuntu\ufffd"), id="replacement-chars"),
])
def test_robust_to_paste_mangling(mangle) -> None:  # type: ignore[no-untyped-def]
    facts = parse_text(mangle(CLASSIC))
    assert _value(facts, "torch.version") == "2.6.0+cu126"
    assert _value(facts, "nvml.device_count") == 2
    assert _value(facts, "python.packages")["torch"] == "2.6.0+cu126"


def test_truncated_report_keeps_what_it_has() -> None:
    cut = CLASSIC[: CLASSIC.index("Nvidia driver version") + len("Nvidia driver version: ")]
    facts = parse_text(cut)
    assert _value(facts, "torch.version") == "2.6.0+cu126"
    assert facts.get("nvml.driver_version").reason is Reason.NOT_IN_REPORT
    assert facts.get("python.packages").reason is Reason.NOT_IN_REPORT
    assert facts.get("libs.cudnn_copies").reason is Reason.NOT_IN_REPORT


def test_utf16_bytes_decode() -> None:
    # PowerShell's `>` writes UTF-16 with a BOM.
    facts = parse_text(decode(CLASSIC.encode("utf-16")))
    assert _value(facts, "torch.version") == "2.6.0+cu126"
    assert decode(b"PyTorch version: 2.1\xff\n").endswith("\ufffd\n")


@pytest.mark.parametrize("text", ["", "   \n\t\n"], ids=["empty", "blank"])
def test_empty_input_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="empty"):
        parse_text(text)


@pytest.mark.parametrize("text", [
    "hello world\nthis is not a report\n",
    "".join(chr(c % 55000 + 1) for c in range(0, 5000, 7)),
    "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
], ids=["prose", "unicode-noise", "binary"])
def test_garbage_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_text(text)
    assert "\n" not in str(info.value)


def test_non_text_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_text(b"PyTorch version: 2.6.0")  # type: ignore[arg-type]


def test_huge_input_is_bounded() -> None:
    start = time.perf_counter()
    with pytest.raises(ParseError, match="MB"):
        parse_text("x" * (MAX_CHARS + 1))
    big = CLASSIC + ("[pip3] pkg==1.0\n" * 50_000) + ("a" * 200_000 + "\n") * 5
    facts = parse_text(big)
    assert _value(facts, "torch.version") == "2.6.0+cu126"
    assert time.perf_counter() - start < 10


def test_version_encodings() -> None:
    assert cuda_api_int("12.8") == 12080 and cuda_api_int("11.4") == 11040 and cuda_api_int("x") is None
    assert cudnn_int("9.1.0") == 90100 and cudnn_int("8.9.2") == 8902 and cudnn_int("9") == 90000


def test_facts_round_trip_as_json() -> None:
    facts = parse_text(CLASSIC + SMI)
    assert Facts.from_dict(json.loads(json.dumps(facts.to_dict()))).to_dict() == facts.to_dict()


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.txt")), ids=lambda p: p.name)
def test_corpus_files_parse_and_keep_their_shape(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    facts = parse_text(text)
    again = parse_text(text.replace("\n", "\r\n"))
    assert again.to_dict() == facts.to_dict()


def test_nvidia_smi_failure_becomes_the_nvml_init_fact_live_probes_write():
    from envdoctor.parsers import parse_text

    facts = parse_text("$ nvidia-smi\nFailed to initialize NVML: Driver/library version mismatch\n"
                       "NVML library version: 570.124\n")
    init = facts["nvml.init"].value
    assert init["code"] == 18 and init["name"] == "NVML_ERROR_LIB_RM_VERSION_MISMATCH"
    facts = parse_text("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                       "Make sure that the latest NVIDIA driver is installed and running.\n")
    assert facts["nvml.init"].value["code"] == 9


def test_typographic_quotes_and_a_docker_prompt_are_understood():
    from envdoctor.parsers import parse_text

    facts = parse_text("root@098b49afe624:/# nvidia-smi\nNVIDIA-SMI has failed because it couldn\u2018t communicate "
                       "with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n")
    assert facts["nvml.init"].value["code"] == 9
    assert facts["host.container"].value == "docker" and "098b49afe624" in facts["host.container"].detail
    plain = parse_text("user@gpu-node-3:~$ nvidia-smi\nFailed to initialize NVML: Unknown Error\n")
    assert plain.get("host.container").reason is not None  # an ordinary host name says nothing


def test_a_pasted_nvml_failure_has_the_reason_of_the_error_table() -> None:
    """What nvidia-smi prints for an NVML failure gets the reason errors.json gives its code, the same
    one a live probe would report (the parser keeps no map of its own)."""
    from envdoctor.knowledge import errors
    from envdoctor.parsers import nvidia_smi

    for words, code, name in errors.nvml_printed():
        init = nvidia_smi.parse([f"Failed to initialize NVML: {words}"])["nvml.init"].value
        assert init["code"] == code and init["name"] == name
        assert init["reason"] == (errors.nvml()[code].reason or "failed"), words
