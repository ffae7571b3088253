"""Parse the package listings people paste instead of collect_env: ``pip list`` (often through
``| grep torch``), ``pip freeze``, ``conda list`` rows, and the torch/torchvision rows of
detectron2's environment table (``torchvision  0.2.1 @/path/to/site-packages/torchvision``, which
names the copy that is imported).

Only packages that matter to a GPU environment are kept (torch and its domain libraries, Triton,
xformers, vLLM, flash-attn, bitsandbytes, cupy/jax CUDA builds and the ``nvidia-*`` wheels), and a
listing counts as a report only when it holds torch itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..lazyre import lazy_re
from ..model import Reading, ok
from .collect_env import normalize_name

SOURCE = "package list"
KEYS = ("python.packages", "torch.version")

_RELEVANT = lazy_re(r"(torch|pytorch|torchvision|torchaudio|torch-xla|triton|pytorch-triton|xformers|vllm|"
                       r"flash-attn|bitsandbytes|deepspeed|nvidia-[\w-]+|cupy-cuda\w+|jax-cuda\w+|jaxlib|"
                       r"onnxruntime-gpu|tensorrt|cuda-python|cuda-bindings|nvidia-ml-py|pynvml)")
_VERSION = r"(\d[\w.+!-]*)"
_FREEZE_RE = lazy_re(rf"^([A-Za-z0-9][\w.-]*)\s*==\s*{_VERSION}\s*$")
_TABLE_RE = lazy_re(rf"^([A-Za-z0-9][\w.-]*)\s+{_VERSION}(?:\s+\S+){{0,3}}\s*$")
# A hand-written list in a ticket: "torch-2.1.1", "torchaudio-2.0.1".
_DASHED_RE = lazy_re(r"^(torch|torchvision|torchaudio)-(\d[\w.+]*)$")
_IMPORTED_RE = lazy_re(rf"^(PyTorch|torchvision|torchaudio)\s+{_VERSION}\s+@\S*")
_SHOW_NAME_RE = lazy_re(r"^Name:\s*(\S+)\s*$")
_SHOW_VERSION_RE = lazy_re(rf"^Version:\s*{_VERSION}\s*$")


def _entries(lines: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(listed, imported): versions from list/freeze/show lines, and those detectron2's table says
    are imported (they win: they are the copies Python loads)."""
    listed: dict[str, str] = {}
    imported: dict[str, str] = {}
    show_name: str | None = None
    for raw in lines:
        line = raw.strip()
        if not line or len(line) > 300:
            continue
        if m := _IMPORTED_RE.match(line):
            imported[{"pytorch": "torch"}.get(m.group(1).lower(), m.group(1).lower())] = m.group(2)
            continue
        if m := _SHOW_NAME_RE.match(line):
            show_name = normalize_name(m.group(1))
            continue
        if show_name and (m := _SHOW_VERSION_RE.match(line)):
            listed[show_name] = m.group(1)
            show_name = None
            continue
        m = _FREEZE_RE.match(line) or _TABLE_RE.match(line) or _DASHED_RE.match(line)
        if m:
            name = normalize_name(m.group(1))
            name = {"pytorch": "torch"}.get(name, name)
            if _RELEVANT.fullmatch(name):
                listed.setdefault(name, m.group(2))
    return listed, imported


def looks_like(lines: Sequence[str]) -> bool:
    listed, imported = _entries(lines)
    return "torch" in listed or "torch" in imported


def parse(lines: Sequence[str]) -> dict[str, Reading]:
    listed, imported = _entries(lines)
    packages = {**listed, **imported}
    out: dict[str, Reading] = {}
    if packages:
        out["python.packages"] = ok(packages, SOURCE)
    if "torch" in packages:
        out["torch.version"] = ok(packages["torch"], SOURCE, "the installed distribution's version from the pasted "
                                  "package list")
    return out


__all__ = ["KEYS", "SOURCE", "looks_like", "parse"]
