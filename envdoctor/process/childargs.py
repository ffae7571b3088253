"""What the torch child is asked to do: its script, its arguments, and whether the microchecks
run in it — decided from the run's Plan by the probes (probes/torch_child.py) and by start-up
(:mod:`envdoctor.pipeline.startup`, which starts the child before click), so both build the same
command line.

One child imports torch once: it reports the torch facts (the python probe's), then, when the
microchecks are planned, runs them in the same process (``{"maps": true, "micro": {...}}``).
Only the standard library is imported here: start-up runs before click.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: The torch facts' script (``envdoctor/child/torch_probe.py``) and the record that ends its
#: first phase when the microchecks follow in the same process.
TORCH_SCRIPT = "torch_probe"
FACTS_PHASE = "torch"
#: Files whose presence says an NVIDIA driver is loaded (Linux) or exposed through WSL2.
GPU_NODES = ("/dev/nvidiactl", "/proc/driver/nvidia/version", "/dev/dxg")


def torch_args(micro: dict[str, Any] | None = None) -> dict[str, Any]:
    """The torch child's arguments; with ``micro`` (:func:`micro_args`) it runs them after its facts."""
    return {"maps": True} if micro is None else {"maps": True, "micro": micro}


def micro_devices(micro: bool, device: str | None, exists: Callable[[str], bool]) -> tuple[list[str] | None, str]:
    """(devices for the microchecks, "") or (None, why they are skipped). An empty list means
    "every visible CUDA device"; without ``--device`` they run only where the driver's nodes exist
    (``exists`` asks the host)."""
    if not micro:
        return None, "--no-micro"
    device = (device or "").strip()
    if device == "cpu":
        return ["cpu"], ""
    if device.startswith("cuda:"):
        return [device], ""
    if device not in ("", "cuda"):
        return None, f"unknown --device {device!r} (use cpu, cuda or cuda:N)"
    if not device and not any(exists(p) for p in GPU_NODES):
        return None, ("no NVIDIA GPU here (no /dev/nvidiactl, /proc/driver/nvidia/version or /dev/dxg); "
                      "run with --device cpu to exercise the microchecks on the CPU")
    return [], ""


def micro_args(devices: list[str], compile_: bool, checks: list[str] | None = None, inject: str = "",
               budget: float | None = None) -> dict[str, Any]:
    """The microchecks' arguments (``envdoctor/child/micro.py``), in one key order."""
    out: dict[str, Any] = {"devices": devices, "compile": bool(compile_)}
    if checks is not None:
        out["checks"] = checks
    if inject:
        out["inject"] = inject
    if budget is not None:
        out["budget"] = float(budget)
    return out
