"""Evidence, not formats: version statements in any list form are facts, prose alone is refused,
and a report's own reading wins over a statement (both kept)."""

from __future__ import annotations

import pytest

from envdoctor.parsers import ParseError, parse_text
from envdoctor.parsers.statements import split_statement


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


@pytest.mark.parametrize("text", ["Hi, training does not work, can you help?\nThanks!\n", "OS: Linux\n",
                                  "Python: 3.10\nOS: Ubuntu 22.04\n"])
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
