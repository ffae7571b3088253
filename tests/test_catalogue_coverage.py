"""Issue 21: the catalogue covers each emitter as a set of its messages, read from its own source; the logic
that came with that coverage (a judged row of the same emitter judges its line; cpp_extension's unformatted
mismatch of torch 2.13; a capability warning with a malformed sm_ never crashes the parser)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from envdoctor.knowledge import datafiles
from envdoctor.knowledge.messages import toolkit_mismatch
from envdoctor.model import Status
from envdoctor.parsers import parse_text
from envdoctor.pipeline.diagnose import diagnose, sort_findings
from envdoctor.registry import load_registry

REGISTRY = load_registry(plugins=False)
DATA = json.loads(datafiles.read_text("messages.json"))


def _family(emitter: str) -> str:
    for word in ("glibc", "Windows", "ProcessGroupNCCL", "DataLoader", "cpp_extension", "NCCL", "torch", "nvidia-smi",
                 "NVRM", "nvcc", "ptxas", "Docker", "CDI", "kube", "k8s", "container", "TensorFlow", "XLA", "JAX",
                 "xFormers", "flash-attn", "bitsandbytes", "Triton", "vLLM", "DeepSpeed", "Ollama", "llama.cpp", "WSL"):
        if word.lower() in emitter.lower():
            return word
    return emitter


def test_each_emitter_the_issue_names_is_a_set_of_messages_not_one_line() -> None:
    counts = Counter(_family(row["emitter"]) for row in DATA["messages"])
    for family, least in {"glibc": 6, "torch": 8, "DataLoader": 4, "cpp_extension": 8, "ProcessGroupNCCL": 8,
                          "NCCL": 25, "JAX": 4, "xFormers": 4, "bitsandbytes": 5, "DeepSpeed": 4, "Ollama": 3,
                          "k8s": 4}.items():
        assert counts[family] >= least, (family, counts[family])


def test_every_verified_row_cites_a_release_or_a_commit_and_every_source_has_one() -> None:
    for name, source in DATA["sources"].items():
        assert source.get("url", "").startswith("https://") or (source["repo"] and source["path"] and source["tag"]), name
    for row in DATA["messages"]:
        if row["verified"]:
            assert "repo" in DATA["sources"][row["source"]] or row["source"] in ("cudnn_loader", "nvidia_smi_doc"), row["id"]


def test_a_judged_row_of_the_same_emitter_judges_the_line_alone() -> None:
    text = ("RuntimeError: DataLoader worker (pid 2226) is killed by signal: Bus error. It is possible that "
            "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.\n")
    said = {m["id"] for m in parse_text(text).get("text.messages").value}
    assert {"dataloader-killed-by-signal", "dataloader-out-of-shm"} <= said
    found = [f for f in diagnose(parse_text(text), REGISTRY) if f.status in (Status.FAIL, Status.WARN)]
    assert [f.id for f in found] == ["dataloader-shm"], [(f.id, f.title) for f in found]
    # a signal that is not the shared-memory one is still named, with what to look at
    killed = "RuntimeError: DataLoader worker (pid 77) is killed by signal: Killed.\n"
    top = sort_findings(diagnose(parse_text(killed), REGISTRY))[0]
    assert top.id == "known-message" and top.status is Status.WARN and "DataLoader worker" in top.title
    assert any("dmesg" in c for c in top.remediation.command_lines())


@pytest.mark.parametrize("text", [
    "RuntimeError: ('The detected CUDA version (%s) mismatches the version that was used to compilePyTorch (%s). "
    "Please make sure to use the same CUDA versions.', '12.4', '12.1')",
    "RuntimeError:\n      The detected CUDA version (12.4) mismatches the version that was used to compile\n"
    "      PyTorch (12.1). Please make sure to use the same CUDA versions.",
])
def test_cpp_extension_s_mismatch_in_both_torch_wordings_is_the_toolkit_mismatch(text: str) -> None:
    assert toolkit_mismatch(" ".join(text.split())) == ("12.4", "12.1")
    top = sort_findings(diagnose(parse_text(text + "\n"), REGISTRY))[0]
    assert top.id == "toolkit-mismatch" and top.status is Status.FAIL and "12.4" in top.title


def test_a_capability_warning_with_a_malformed_sm_is_read_without_a_crash() -> None:
    facts = parse_text("UserWarning: Tesla X with CUDA capability sm_0x is not compatible with the current PyTorch "
                       "installation.\n")
    assert "torch-capability-unsupported" in {m["id"] for m in facts.get("text.messages").value}


@pytest.mark.parametrize(("line", "cause", "command"), [
    ("misc/shmutils.cc:72 NCCL WARN Could not map /dev/shm/nccl-x size 9637888, error: No space left on device",
     "nccl-shm-exhausted", "--shm-size"),
    ("init.cc:943 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000",
     "nccl-duplicate-gpu", "LOCAL_RANK"),
    ("ImportError: /venv/lib/python3.10/site-packages/bitsandbytes/libbitsandbytes_cuda124.so: ... 🚨 CUDA SETUP "
     "ERROR: Missing dependency: libcusparse.so.12 🚨", "bnb-native-library", "bitsandbytes"),
    (">- DeepSpeed Op Builder: Installed CUDA version 12.4 does not match the version torch was compiled with 12.1, "
     "unable to compile cuda/cpp extensions without a matching cuda version.", "toolkit-mismatch", "CUDA_HOME"),
    ("RuntimeError: Ninja is required to load C++ extensions (pip install ninja to get it)", "ninja-missing",
     "install ninja"),
])
def test_a_new_row_names_its_cause_and_the_remedy_for_its_emitter(line: str, cause: str, command: str) -> None:
    facts = parse_text(line + "\n")
    assert cause in {m["cause"] for m in facts.get("text.messages").value}
    # the finding that says the row: known-message, or the check that judges the facts its words wrote (DeepSpeed's
    # two CUDA versions: toolkit-mismatch, whose remedy points CUDA_HOME at a toolkit of torch's CUDA)
    judges = {m["judged_by"] for m in facts.get("text.messages").value if m["cause"] == cause} - {None}
    lines = [c for f in diagnose(facts, REGISTRY) if f.id == "known-message" or f.id in judges
             for c in (*f.remediation.command_lines(), f.remediation.text)]
    assert any(command in c for c in lines), lines
