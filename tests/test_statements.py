"""Evidence, not formats: version statements in any list form are facts, prose alone is refused,
and a report's own reading wins over a statement (both kept)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from envdoctor.parsers import ParseError, parse_text, statements
from envdoctor.parsers.statements import split_statement

from .statement_shapes import SHAPES


@pytest.mark.parametrize("line, key", [
    ("- PyTorch version (GPU?): 2.1.2+cu121 (True)", "pytorch"),
    ("| Driver | 535.104.05 |", "driver"),
    ("**Torch version**: 2.0.1", "torch"),
    ("torch==2.2.0", "torch"),
    ("Python version 3.10.12", "python"),
    ("* NVIDIA driver version: 550.54", "nvidia driver"),
])
def test_a_statement_splits_whatever_its_punctuation(line: str, key: str) -> None:
    split = split_statement(line)
    assert split is not None and split[0] == key


def _values(text: str) -> dict[str, object]:
    facts = parse_text(text)
    return {k: facts.get(k).value for k in ("torch.version", "torch.cuda_version", "nvml.driver_version",
                                            "python.version", "torch.cudnn_version", "host.os")
            if facts.get(k).ok}


def test_hugging_face_env_block_in_a_details_tag() -> None:
    text = ("<details><summary>env</summary>\n\n```\n- `transformers` version: 4.36.2\n"
            "- Platform: Linux-5.15.0-91-generic-x86_64-with-glibc2.35\n- Python version: 3.10.12\n"
            "- PyTorch version (GPU?): 2.1.2+cu121 (True)\n```\n</details>\n")
    assert _values(text) == {"torch.version": "2.1.2+cu121", "torch.cuda_version": "12.1",
                             "python.version": "3.10.12", "host.os": "Linux"}


def test_markdown_table_and_bold_keys_with_prose_around() -> None:
    table = "My setup:\n\n| Component | Version |\n|---|---|\n| PyTorch | 2.3.1 |\n| Driver | 535.104.05 |\n" \
            "| cuDNN | 8.9.2 |\n\nAny idea?"
    assert _values(table) == {"torch.version": "2.3.1", "nvml.driver_version": "535.104.05",
                              "torch.cudnn_version": 8902}
    bold = "> I get an error.\n>\n> **Torch version**: 2.0.1+cpu\n> **OS**: Windows 11\n"
    assert _values(bold) == {"torch.version": "2.0.1+cpu", "torch.cuda_version": None, "host.os": "Windows"}


def test_a_report_reading_wins_over_a_statement_and_both_are_kept() -> None:
    text = ("PyTorch version: 2.1.0+cu118\nIs debug build: False\nCUDA used to build PyTorch: 11.8\n"
            "\ntorch: 2.0.0\n")
    facts = parse_text(text)
    assert facts.get("torch.version").value == "2.1.0+cu118"
    assert "2.0.0" in (facts.get("torch.version").detail or "")


# (Issue 21: "OS: Linux" alone is read, so it is judged and told that nothing could be judged:
# tests/test_tool_lines_and_prose.py.)
@pytest.mark.parametrize("text", ["Hi, training does not work, can you help?\nThanks!\n",
                                  "see the attached screenshot, it just stops\n"])
def test_text_without_gpu_evidence_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_text(text)
    assert "\n" not in str(info.value) and "looks for" in str(info.value)


def test_one_piece_of_evidence_is_judged_and_the_rest_is_not_in_report() -> None:
    facts = parse_text("pytorch version: 2.3.1+cu121\n")
    assert facts.get("torch.cuda_version").value == "12.1"
    assert facts.get("nvml.driver_version").reason is not None
    assert facts.get("nvml.driver_version").reason.value == "not_in_report"


def test_a_path_is_no_version_and_collect_envs_own_labels_keep_their_meaning() -> None:
    # collect_env's "cuDNN version" is a file search (libs.cudnn_copies), never torch's cuDNN; the
    # digits of a path ("…\\CUDA\\v12.5\\bin\\cudnn_ops64_9.dll") are not a version of anything stated.
    text = ("PyTorch version: 2.5.0+cu124\nIs debug build: False\nCUDA used to build PyTorch: 12.4\n"
            "cuDNN version: C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v12.5\\bin\\cudnn_ops64_9.dll\n")
    assert parse_text(text).get("torch.cudnn_version").ok is False
    assert "torch.cudnn_version" not in _values("torch: 2.3.1\ncuDNN: /usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.2\n")


def test_an_interpreter_s_prompt_and_echo_is_a_statement() -> None:
    # Issue 21: a REPL pair (">>> torch.__version__" then "'2.1.0+cpu'") says what a statement says.
    from envdoctor.parsers import parse_text

    facts = parse_text(">>> import torch\n>>> torch.__version__\n'2.1.0+cpu'\n>>> torch.cuda.is_available()\nFalse\n")
    assert facts.value("torch.version") == "2.1.0+cpu" and facts.get("torch.cuda_version").value is None
    assert facts.value("torch.cuda_available") is False
    ipython = parse_text("In [3]: print(torch.__version__)\n2.4.0+cu121\n")
    assert ipython.value("torch.version") == "2.4.0+cu121" and ipython.value("torch.cuda_version") == "12.1"
    # an expression that names no fact, or a prompt with no echo, says nothing
    assert "torch.version" not in {k for k, r in parse_text(">>> torch.__version__\n>>> x.y\n1\nRuntimeError: "
                                                            "boom\n").items() if r.ok}


# -- issue 22: statements in every shape -------------------------------------------------------------------

_COLLECT_ENV = ("PyTorch version: 2.9.0+cu130\nIs debug build: False\nCUDA used to build PyTorch: 13.0\n"
                "Is CUDA available: True\nGPU models and configuration: GPU 0: NVIDIA Quadro P5000\n"
                "Nvidia driver version: 580.82.07\n")
_SAID = [("torch", "2.9.0+cu130"), ("gpu", "NVIDIA Quadro P5000"), ("driver", "580.82.07")]
_SAME = ("torch.version", "torch.cuda_version", "nvml.gpus", "nvml.device_count", "nvml.driver_version")


def _facts_of(text: str) -> dict[str, object]:
    facts = parse_text(text)
    return {k: facts.get(k).value for k in _SAME if facts.get(k).ok}


@pytest.mark.parametrize("prose", [False, True], ids=["bare", "in-prose"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_shape_gives_the_facts_collect_env_gives(shape: str, prose: bool) -> None:
    from .statement_shapes import render

    want = _facts_of(_COLLECT_ENV)
    assert want["nvml.gpus"] == ({"index": 0, "name": "NVIDIA Quadro P5000"},)
    assert _facts_of(render(shape, _SAID, prose)) == want


@pytest.mark.parametrize("line, cc", [
    ("GPU: NVIDIA TITAN Xp (compute capability 6.1)", "6.1"),
    ("GPU: NVIDIA GeForce GTX 1080 (sm_61)", "6.1"),
    ("GPU: RTX 3090, compute capability 8.6", "8.6"),
    ("GPU: NVIDIA GeForce RTX 3090\nCompute capability: 8.6", "8.6"),
    ("GPU: NVIDIA GeForce RTX 3090\ncapability: (8, 6)", "8.6"),
    ("GPU: NVIDIA GeForce RTX 5090\nCUDA arch: sm_120", "12.0"),
    (">>> torch.cuda.get_device_capability(0)\n(8, 9)", "8.9"),
])
def test_a_stated_compute_capability_is_the_gpus(line: str, cc: str) -> None:
    gpus = parse_text(line + "\n").value("nvml.gpus")
    assert gpus[0]["compute_capability"] == cc


@pytest.mark.parametrize("text, name, index, count", [
    ("Device: cuda:0 NVIDIA GeForce RTX 4090 : cudaMallocAsync", "NVIDIA GeForce RTX 4090", 0, 1),
    ("2024-10-19 01:10:47,712 - root - INFO - Device: cuda:1 NVIDIA GeForce RTX 2060 : native",
     "NVIDIA GeForce RTX 2060", 1, 1),
    ("- **Name:** cuda:0 NVIDIA GeForce RTX 5070 Ti : cudaMallocAsync", "NVIDIA GeForce RTX 5070 Ti", 0, 1),
    ("GPU Model: 2x NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", 0, 2),
    ("GPU Name: Tesla K80", "Tesla K80", 0, 1),
    ("Graphics adapter: NVIDIA GeForce RTX 3060", "NVIDIA GeForce RTX 3060", 0, 1),
    (">>> torch.cuda.get_device_name(0)\n'NVIDIA H100 80GB HBM3'", "NVIDIA H100 80GB HBM3", 0, 1),
    ("* CUDA:\n\t- GPU:\n\t\t- NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 3090", 0, 1),
])
def test_the_gpu_keys_and_device_lines_people_write(text: str, name: str, index: int, count: int) -> None:
    facts = parse_text(text + "\n")
    gpus = facts.value("nvml.gpus")
    assert [g["name"] for g in gpus] == [name] * count and gpus[0]["index"] == index
    assert facts.value("nvml.device_count") == count


@pytest.mark.parametrize("text", [
    "Device: cpu\ntorch: 2.5.1\n", "device: cuda\ntorch: 2.5.1\n", "GPU: not detected\ntorch: 2.5.1\n",
    "GPU: AMD Radeon RX 7900 XTX\ntorch: 2.5.1\n", "GPU: Apple M2 Max (mps)\ntorch: 2.5.1\n",
    "Name: John\ntorch: 2.5.1\n", "GPU\nNVIDIA drivers are hard to install on this distro\ntorch: 2.5.1\n",
    "My GPU: it is an old one and the driver is fine\ntorch: 2.5.1\n",
    "Compute capability: high\ntorch: 2.5.1\n",
])
def test_prose_and_other_values_under_a_gpu_key_state_no_gpu(text: str) -> None:
    facts = parse_text(text)
    assert not facts.get("nvml.gpus").ok and facts.value("torch.version") == "2.5.1"


def test_an_unqualified_cuda_gives_way_to_torchs_own_tag_and_a_torch_key_wins() -> None:
    # "CUDA: 12.4" is often the toolkit on the system; the wheel's tag says torch's.
    assert parse_text("CUDA: 12.4\nPyTorch: 2.9.0+cu130\n").value("torch.cuda_version") == "13.0"
    assert parse_text("PyTorch: 2.5.1\nCUDA Version: 12.4\n").value("torch.cuda_version") == "12.4"
    assert parse_text("torch.version.cuda: 12.1\nPyTorch: 2.5.1+cu124\n").value("torch.cuda_version") == "12.1"
    # a package list's torch tag ("7.0+cu118") is not overridden by conda's "cuda-version  12.9" package either
    assert parse_text("torch==2.4.0+cu118\ncuda-version        12.9\n").value("torch.cuda_version") != "12.9"


def test_the_alias_table_is_one_table_with_no_key_naming_two_facts() -> None:
    from envdoctor.parsers import statements

    seen: dict[str, str] = {}
    for fact, names in statements.ALIASES.items():
        for name in names:
            key = statements.norm_key(name)
            assert seen.setdefault(key, fact) == fact, (name, seen[key], fact)
    assert statements.norm_key("torch.__version__") == statements.norm_key("Torch Version") == "torch"


# -- the issue's examples, through the CLI ------------------------------------------------------------------

def _diagnose(tmp_path: Path, text: str) -> tuple[int, dict[str, Any], str]:
    """``envdoctor diagnose --json`` of the text as a file: (exit code, the report, what it printed)."""
    from .faults import run_cli

    paste = tmp_path / "ticket.md"
    paste.write_text(text, encoding="utf-8")
    shown = run_cli(["diagnose", "--json", str(paste)])
    assert shown.rc is not None and not shown.timed_out, shown.text
    return shown.rc, json.loads(shown.stdout), shown.text


def _wheel_carries(command: str, cc: tuple[int, int]) -> bool:
    """The command installs a torch wheel the table says carries ``cc`` (or the CPU build)."""
    from envdoctor.knowledge import compat

    version = re.search(r"torch==([\d.]+)", command)
    index = re.search(r"/whl/(\w+)", command)
    if index and index.group(1) == "cpu":
        return True
    arch = compat.arch_list(version.group(1), index.group(1)) if version and index else None
    return arch is not None and compat.runs_on(arch, cc).runs


@pytest.mark.parametrize("text, torch, gpu", [
    ("### Environment\n\n- **PyTorch:** 2.9.0+cu130\n- **GPU:** NVIDIA Quadro P5000\n\nIt crashes on start.\n",
     "2.9.0+cu130", "NVIDIA Quadro P5000"),
    ("- GPU: NVIDIA TITAN Xp (compute capability 6.1)\n- PyTorch: 2.8.0+cu128\n", "2.8.0+cu128", "NVIDIA TITAN Xp"),
], ids=["quadro-p5000-cu130", "titan-xp-2.8-cu128"])
def test_the_issues_examples_fail_torch_arch_support_with_a_wheel_that_carries_sm_61(
        tmp_path: Path, text: str, torch: str, gpu: str) -> None:
    code, report, shown = _diagnose(tmp_path, text)
    assert code == 1, shown
    arch = next(f for f in report["findings"] if f["id"] == "torch-arch-support")
    assert arch["status"] == "fail" and gpu in arch["title"] and "sm_61" in arch["title"], arch
    commands = arch["remediation"]["commands"]
    assert commands and all(_wheel_carries(c, (6, 1)) for c in commands), commands
    assert report["summary"]["fail"] >= 1 and report["facts"]["torch.version"]["value"] == torch, report["summary"]


def test_a_new_driver_and_an_old_gpu_is_an_arch_failure_not_a_driver_problem(tmp_path: Path) -> None:
    # uv's --torch-backend=auto picks the wheel by the driver alone: driver 580 runs CUDA 13, so it installs
    # a cu130 wheel, whose kernels start at sm_75; a GTX 1080 (sm_61) gets "no kernel image".
    code, report, shown = _diagnose(tmp_path, "GPU: NVIDIA GeForce GTX 1080\nDriver Version: 580.82.07\n"
                                              "PyTorch: 2.9.0+cu130\n")
    assert code == 1, shown
    by_id = {f["id"]: f for f in report["findings"]}
    assert by_id["torch-arch-support"]["status"] == "fail"
    assert [f["id"] for f in report["findings"] if f["status"] == "fail"] == ["torch-arch-support"]
    assert by_id["driver-too-old"]["status"] == "ok", by_id["driver-too-old"]
    commands = by_id["torch-arch-support"]["remediation"]["commands"]
    assert commands and all(_wheel_carries(c, (6, 1)) for c in commands), commands


@pytest.mark.parametrize("value", [
    "planning to buy an RTX 5090 next month", "I don't have an RTX 4090 yet", "RTX 4090 and RTX 3090",
    "2x RTX 3090, 1x A100", "A100 or H100 (whichever the cluster gives)",
])
def test_a_gpu_value_in_prose_or_a_list_of_two_names_no_gpu(value: str) -> None:
    """Prose around a product name, or two products, is no statement of one GPU: a false GPU would
    become a false arch failure with a printed reinstall."""
    assert statements.gpu_value(value) is None


@pytest.mark.parametrize(("value", "name"), [
    ("MSI GeForce RTX 3080 Gaming X Trio", "MSI GeForce RTX 3080 Gaming X Trio"),
    ("GTX 1650 (sm_75, compute capability 7.5)", "GTX 1650"),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"),
])
def test_board_makers_words_and_every_capability_mention_are_read(value: str, name: str) -> None:
    read = statements.gpu_value(value)
    assert read is not None and read[0] == name


@pytest.mark.parametrize(("value", "os_name"), [
    ("Ubuntu 22.04 (not Windows)", "Linux"), ("research cluster", None), ("not windows", None),
    ("Windows 11 with WSL2 Ubuntu 22.04", "Linux"), ("Windows 10 Pro", "Windows"), ("Arch Linux", "Linux"),
])
def test_the_os_is_read_by_whole_words_the_first_said_and_never_a_negated_one(value: str, os_name: str | None) -> None:
    assert statements._value("host.os", value) == os_name


def test_a_sentence_about_a_version_is_no_statement_of_it() -> None:
    facts = parse_text("Torch version 2.0.1 did not work, so I upgraded\nPyTorch version: 2.5.1+cu124\n")
    assert facts["torch.version"].value == "2.5.1+cu124"


def test_an_issue_form_field_is_its_heading_a_blank_line_and_its_value() -> None:
    # GitHub's issue forms render each field as "### Label", a blank line, then the value.
    form = ("### Issue type\n\nBuild/Install\n\n### TensorFlow version\n\n2.11.0\n\n### OS platform and distribution"
            "\n\nWindows 10\n\n### Python version\n\n3.10.9\n")
    facts = parse_text(form)
    assert facts.value("host.os") == "Windows" and facts.value("python.version") == "3.10.9"
    assert facts.value("text.frameworks") == {"tensorflow": "2.11.0"}
    # a heading with no value under it takes nothing from the next heading's value
    empty = parse_text("### Python version\n\n### CUDA/cuDNN version\n\n12.1\n\ntorch: 2.1.0\n")
    assert not empty.get("python.version").ok
    # a plain line followed by a blank line is no key of the line after the blank (only a heading is)
    assert not parse_text("Python version\n\n3.10.9\ntorch: 2.1.0\n").get("python.version").ok


def test_tensorflow_s_version_field_judges_native_windows() -> None:
    from envdoctor.pipeline.diagnose import diagnose, sort_findings
    from envdoctor.registry import load_registry

    form = "### TensorFlow version\n\n2.11.0\n\n### OS platform and distribution\n\nWindows 11\n"
    found = {f.id: f for f in diagnose(parse_text(form), load_registry(plugins=False))}
    assert found["tensorflow-windows-gpu"].status.value == "warn"
    twin = "### TensorFlow version\n\n2.10.1\n\n### OS platform and distribution\n\nWindows 11\n"
    top = sort_findings(diagnose(parse_text(twin), load_registry(plugins=False)))
    assert all(f.status.value in ("ok", "skip") for f in top if f.id == "tensorflow-windows-gpu")


@pytest.mark.parametrize(("value", "name"), [("1050ti 4 GB", "GTX 1050 Ti"), ("3090", "RTX 3090"),
                                             ("4060 Ti 16GB", "RTX 4060 Ti"), ("970m", "GTX 970M")])
def test_a_bare_geforce_model_number_under_a_gpu_key_is_that_gpu(value: str, name: str) -> None:
    gpus = parse_text(f"### GPU model and memory\n\n{value}\n\n### Python version\n\n3.10.10\n").value("nvml.gpus")
    assert [g["name"] for g in gpus] == [name]


@pytest.mark.parametrize("value", ["12345", "100", "2.1", "730x"])
def test_a_number_that_names_no_one_geforce_is_no_gpu(value: str) -> None:
    assert not parse_text(f"GPU: {value}\nPython: 3.10.10\n").get("nvml.gpus").ok


def test_tensorflow_after_2_10_on_windows_with_a_gpu_shown_fails() -> None:
    from envdoctor.pipeline.diagnose import diagnose, sort_findings
    from envdoctor.registry import load_registry

    form = ("### Tensorflow Version\n\nv2.12.0-rc1-12-g0db597d0d75 2.12.0\n\n### OS Platform and Distribution\n\n"
            "Windows 10\n\n### GPU model and memory\n\n1050ti 4 GB\n")
    top = sort_findings(diagnose(parse_text(form), load_registry(plugins=False)))[0]
    assert top.id == "tensorflow-windows-gpu" and top.status.value == "fail" and "GTX 1050 Ti" in top.detail
