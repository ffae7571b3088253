"""Microchecks: judge the ``micro.*`` facts — did the stack compute right, fast enough, and
without hanging or crashing — on every device they ran on.

A wrong result is ``fail`` (the environment is broken); far below the datasheet peak is
``warn``; a microcheck child that hung or crashed is ``error`` (envdoctor could not finish),
naming the step it was in and, for a crash, the signal.

The facts carry what was measured; the ratio to the datasheet peak is computed here, against
``compat.gpu_peaks``, so a saved report re-judged later gets the table of that day. Reports
saved before that carry ``peak_tflops``/``peak_gbps``/``ratio`` next to the figures: those are
used only when the table has no peaks for the GPU.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard

from envdoctor import views
from envdoctor.knowledge import compat, remedies

from ..kit import Remediation, error, evidence, fail, ok, skip, warn
from ..model import Facts, Finding, Reason, Status, thaw
from ..registry import CheckResult, check

#: Achieved/peak below this is "far below": a healthy GPU reaches 0.6-0.9 of the dense peak
#: on a large square GEMM; a throttled, down-clocked or MIG-sliced one sits far lower.
LOW_RATIO = 0.35
#: Device-to-device copy vs memory bandwidth: healthy HBM/GDDR copies reach 0.7-0.9.
LOW_MEMORY_RATIO = 0.3
#: Pinned host<->device vs what the PCIe link carries: healthy links reach 0.7-0.9.
LOW_PCIE_RATIO = 0.5
#: GB/s per lane, one direction, after encoding (PCIe 1-2: 8b/10b; 3-5: 128b/130b; 6: FLIT).
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}

HANG_HINT = ("A microcheck that never returns usually means a wedged driver or GPU: look for Xid errors "
             f"(`{remedies.kernel_log('xid', times=True)}`), check `nvidia-smi` answers, then reset the GPU it hung on "
             "(with nothing running on it) or reboot.")
CRASH_HINT = ("A crash inside CUDA/cuBLAS/cuDNN usually means mismatched libraries (see the library "
              "findings) or a faulty GPU (Xid errors in `dmesg`). Re-run `envdoctor check --micro-only` to "
              "confirm it repeats.")
SHM_LINKS = (remedies.DOCKER_SHM_SIZE,
             "https://kubernetes.io/docs/concepts/storage/volumes/#emptydir",
             remedies.TORCH_DOCKER_IMAGE)


def _gpu_index(device: str) -> list[int]:
    if device.startswith("cuda:"):
        try:
            return [int(device.split(":", 1)[1])]
        except ValueError:
            return []
    return []


def _not_run(facts: Facts, key: str, what: str) -> Finding | None:
    """The finding for a micro fact that has no value: skip, or error for a hang/crash."""
    reading = facts.get(key)
    if reading.ok:
        return None
    ev = evidence(facts, key, "micro.run")
    if reading.reason is Reason.TIMEOUT:
        # Reset the GPU the hung step ran on (nothing else may run on it), else reboot.
        hung_on = _stage_gpus(facts)
        reset = remedies.gpu_resets(hung_on, f"nothing may run on it; otherwise: {remedies.reboot()}")
        return error(f"The {what} microcheck hung", detail=f"{reading.describe()}. Results finished before the hang "
                     "are kept in the report.", evidence=ev,
                     remedy=Remediation(HANG_HINT, ("nvidia-smi", remedies.kernel_log("xid", times=True),
                                                    *(reset or (remedies.reboot(),)))))
    if reading.reason is Reason.CRASHED:
        return error(f"The {what} microcheck crashed", detail=reading.describe(), evidence=ev,
                     remedy=Remediation(CRASH_HINT, (remedies.kernel_log("xid", times=True),)))
    if reading.reason is Reason.FAILED:
        return error(f"The {what} microcheck did not finish", detail=reading.describe(), evidence=ev)
    return skip(f"The {what} microcheck was not run", detail=reading.describe(), evidence=ev)


def _stage_gpus(facts: Facts) -> list[int]:
    """GPU indices of the step the child was in when it stopped: ``micro.run.stage_devices``, or
    for a report saved before the probe wrote it, the devices its ``stage`` field names."""
    run = thaw(facts.get("micro.run").value)
    run = run if isinstance(run, dict) else {}
    devices = run.get("stage_devices")
    if not isinstance(devices, list):
        devices = re.findall(r"cuda:\d+", str(run.get("stage") or ""))
    return sorted({i for d in devices for i in _gpu_index(str(d))})


def _per_device(facts: Facts, key: str) -> dict[str, dict[str, Any]]:
    value = thaw(facts.get(key).value) or {}
    return {str(d): r for d, r in value.items() if isinstance(r, dict)}


#: One device's (or one dtype's) verdict: status, the finding's title should it be the worst, the
#: device's line for the detail, and the GPU indices it names.
Verdict = tuple[Status, str, str, list[int]]
_SEVERITY = {Status.OK: 0, Status.WARN: 1, Status.FAIL: 2}


def _judge_devices(facts: Facts, key: str, judge: Callable[[Facts, str, dict[str, Any], list[int]], Verdict]
                   ) -> list[Verdict]:
    """``judge(facts, device, result, gpu_indices)`` applied to each device's result of ``key``."""
    return [judge(facts, dev, r, _gpu_index(dev)) for dev, r in _per_device(facts, key).items()]


def _combine(findings: list[Verdict], title_ok: str, ev: Mapping[str, Any], remedy: Remediation | None,
             title_none: str) -> Finding:
    """One finding for a check from per-device verdicts: worst status, every device's line;
    ``title_none`` (a skip) when no device has a result."""
    if not findings:
        return skip(title_none, evidence=ev)
    worst = max((s for s, *_ in findings), key=lambda s: _SEVERITY[s], default=Status.OK)
    bad = [(t, d, g) for s, t, d, g in findings if s is worst]
    detail = "\n".join(d for _, _, d, _ in findings)
    gpus = sorted({g for s, *_, gs in findings if s is worst for g in gs}) if worst is not Status.OK else []
    if worst is Status.OK:
        return ok(title_ok, detail=detail, evidence=ev)
    title = bad[0][0] if len(bad) == 1 else f"{bad[0][0]} (and {len(bad) - 1} more)"
    make = warn if worst is Status.WARN else fail
    return make(title, detail=detail, evidence=ev, remedy=remedy, gpus=gpus)


def _fmt(x: Any, digits: int = 3) -> str:
    if not isinstance(x, (int, float)):
        return "?"
    return f"{x:,.0f}" if 1000 <= abs(x) < 1e12 else f"{x:.{digits}g}"


# -- device touch -------------------------------------------------------------------------------

TOUCH_REMEDY = Remediation("A device that cannot copy or run a trivial kernel correctly is unusable. Look for Xid "
                           "errors, check ECC and row-remapping findings, and reset the GPU or reboot.",
                           (remedies.kernel_log("xid", times=True), "nvidia-smi -q -d ECC,ROW_REMAPPER"))


def _touch_verdict(facts: Facts, dev: str, r: dict[str, Any], gpus: list[int]) -> Verdict:
    name = f"{dev} ({r['name']})" if r.get("name") and dev != "cpu" else dev
    if r.get("ok"):
        return (Status.OK, "", f"{name}: round trip and kernel correct", gpus)
    if r.get("unusable"):
        return (Status.FAIL, f"{dev} cannot be used", f"{name}: {r.get('error')}", gpus)
    if r.get("error"):
        return (Status.FAIL, f"{dev} fails the device touch", f"{name}: {r['error']}", gpus)
    what = "host->device->host copy came back different" if not r.get("roundtrip_equal") else \
        "a trivial kernel computed a wrong sum"
    return (Status.FAIL, f"{dev} corrupts data", f"{name}: {what}", gpus)


@check("micro-device", "Each device allocates, copies and runs a kernel correctly",
       needs=("micro.device",), judges_failures=True,
       micro=True, healthcheck=True)
def micro_device(facts: Facts) -> CheckResult:
    if missing := _not_run(facts, "micro.device", "device touch"):
        return missing
    verdicts = _judge_devices(facts, "micro.device", _touch_verdict)
    return _combine(verdicts, f"{len(verdicts)} device(s) pass the device touch", evidence(facts, "micro.device"),
                    TOUCH_REMEDY, "No device was touched")


# -- matmul -------------------------------------------------------------------------------------

def _low_throughput_hint(dev: str) -> str:
    return ("Far below the datasheet peak usually means the GPU is throttled (power or thermal: "
            "`nvidia-smi -q -d PERFORMANCE,CLOCK,POWER`), running at reduced clocks (application clocks or a "
            "power cap: `nvidia-smi -q -d CLOCK`), busy with another process (`nvidia-smi`), or is a MIG slice "
            "(`nvidia-smi -L`) — a 1g slice has 1/7 of the compute." if dev != "cpu" else "")


def _number(x: Any) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _device_name(facts: Facts, dev: str) -> str | None:
    devices = _per_device(facts, "micro.device") if facts.get("micro.device").ok else {}
    name = (devices.get(dev) or {}).get("name")
    return str(name) if name else None


def _peaks(facts: Facts, dev: str, r: Mapping[str, Any]) -> compat.Peaks | None:
    """The datasheet peaks of the GPU behind ``dev``: by the name its result records, else the one
    its device touch reports, else the peak model an old report named."""
    if dev == "cpu":
        return None
    for name in (r.get("name"), _device_name(facts, dev), r.get("peak_model")):
        peaks = compat.gpu_peaks(str(name)) if name else None
        if peaks is not None:
            return peaks
    return None


#: (achieved/peak, the peak, the GPU model it belongs to); all None when no peak is known.
Ratio = tuple[float | None, float | None, str | None]


def _ratio(achieved: Any, peak: float | None, model: str | None, old: Mapping[str, Any], old_peak_key: str,
           old_model: Any) -> Ratio:
    """``achieved / peak`` (rounded as the figures are), else what an old report stored."""
    if peak and _number(achieved):
        return round(achieved / peak, 4), peak, model
    stored = old.get(old_peak_key)
    if _number(stored) and stored > 0 and _number(achieved):
        return round(achieved / stored, 4), stored, str(old_model) if old_model else None
    if _number(old.get("ratio")):
        return old["ratio"], stored if _number(stored) else None, str(old_model) if old_model else None
    return None, None, None


def _matmul_dtype(dev: str, label: str, d: Mapping[str, Any], gpus: list[int], ratio: Ratio) -> Verdict:
    where = f"{dev} {label}"
    if d.get("error"):
        return (Status.FAIL, f"{label} matmul fails on {dev}", f"{where}: {d['error']}", gpus)
    if not d.get("finite"):
        return (Status.FAIL, f"{label} matmul on {dev} returns NaN/Inf",
                f"{where}: the {d.get('n')}x{d.get('n')} product of finite random inputs contains NaN or Inf", gpus)
    if not d.get("ok"):
        return (Status.FAIL, f"{label} matmul on {dev} computes wrong results",
                f"{where}: relative error {_fmt(d.get('rel_err'))} vs float64 exceeds {_fmt(d.get('tolerance'))}", gpus)
    share, peak, model = ratio
    speed = f"{_fmt(d.get('tflops'))} TFLOP/s"
    if share is not None:
        speed += f" = {share:.0%} of the {model} dense peak ({_fmt(peak)})"
    line = f"{where}: rel err {_fmt(d.get('rel_err'), 2)} (tol {_fmt(d.get('tolerance'))}), {speed}"
    if share is not None and share < LOW_RATIO:
        return (Status.WARN, f"{label} matmul on {dev} runs at {share:.0%} of peak", line, gpus)
    return (Status.OK, "", line, gpus)


def _matmul_device(facts: Facts, dev: str, r: Mapping[str, Any]) -> list[tuple[str, Verdict, Any, float | None]]:
    """(dtype label, verdict, achieved TFLOP/s, ratio to the peak) for each dtype one device ran."""
    gpus = _gpu_index(dev)
    if r.get("not_run"):
        return [("", (Status.FAIL, f"matmul not run on {dev}", f"{dev}: {r['not_run']}", gpus), None, None)]
    if r.get("error") and not r.get("dtypes"):
        return [("", (Status.FAIL, f"matmul fails on {dev}", f"{dev}: {r['error']}", gpus), None, None)]
    peaks = _peaks(facts, dev, r)
    out = []
    for label, d in (r.get("dtypes") or {}).items():
        ratio = _ratio(d.get("tflops"), peaks.tflops.get(label) if peaks else None, peaks.model if peaks else None,
                       d, "peak_tflops", r.get("peak_model"))
        out.append((label, _matmul_dtype(dev, label, d, gpus, ratio), d.get("tflops"), ratio[0]))
    return out


MATMUL_WRONG_REMEDY = Remediation(
    "A GEMM that returns wrong numbers or NaN on random inputs means broken math libraries (a mismatched cuBLAS) "
    "or a faulty GPU. Check the library findings, look for Xid/ECC errors, and do not trust training results from "
    "this device until it passes.", (remedies.kernel_log("xid", times=True), "nvidia-smi -q -d ECC,ROW_REMAPPER"))


@check("micro-matmul", "Matrix multiply is correct (vs float64) and near the expected speed",
       needs=("micro.matmul",), judges_failures=True,
       micro=True)
def micro_matmul(facts: Facts) -> CheckResult:
    if missing := _not_run(facts, "micro.matmul", "matmul"):
        return missing
    # Not _judge_devices: one device yields a verdict per dtype, and the title and hint need the
    # fastest result and the first slow device across all of them.
    verdicts: list[Verdict] = []
    low_devices = []
    best: tuple[str, str, float, float | None] | None = None
    for dev, r in _per_device(facts, "micro.matmul").items():
        for label, verdict, tflops, share in _matmul_device(facts, dev, r):
            verdicts.append(verdict)
            if verdict[0] is Status.FAIL:
                continue
            if _number(tflops) and (best is None or tflops > best[2]):
                best = (dev, label, tflops, share)
            if verdict[0] is Status.WARN:
                low_devices.append(dev)
    worst = max((v[0] for v in verdicts), key=lambda s: _SEVERITY[s], default=Status.OK)
    remedy = MATMUL_WRONG_REMEDY if worst is Status.FAIL else Remediation(
        _low_throughput_hint(low_devices[0] if low_devices else "cpu"),
        ("nvidia-smi -q -d PERFORMANCE,CLOCK,POWER", "nvidia-smi -L"))
    title = "Matmul results are correct"
    if best is not None:
        title += f"; fastest {best[0]} {best[1]} {_fmt(best[2])} TFLOP/s"
        if best[3] is not None:
            title += f" ({best[3]:.0%} of peak)"
    return _combine(verdicts, title, evidence(facts, "micro.matmul"), remedy, "No matmul results")


# -- transformer --------------------------------------------------------------------------------

def _py(facts: Facts) -> str:
    return facts.value("python.executable") or "python"


def _transformer_remedy(facts: Facts) -> Remediation:
    return Remediation(TRANSFORMER_REMEDY.text, tuple(c.replace("python -c", f"{_py(facts)} -c", 1)
                                                      for c in TRANSFORMER_REMEDY.commands), TRANSFORMER_REMEDY.links)


TRANSFORMER_REMEDY = Remediation(
    "Non-finite or divergent training steps on random data point at broken kernels (cuDNN/cuBLAS mismatch) or a "
    "faulty GPU; missing fused attention usually means a torch build without kernels for this GPU architecture "
    "(see torch-arch-support).",
    ("python -c \"import torch; print(torch.backends.cuda.flash_sdp_enabled(), torch.cuda.get_arch_list())\"",))


def _transformer_verdict(facts: Facts, dev: str, r: dict[str, Any], gpus: list[int]) -> Verdict:
    if r.get("not_run") or r.get("error"):
        return (Status.FAIL, f"Transformer step fails on {dev}", f"{dev}: {r.get('error') or r.get('not_run')}", gpus)
    f32, amp, sdpa = r.get("fp32") or {}, r.get("amp") or {}, r.get("sdpa") or {}
    usable = sorted(k for k, b in sdpa.items() if isinstance(b, dict) and b.get("usable"))
    speed = (f"fp32 {_fmt(f32.get('tokens_per_s'))} tokens/s, {amp.get('dtype')} autocast "
             f"{_fmt(amp.get('tokens_per_s'))} tokens/s; SDPA backends: {', '.join(usable) or 'none'}")
    problems = []
    if not (f32.get("loss_finite") and f32.get("grads_finite") and f32.get("params_finite", True)):
        problems.append("the fp32 step produced a non-finite loss, gradient or weight")
    if not (amp.get("loss_finite") and amp.get("grads_finite")):
        problems.append(f"the {amp.get('dtype')} autocast step produced a non-finite loss or gradient")
    elif not amp.get("grads_close"):
        problems.append(f"{amp.get('dtype')} autocast gradients differ from fp32 by {_fmt(amp.get('grad_rel_err'))} "
                        f"(allowed {_fmt(amp.get('grad_tolerance'))})")
    if not usable:
        problems.append("no scaled_dot_product_attention backend gives correct results")
    if problems:
        return (Status.FAIL, f"Transformer training step is broken on {dev}",
                f"{dev}: {'; '.join(problems)}. {speed}", gpus)
    if dev != "cpu" and not ({"flash", "mem_efficient", "cudnn"} & set(usable)):
        why = "; ".join(f"{k}: {b.get('why')}" for k, b in sdpa.items() if isinstance(b, dict) and b.get("why"))
        return (Status.WARN, f"Only the math attention backend works on {dev}",
                f"{dev}: fused attention kernels are unusable ({why}); attention falls back to the slow, "
                f"memory-hungry math path. {speed}", gpus)
    return (Status.OK, "", f"{dev}: {speed}", gpus)


@check("micro-transformer", "A Transformer block trains: finite loss and gradients, autocast close to fp32",
       needs=("micro.transformer",), judges_failures=True,
       micro=True)
def micro_transformer(facts: Facts) -> CheckResult:
    if missing := _not_run(facts, "micro.transformer", "Transformer"):
        return missing
    verdicts = _judge_devices(facts, "micro.transformer", _transformer_verdict)
    first = next(iter(_per_device(facts, "micro.transformer").items()), None)
    title = "Transformer forward/backward works"
    if first and isinstance((first[1].get("amp") or {}).get("tokens_per_s"), (int, float)):
        amp = first[1]["amp"]
        title += f"; {first[0]} {amp.get('dtype')} autocast {_fmt(amp['tokens_per_s'])} tokens/s"
    return _combine(verdicts, title, evidence(facts, "micro.transformer"), _transformer_remedy(facts),
                    "No Transformer results")


# -- copies -------------------------------------------------------------------------------------

def _pcie_link(facts: Facts, uuid: str | None, index: int | None) -> tuple[int | None, int | None]:
    """(gen, width) of a GPU's PCIe link from ``nvml.gpus[*].pcie``: the maximum the GPU and
    system support (NVML's Max* calls), since the current generation drops at idle to save power.
    The GPU is found by UUID (torch's has no ``GPU-`` prefix), else it is the only one."""
    chosen = views.find_gpu(views.gpus(facts), uuid, index)
    return chosen.pcie_max() if chosen else (None, None)


COPY_REMEDY = Remediation(
    "Slow host<->device copies mean a PCIe link trained below its rating (a riser, a x8/x4 slot, a bad seat: see "
    "gpu-pcie-link), a GPU attached to the other CPU socket, or IOMMU overhead. Slow device copies point at reduced "
    "memory clocks or another process on the GPU.",
    ("nvidia-smi -q -d PCIE", "nvidia-smi topo -m"))


def _copy_verdict(facts: Facts, dev: str, r: dict[str, Any], gpus: list[int]) -> Verdict:
    if r.get("not_run") or r.get("error"):
        return (Status.FAIL, f"Copies fail on {dev}", f"{dev}: {r.get('error') or r.get('not_run')}", gpus)
    if dev == "cpu":
        h = r.get("h2h") or {}
        status = Status.OK if h.get("equal") else Status.FAIL
        return (status, "Host memory copy came back different", f"cpu: host copy {_fmt(h.get('gbps'))} GB/s"
                + ("" if h.get("equal") else ", data differs"), gpus)
    h2d, d2h, d2d = r.get("h2d") or {}, r.get("d2h") or {}, r.get("d2d") or {}
    line = (f"{dev}: pinned H->D {_fmt(h2d.get('gbps'))} GB/s, D->H {_fmt(d2h.get('gbps'))} GB/s, "
            f"D->D {_fmt(d2d.get('gbps'))} GB/s")
    if not r.get("roundtrip_equal") or not d2d.get("equal", True):
        return (Status.FAIL, f"Copies corrupt data on {dev}", line + "; copied data differs", gpus)
    notes = []
    devices = _per_device(facts, "micro.device") if facts.get("micro.device").ok else {}
    gen, width = _pcie_link(facts, (devices.get(dev) or {}).get("uuid"), gpus[0] if gpus else None)
    if gen in PCIE_LANE_GBPS and width:
        link = PCIE_LANE_GBPS[gen] * width
        line += f" (PCIe gen{gen} x{width} carries ~{link:.0f} GB/s each way"
        worst = min((v for v in (h2d.get("gbps"), d2h.get("gbps")) if isinstance(v, (int, float))), default=None)
        if worst is not None and worst < LOW_PCIE_RATIO * link:
            notes.append(f"host<->device copies reach {worst / link:.0%} of the PCIe gen{gen} x{width} link")
        line += ")"
    peaks = _peaks(facts, dev, r)
    ratio, peak, model = _ratio(d2d.get("gbps"), peaks.memory_gbps if peaks else None, peaks.model if peaks else None,
                                d2d, "peak_gbps", r.get("peak_model"))
    if ratio is not None:
        line += f"; D->D is {ratio:.0%} of {_fmt(peak)} GB/s ({model})"
        if ratio < LOW_MEMORY_RATIO:
            notes.append(f"device memory copies reach {ratio:.0%} of the memory bandwidth")
    if notes:
        return (Status.WARN, f"Slow copies on {dev}", f"{line}. {'; '.join(notes)}", gpus)
    return (Status.OK, "", line, gpus)


@check("micro-copy", "Copies are correct and reach the PCIe link's and memory's bandwidth",
       needs=("micro.copy",), judges_failures=True,
       micro=True)
def micro_copy(facts: Facts) -> CheckResult:
    if missing := _not_run(facts, "micro.copy", "copy"):
        return missing
    verdicts = _judge_devices(facts, "micro.copy", _copy_verdict)
    first = next(iter(_per_device(facts, "micro.copy").items()), None)
    title = "Copies are correct"
    if first and isinstance((first[1].get("h2d") or {}).get("gbps"), (int, float)):
        title += (f"; {first[0]} H->D {_fmt(first[1]['h2d']['gbps'])} GB/s, "
                  f"D->D {_fmt((first[1].get('d2d') or {}).get('gbps'))} GB/s")
    return _combine(verdicts, title, evidence(facts, "micro.copy", "nvml.gpus"), COPY_REMEDY, "No copy results")


# -- DataLoader / shared memory -----------------------------------------------------------------

def _shm_remedy(facts: Facts) -> Remediation:
    container = facts.value("host.container")
    if container == "kubernetes":
        return Remediation(
            "DataLoader workers hand batches to the main process through /dev/shm, and it is too small. Mount a "
            "memory-backed emptyDir on /dev/shm in the pod (or lower num_workers/batch size).",
            ("# pod spec:\nvolumes:\n- name: dshm\n  emptyDir: {medium: Memory, sizeLimit: 16Gi}\n"
             "# container:\nvolumeMounts:\n- name: dshm\n  mountPath: /dev/shm",), SHM_LINKS)
    commands: tuple[str, ...] = (remedies.container_run("--shm-size=16g"), remedies.container_run("--ipc=host"))
    if not container:
        commands = (remedies.shm_remount(), *commands)
    return Remediation(
        "DataLoader workers hand batches to the main process through /dev/shm, and it is too small (Docker's "
        "default is 64 MiB). Start the container with a bigger /dev/shm or the host's IPC namespace; in Kubernetes "
        "mount an emptyDir with medium: Memory on /dev/shm. As a stopgap, num_workers=0.", commands, SHM_LINKS)


@check("micro-dataloader", "DataLoader workers pass large batches through /dev/shm",
       needs=("micro.dataloader",), judges_failures=True,
       micro=True)
def micro_dataloader(facts: Facts) -> CheckResult:
    missing = _not_run(facts, "micro.dataloader", "DataLoader")
    if missing:
        return missing
    ev = evidence(facts, "micro.dataloader", "host.shm_size", "host.container")
    results = _per_device(facts, "micro.dataloader")
    if not results:
        return skip("No DataLoader results", evidence=ev)
    dev, r = next(iter(results.items()))
    gpus = _gpu_index(dev)
    if r.get("ok"):
        return ok(f"DataLoader with {r.get('workers')} workers and pin_memory moves {_fmt(r.get('mbps'))} MB/s",
                  detail=f"{r.get('batches')} batches of {int(r.get('batch_bytes') or 0) >> 20} MiB, verified",
                  evidence=ev)
    text = r.get("error") or r.get("not_run") or ""
    worker_lines = [ln for ln in r.get("worker_stderr") or [] if "error" in ln.lower()]
    if r.get("bus_error"):
        shown = worker_lines[0] if worker_lines else "ERROR: Unexpected bus error encountered in worker."
        return fail("DataLoader workers die of SIGBUS: /dev/shm is too small",
                    detail=f"{text} (worker said: {shown})", evidence=ev, remedy=_shm_remedy(facts), gpus=gpus)
    if r.get("wrong_batches"):
        return fail("DataLoader delivered corrupted batches", detail=f"batches {r['wrong_batches']} differ from what the "
                    "workers produced", evidence=ev, gpus=gpus,
                    remedy=Remediation("Data corrupted between workers and the main process points at shared "
                                       "memory or RAM faults; re-run, then test memory (memtest86+ from the boot "
                                       "menu, or memtester while the machine runs).",
                                       ("envdoctor check --micro-only",
                                        remedies.memory_test()), ("https://www.memtest.org/",)))
    if r.get("hung"):
        return fail("DataLoader pass hangs", detail=text, evidence=ev, gpus=gpus, remedy=Remediation(
            "No batch arrived before the pass's deadline (the detail says whether ending the workers freed the "
            "main process, and where it was when it did not). Workers that hang are usually blocked in the dataset's "
            "code, or in a lock some "
            "thread held when the DataLoader forked them (start threads after creating the DataLoader, or use "
            "multiprocessing_context='spawn'). Re-run with num_workers=0 to confirm the data path itself works.",
            ("envdoctor check --micro-only",)))
    if r.get("killed"):
        return fail("DataLoader workers die", detail=text, evidence=ev, gpus=gpus,
                    remedy=Remediation("Workers killed by a signal are usually out of memory (the OOM killer: "
                                       "`dmesg | grep -i oom`) or out of /dev/shm. Lower num_workers or batch size, "
                                       "or raise the memory and shared-memory limits.", (remedies.kernel_log("oom|killed", flags="-i -E", times=True),)))
    return fail("DataLoader with workers fails", detail=text, evidence=ev, gpus=gpus, remedy=Remediation(
        "Workers that start but fail usually cannot share memory (/dev/shm too small or not writable) or cannot "
        "fork/spawn in this environment; the error above names which. Re-run with num_workers=0 to confirm the "
        "data path itself works, then fix shared memory.",
        ("df -h /dev/shm", *_shm_remedy(facts).commands), SHM_LINKS))


# -- multi-GPU ----------------------------------------------------------------------------------

@check("micro-multi-gpu", "GPUs reach each other: peer access and an NCCL all-reduce",
       needs=("micro.multi_gpu",), judges_failures=True,
       micro=True)
def micro_multi_gpu(facts: Facts) -> CheckResult:
    missing = _not_run(facts, "micro.multi_gpu", "multi-GPU")
    if missing:
        return missing
    ev = evidence(facts, "micro.multi_gpu")
    r = thaw(facts.value("micro.multi_gpu") or {})
    devices = r.get("devices") or []
    gpus = [g for d in devices for g in _gpu_index(d)]
    if r.get("error") and "nccl" not in r:
        return fail("Multi-GPU check failed", detail=r["error"], evidence=ev, gpus=gpus)
    matrix = r.get("peer_access") or []
    no_peer = [f"{devices[i]}->{devices[j]}" for i, row in enumerate(matrix) for j, v in enumerate(row)
               if not v and i < len(devices) and j < len(devices)]
    peers = "all pairs have peer access" if not no_peer else f"no peer access: {', '.join(no_peer)}"
    nccl = r.get("nccl") or {}
    status = nccl.get("status")
    warnings = nccl.get("nccl_warnings") or []
    tail = f" NCCL said: {' | '.join(warnings[-3:])}" if warnings else ""
    remedy = Remediation(
        "NCCL between local GPUs fails most often because PCIe ACS or the IOMMU blocks peer-to-peer traffic "
        "(all-reduce hangs), because fabric manager is not running on NVSwitch systems, or because of mismatched "
        "NCCL libraries. Test with P2P disabled; if that works, disable ACS in the BIOS or set iommu=pt.",
        ("NCCL_DEBUG=INFO NCCL_P2P_DISABLE=1 envdoctor check --micro-only", "nvidia-smi topo -m",
         "systemctl status nvidia-fabricmanager"),
        ("https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html",))
    if status == "hung":
        return fail("NCCL all-reduce between local GPUs hangs", detail=f"{nccl.get('detail')}; {peers}.{tail}",
                    evidence=ev, remedy=remedy, gpus=gpus)
    if status == "wrong":
        return fail("NCCL all-reduce returns wrong sums", detail=f"{nccl.get('detail')}; {peers}.{tail}", evidence=ev,
                    remedy=remedy, gpus=gpus)
    if status != "ok":
        return fail("NCCL all-reduce fails", detail=f"{nccl.get('detail')}; {peers}.{tail}", evidence=ev,
                    remedy=remedy, gpus=gpus)
    return ok(f"NCCL all-reduce across {len(devices)} GPUs is correct ({_fmt(nccl.get('seconds'))} s)",
              detail=f"{peers}.", evidence=ev)


# -- torch.compile ------------------------------------------------------------------------------

COMPILE_REMEDY = Remediation(
    "Inductor needs Triton (bundled with CUDA torch wheels as `triton`) on a GPU and a working C++ compiler "
    "(gcc/g++) for CPU code and its launchers; a Python.h from the python3-dev package is needed too. Check the "
    "error text for which is missing.",
    ("python -c \"import triton; print(triton.__version__)\"", "gcc --version"))


def _compile_verdict(facts: Facts, dev: str, r: dict[str, Any], gpus: list[int]) -> Verdict:
    if r.get("error") or r.get("not_run"):
        return (Status.FAIL, f"torch.compile fails on {dev}", f"{dev}: {r.get('error') or r.get('not_run')}", gpus)
    if not r.get("ok"):
        return (Status.FAIL, f"Compiled step differs from eager on {dev}",
                f"{dev}: loss rel err {_fmt(r.get('loss_rel_err'))}, grad rel err "
                f"{_fmt(r.get('grad_rel_err'))} (allowed {_fmt(r.get('tolerance'))})", gpus)
    return (Status.OK, "", f"{dev}: compiled in {_fmt(r.get('compile_seconds'))} s, matches eager", gpus)


@check("micro-compile", "torch.compile (Inductor) compiles and matches eager",
       needs=("micro.compile",), judges_failures=True,
       micro=True)
def micro_compile(facts: Facts) -> CheckResult:
    if missing := _not_run(facts, "micro.compile", "torch.compile"):
        return missing
    remedy = Remediation(COMPILE_REMEDY.text, tuple(c.replace("python -c", f"{_py(facts)} -c", 1)
                                                   for c in COMPILE_REMEDY.commands), COMPILE_REMEDY.links)
    return _combine(_judge_devices(facts, "micro.compile", _compile_verdict), "torch.compile works",
                    evidence(facts, "micro.compile"), remedy, "No torch.compile results")


CHECKS = [micro_device, micro_matmul, micro_transformer, micro_copy, micro_dataloader, micro_multi_gpu, micro_compile]
