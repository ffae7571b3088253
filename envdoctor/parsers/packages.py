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
KEYS = ("python.packages", "torch.version", "torch.cuda_version")

_RELEVANT = lazy_re(r"(torch|pytorch|torchvision|torchaudio|torch-xla|triton|pytorch-triton|xformers|vllm|"
                       r"flash-attn|bitsandbytes|deepspeed|nvidia-[\w-]+|cupy-cuda\w+|jax-cuda\w+|jaxlib|"
                       r"onnxruntime-gpu|tensorrt|cuda-python|cuda-bindings|nvidia-ml-py|pynvml)")
_VERSION = r"(\d[\w.+!-]*)"
_FREEZE_RE = lazy_re(rf"^([A-Za-z0-9][\w.-]*)\s*==\s*{_VERSION}\s*$")
_TABLE_RE = lazy_re(rf"^([A-Za-z0-9][\w.-]*)\s+{_VERSION}(?:\s+\S+){{0,3}}\s*$")
# A hand-written list in a ticket: "torch-2.1.1", "torchaudio-2.0.1".
_DASHED_RE = lazy_re(r"^(torch|torchvision|torchaudio)-(\d[\w.+]*)$")
_IMPORTED_RE = lazy_re(rf"^(PyTorch|torchvision|torchaudio)\s+{_VERSION}\s+@\S*")
# A `conda list` row: name, version, build string, channel (conda/conda, conda/cli/main_list.py).
_CONDA_ROW_RE = lazy_re(rf"^([A-Za-z0-9][\w.-]*)\s+{_VERSION}\s+(\S+)(?:\s+(\S+))?\s*$")
# What a pytorch build string says it was built for:
# * the pytorch channel (pytorch/builder, conda/pytorch-nightly/meta.yaml: "py{{ PY_VER }}_{{ CUDA_STRING }}_…"):
#   "py3.10_cuda11.8_cudnn8.7.0_0", "py3.10_cpu_0";
# * conda-forge (conda-forge/pytorch-cpu-feedstock, recipe/meta.yaml: "cuda{{ cuda_compiler_version | replace('.',
#   '') }}[_{{ blas_impl }}]_py{{ CONDA_PY }}h{{ PKG_HASH }}_…", "cpu_[{{ blas_impl }}_]py…"): "cuda118py310h…",
#   "cuda126_mkl_py312h…", "cpu_mkl_py311h…", "cpu_generic_py310h…".
_PYTORCH_CHANNEL_CUDA_RE = lazy_re(r"^py\d\.\d{1,2}_cuda(\d{1,2}\.\d)(?:\.\d+)*_cudnn")
_PYTORCH_CHANNEL_CPU_RE = lazy_re(r"^py\d\.\d{1,2}_cpu_\d+$")
_CONDA_FORGE_CUDA_RE = lazy_re(r"^cuda(\d{1,2})(\d)_?(?:[a-z]+_)?py\d{2,3}h")
_CONDA_FORGE_CPU_RE = lazy_re(r"^cpu_(?:[a-z]+_)?py\d{2,3}h")
_MINOR_RE = lazy_re(r"^(\d{1,2}\.\d)$")
# conda's transaction plan ("The following NEW packages will be INSTALLED:"), each package as its record's dist
# string "channel/subdir::name-version-build" after the name (conda >= 4.6, conda/core/link.py _change_report_str;
# an UPDATED row "old --> new"), or as "name: version-build channel" (conda < 4.6, conda/plan.py display_actions).
_PLAN_ROW_RE = lazy_re(r"^([A-Za-z0-9][\w.-]*)\s+(?:\S+\s+-->\s+)?(?:[\w./-]+/)?[\w-]+::([A-Za-z0-9][\w.+!-]*)"
                       r"(?:\s+\([\w ]{1,20}\))?\s*$")
_OLD_PLAN_ROW_RE = lazy_re(r"^([A-Za-z0-9][\w.-]*):\s+(?:\S+\s+-->\s+)?(\d[\w.+!]*)-([\w.+]+)(?:\s+\S+)?\s*$")
#: The package names a conda plan installs torch under (the pytorch channel's nightly and CPU names included).
_PLAN_TORCH = {"pytorch": "torch", "pytorch-nightly": "torch", "pytorch-cpu": "torch", "pytorch-nightly-cpu": "torch"}


def _plan_row(line: str) -> tuple[str, str, str] | None:
    """``(name, version, build)`` of a row of conda's transaction plan, or None."""
    if "::" in line and (m := _PLAN_ROW_RE.match(line)):
        parts = m.group(2).rsplit("-", 2)
        if len(parts) == 3 and parts[0] == m.group(1) and parts[1][:1].isdigit():
            return parts[0], parts[1], parts[2]
        return None
    if (m := _OLD_PLAN_ROW_RE.match(line)) is not None:
        return m.group(1), m.group(2), m.group(3)
    return None
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
        if (plan := _plan_row(line)) is not None:
            name = _PLAN_TORCH.get(plan[0], normalize_name(plan[0]))
            if _RELEVANT.fullmatch(name):
                listed.setdefault(name, plan[1])
            continue
        m = _FREEZE_RE.match(line) or _TABLE_RE.match(line) or _DASHED_RE.match(line)
        if m:
            name = normalize_name(m.group(1))
            name = {"pytorch": "torch"}.get(name, name)
            if _RELEVANT.fullmatch(name):
                listed.setdefault(name, m.group(2))
    return listed, imported


def build_cuda(name: str, version: str, build: str) -> tuple[str | None, str] | None:
    """What a `conda list` row says torch was built for: ``(None, why)`` for a CPU build, ``("11.8", why)`` for a
    CUDA one; None when the row says neither. Read from the pytorch row's build string, the pytorch channel's
    ``pytorch-mutex … cpu`` / ``cpuonly`` selectors and its ``pytorch-cuda X.Y`` package."""
    why = f"`conda list`: {name} {version} {build}"
    if name in ("pytorch", "torch", "pytorch-nightly", "pytorch-cpu", "pytorch-nightly-cpu"):
        if m := _PYTORCH_CHANNEL_CUDA_RE.match(build):
            return m.group(1), why
        if m := _CONDA_FORGE_CUDA_RE.match(build):
            return f"{m.group(1)}.{m.group(2)}", why
        if _PYTORCH_CHANNEL_CPU_RE.match(build) or _CONDA_FORGE_CPU_RE.match(build):
            return None, why
        return None  # a build string of another shape says nothing
    if name == "pytorch-mutex" and build == "cpu" or name in ("cpuonly", "cpu-only"):
        return None, why
    if name == "pytorch-cuda" and (m := _MINOR_RE.match(version)):
        return m.group(1), why
    return None


def _builds(lines: Sequence[str]) -> list[tuple[str | None, str]]:
    """What each `conda list` row that names torch's build says it was built for (see :func:`build_cuda`)."""
    out: list[tuple[str | None, str]] = []
    for raw in lines:
        line = raw.strip()
        if not line or len(line) > 300 or not line.startswith(("pytorch", "torch", "cpuonly", "cpu-only")):
            continue
        if (plan := _plan_row(line)) is not None:
            said = build_cuda(plan[0], plan[1], plan[2])
        elif (m := _CONDA_ROW_RE.match(line)) is not None:
            said = build_cuda(normalize_name(m.group(1)), m.group(2), m.group(3))
        else:
            continue
        if said is not None:
            out.append(said)
    return out


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
        builds = _builds(lines)
        if builds and len({b[0] for b in builds}) == 1 and "+" not in packages["torch"]:
            # One answer from the build strings (rows that disagree say nothing); a "+cu118" tag says it itself.
            cuda, why = builds[0]
            out["torch.cuda_version"] = ok(cuda, SOURCE, f"the CUDA torch's conda build is for ({why})" if cuda else
                                           f"a CPU-only conda build of torch ({why})")
    return out


__all__ = ["KEYS", "SOURCE", "looks_like", "parse"]
