"""Parse the one-line environment banner Ultralytics (YOLOv5, YOLOv8 and later) prints before every
run, which users paste into thousands of issues, and the ``torch.cuda.is_available(): False`` lines
that often come with it:

    YOLOv5 🚀 2022-9-1 Python-3.9.13 torch-1.12.1+cu113 CUDA:0 (NVIDIA GeForce RTX 3090, 24268MiB)
    Ultralytics YOLOv8.1.3 🚀 Python-3.10.11 torch-2.1.0+cpu CPU (11th Gen Intel Core(TM) i7-11800H)

The banner is torch describing itself (``torch.__version__``) and the device Ultralytics selected:
``CUDA:n (name, MiB)`` is a device torch sees; ``CPU`` only says the run used the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence

from envdoctor.knowledge import versions

from ..lazyre import lazy_re
from ..model import Reading, ok

SOURCE = "ultralytics"
KEYS = ("torch.version", "torch.cuda_version", "torch.devices", "torch.device_count", "torch.cuda_available",
        "python.version")

_BANNER_RE = lazy_re(r"(?:YOLOv\d\S*|Ultralytics\b).{0,200}?\btorch[- ](\d+\.\d+(?:\.\d+)?(?:\.?(?:dev|a|b|rc)\d+)?"
                        r"(?:\+[\w.]+)?)")
_PYTHON_RE = lazy_re(r"\bPython-(\d+\.\d+(?:\.\d+)?)")
_DEVICE_RE = lazy_re(r"CUDA:(\d+) \(([^,()]+(?:\([^)]*\))?[^,()]*), (\d+)\s*MiB\)")
_AVAILABLE_RE = lazy_re(r"torch\.cuda\.is_available\(\)\s*[:=]?\s*(True|False)\b")


def looks_like(lines: Sequence[str]) -> bool:
    return any(_BANNER_RE.search(line) for line in lines)


def parse(lines: Sequence[str]) -> dict[str, Reading]:
    out: dict[str, Reading] = {}
    banner = next((line for line in lines if _BANNER_RE.search(line)), None)
    if banner is None:
        return out
    version = _BANNER_RE.search(banner).group(1)  # type: ignore[union-attr]
    out["torch.version"] = ok(version, SOURCE, "Ultralytics banner")
    tag = versions.local_tag(version)
    if tag == "cpu":
        out["torch.cuda_version"] = ok(None, SOURCE, "the banner's torch is a +cpu build")
    elif cuda := versions.variant_cuda(tag):
        out["torch.cuda_version"] = ok(cuda, SOURCE, f"from the +{tag} tag")
    if m := _PYTHON_RE.search(banner):
        out["python.version"] = ok(m.group(1), SOURCE)
    text = "\n".join(lines)
    devices = {int(m.group(1)): {"index": int(m.group(1)), "name": m.group(2).strip(),
                                 "total_memory": int(m.group(3)) << 20} for m in _DEVICE_RE.finditer(text)}
    if devices:
        out["torch.devices"] = ok(sorted(devices.values(), key=lambda d: d["index"]), SOURCE, "CUDA:n in the banner")
        out["torch.device_count"] = ok(len(devices), SOURCE)
        out["torch.cuda_available"] = ok(True, SOURCE, "the banner selected a CUDA device")
    elif m := _AVAILABLE_RE.search(text):
        out["torch.cuda_available"] = ok(m.group(1) == "True", SOURCE)
    return out


__all__ = ["KEYS", "SOURCE", "looks_like", "parse"]
