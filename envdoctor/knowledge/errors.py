"""Meanings of CUDA driver (CUresult), CUDA runtime (cudaError_t) and NVML (nvmlReturn_t) return
codes: typed lookups over the one table ``envdoctor/data/errors.json``.

Every module that names or explains a code asks here: the message scanner (which runtime codes
stand for cuInit's result, and the words that identify them), the cuda-init and nvml-init checks
(titles and explanations), the nvidia-smi parser (what nvidia-smi prints for each NVML code) and
the NVML probe, which hands :func:`nvml_child_table` to its child in the child's JSON arguments
(the child runs as a stdlib script and cannot import envdoctor).
"""

from __future__ import annotations

import functools
import json
from typing import Any

from envdoctor.knowledge import datafiles
from envdoctor.record import Record

__all__ = ["CodeInfo", "cuda_driver", "cuda_init_codes", "cuda_init_text", "cuda_runtime", "nvml", "nvml_child_table",
           "nvml_printed", "runtime_messages", "runtime_names", "sources"]

TABLES = ("cuda_driver", "cuda_runtime", "nvml")


class CodeInfo(Record):
    """One return code: its symbolic name, the library's own wording, and envdoctor's reading of it."""

    code: int
    name: str
    message: str | None = None
    title: str | None = None  # the finding title a check uses when an initialisation returns the code
    meaning: str | None = None  # the explanation a check prints with it
    reason: str | None = None  # NVML: "absent" | "denied" | "unsupported" | "timeout" | "failed"
    as_cuinit: bool = False  # runtime: torch's cudaGetDeviceCount error with this code stands for cuInit's result
    recognise: tuple[str, ...] = ()  # runtime: "name" / "message" identify the code on their own
    printed_as: tuple[str, ...] = ()  # NVML: what nvidia-smi prints for it
    other_messages: tuple[str, ...] = ()  # the same code's wording in another release of the library

    @property
    def wordings(self) -> tuple[str, ...]:
        """Every wording of the code's message: errors.json's, then the other releases'."""
        return (self.message, *self.other_messages) if self.message else self.other_messages

    @property
    def judged(self) -> bool:
        """envdoctor has its own reading of the code (a check judges it): else it is only named."""
        return bool(self.as_cuinit or self.title or self.reason or self.printed_as)


def _entry(code: str, raw: dict[str, Any]) -> CodeInfo:
    return CodeInfo(int(code), str(raw["name"]), raw.get("message"), raw.get("title"), raw.get("meaning"),
                    raw.get("reason"), bool(raw.get("as_cuinit", False)), tuple(raw.get("recognise", ())),
                    tuple(raw.get("printed_as", ())), tuple(raw.get("other_messages", ())))


@functools.lru_cache(maxsize=1)
def _load() -> dict[str, Any]:
    text = datafiles.read_text("errors.json")
    data: dict[str, Any] = json.loads(text)
    return data


@functools.lru_cache(maxsize=len(TABLES))
def _table(name: str) -> dict[int, CodeInfo]:
    return {int(code): _entry(code, raw) for code, raw in _load()[name]["codes"].items()}


def cuda_driver() -> dict[int, CodeInfo]:
    """CUresult code -> its meaning."""
    return _table("cuda_driver")


def cuda_runtime() -> dict[int, CodeInfo]:
    """cudaError_t code -> its meaning."""
    return _table("cuda_runtime")


def nvml() -> dict[int, CodeInfo]:
    """nvmlReturn_t code -> its meaning."""
    return _table("nvml")


def sources() -> dict[str, str]:
    """Table name -> the NVIDIA page it is copied from."""
    return {name: str(_load()[name]["source"]) for name in TABLES}


@functools.lru_cache(maxsize=1)
def cuda_init_codes() -> dict[int, str]:
    """The CUDA error codes torch reports from initialisation that stand for what cuInit returned,
    each with the name the ``cuda.init`` fact carries: the driver API's where CUresult has the same
    code (and meaning), else the runtime's (35, ``cudaErrorInsufficientDriver``)."""
    driver = cuda_driver()
    return {code: (driver[code].name if code in driver else info.name)
            for code, info in cuda_runtime().items() if info.as_cuinit}


def cuda_init_text(code: int) -> tuple[str, str] | None:
    """``(title, meaning)`` the cuda-init check uses for a ``cuda.init`` code, None when it has none."""
    for table in (cuda_driver(), cuda_runtime()):
        info = table.get(code)
        if info is not None and info.title and info.meaning:
            return info.title, info.meaning
    return None


@functools.lru_cache(maxsize=1)
def runtime_names() -> dict[str, int]:
    """cudaError_t names that identify an initialisation failure on their own: ``cudaErrorNoDevice`` -> 100."""
    return {info.name: code for code, info in cuda_runtime().items() if "name" in info.recognise}


@functools.lru_cache(maxsize=1)
def runtime_messages() -> tuple[tuple[str, int], ...]:
    """``(cudaGetErrorString text, code)`` for the sentences that identify an initialisation failure."""
    return tuple((words, code) for code, info in cuda_runtime().items()
                 if "message" in info.recognise for words in info.wordings)


@functools.lru_cache(maxsize=1)
def nvml_printed() -> tuple[tuple[str, int, str], ...]:
    """``(words nvidia-smi prints, NVML code, name)``, in the order a failure line is matched."""
    return tuple((words, code, info.name) for code, info in nvml().items() for words in info.printed_as)


def nvml_child_table() -> dict[str, list[str]]:
    """The NVML table as the NVML child takes it in its JSON arguments: ``{"9": [name, reason]}``."""
    return {str(code): [info.name, info.reason or "failed"] for code, info in nvml().items()}
