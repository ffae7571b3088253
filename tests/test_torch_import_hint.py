"""Issue 21: torch-import's hint is read from the loader grammar's facts (torch.loader_failures), never from
the error text's words."""

from __future__ import annotations

import pytest
from envdoctor.checks import torch_build

from envdoctor.knowledge.messages import loader_errors
from envdoctor.model import Reason, Status, missing, ok

from .builders import facts
from .judging import judge_one


def _failed_import(error: str, failures: list[dict[str, object]] | None = None):  # type: ignore[no-untyped-def]
    found = loader_errors(error) if failures is None else failures
    return facts(torch__version=missing(Reason.FAILED, "probe:torch", error),
                 torch__import_error=ok(error, "probe:torch"), torch__loader_failures=ok(found, "probe:python"))


@pytest.mark.parametrize(("error", "words"), [
    ("ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
     ("libcudart.so.12", "nvidia-*")),
    ("ImportError: libcudnn_graph.so.9: cannot open shared object file: No such file or directory",
     ("libcudnn_graph.so.9", "nvidia-*")),
    ("ImportError: libcuda.so.1: cannot open shared object file: No such file or directory",
     ("libcuda.so.1", "driver", "--gpus all")),
    ("ImportError: /venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so: undefined symbol: ncclCommResume",
     ("libtorch_cuda.so", "ncclCommResume", "rebuild")),
    ("ImportError: /lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.30' not found (required by "
     "/venv/lib/python3.10/site-packages/torch/lib/libtorch_python.so)", ("libstdc++.so.6", "GLIBCXX_3.4.30")),
    ("OSError: /usr/lib/i386-linux-gnu/libcuda.so.1: wrong ELF class: ELFCLASS32", ("another architecture",)),
])
def test_the_hint_follows_the_loader_failure(error: str, words: tuple[str, ...]) -> None:
    finding = judge_one(torch_build.torch_import, _failed_import(error))
    assert finding.status is Status.FAIL
    for word in words:
        assert word in finding.remediation.text, (word, finding.remediation.text)


def test_the_hint_reads_the_fact_not_the_text() -> None:
    # The same words with no loader failure read (a grammar that found nothing) give the plain reinstall hint;
    # a failure read with no such words in the text still gives its own hint.
    plain = judge_one(torch_build.torch_import, _failed_import("ImportError: libcudart.so.12 is broken", []))
    assert plain.remediation.text.startswith("Reinstall torch")
    read = loader_errors("ImportError: libcublas.so.12: cannot open shared object file: No such file or directory")
    other = judge_one(torch_build.torch_import, _failed_import("ImportError: (text elided)", read))
    assert "libcublas.so.12" in other.remediation.text
    assert other.remediation.commands  # a torch install line either way


def test_a_missing_driver_library_is_not_answered_with_a_torch_reinstall() -> None:
    # libcuda.so.1 comes with the NVIDIA driver (or the container runtime's mounts), never with torch.
    finding = judge_one(torch_build.torch_import, _failed_import(
        "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory"))
    assert finding.remediation.commands
    assert not any("pip" in c and "torch" in c for c in finding.remediation.commands), finding.remediation.commands
    runtime = judge_one(torch_build.torch_import, _failed_import(
        "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory"))
    assert any("torch" in c for c in runtime.remediation.commands)  # a runtime library is torch's to bring
