"""Issue 21, round 2: the facts round 1 taught diagnose to read from a paste are judged.

Each cause below is a synthetic text written for this test (never a ticket's words), with a twin in prose, and its
negative twin (the healthy or ambiguous text the same check must not fail on):

* a ``CUDA_VISIBLE_DEVICES`` a command line sets (cuda-visible-devices), NCCL switches set in the text
  (launch-nccl-env) and a hang ``NCCL_P2P_DISABLE=1`` cures (nccl-p2p-acs);
* ``kubectl describe node``'s ``nvidia.com/gpu: 0`` (container-gpu);
* a ``docker run`` without ``--gpus`` beside CUDA seeing no GPU (container-gpu);
* TensorFlow >= 2.11 on native Windows (tensorflow-windows-gpu);
* a conda CPU build of pytorch (torch-cpu-build, from the build string);
* WSL 1 in ``wsl -l -v`` (wsl-version);
* "no kernel image" beside a GPU the installed torch has no kernels for (torch-arch-support).
"""

from __future__ import annotations

import pytest

from envdoctor.model import Facts, Finding, Status
from envdoctor.parsers import ParseError, parse_text, toollines
from envdoctor.parsers.packages import build_cuda
from envdoctor.parsers.prose import hang, tensorflow
from envdoctor.pipeline.diagnose import diagnose, sort_findings
from envdoctor.registry import load_registry

SMI_2 = ("$ nvidia-smi -L\n"
         "GPU 0: NVIDIA GeForce RTX 3090 (UUID: GPU-aaaaaaaa-1111-2222-3333-444444444444)\n"
         "GPU 1: NVIDIA GeForce RTX 3090 (UUID: GPU-bbbbbbbb-1111-2222-3333-444444444444)\n")
SMI_1 = "$ nvidia-smi -L\nGPU 0: NVIDIA GeForce RTX 3080 (UUID: GPU-cccccccc-1111-2222-3333-444444444444)\n"
NO_GPUS = "RuntimeError: No CUDA GPUs are available\n"


def _facts(text: str) -> Facts:
    return parse_text(text)


def _findings(text: str) -> list[Finding]:
    return sort_findings(diagnose(_facts(text), load_registry(plugins=False)))


def _top(text: str) -> Finding | None:
    return next((f for f in _findings(text) if f.status is Status.FAIL), None)


def _of(text: str, check_id: str) -> Finding:
    return next(f for f in _findings(text) if f.id == check_id)


def _cmds(finding: Finding) -> str:
    return " ".join([finding.remediation.text, *finding.remediation.commands])


# -- 1. CUDA_VISIBLE_DEVICES a command line sets --------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    SMI_2 + "$ CUDA_VISIBLE_DEVICES=2 python train.py\n" + NO_GPUS,
    SMI_2 + "$ export CUDA_VISIBLE_DEVICES=3\n$ python train.py\n",
])
def test_an_index_the_gpus_do_not_have_fails_cuda_visible_devices(text: str) -> None:
    top = _top(text)
    assert top is not None and top.id == "cuda-visible-devices", top
    assert "GPU 2" in top.title or "GPU 3" in top.title
    assert any("CUDA_VISIBLE_DEVICES" in c for c in top.remediation.commands)


@pytest.mark.parametrize("text", [
    # a tool lists what CUDA shows the process, after the variable: one device for CUDA_VISIBLE_DEVICES=1 is right
    "$ CUDA_VISIBLE_DEVICES=1 ./llama-server -m model.gguf\nggml_cuda_init: found 1 CUDA devices:\n"
    "  Device 0: NVIDIA GeForce RTX 3090, compute capability 8.6, VMM: yes\n",
    # prose names the cards it mentions, not how many the driver has
    "I have a 4090 and a second card.\n$ CUDA_VISIBLE_DEVICES=1 python train.py\n",
    # a shell variable is expanded when the command runs: unknown here
    SMI_2 + "$ CUDA_VISIBLE_DEVICES=$LOCAL_RANK python train.py\n" + NO_GPUS,
])
def test_a_count_that_is_not_the_drivers_or_an_unexpanded_value_is_no_visible_devices_failure(text: str) -> None:
    assert _of(text, "cuda-visible-devices").status not in (Status.FAIL, Status.WARN)


@pytest.mark.parametrize("value", ["-1", "", "NoDevFiles"])
def test_a_value_that_hides_every_gpu_beside_no_cuda_gpus_fails(value: str) -> None:
    top = _top(f"$ export CUDA_VISIBLE_DEVICES={value}\n$ python -c 'import torch; torch.zeros(1).cuda()'\n"
               + NO_GPUS)
    assert top is not None and top.id == "cuda-visible-devices"
    assert "hides every GPU" in top.title
    assert "unset CUDA_VISIBLE_DEVICES" in _cmds(top)


def test_a_value_that_hides_every_gpu_without_a_symptom_only_warns() -> None:
    finding = _of("$ CUDA_VISIBLE_DEVICES=-1 python eval_on_cpu.py\nepoch 1 loss 0.4\n", "cuda-visible-devices")
    assert finding.status is Status.WARN


def test_indices_the_gpus_have_are_ok_and_gpus_not_shown_skip() -> None:
    assert _of(SMI_2 + "$ CUDA_VISIBLE_DEVICES=0,1 python train.py\nepoch 1 loss 0.4\n",
               "cuda-visible-devices").status is Status.OK
    assert _of("$ CUDA_VISIBLE_DEVICES=1 python train.py\n" + NO_GPUS, "cuda-visible-devices").status is Status.SKIP


def test_a_later_index_that_does_not_exist_warns_not_fails() -> None:
    finding = _of(SMI_2 + "$ CUDA_VISIBLE_DEVICES=1,4 python train.py\n", "cuda-visible-devices")
    assert finding.status is Status.WARN
    assert "CUDA_VISIBLE_DEVICES=1" in _cmds(finding)


# -- 1b. NCCL switches and the P2P workaround ------------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    "Training with 4 A100 GPUs hangs forever at the first all_reduce in DDP.\n"
    "With NCCL_P2P_DISABLE=1 torchrun --nproc_per_node=4 train.py it runs fine.\n",
    "$ NCCL_P2P_DISABLE=1 torchrun --nproc_per_node=2 train.py\nepoch 1 loss 0.3\n"
    "Without the variable the job is stuck at the first barrier forever.\n",
])
def test_a_hang_that_nccl_p2p_disable_cures_is_the_acs_problem(text: str) -> None:
    top = _top(text)
    assert top is not None and top.id == "nccl-p2p-acs"
    assert any("setpci" in c for c in top.remediation.commands)
    assert _of(text, "launch-nccl-env").status is Status.WARN


def test_nccl_p2p_disable_without_a_hang_only_warns_that_it_slows_collectives() -> None:
    text = "$ NCCL_P2P_DISABLE=1 NCCL_IB_DISABLE=1 torchrun --nproc_per_node=2 train.py\nepoch 1 loss 0.3\n"
    assert _top(text) is None
    finding = _of(text, "launch-nccl-env")
    assert finding.status is Status.WARN and "NCCL_IB_DISABLE=1" in finding.detail
    assert _of(text, "nccl-p2p-acs").status is Status.SKIP


def test_a_hang_said_as_a_hypothesis_is_no_hang() -> None:
    assert hang(["If it hangs, set NCCL_P2P_DISABLE=1 and retry."]) is None
    assert hang(["The job hangs at the first all_reduce."]) == "The job hangs at the first all_reduce."
    assert hang(["[rank0] INFO stuck waiting"]) is None  # a log's line, not a person's


# -- 2. kubectl describe node --------------------------------------------------------------------------------------
NODE = ("$ kubectl describe node gpu-node-1\nName:               gpu-node-1\nCapacity:\n  cpu:                32\n"
        "  nvidia.com/gpu:     {cap}\nAllocatable:\n  cpu:                32\n  nvidia.com/gpu:     {alloc}\n"
        "System Info:\n  Kernel Version:     5.15.0-91-generic\n")


@pytest.mark.parametrize("cap,alloc", [(4, 0), (0, 0)])
def test_a_node_that_advertises_no_allocatable_gpu_fails_container_gpu(cap: int, alloc: int) -> None:
    text = NODE.format(cap=cap, alloc=alloc)
    assert _facts(text).value("text.node_gpus") == {"capacity": cap, "allocatable": alloc}
    top = _top(text)
    assert top is not None and top.id == "container-gpu"
    assert "device-plugin" in _cmds(top) and "nvidia.com/gpu" in top.title


def test_a_node_with_allocatable_gpus_is_no_failure_and_no_pass_of_container_gpu() -> None:
    """The node advertising GPUs does not show that this container got one: not a pass of that question."""
    text = NODE.format(cap=4, alloc=4)
    assert _facts(text).value("text.node_gpus") == {"capacity": 4, "allocatable": 4}
    assert _top(text) is None
    assert _of(text, "container-gpu").status is Status.SKIP
    pod = text + "$ kubectl logs mypod\n" + NO_GPUS
    assert _of(pod, "container-gpu").status is not Status.OK


# -- 3. a container started without GPUs ----------------------------------------------------------------------------
IMAGE = "pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime"


@pytest.mark.parametrize("text", [
    f"$ docker run -it --rm {IMAGE} python -c \"import torch; print(torch.cuda.is_available())\"\nFalse\n",
    f"$ docker run --rm -it {IMAGE} python train.py\n" + NO_GPUS,
    f"$ podman run --rm -it {IMAGE} python\n>>> import torch\n>>> torch.cuda.is_available()\nFalse\n",
    f"I start the image like this and CUDA is not there.\n$ docker run --rm -it {IMAGE} python train.py\n" + NO_GPUS,
])
def test_a_container_run_without_gpus_beside_no_cuda_fails_container_gpu(text: str) -> None:
    top = _top(text)
    assert top is not None and top.id == "container-gpu"
    assert top.title == "The container was started without GPUs"
    assert "--gpus all" in _cmds(top)


def test_a_container_run_with_gpus_is_not_this_cause() -> None:
    text = f"$ docker run --rm -it --gpus all {IMAGE} python train.py\n" + NO_GPUS
    assert _of(text, "container-gpu").status is not Status.FAIL
    text = f"$ docker run -it --rm --gpus all {IMAGE} python -c \"import torch; print(torch.cuda.is_available())\"\nTrue\n"
    assert _facts(text).value("torch.cuda_available") is True
    assert _top(text) is None


# -- 4. TensorFlow on native Windows ---------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    "OS: Windows 11\nTensorFlow version: 2.15.0\n>>> import tensorflow as tf\n"
    ">>> tf.config.list_physical_devices('GPU')\n[]\n",
    "I'm on Windows 10 with an RTX 3060 and TensorFlow 2.13.0 finds nothing.\n"
    "C:\\Users\\me> python -c \"import tensorflow as tf; print(tf.config.list_physical_devices('GPU'))\"\n[]\n",
    "PS C:\\work> pip install tensorflow[and-cuda]\nCollecting tensorflow[and-cuda]\n"
    "WARNING: tensorflow 2.16.1 does not provide the extra 'and-cuda'\nSuccessfully installed tensorflow-2.16.1\n",
])
def test_tensorflow_2_11_or_newer_on_native_windows_has_no_gpu(text: str) -> None:
    top = _top(text)
    assert top is not None and top.id == "tensorflow-windows-gpu"
    said = _cmds(top)
    assert "wsl --install" in said and "tensorflow<2.11" in said
    assert "https://www.tensorflow.org/install/pip#windows-native" in top.remediation.links


def test_tensorflow_2_10_on_windows_with_a_gpu_and_tensorflow_in_wsl_are_not_this_cause() -> None:
    text = ("OS: Windows 10\ntensorflow version: 2.10.1\n>>> tf.config.list_physical_devices('GPU')\n"
            "[PhysicalDevice(name='/physical_device:GPU:0', device_type='GPU')]\n")
    assert _facts(text).value("text.tensorflow_gpus") == 1
    assert _of(text, "tensorflow-windows-gpu").status is Status.OK
    text = "OS: Ubuntu 22.04 under WSL2\nTensorFlow version: 2.15.0\n>>> tf.config.list_physical_devices('GPU')\n[]\n"
    assert _of(text, "tensorflow-windows-gpu").status is Status.SKIP


def test_tensorflow_version_in_prose_is_read_only_when_stated() -> None:
    assert tensorflow(["We run TensorFlow 2.15 on the box."]) is not None
    assert tensorflow(["Should I downgrade to TensorFlow 2.10?"]) is None
    assert tensorflow(["I tried tensorflow 2.12 and tensorflow 2.13 already."]) is None
    # a hypothesis after the version does not undo the reporter's own ("… but every time I try to import …")
    assert tensorflow(["I am using TensorFlow both CPU and GPU version 2.8 but everytime I try to import it fails"]) \
        == ("2.8", "I am using TensorFlow both CPU and GPU version 2.8 but everytime I try to import it fails")
    assert tensorflow(["If I upgrade to TensorFlow 2.11 it breaks"]) is None


# -- 5. conda build strings -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,version,build,cuda", [
    ("pytorch", "2.1.0", "py3.10_cpu_0", None),
    ("pytorch", "2.1.0", "py3.10_cuda11.8_cudnn8.7.0_0", "11.8"),
    ("pytorch", "1.4.0", "py3.7_cuda10.1.243_cudnn7.6.3_0", "10.1"),
    ("pytorch", "2.3.1", "cpu_mkl_py311h3b9f5e0_100", None),
    ("pytorch", "2.0.0", "cpu_py310hd11e9c7_0", None),
    ("pytorch", "1.8.0", "cuda112py39h716d6ff_1", "11.2"),
    ("pytorch", "2.4.0", "cuda120_py311h2b0c1e5_300", "12.0"),
    ("pytorch", "2.6.0", "cuda126_mkl_py312h8a2f4f4_302", "12.6"),
    ("pytorch-mutex", "1.0", "cpu", None),
    ("cpuonly", "2.0", "0", None),
    ("pytorch-cuda", "11.8", "h7e8668a_5", "11.8"),
])
def test_conda_build_strings_say_what_torch_was_built_for(name: str, version: str, build: str,
                                                          cuda: str | None) -> None:
    said = build_cuda(name, version, build)
    assert said is not None and said[0] == cuda


def test_a_build_string_of_another_shape_says_nothing() -> None:
    assert build_cuda("pytorch", "2.1.0", "pyhd8ed1ab_0") is None
    assert build_cuda("pytorch-mutex", "1.0", "cuda") is None


@pytest.mark.parametrize("rows", [
    "pytorch                   2.1.0           py3.10_cpu_0    pytorch\n"
    "pytorch-mutex             1.0                         cpu    pytorch\n",
    "pytorch                   2.3.1           cpu_mkl_py311h3b9f5e0_100    conda-forge\n",
])
def test_a_conda_cpu_build_beside_a_gpu_fails_torch_cpu_build(rows: str) -> None:
    text = "$ conda list | grep torch\n" + rows + SMI_1
    facts = _facts(text)
    assert facts.get("torch.cuda_version").ok and facts.value("torch.cuda_version") is None
    top = _top(text)
    assert top is not None and top.id == "torch-cpu-build"


def test_a_conda_cuda_build_is_a_cuda_build() -> None:
    text = ("$ conda list | grep torch\n"
            "pytorch                   2.1.0           py3.10_cuda11.8_cudnn8.7.0_0    pytorch\n"
            "pytorch-cuda              11.8                 h7e8668a_5    pytorch\n" + SMI_1)
    assert _facts(text).value("torch.cuda_version") == "11.8"
    assert _top(text) is None
    assert _of(text, "torch-cpu-build").status is Status.OK


# -- 6. WSL 1 ---------------------------------------------------------------------------------------------------------
WSL_LIST = "PS C:\\> wsl -l -v\n  NAME            STATE           VERSION\n* Ubuntu-22.04    Running         {v}\n" \
           "  docker-desktop  Stopped         2\n"


@pytest.mark.parametrize("text", [
    WSL_LIST.format(v=1) + "$ nvidia-smi\nnvidia-smi: command not found\n",
    "$ uname -r\n4.4.0-19041-Microsoft\n$ nvidia-smi\nNVIDIA-SMI has failed because it couldn't communicate with the "
    "NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n",
])
def test_wsl_1_with_nvidia_smi_failing_fails_wsl_version(text: str) -> None:
    top = _top(text)
    assert top is not None and top.id == "wsl-version"
    assert any("--set-version" in c for c in top.remediation.commands)


def test_wsl_list_is_read_and_wsl_2_is_ok() -> None:
    facts = _facts(WSL_LIST.format(v=1))
    assert facts.value("text.wsl_distros")[0] == {"name": "Ubuntu-22.04", "state": "Running", "version": 1,
                                                   "default": True}
    assert _of(WSL_LIST.format(v=1), "wsl-version").status is Status.WARN  # WSL 1, but no GPU failure shown
    text = WSL_LIST.format(v=2) + SMI_1
    assert _of(text, "wsl-version").status is Status.OK
    assert _top(text) is None
    assert "wsl --set-version Ubuntu-22.04 2" in _cmds(_of(WSL_LIST.format(v=1), "wsl-version"))


# -- 7. no kernel image beside a GPU torch has no kernels for ------------------------------------------------------
@pytest.mark.parametrize("text", [
    ">>> import torch\n>>> torch.__version__\n'2.5.1+cu124'\n>>> torch.cuda.get_device_name(0)\n"
    "'NVIDIA GeForce RTX 5090'\n>>> torch.zeros(1, device=\"cuda\") + 1\n"
    "RuntimeError: CUDA error: no kernel image is available for execution on the device\n",
    "I just got an RTX 5090 and installed torch 2.5.1+cu124 with pip.\nTraceback (most recent call last):\n"
    "  File \"train.py\", line 12, in <module>\n    x = torch.randn(4, 4).cuda() @ w\n"
    "RuntimeError: CUDA error: no kernel image is available for execution on the device\n",
])
def test_no_kernel_image_beside_a_gpu_torch_lacks_fails_torch_arch_support(text: str) -> None:
    top = _top(text)
    assert top is not None and top.id == "torch-arch-support"
    assert "sm_120" in top.title


def test_a_gpu_whose_kernels_torch_carries_is_not_this_cause() -> None:
    # sm_89 runs torch 2.0.1+cu117's sm_86 kernels (one major): "no kernel image" there comes from something else.
    text = (">>> torch.__version__\n'2.0.1+cu117'\n>>> torch.cuda.get_device_name(0)\n'NVIDIA GeForce RTX 4090'\n"
            "RuntimeError: CUDA error: no kernel image is available for execution on the device\n")
    assert _of(text, "torch-arch-support").status is Status.OK


# -- healthy texts give no fail ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    SMI_2 + "$ CUDA_VISIBLE_DEVICES=1 python train.py\nepoch 1 loss 0.42\n",
    NODE.format(cap=8, alloc=8),
    f"$ docker run --rm --gpus all {IMAGE} nvidia-smi -L\n" + SMI_1.split("\n", 1)[1],
    WSL_LIST.format(v=2),
    "OS: Windows 10\ntensorflow version: 2.10.1\n>>> tf.config.list_physical_devices('GPU')\n"
    "[PhysicalDevice(name='/physical_device:GPU:0', device_type='GPU')]\n",
])
def test_healthy_texts_give_no_fail(text: str) -> None:
    assert _top(text) is None


def test_repeated_rows_inside_a_block_are_read() -> None:
    # Allocatable repeats Capacity's rows word for word: the reader keeps them (a log's repeats it drops).
    found = toollines.read(NODE.format(cap=2, alloc=2).splitlines())
    assert found.node == {"capacity": 2, "allocatable": 2}


@pytest.mark.parametrize("value,why", [("-1", "negative index"), ("", "empty"), ("NoDevFiles", "not a device index"),
                                       ("0,0", "twice")])
def test_the_finding_says_why_the_value_hides_every_gpu(value: str, why: str) -> None:
    finding = _of(f"$ export CUDA_VISIBLE_DEVICES={value}\n$ python train.py\n" + NO_GPUS, "cuda-visible-devices")
    assert finding.status is Status.FAIL and why in finding.detail


COMPOSE = ("$ cat docker-compose.yml\nservices:\n  trainer:\n    image: " + IMAGE + "\n    command: python train.py\n"
           "{gpu}    volumes:\n      - ./data:/data\n$ docker compose up\ntrainer-1  | " + NO_GPUS)
RESERVED = ("    deploy:\n      resources:\n        reservations:\n          devices:\n            - driver: nvidia\n"
            "              count: all\n              capabilities: [gpu]\n")


def test_a_compose_service_without_gpus_beside_no_cuda_fails_container_gpu() -> None:
    text = COMPOSE.format(gpu="")
    assert _facts(text).value("text.compose_gpus") is False
    top = _top(text)
    assert top is not None and top.id == "container-gpu" and "Compose" in top.title
    assert "capabilities: [gpu]" in _cmds(top)


@pytest.mark.parametrize("gpu", [RESERVED, "    runtime: nvidia\n", "    gpus: all\n"])
def test_a_compose_service_that_asks_for_gpus_is_not_this_cause(gpu: str) -> None:
    text = COMPOSE.format(gpu=gpu)
    assert _facts(text).value("text.compose_gpus") is True
    assert _of(text, "container-gpu").status is not Status.FAIL


def test_nccl_debug_in_a_paste_is_the_log_asked_for_not_a_setting_left_behind() -> None:
    text = "$ NCCL_DEBUG=INFO torchrun --nproc_per_node=2 train.py\nepoch 1 loss 0.3\n"
    assert _of(text, "launch-nccl-env").status is Status.SKIP


# -- the review's false alarms: each must not fail ------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    "I trained on 1080 images with torch 2.8.0+cu128 and it is slow.\n",   # a count, not a GTX 1080
    "I used a 1080 pixel image with torch 2.1.0+cu121.\n",
])
def test_a_number_in_prose_that_counts_something_is_no_gpu(text: str) -> None:
    facts = _facts(text)
    assert not facts.get("nvml.gpus").ok, facts.get("nvml.gpus")
    assert _of(text, "torch-arch-support").status is not Status.FAIL


@pytest.mark.parametrize("text", [
    "I fine-tune with the backbone frozen.\n$ NCCL_P2P_DISABLE=1 torchrun --nproc_per_node=2 train.py\n",
    "Even with NCCL_P2P_DISABLE=1 the training hangs at step 3.\n$ NCCL_P2P_DISABLE=1 torchrun train.py\n",
])
def test_frozen_layers_or_a_hang_despite_the_workaround_is_no_p2p_acs_failure(text: str) -> None:
    assert _of(text, "nccl-p2p-acs").status is not Status.FAIL



def test_a_blank_line_or_a_comment_between_compose_services_does_not_hide_a_gpu_request() -> None:
    compose = ("services:\n  web:\n    image: nginx\n\n  # the trainer gets the GPU\n  trainer:\n"
               "    image: pytorch/pytorch\n    deploy:\n      resources:\n        reservations:\n          devices:\n"
               "            - driver: nvidia\n              count: all\n              capabilities: [gpu]\n")
    assert _facts(compose).value("text.compose_gpus") is True


def test_ollama_started_twice_names_its_gpu_once() -> None:
    line = ('time=2025-01-0{n}T10:00:00Z level=INFO source=types.go:131 msg="inference compute" id=GPU-abc '
            'library=cuda variant=v12 compute=8.6 driver=12.4 name="NVIDIA GeForce RTX 3090" total="24.0 GiB" '
            'available="23.1 GiB"\n')
    facts = _facts(line.format(n=1) + line.format(n=2))
    assert facts.value("nvml.device_count") == 1 and len(facts.value("nvml.gpus")) == 1


@pytest.mark.parametrize("driver", ["470.82.01", "450.80.02", "535.104.05", "550.54.14"])
def test_a_cpu_torchs_reinstall_pins_a_version_its_cuda_index_carries(driver: str) -> None:
    """A driver too old for the newest release's wheels gets an older release's variant: the pin is that release's
    patch, never the newest torch from an index that does not carry it."""
    import re

    from envdoctor.knowledge import compat

    text = (f"NVIDIA-SMI {driver}    Driver Version: {driver}    CUDA Version: 11.0\ntorch 2.5.1+cpu\n"
            "AssertionError: Torch not compiled with CUDA enabled\n")
    cmds = " ".join(_of(text, "torch-cpu-build").remediation.command_lines())
    m = re.search(r"torch==(\d+\.\d+)\.\d+\S* --index-url https://download.pytorch.org/whl/(cu\d+)", cmds)
    assert m, cmds
    assert m.group(2) in compat.release_variants(m.group(1)), cmds
    assert "torch None" not in _of(text, "torch-cpu-build").detail


_OLD_WINDOWS = ("### Microsoft Windows [Version 10.0.{build}.292]\n\n#### Ubuntu app WSL:\nand still when using "
                "nvidia-smi I get :\n```\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                "Make sure that the latest NVIDIA driver is installed and running.\n```\n")


def test_a_windows_build_before_wsl_2_is_wsl_1_without_a_gpu() -> None:
    from envdoctor.pipeline.diagnose import diagnose, sort_findings
    from envdoctor.registry import load_registry

    registry = load_registry(plugins=False)
    facts = parse_text(_OLD_WINDOWS.format(build="17763"))
    assert facts.value("host.windows_build") == 17763
    top = sort_findings(diagnose(facts, registry))[0]
    assert top.id == "wsl-version" and top.status.value == "fail" and "17763" in top.title
    # a build that runs WSL 2 says nothing about the WSL version; nor does an old build in a text without WSL
    newer = {f.id: f for f in diagnose(parse_text(_OLD_WINDOWS.format(build="19045")), registry)}
    assert newer["wsl-version"].status.value == "skip"
    native = _OLD_WINDOWS.format(build="17763").replace("Ubuntu app WSL", "Command prompt")
    assert {f.id: f for f in diagnose(parse_text(native), registry)}["wsl-version"].status.value == "skip"


def test_wsl_s_issue_template_build_field_is_read() -> None:
    facts = parse_text("Windows build number: Microsoft Windows [Version 10.0.18363.1440\nWSL 2\n")
    assert facts.value("host.windows_build") == 18363


@pytest.mark.parametrize(("rows", "version", "cuda"), [
    ("  cpu-only           pytorch/linux-64::cpu-only-1.0-0\n"
     "  pytorch-nightly    pytorch/linux-64::pytorch-nightly-1.0.0.dev20190311-py3.7_cpu_0\n",
     "1.0.0.dev20190311", None),
    ("  cpuonly            pytorch/noarch::cpuonly-2.0-0\n"
     "  pytorch            pytorch/linux-64::pytorch-2.0.1-py3.10_cpu_0\n", "2.0.1", None),
    ("  pytorch            pytorch/linux-64::pytorch-2.0.1-py3.10_cuda11.8_cudnn8.7.0_0\n"
     "  pytorch-cuda       pytorch/linux-64::pytorch-cuda-11.8-h7e8668a_5\n", "2.0.1", "11.8"),
    ("  pytorch            pytorch/linux-64::pytorch-1.13.1-py3.9_cuda11.7_cudnn8.5.0_0 --> "
     "pytorch/linux-64::pytorch-2.0.1-py3.10_cpu_0\n", "2.0.1", None),
    ("    pytorch:         1.0.0-py3.7_cpu_0 pytorch\n    cpuonly:         1.0-0       pytorch\n", "1.0.0", None),
])
def test_conda_s_transaction_plan_says_which_torch_build_it_installs(rows: str, version: str, cuda: str | None) -> None:
    text = f"The following NEW packages will be INSTALLED:\n\n{rows}\nProceed ([y]/n)? y\n"
    facts = parse_text(text)
    assert facts.value("torch.version") == version
    assert facts.get("torch.cuda_version").ok and facts.value("torch.cuda_version") == cuda


def test_a_dll_error_a_rich_logger_wrapped_is_the_loader_s_and_explained() -> None:
    text = ('2024-09-13 10:46:18 ERROR    Error loading                                            __init__.py:127\n'
            '                             "D:\\kohya_ss\\venv\\lib\\site-packages\\torch\\lib\\fbgemm.dll" or one\n'
            '                             of its dependencies.\n')
    found = sort_findings(diagnose(parse_text(text), load_registry(plugins=False)))
    assert found[0].id == "loader-library" and found[0].status is Status.FAIL and "fbgemm.dll" in found[0].title
    assert not [f for f in found if f.id == "unexplained-error" and f.status is not Status.SKIP]
    # the first line alone names no DLL: nothing is made up from it
    alone = parse_text("2024-09-13 10:46:18 ERROR    Error loading                     __init__.py:127\nOSError: boom\n")
    assert not alone.get("torch.loader_failures").ok


@pytest.mark.parametrize(("line", "value"), [
    ("Run 'CUDA_VISIBLE_DEVICES=5 python3 train.py'", "5"),
    ("When I added os.environ['CUDA_VISIBLE_DEVICES']='1' in train.py, the code will always use cuda:0", "1"),
    ('os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"', "0,1"),
])
def test_a_device_list_set_in_a_sentence_or_in_python_is_read(line: str, value: str) -> None:
    facts = parse_text(line + "\n")
    assert facts.value("text.env_assignments") == {"CUDA_VISIBLE_DEVICES": value}


def test_a_variable_that_is_not_the_stack_s_own_is_not_read_from_a_sentence() -> None:
    with pytest.raises(ParseError):
        parse_text("I set MY_DEVICE_NAME=foo in the config and it still fails\n")


def test_the_interpreter_s_folder_in_a_traceback_says_its_python() -> None:
    frame = '  File "/root/miniconda3/lib/python3.8/site-packages/torch/distributed/distributed_c10d.py", line 3505\n'
    assert parse_text(frame).value("python.version") == "3.8"
    windows = '  File "C:\\Users\\me\\AppData\\Local\\Programs\\Python\\Python310\\lib\\site-packages\\torch\\__init__.py"\n'
    assert parse_text(windows).value("python.version") == "3.10"
    # two interpreters in one text: neither is the one
    both = frame + frame.replace("python3.8", "python3.11")
    with pytest.raises(ParseError):
        parse_text(both)
    # a stated version wins over the folder
    assert parse_text("Python version: 3.8.10\n" + frame).value("python.version") == "3.8.10"


def test_a_kubeflow_step_runs_in_a_pod_so_its_shm_remedy_is_the_pod_s() -> None:
    text = ("I deployed a pipeline to Kubeflow from my local computer\n"
            "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory "
            "(shm).\n")
    facts = parse_text(text)
    assert facts.value("host.container") == "kubernetes"
    top = sort_findings(diagnose(facts, load_registry(plugins=False)))[0]
    assert top.id == "dataloader-shm" and any("emptyDir" in c for c in top.remediation.command_lines())
    # the word alone in another sense is no container ("kubeflow-like" is still the name; a plain text is not)
    assert not parse_text("torch: 2.1.0\nI run it on my laptop\n").get("host.container").ok


def test_a_syslog_line_s_escaped_newlines_are_the_kernel_message_s_lines() -> None:
    text = ("Jun 30 11:07:05 gpu-0 kernel: NVRM: API mismatch: the client has the version 535.54.03, but#012NVRM: "
            "this kernel module has the version 530.30.02.  Please#012NVRM: make sure that this kernel module and all "
            "NVIDIA driver#012NVRM: components have the same version.\n")
    top = sort_findings(diagnose(parse_text(text), load_registry(plugins=False)))[0]
    assert top.id == "driver-version-mismatch" and top.status is Status.FAIL
    # "#012" elsewhere (a colour, an issue number) is left alone
    assert parse_text("torch: 2.1.0\ncolor: #012345\n").value("torch.version") == "2.1.0"


def test_a_notebook_s_json_error_output_is_read_unescaped_and_its_source_listing_is_no_error() -> None:
    text = ('{"name": "OSError",\n'
            '\t"message": "[WinError 126] The specified module could not be found. Error loading '
            '\\"c:\\\\Users\\\\me\\\\envs\\\\DL\\\\Lib\\\\site-packages\\\\torch\\\\lib\\\\fbgemm.dll\\" or one of its '
            'dependencies.",\n'
            "File c:\\\\Users\\\\me\\\\envs\\\\DL\\\\Lib\\\\site-packages\\\\torch\\\\__init__.py:148\n"
            "    147                 err.strerror += f' Error loading \\\"{dll}\\\" or one of its dependencies.'\n"
            "--> 148                 raise err\n")
    found = sort_findings(diagnose(parse_text(text), load_registry(plugins=False)))
    assert found[0].id == "loader-library" and "fbgemm.dll" in found[0].title
    assert not [f for f in found if f.id == "unexplained-error" and f.status is not Status.SKIP]


def test_cuda_unavailable_with_torch_s_build_unshown_is_a_warning_not_a_guess() -> None:
    text = ">>> import torch\n>>> torch.cuda.is_available()\nFalse\n"
    found = {f.id: f for f in diagnose(parse_text(text), load_registry(plugins=False))}
    assert found["torch-cuda-available"].status is Status.WARN
    assert "does not show why" in found["torch-cuda-available"].title
    # with torch's CPU tag shown, the build is known: torch-cpu-build's to judge, no guess here
    cpu = {f.id: f for f in diagnose(parse_text("torch: 2.1.0+cpu\n" + text), load_registry(plugins=False))}
    assert cpu["torch-cuda-available"].status is Status.SKIP


_PER_TASK = ("RuntimeError: CUDA error: invalid device ordinal\n"
             "#!/bin/bash\n#SBATCH --ntasks-per-node=8\n#SBATCH --gpus-per-task=1\nsrun python train.py --distributed\n")


def test_an_invalid_ordinal_under_gpus_per_task_is_the_task_s_own_gpu_binding() -> None:
    top = sort_findings(diagnose(parse_text(_PER_TASK), load_registry(plugins=False)))[0]
    assert top.id == "launch-ranks" and top.status is Status.FAIL and "Slurm task" in top.title
    assert any("--gpus-per-node" in c for c in top.remediation.command_lines())
    # without the directive it stays the generic one-rank-per-GPU finding
    plain = sort_findings(diagnose(parse_text(_PER_TASK.replace("#SBATCH --gpus-per-task=1\n", "")),
                                   load_registry(plugins=False)))[0]
    assert plain.id == "launch-ranks" and "Slurm task" not in plain.title
    assert parse_text("srun --gpus-per-task 2 python x.py\nRuntimeError: CUDA error: invalid device ordinal\n").value(
        "launch.slurm_gpus_per_task") == "srun --gpus-per-task 2 python x.py"


_PIP_NONE = ("ERROR: Could not find a version that satisfies the requirement torch (from versions: none)\n"
             "ERROR: No matching distribution found for torch\n"
             "PyTorch version: N/A\nIs debug build: N/A\nCUDA used to build PyTorch: N/A\n"
             "OS: Ubuntu 23.04 (x86_64)\nPython version: {py} (main, Oct  3 2023, 08:43:22) [GCC 12.3.0] (64-bit runtime)\n"
             "Python platform: Linux-6.2.0-37-generic-x86_64-with-glibc2.37\nIs CUDA available: N/A\n")


def test_pip_finding_no_torch_for_a_python_torch_supports_says_when_and_what_else_it_can_be() -> None:
    found = sort_findings(diagnose(parse_text(_PIP_NONE.format(py="3.12.0")), load_registry(plugins=False)))
    assert found[0].id == "python-supported" and found[0].status is Status.FAIL
    assert "from 2.2 on" in found[0].title and "pip install -U pip" in " ".join(found[0].remediation.command_lines())
    # torch is not installed, not broken: no "reinstall torch" beside it
    assert not [f for f in found if f.id == "torch-import" and f.status is Status.FAIL]


def test_pip_finding_no_torch_for_a_python_no_torch_supports_is_that_python() -> None:
    found = sort_findings(diagnose(parse_text(_PIP_NONE.format(py="3.99.0")), load_registry(plugins=False)))
    assert found[0].id == "python-supported" and found[0].status is Status.FAIL and "3.99" in found[0].title


def test_pip_finding_no_other_package_is_said_but_not_torch_s() -> None:
    text = "ERROR: Could not find a version that satisfies the requirement flash-attn (from versions: none)\n"
    found = sort_findings(diagnose(parse_text(text), load_registry(plugins=False)))
    assert not [f for f in found if f.id == "python-supported" and f.status is not Status.SKIP]
    assert [f for f in found if f.id == "known-message" and f.status is Status.WARN]


def test_a_library_error_in_a_text_that_installs_one_framework_gets_that_framework_s_remedy() -> None:
    text = ("**ONNX Runtime Installation**: pip install onnxruntime-gpu==1.5.1\n"
            "**_Error_**: **OSError: libcudnn.so.8: cannot open shared object file: No such file or directory**\n")
    facts = parse_text(text)
    assert facts.value("text.frameworks") == {"onnxruntime-gpu": "1.5.1"}
    top = sort_findings(diagnose(facts, load_registry(plugins=False)))[0]
    assert top.id == "loader-library" and "onnxruntime" in top.remediation.text
    # a line that installs torch as well says nothing about whose the error is
    both = parse_text(text.replace("onnxruntime-gpu==1.5.1", "torch==2.1.0 onnxruntime-gpu==1.5.1"))
    assert not both.get("text.frameworks").ok
