"""Probe: run the microchecks (``envdoctor/child/micro.py``) in the target interpreter with a
deadline, and turn what the child printed — all of it, or as much as it printed before it hung
or crashed — into ``micro.*`` facts.

Deciding to run is cheap and happens here: ``--no-micro`` skips everything, and without
``--device cpu`` the microchecks run only when the NVIDIA driver's device nodes exist (the child
then confirms ``torch.cuda.is_available()``). The facts hold what was measured (TFLOP/s, GB/s,
seconds, sizes, the GPU's name), never a ratio to a datasheet peak: the checks divide by the
peaks of ``envdoctor/data/compat.json`` when they judge, so a re-judged old report gets today's
table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from envdoctor.process import childargs
from envdoctor.process.host import ChildResult, Host, PhasedChild

from ..model import Reading, Reason, missing, ok
from . import torch_child
from .spec import Options, ProbeSpec

SOURCE = "child:micro"

#: Checks in the order the child runs them; each has the fact ``micro.<name>``.
CHECKS = ("device", "matmul", "transformer", "copy", "compile", "dataloader", "multi_gpu")
KEYS = ("micro.run", *(f"micro.{c}" for c in CHECKS))

# -- deciding and running ---------------------------------------------------------------------
# What the child is asked and its deadline are the torch child's plan (:mod:`.torch_child`): the
# microchecks may run in the torch facts' own child.

class MicroProbeSpec(ProbeSpec):
    """The deadline grows with ``--compile`` (:func:`.torch_child.micro_deadline`)."""

    def deadline(self, options: Options) -> float:
        return torch_child.micro_deadline(options)


def _skipped(detail: str) -> dict[str, Reading]:
    return {k: missing(Reason.SKIPPED, SOURCE, detail) for k in KEYS}


def probe_micro(host: Host, options: Options) -> dict[str, Reading]:
    args, why = torch_child.child_args(host, options)
    if args is None:
        return _skipped(why)
    deadline = PROBE.deadline(options)
    shared = torch_child.start(host, options)
    if shared is not None:  # the torch facts' child runs them after its facts: one import torch
        return readings_from_shared(shared, args, deadline)
    result = host.run_child("micro", args, timeout=deadline, python=options.python)
    return readings_from_child(result, args, deadline)


def readings_from_shared(child: PhasedChild, args: Mapping[str, Any], deadline: float) -> dict[str, Reading]:
    """Facts from the one torch child's second phase. A child that stopped before it (``import
    torch`` hung or crashed) is the torch facts' finding: here every key says so, as a skip."""
    result = child.final(deadline)
    if child.reached(childargs.FACTS_PHASE) or isinstance(result.data.get("fatal"), dict) or result.status == "absent":
        return readings_from_child(result, args, deadline)
    what = {"timeout": "hung", "crashed": "crashed"}.get(result.status, "stopped")
    detail = (f"not run: the torch child {what} before the microchecks ({result.explain()}); "
              "see the torch facts")
    run = _run_record(result, args, deadline)
    return {"micro.run": Reading(run, Reason.SKIPPED, SOURCE, detail),
            **{f"micro.{c}": missing(Reason.SKIPPED, SOURCE, detail) for c in CHECKS}}


# -- turning the child's records into facts ---------------------------------------------------

def _results(data: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{"matmul": {"cuda:0": {...}}, ...}`` from the child's ``matmul@cuda:0`` records."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        name, sep, device = key.partition("@")
        if sep and name in CHECKS and isinstance(value, dict):
            out.setdefault(name, {})[device] = value
    return out


def _with_gpu_name(name: str, per_device: dict[str, Any], devices: Mapping[str, Any]) -> dict[str, Any]:
    """Matmul and copy results name the GPU they ran on (from its device touch), so a check can
    find its datasheet peaks from the result alone."""
    if name not in ("matmul", "copy"):
        return per_device
    out: dict[str, Any] = {}
    for dev, result in per_device.items():
        gpu = (devices.get(dev) or {}).get("name") if dev != "cpu" else None
        out[dev] = {**result, "name": gpu} if gpu and isinstance(result, dict) and "name" not in result else result
    return out


def stage_devices(stage: str | None) -> list[str]:
    """The CUDA devices a step the child announced names (``"matmul@cuda:1: bf16 compute"``,
    ``"cuda init cuda:1"``): where a hang or crash happened."""
    return sorted(set(re.findall(r"cuda:\d+", stage or "")), key=lambda d: int(d.split(":")[1]))


def readings_from_child(result: ChildResult, args: Mapping[str, Any], deadline: float) -> dict[str, Reading]:
    """Facts from what the child printed. The check the child was in when it hung or crashed
    gets that reason; checks it never reached are ``skipped`` ("not reached"), so one hang is
    one finding, not seven."""
    data = result.data
    if result.status == "absent":
        return {k: missing(Reason.ABSENT, SOURCE, result.detail) for k in KEYS}
    run = _run_record(result, args, deadline)
    fatal = data.get("fatal")
    plan_: Mapping[str, Any] | None = data.get("plan")
    out: dict[str, Reading] = {}

    if isinstance(fatal, dict):
        run["error"] = fatal.get("error")
        out["micro.run"] = Reading(run, Reason.FAILED, SOURCE, f"import torch failed: {fatal.get('error')}")
        out.update({f"micro.{c}": missing(Reason.SKIPPED, SOURCE, "torch does not import (see torch-import)")
                    for c in CHECKS})
        return out
    if isinstance(plan_, dict):
        run["devices"] = list(plan_.get("devices") or [])
        if plan_.get("unusable"):
            run["unusable"] = dict(plan_["unusable"])
    out["micro.run"] = Reading(run, result.reason, SOURCE, result.explain() if not result.ok else "")

    if isinstance(plan_, dict) and not plan_.get("devices"):
        why = plan_.get("why") or "no usable device"
        out.update({f"micro.{c}": missing(Reason.SKIPPED, SOURCE, f"no usable GPU: {why}") for c in CHECKS})
        unusable = plan_.get("unusable") or {}
        if unusable:  # the user named a device that cannot be used: that is the device touch failing
            out["micro.device"] = ok({d: {"ok": False, "error": e, "unusable": True} for d, e in unusable.items()},
                                     SOURCE)
        return out

    out.update(_check_readings(result, args, plan_))
    return out


def _run_record(result: ChildResult, args: Mapping[str, Any], deadline: float) -> dict[str, Any]:
    """``micro.run``: how the child went, where it stopped, and what was asked of it."""
    data = result.data
    run: dict[str, Any] = {
        "status": result.status, "seconds": round(result.seconds, 3), "deadline": deadline,
        "stage": result.stage or None, "stage_devices": stage_devices(result.stage), "torch": data.get("torch_version"),
        "cuda_init_seconds": data.get("cuda_init_seconds"), "checks_seconds": data.get("checks_seconds"),
        "requested": list(args.get("devices") or []) or "all visible CUDA devices",
    }
    if args.get("inject"):
        run["self_test_inject"] = args["inject"]
    if not result.ok:
        run["detail"] = result.explain()
        run["stderr_tail"] = [ln for ln in result.stderr.strip().splitlines() if ln.strip()][-8:]
    return run


def _check_readings(result: ChildResult, args: Mapping[str, Any],
                    plan_: Mapping[str, Any] | None) -> dict[str, Reading]:
    """One reading per microcheck: its result, or why there is none (not planned, the check the child
    hung or crashed in, or not reached after that)."""
    out: dict[str, Reading] = {}
    planned: list[str]
    if isinstance(plan_, dict):
        planned = [c for c in CHECKS if c in (plan_.get("checks") or [])]
        devices = list(plan_.get("devices") or [])
    else:  # died before planning (in import torch or CUDA enumeration)
        planned = [c for c in CHECKS if c in (args.get("checks") or CHECKS)
                   and (c != "compile" or args.get("compile")) and c != "multi_gpu"]
        devices = list(args.get("devices") or [])
    results = _results(result.data)
    device_info = results.get("device", {})
    blamed = False
    for name in CHECKS:
        key = f"micro.{name}"
        got = results.get(name, {})
        if name not in planned:
            out[key] = missing(Reason.SKIPPED, SOURCE, _not_planned(name, args, plan_))
            continue
        if name == "multi_gpu":
            complete = "all" in got
            value: Any = got.get("all")
        elif name == "dataloader":
            complete = bool(got)
            value = got
        else:
            complete = (bool(devices) and all(d in got for d in devices)) or (not devices and bool(got))
            value = _with_gpu_name(name, got, device_info)
        if complete or (result.ok and got):
            out[key] = ok(value, SOURCE)
        elif result.ok:
            out[key] = missing(Reason.FAILED, SOURCE, "the microcheck child finished without reporting this check")
        elif not blamed:
            blamed = True
            reason = result.reason or Reason.FAILED
            out[key] = Reading(value or None, reason, SOURCE, result.explain())
        else:
            what = {"timeout": "hung", "crashed": "crashed"}.get(result.status, "stopped")
            out[key] = Reading(value or None, Reason.SKIPPED, SOURCE,
                               f"not reached: the microcheck child {what} earlier ({result.stage or 'before any check'})")
    return out


def _not_planned(name: str, args: Mapping[str, Any], plan_: Mapping[str, Any] | None) -> str:
    subset = args.get("checks")
    if subset == ["device"]:
        return "healthcheck runs only the device touch"
    if subset and name not in subset:
        return "not requested"
    if name == "compile":
        return "--compile not given"
    if name == "multi_gpu":
        why = (plan_ or {}).get("multi_gpu_skipped") or "fewer than 2 CUDA devices"
        return f"needs at least 2 visible GPUs ({why})"
    return "not requested"


# Not in the plain healthcheck subset: `healthcheck --micro` adds micro probes itself.
PROBE = MicroProbeSpec("micro", probe_micro, KEYS, scale=torch_child.MICRO_SCALE, micro=True, critical=True)
PROBES = [PROBE]
