"""Issue 21 (reading): what a real paste says is read, and only a text in which nothing is read is refused.

Every text here is written for the test in the shape the tool or the person prints it (the tools' lines from
their format strings, cited in envdoctor/parsers/toollines.py), alone and inside prose; the guards of prose
statements (two versions, a negation, a question, a word that is no GPU) state nothing; healthy tool logs give no
fail.
"""

from __future__ import annotations

from typing import Any

import pytest

from envdoctor.model import Status
from envdoctor.output.examined import Examined
from envdoctor.parsers import ParseError, parse_text
from envdoctor.pipeline.diagnose import diagnose, sort_findings
from envdoctor.registry import load_registry

HEAD = "Hello, after a reboot my job behaves oddly and I could use a hand. This is what it prints:\n\n"
TAIL = "\n\nThanks in advance, happy to send more output if it helps.\n"

LLAMA = ("ggml_cuda_init: GGML_CUDA_FORCE_MMQ:    no\n"
         "ggml_cuda_init: found 2 CUDA devices:\n"
         "  Device 0: NVIDIA GeForce RTX 4070, compute capability 8.9, VMM: yes\n"
         "  Device 1: NVIDIA GeForce RTX 3060, compute capability 8.6, VMM: yes, VRAM: 12004 MiB\n"
         "llm_load_tensors: offloaded 33/33 layers to GPU\n")
OLLAMA = ('time=2025-02-11T08:15:02.114Z level=INFO source=types.go:131 msg="inference compute" id=GPU-1f2e3d4c '
          'library=cuda variant=v12 compute=7.5 driver=12.2 name="NVIDIA GeForce GTX 1660 SUPER" total="6.0 GiB" '
          'available="5.1 GiB"\n')
OLLAMA_NEW = ('time=2025-11-02T10:00:00.000Z level=INFO source=types.go:60 msg="inference compute" id=GPU-9a8b '
              'library=CUDA compute=8.6 name=CUDA0 description="NVIDIA RTX A4000" libdirs=ollama,cuda_v12 '
              'driver=12.8 pci_id=0000:65:00.0 type=discrete total="16.0 GiB" available="15.2 GiB"\n')
OLLAMA_CPU = ('time=2025-03-01T09:00:00.000Z level=INFO source=types.go:130 msg="inference compute" id=0 library=cpu '
              'variant="" compute="" driver=0.0 name="" total="31.2 GiB" available="28.0 GiB"\n')
TF = ("2025-01-20 14:02:11.503921: I tensorflow/core/common_runtime/gpu/gpu_device.cc:2021] Created device "
      "/job:localhost/replica:0/task:0/device:GPU:0 with 21458 MB memory:  -> device: 0, name: NVIDIA RTX A5000, "
      "pci bus id: 0000:17:00.0, compute capability: 8.6\n")
COMFY = ("Total VRAM 8192 MB, total RAM 32614 MB\n"
         "pytorch version: 2.4.1+cu124\n"
         "Set vram state to: NORMAL_VRAM\n"
         "Device: cuda:0 NVIDIA GeForce RTX 3070 : cudaMallocAsync\n")
A1111 = ("version: v1.10.1  •  python: 3.10.14  •  torch: 2.1.2+cu121  •  xformers: 0.0.23.post1  •  gradio: "
         "3.41.2  •  checkpoint: 31e35c80fc\n")
VLLM = ("INFO 03-14 09:26:53 llm_engine.py:237] Initializing an LLM engine (v0.6.3.post1) with config: "
        "model='some/model', speculative_config=None, dtype=torch.bfloat16\n")
CONDA_INFO = ("     active environment : ml\n"
              "            shell level : 2\n"
              "          conda version : 24.9.2\n"
              "         python version : 3.12.7.final.0\n"
              "       virtual packages : __archspec=1=skylake\n"
              "                          __cuda=12.4=0\n"
              "                          __glibc=2.35=0\n"
              "                          __linux=6.5.0=0\n"
              "               platform : linux-64\n")
KUBECTL = ("Name:               gpu-node-7\n"
           "Capacity:\n"
           "  cpu:                96\n"
           "  memory:             1056276448Ki\n"
           "  nvidia.com/gpu:     8\n"
           "  pods:               110\n"
           "Allocatable:\n"
           "  cpu:                95\n"
           "  nvidia.com/gpu:     0\n"
           "  pods:               110\n"
           "System Info:\n"
           "  Kernel Version:     5.15.0-119-generic\n")
TF_FORM = ("### System information\n"
           "- OS Platform and Distribution: Ubuntu 22.04\n"
           "- TensorFlow installed from: binary\n"
           "- TensorFlow version: 2.16.1\n"
           "- Python version: 3.11\n"
           "- GPU model and memory: RTX 3080 10GB\n")
JAX_INFO = ("jax:    0.4.35\n"
            "jaxlib: 0.4.34\n"
            "numpy:  2.1.3\n"
            "python: 3.12.7 | packaged by conda-forge | (main, Oct  4 2024, 16:05:46) [GCC 13.3.0]\n")


@pytest.fixture(scope="module")
def registry() -> Any:
    return load_registry(plugins=False)


def _read(text: str) -> dict[str, Any]:
    return {k: r.value for k, r in parse_text(text).items() if r.ok}


def _tools(text: str) -> set[str]:
    return {t["tool"] for t in _read(text).get("text.tools", ())}


@pytest.mark.parametrize("prose", [False, True], ids=["alone", "in-prose"])
def test_llama_cpp_devices_are_the_gpus_with_their_capability(prose: bool) -> None:
    read = _read(HEAD + LLAMA + TAIL if prose else LLAMA)
    assert [(g["name"], g["compute_capability"]) for g in read["nvml.gpus"]] == [
        ("NVIDIA GeForce RTX 4070", "8.9"), ("NVIDIA GeForce RTX 3060", "8.6")]
    assert read["nvml.device_count"] == 2
    assert "llama.cpp" in {t["tool"] for t in read["text.tools"]}
    assert "llama.cpp's start-up line 'Device 0: NVIDIA GeForce RTX 4070" in parse_text(LLAMA).get("nvml.gpus").detail


@pytest.mark.parametrize("text", [OLLAMA, HEAD + OLLAMA + TAIL], ids=["alone", "in-prose"])
def test_ollama_inference_compute_gives_the_gpu_and_the_drivers_cuda(text: str) -> None:
    read = _read(text)
    assert read["nvml.gpus"][0]["name"] == "NVIDIA GeForce GTX 1660 SUPER"
    assert read["nvml.gpus"][0]["compute_capability"] == "7.5"
    assert read["cuda.driver_version"] == 12020


def test_ollama_newer_line_names_the_gpu_in_its_description() -> None:
    read = _read(OLLAMA_NEW)
    assert read["nvml.gpus"][0]["name"] == "NVIDIA RTX A4000" and read["cuda.driver_version"] == 12080


def test_ollama_on_the_cpu_is_read_but_states_no_gpu() -> None:
    facts = parse_text(OLLAMA_CPU)  # not refused: the tool's line is read
    assert facts.get("text.tools").ok and not facts.get("nvml.gpus").ok and not facts.get("cuda.driver_version").ok


@pytest.mark.parametrize("text", [TF, HEAD + TF + TAIL], ids=["alone", "in-prose"])
def test_tensorflow_created_device_gives_the_gpu(text: str) -> None:
    read = _read(text)
    assert read["nvml.gpus"] == ({"index": 0, "name": "NVIDIA RTX A5000", "compute_capability": "8.6"},)
    assert "tensorflow" in _tools(text)


def test_comfyui_start_up_log_gives_torch_and_the_gpu() -> None:
    read = _read(HEAD + COMFY + TAIL)
    assert read["torch.version"] == "2.4.1+cu124" and read["torch.cuda_version"] == "12.4"
    assert read["nvml.gpus"][0]["name"] == "NVIDIA GeForce RTX 3070"
    assert "comfyui" in _tools(COMFY)


@pytest.mark.parametrize("text", [A1111, HEAD + A1111 + TAIL], ids=["alone", "in-prose"])
def test_a1111_footer_gives_python_torch_and_xformers(text: str) -> None:
    read = _read(text)
    assert read["torch.version"] == "2.1.2+cu121" and read["torch.cuda_version"] == "12.1"
    assert read["python.version"] == "3.10.14" and read["text.frameworks"]["xformers"] == "0.0.23.post1"


def test_vllm_engine_line_is_read() -> None:
    read = _read(VLLM)
    assert read["text.frameworks"] == {"vllm": "0.6.3.post1"} and "vllm" in _tools(VLLM)


def test_conda_info_gives_python_and_the_drivers_cuda() -> None:
    read = _read(HEAD + CONDA_INFO + TAIL)
    assert read["python.version"] == "3.12.7" and read["cuda.driver_version"] == 12040


@pytest.mark.parametrize("text", [KUBECTL, HEAD + KUBECTL + TAIL], ids=["alone", "in-prose"])
def test_kubectl_describe_node_gpu_capacity_and_allocatable(text: str) -> None:
    assert _read(text)["text.node_gpus"] == {"capacity": 8, "allocatable": 0}


def test_an_nvidia_gpu_row_outside_a_node_block_is_no_node_fact() -> None:
    with pytest.raises(ParseError):
        parse_text("the docs say to request nvidia.com/gpu: 1 in the pod spec\n")


@pytest.mark.parametrize("text", [TF_FORM, HEAD + TF_FORM + TAIL], ids=["alone", "in-prose"])
def test_a_tensorflow_issue_form_is_read_not_refused(text: str) -> None:
    read = _read(text)
    assert read["text.frameworks"] == {"tensorflow": "2.16.1"}
    assert read["nvml.gpus"][0]["name"].startswith("RTX 3080")
    assert "torch.version" not in read and "torch.cuda_version" not in read  # TensorFlow's form says nothing of torch


def test_jax_environment_info_is_read() -> None:
    read = _read(JAX_INFO)
    assert read["text.frameworks"] == {"jax": "0.4.35", "jaxlib": "0.4.34"}


@pytest.mark.parametrize(("text", "want"), [
    ("CUDA_VISIBLE_DEVICES=1 python train.py --epochs 3\n", {"CUDA_VISIBLE_DEVICES": "1"}),
    ("$ export NCCL_P2P_DISABLE=1\n$ export NCCL_DEBUG=INFO\n", {"NCCL_P2P_DISABLE": "1", "NCCL_DEBUG": "INFO"}),
    ("docker run --rm --gpus all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility --shm-size 8g img:1 python x.py\n",
     {"NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}),
    ("(venv) PS C:\\work> set CUDA_LAUNCH_BLOCKING=1\n", {"CUDA_LAUNCH_BLOCKING": "1"}),
])
def test_command_lines_record_the_gpu_stacks_variables(text: str, want: dict[str, str]) -> None:
    read = _read(HEAD + text + TAIL)
    assert read["text.env_assignments"] == want
    assert "env.vars" not in read  # only what the text shows: the rest of the environment is unknown


def test_a_command_lines_other_variables_are_not_kept() -> None:
    read = _read("HF_TOKEN=hf_abcdefghijklmnop CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node 2 t.py\n")
    assert read["text.env_assignments"] == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert "hf_abcdefghijklmnop" not in str(read["text.env_assignments"])


@pytest.mark.parametrize("run", ["docker run --gpus all --shm-size 8g -it nvcr.io/nvidia/pytorch:24.05-py3 bash",
                                 "nvidia-docker run -it --rm myimage:latest"])
def test_a_container_run_command_is_read(run: str) -> None:
    read = _read(f"{run}\n")
    assert read["container.gpus_requested"] is True and read["text.tools"]


# -- prose -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    "I'm on torch 2.1.0 with CUDA 12.1 and a 3090, driver 535.104.05.",
    "Hi all. I'm on torch 2.1.0 with CUDA 12.1 and a 3090, driver 535.104.05. Training dies after an hour.",
])
def test_prose_versions_and_gpu_are_facts(text: str) -> None:
    facts = parse_text(text)
    assert facts.value("torch.version") == "2.1.0" and facts.value("torch.cuda_version") == "12.1"
    assert facts.value("nvml.driver_version") == "535.104.05"
    assert facts.value("nvml.gpus")[0]["name"] == "RTX 3090"
    assert "said in prose" in facts.get("torch.version").detail and "torch 2.1.0" in facts.get("torch.version").detail


def test_the_error_on_top_and_the_gpu_in_a_later_sentence_are_read_together() -> None:
    text = ("RuntimeError: CUDA error: no kernel image is available for execution on the device\n\n"
            "It happens on every run. My card is a GeForce GTX 750 Ti and I installed PyTorch 2.5.1 last week.\n")
    facts = parse_text(text)
    assert facts.value("nvml.gpus")[0]["name"] == "GeForce GTX 750 Ti"
    assert facts.value("torch.version") == "2.5.1"


@pytest.mark.parametrize("text", [
    "I upgraded from torch 1.13 to torch 2.0 and it broke.",  # two versions of one component
    "Tried CUDA 11.8 and CUDA 12.1, same result.",
    "It does not work with torch 2.2.0.",  # a negation
    "Does torch 2.3.0 support CUDA 12.4?",  # a question
    "If I install torch 2.2.0 would it help.",  # a hypothesis
])
def test_prose_guards_state_nothing(text: str) -> None:
    facts = parse_text(text + "\nRuntimeError: the run stopped\n")  # an error line: judged, never refused
    assert not facts.get("torch.version").ok and not facts.get("torch.cuda_version").ok


def test_versions_stated_differently_in_two_sentences_state_neither() -> None:
    facts = parse_text("At first I used torch 2.0.1. Now I use torch 2.1.0.\nRuntimeError: stopped\n")
    assert not facts.get("torch.version").ok


@pytest.mark.parametrize("text", [
    "I am fine-tuning the T5 model on my laptop and it stops.",
    "I drive my Tesla car to the lab where the server runs.",
    "The RTX voice app runs on the same machine.",
    "See page 3090 of the manual for the details of the run.",
    "My RTX 9999 card crashes when the run starts.",  # branded, but no product the catalogue knows
])
def test_a_gpu_word_that_is_no_gpu_states_no_gpu(text: str) -> None:
    facts = parse_text(text + "\nRuntimeError: stopped\n")
    assert not facts.get("nvml.gpus").ok


def test_planning_to_buy_a_gpu_states_no_gpu() -> None:
    facts = parse_text("I am planning to buy an RTX 5090 next month.\nRuntimeError: stopped\n")
    assert not facts.get("nvml.gpus").ok


def test_a_statement_wins_over_prose() -> None:
    facts = parse_text("torch: 2.4.0+cu121\nGPU: NVIDIA A100-SXM4-80GB\n\nEarlier I had torch 2.1.0 on a 3090 box.\n")
    assert facts.value("torch.version") == "2.4.0+cu121" and facts.value("nvml.gpus")[0]["name"].startswith("NVIDIA A100")


def test_a_log_line_quoting_versions_is_no_prose() -> None:
    facts = parse_text("[2025-01-01 10:00:00] INFO building against torch 2.3.0 with CUDA 12.1\n"
                       "UserWarning: something about torch 1.9.0 happened\nRuntimeError: stopped\n")
    assert not facts.get("torch.version").ok


# -- REPL -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("prose", [False, True], ids=["alone", "in-prose"])
def test_repl_device_name_and_capability(prose: bool) -> None:
    repl = (">>> import torch\n>>> torch.cuda.get_device_name(0)\n'NVIDIA GeForce GTX 950M'\n"
            ">>> torch.cuda.get_device_capability()\n(5, 0)\n")
    facts = parse_text(HEAD + repl + TAIL if prose else repl)
    assert facts.value("nvml.gpus")[0] == {"index": 0, "name": "NVIDIA GeForce GTX 950M", "compute_capability": "5.0"}


# -- refusal and the answer's honesty ----------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["OS: Linux\n", "Python: 3.10\nOS: Ubuntu 22.04\n"])
def test_context_alone_is_judged_and_told_nothing_could_be_judged(text: str, registry: Any) -> None:
    facts = parse_text(text)
    findings = diagnose(facts, registry)
    headline = Examined.of(findings, facts, "paste:stdin").headline() or ""
    assert not headline.startswith("No problems found") and "could be judged" in headline


@pytest.mark.parametrize("text", ["my training loop is slower than I expected\n",
                                  "Thanks, that fixed it! Closing the issue.\n", "see the attached screenshot\n"])
def test_a_text_in_which_nothing_is_read_is_still_refused(text: str) -> None:
    with pytest.raises(ParseError, match="no environment evidence"):
        parse_text(text)


@pytest.mark.parametrize("text", [LLAMA, OLLAMA, OLLAMA_NEW, TF, COMFY, A1111, VLLM, CONDA_INFO, KUBECTL.replace(
    "nvidia.com/gpu:     0", "nvidia.com/gpu:     8"), TF_FORM, JAX_INFO], ids=[
    "llama", "ollama", "ollama-new", "tensorflow", "comfyui", "a1111", "vllm", "conda-info", "kubectl", "tf-form",
    "jax"])
def test_healthy_tool_logs_give_no_fail(text: str, registry: Any) -> None:
    findings = sort_findings(diagnose(parse_text(HEAD + text + TAIL), registry))
    assert not [f.id for f in findings if f.status is Status.FAIL]


def test_a_known_tool_line_alone_is_never_refused() -> None:
    for text in (OLLAMA_CPU, VLLM, "Total VRAM 4096 MB, total RAM 16000 MB\n"):
        assert parse_text(text).get("text.tools").ok


def test_vllm_api_server_version_line_is_read() -> None:
    assert _read("INFO 11-02 08:00:01 [api_server.py:1090] vLLM API server version 0.9.2\n")["text.frameworks"] == {
        "vllm": "0.9.2"}


@pytest.mark.parametrize(("sentence", "name", "count"), [
    ("The box runs a Quadro RTX 4000 with 8 GB.", "Quadro RTX 4000", 1),
    ("My laptop has an Nvidia GeForce RTX 3050 Laptop GPU.", "GeForce RTX 3050 Laptop", 1),
    ("We use 2 nvidia A40 cards joined by a bridge.", "A40", 2),
    ("The node has four A100 boards.", "A100", 4),
])
def test_prose_gpu_names_and_counts(sentence: str, name: str, count: int) -> None:
    facts = parse_text(sentence + "\nRuntimeError: stopped\n")
    assert facts.value("nvml.gpus")[0]["name"] == name and facts.value("nvml.device_count") == count


def test_a_cuda_without_torch_beside_it_is_not_torchs() -> None:
    facts = parse_text("I installed CUDA 11.8 from the runfile last week.\nRuntimeError: stopped\n")
    assert not facts.get("torch.cuda_version").ok


def test_a_package_listing_line_is_no_prose() -> None:
    text = "pytorch                   2.1.0           py3.11_cuda12.1_cudnn8.9.2_0    pytorch\nRuntimeError: x\n"
    facts = parse_text(text)
    assert facts.get("torch.version").source != "prose" and facts.get("torch.cuda_version").source != "prose"


# -- through the CLI --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "judged"), [
    (HEAD + OLLAMA + TAIL, True),
    ("I'm on torch 2.1.0 with CUDA 12.1 and a 3090, driver 535.104.05. It hangs at the first step.\n", True),
    ("my training loop is slower than I expected\n", False),
], ids=["ollama-log", "prose", "nothing-read"])
def test_diagnose_judges_what_it_reads_and_refuses_only_nothing(tmp_path: Any, text: str, judged: bool) -> None:
    from .faults import run_cli

    paste = tmp_path / "ticket.md"
    paste.write_text(text, encoding="utf-8")
    shown = run_cli(["diagnose", str(paste)])
    assert shown.rc is not None and not shown.timed_out, shown.text
    if judged:
        assert shown.rc == 0 and "no environment evidence" not in shown.text, shown.text
        assert "could not be judged: not in the text" in shown.text  # what the text does not show is said
    else:
        assert shown.rc != 0 and "no environment evidence" in shown.text, shown.text


@pytest.mark.parametrize("prose", [False, True], ids=["alone", "in-prose"])
def test_pip_show_gives_the_packages_version(prose: bool) -> None:
    show = ("Name: torch\nVersion: 2.3.1+cu118\nSummary: Tensors and Dynamic neural networks in Python\n"
            "Location: /opt/venv/lib/python3.11/site-packages\n\nName: tensorflow\nVersion: 2.15.1\n")
    read = _read(HEAD + show + TAIL if prose else show)
    assert read["torch.version"] == "2.3.1+cu118" and read["torch.cuda_version"] == "11.8"
    assert read["text.frameworks"] == {"tensorflow": "2.15.1"}


@pytest.mark.parametrize(("command", "echo", "key", "want"), [
    ('$ python -c "import torch; print(torch.__version__)"', "2.2.0+cpu", "torch.version", "2.2.0+cpu"),
    ("python3 -c 'import torch; print(torch.version.cuda)'", "12.1", "torch.cuda_version", "12.1"),
    ('python -c "import torch;print(torch.cuda.get_device_name(0))"', "NVIDIA GeForce RTX 2080 Ti", "nvml.gpus", None),
])
def test_a_shells_python_c_print_and_its_output_is_a_statement(command: str, echo: str, key: str, want: Any) -> None:
    facts = parse_text(f"{HEAD}{command}\n{echo}\n{TAIL}")
    got = facts.value(key)
    assert (got[0]["name"] == echo) if key == "nvml.gpus" else got == want


def test_lspci_without_ids_is_read_as_a_tool_line_only() -> None:
    read = _read(HEAD + "01:00.0 VGA compatible controller: NVIDIA Corporation GA102 [GeForce RTX 3090] (rev a1)\n"
                 + TAIL)
    assert "lspci" in {t["tool"] for t in read["text.tools"]} and "nvml.gpus" not in read
