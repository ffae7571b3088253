"""Probe the NVIDIA stack below torch: kernel module, device nodes, PCI devices, NVML, the CUDA
driver API, device-visibility variables and kernel-log Xid events.

Files are read through ``Host`` (tests re-root them onto fake trees); NVML and ``cuInit`` run in
child processes with deadlines, because a wedged driver hangs or crashes whoever calls it.
Every key is set on every path; a missing fact carries the reason a user can act on.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from envdoctor.knowledge import errors
from envdoctor.process import driverstart
from envdoctor.process.host import CLEANUP_GRACE, ChildResult, Host

from ..model import Reading, Reason, missing, ok
from .spec import Options, ProbeSpec

NVIDIA_VENDOR = "0x10de"

DRIVER_KEYS = ("driver.kernel_module_version", "driver.modules", "driver.device_nodes", "driver.pci_gpus",
               "driver.pci_scanned")
XID_KEYS = ("driver.xid_events",)
NVML_KEYS = ("nvml.init", "nvml.library_path", "nvml.driver_version", "nvml.cuda_driver_version",
             "nvml.device_count", "nvml.gpus", "visibility.cuda_devices")
CUDA_KEYS = ("cuda.init", "cuda.driver_version", "cuda.device_count", "cuda.library_path")
VISIBILITY_KEYS = ("visibility.cuda_visible_devices", "visibility.cuda_device_order",
                   "visibility.nvidia_visible_devices", "visibility.nvidia_driver_capabilities")

# Modules whose presence decides a finding: nvidia_uvm is needed by CUDA (cuInit fails with 999
# without it), nouveau grabs the GPU before nvidia can.
MODULES = ("nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nvidia_peermem", "nouveau")
# /proc/driver/nvidia/version: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.124.06  Thu…"
# or, for the open modules, "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06 …".
_KMOD_RE = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)?)")
# "NVRM: Xid (PCI:0000:02:00): 79, pid=1234, name=python, GPU has fallen off the bus."
_XID_RE = re.compile(r"NVRM: Xid \((?P<pci>[^)]*)\): (?P<code>\d+),\s*(?P<text>.*)")


# -- files: kernel module, device nodes, PCI -----------------------------------------------------
def read_kernel_module(host: Host) -> Reading:
    text, reason, detail = host.read_text("/proc/driver/nvidia/version")
    if text is not None:
        match = _KMOD_RE.search(text)
        if match:
            first = text.strip().splitlines()[0] if text.strip() else ""
            return ok(match.group(1), "/proc/driver/nvidia/version", first[:200])
        return missing(Reason.FAILED, "/proc/driver/nvidia/version", f"unrecognised text: {text[:200]!r}")
    sys_text, sys_reason, sys_detail = host.read_text("/sys/module/nvidia/version")
    if sys_text is not None and sys_text.strip():
        return ok(sys_text.strip(), "/sys/module/nvidia/version")
    if reason is Reason.DENIED or sys_reason is Reason.DENIED:
        return missing(Reason.DENIED, "/proc/driver/nvidia/version", detail if reason is Reason.DENIED else sys_detail)
    return missing(Reason.ABSENT, "/proc/driver/nvidia/version",
                   "the nvidia kernel module is not loaded: /proc/driver/nvidia/version and "
                   "/sys/module/nvidia/version do not exist")


def read_modules(host: Host) -> Reading:
    text, reason, detail = host.read_text("/proc/modules")
    loaded: set[str] = set()
    sources = []
    if text is not None:
        loaded.update(line.split(None, 1)[0] for line in text.splitlines() if line.strip())
        sources.append("/proc/modules")
    # Built-in modules are absent from /proc/modules but have /sys/module/<name>.
    if host.exists("/sys/module"):
        sources.append("/sys/module")
        loaded.update(name for name in MODULES if host.exists(f"/sys/module/{name}"))
    if not sources:
        return missing(reason or Reason.ABSENT, "/proc/modules", detail or "neither /proc/modules nor /sys/module exist")
    return ok({name: name in loaded for name in MODULES}, "+".join(sources))


def read_device_nodes(host: Host) -> Reading:
    """``{"/dev/nvidiactl": "ok"|"denied"|"absent", …}``: the control node, UVM, and every
    ``/dev/nvidia*`` found. "denied" means this user cannot open it read-write."""
    names = {"nvidiactl", "nvidia-uvm"}
    names.update(n for n in host.list_dir("/dev") if n.startswith("nvidia") and n != "nvidia-caps")
    nodes: dict[str, str] = {}
    for name in sorted(names):
        path = f"/dev/{name}"
        if not host.exists(path):
            nodes[path] = "absent"
        else:
            nodes[path] = "ok" if host.access(path, os.R_OK | os.W_OK) else "denied"
    return ok(nodes, "/dev")


def read_pci(host: Host) -> tuple[Reading, Reading]:
    base = "/sys/bus/pci/devices"
    if not host.exists(base):
        why = missing(Reason.ABSENT, base, f"{base} does not exist: no PCI view here (not Linux, sysfs not "
                      "mounted, or a sandbox that hides the bus)")
        return why, why
    entries = host.list_dir(base)
    gpus = []
    for address in entries:
        vendor, _, _ = host.read_text(f"{base}/{address}/vendor")
        if (vendor or "").strip().lower() != NVIDIA_VENDOR:
            continue
        cls = (host.read_text(f"{base}/{address}/class")[0] or "").strip().lower()
        # Class 0x03xxxx is a display controller (VGA 0x0300, 3D 0x0302); NVIDIA also exposes
        # HDMI audio (0x0403), USB-C (0x0c03) and NVSwitch bridges (0x0680) that are not GPUs.
        if not cls.startswith("0x03"):
            continue
        device = (host.read_text(f"{base}/{address}/device")[0] or "").strip().lower()
        driver = None
        if host.exists(f"{base}/{address}/driver"):
            driver = os.path.basename(host.realpath(f"{base}/{address}/driver")) or None
        gpus.append({"address": address, "vendor": NVIDIA_VENDOR, "device": device, "class": cls, "driver": driver})
    return ok(gpus, base), ok(len(entries), base)


def probe_driver(host: Host, options: Options) -> dict[str, Reading]:
    pci, scanned = read_pci(host)
    return {
        "driver.kernel_module_version": read_kernel_module(host),
        "driver.modules": read_modules(host),
        "driver.device_nodes": read_device_nodes(host),
        "driver.pci_gpus": pci,
        "driver.pci_scanned": scanned,
    }


# -- kernel log ------------------------------------------------------------------------------------
def parse_xid(text: str, limit: int = 50) -> list[dict[str, Any]]:
    """The Xid lines of a kernel log, oldest first, at most the last ``limit``."""
    events = []
    for line in text.splitlines():
        match = _XID_RE.search(line)
        if match:
            events.append({"pci": match.group("pci"), "code": int(match.group("code")),
                           "text": match.group("text").strip()[:300], "line": line.strip()[:400]})
    return events[-limit:]


def probe_xid(host: Host, options: Options) -> dict[str, Reading]:
    # dmesg reads the kernel ring buffer: events since boot, as far back as the buffer holds.
    # With kernel.dmesg_restrict=1 an unprivileged user gets "Operation not permitted".
    result = host.run(["dmesg"], timeout=min(options.timeout, 5.0))
    source = "dmesg"
    if result.status != "ok":
        reason = result.reason or Reason.FAILED
        return {"driver.xid_events": missing(reason, source, result.detail)}
    if result.returncode != 0:
        err = (result.stderr or result.stdout).strip().splitlines()
        text = err[-1] if err else f"dmesg exited with code {result.returncode}"
        denied = "not permitted" in text.lower() or "permission denied" in text.lower()
        detail = text + (" (kernel.dmesg_restrict=1: run as root, or `sudo dmesg | grep -i xid`)" if denied else "")
        return {"driver.xid_events": missing(Reason.DENIED if denied else Reason.FAILED, source, detail)}
    return {"driver.xid_events": ok(parse_xid(result.stdout), source)}


# -- visibility variables ----------------------------------------------------------------------------
def _strtoul(token: str) -> int:
    """What CUDA (and torch's mirror of it) reads from a token: the leading integer, else -1."""
    match = re.match(r"[+-]?\d+", token)
    return int(match.group(0)) if match else -1


def parse_cuda_visible_devices(raw: str | None) -> dict[str, Any]:
    """Parse ``CUDA_VISIBLE_DEVICES`` the way the CUDA runtime does (rules as mirrored by torch's
    ``torch.cuda._parse_visible_devices``): integers are read like ``strtoul`` (``1gpu`` is 1);
    a negative or non-numeric token ends the list there; a repeated device hides every device;
    a list starting with ``GPU-``/``MIG-`` holds UUIDs (or unique prefixes) and ends at the
    first token without that prefix; ``""`` hides every device."""
    if raw is None:
        return {"raw": None, "set": False, "kind": "unset", "entries": None, "ignored": [], "stopped_at": None,
                "stop_reason": None, "hides_all": False, "loose_tokens": []}
    tokens = raw.split(",")
    entries: list[Any] = []
    ignored: list[str] = []
    stopped_at = None
    stop_reason = None
    loose: list[str] = []
    kind = "index"
    if raw.strip() == "":
        kind = "empty"
    elif raw.startswith(("GPU-", "MIG-")):
        prefix = raw[:4]
        kind = "uuid" if prefix == "GPU-" else "mig"
        for i, token in enumerate(tokens):
            if token in entries:
                stopped_at, stop_reason, entries = token, "duplicate", []
                break
            if not token.startswith(prefix):
                stopped_at, stop_reason, ignored = token, "invalid", tokens[i:]
                break
            entries.append(token)
    else:
        for i, token in enumerate(tokens):
            value = _strtoul(token.strip())
            if value in entries:
                stopped_at, stop_reason, entries = token, "duplicate", []
                break
            if value < 0:
                stopped_at, stop_reason, ignored = token, "negative" if token.strip().startswith("-") else "invalid", tokens[i:]
                break
            if token.strip() != str(value):
                loose.append(token)
            entries.append(value)
    return {"raw": raw, "set": True, "kind": kind, "entries": entries, "ignored": ignored, "stopped_at": stopped_at,
            "stop_reason": stop_reason, "hides_all": not entries, "loose_tokens": loose}


def parse_nvidia_visible_devices(raw: str | None) -> dict[str, Any]:
    """``NVIDIA_VISIBLE_DEVICES`` (read by the NVIDIA container runtime when the container starts):
    ``all``, ``none`` (no GPU, but the driver libraries), ``void``/empty (nothing injected), or a
    list of indices/UUIDs."""
    if raw is None:
        return {"raw": None, "mode": "unset", "devices": []}
    value = raw.strip()
    if value in ("all", "none", "void", ""):
        return {"raw": raw, "mode": value or "void", "devices": []}
    return {"raw": raw, "mode": "list", "devices": [t.strip() for t in value.split(",") if t.strip()]}


# The capabilities the container runtime injects: "compute" brings libcuda, "utility" brings
# libnvidia-ml and nvidia-smi. Default when unset: "compute,utility" (nvidia-container-toolkit docs,
# https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html).
DEFAULT_CAPABILITIES = ("compute", "utility")


def parse_driver_capabilities(raw: str | None) -> dict[str, Any]:
    if raw is None or not raw.strip():
        return {"raw": raw, "capabilities": list(DEFAULT_CAPABILITIES), "default": True, "missing": []}
    caps = [c.strip().lower() for c in raw.split(",") if c.strip()]
    have = set(caps)
    lacking = [] if "all" in have else [c for c in DEFAULT_CAPABILITIES if c not in have]
    return {"raw": raw, "capabilities": caps, "default": False, "missing": lacking}


def probe_visibility(host: Host, options: Options) -> dict[str, Reading]:
    env = host.environ
    order = env.get("CUDA_DEVICE_ORDER")
    return {
        "visibility.cuda_visible_devices": ok(parse_cuda_visible_devices(env.get("CUDA_VISIBLE_DEVICES")), "env"),
        "visibility.cuda_device_order": ok(order, "env", "" if order else "unset: CUDA orders devices FASTEST_FIRST"),
        "visibility.nvidia_visible_devices": ok(parse_nvidia_visible_devices(env.get("NVIDIA_VISIBLE_DEVICES")), "env"),
        "visibility.nvidia_driver_capabilities": ok(parse_driver_capabilities(env.get("NVIDIA_DRIVER_CAPABILITIES")),
                                                    "env"),
    }


def _find_by_uuid(gpus: Sequence[Mapping[str, Any]], token: str, kind: str) -> tuple[Mapping[str, Any], str | None] | None:
    """The GPU (and MIG instance) a UUID prefix in CUDA_VISIBLE_DEVICES names, as CUDA matches it."""
    for g in gpus:
        if kind == "uuid" and str(g.get("uuid") or "").startswith(token):
            return g, None
        if kind == "mig":
            for mig in g.get("mig_devices") or []:
                if mig and str(mig).startswith(token):
                    return g, str(mig)
    return None


def map_cuda_devices(parsed: Mapping[str, Any], gpus: Sequence[Mapping[str, Any]], order: str | None) -> dict[str, Any]:
    """Which NVML GPU each CUDA ordinal is (nvitop's mapping). Out-of-range indices and unknown
    UUIDs end the list there, as they do in CUDA. With ``CUDA_DEVICE_ORDER`` unset CUDA orders
    devices fastest first, which matches NVML's PCI order only when all GPUs are the same model."""
    names = {g.get("name") for g in gpus}
    pci_order = (order or "").strip().upper() == "PCI_BUS_ID"
    certain = pci_order or len(names) <= 1
    out: list[dict[str, Any]] = []
    unmatched = None

    def entry(g: Mapping[str, Any], mig: str | None = None) -> dict[str, Any]:
        item = {"cuda": len(out), "nvml_index": g.get("index"), "uuid": g.get("uuid"),
                "pci_bus_id": g.get("pci_bus_id"), "name": g.get("name")}
        if mig:
            item["mig_uuid"] = mig
        return item

    kind = parsed.get("kind")
    if kind == "unset":
        out.extend(entry(g) for g in gpus)
    elif kind == "index":
        for value in parsed.get("entries") or []:
            if not 0 <= value < len(gpus):
                unmatched = str(value)
                break
            out.append(entry(gpus[value]))
    elif kind in ("uuid", "mig"):
        for token in parsed.get("entries") or []:
            hit = _find_by_uuid(gpus, token, str(kind))
            if hit is None:
                unmatched = token
                break
            out.append(entry(*hit))
    return {"devices": out, "unmatched": unmatched, "order": "PCI_BUS_ID" if pci_order else "FASTEST_FIRST",
            "order_certain": certain}


# -- NVML ----------------------------------------------------------------------------------------------
NVML_SOURCE = "child:nvml_probe"
_REASONS = {"absent": Reason.ABSENT, "denied": Reason.DENIED, "unsupported": Reason.UNSUPPORTED,
            "timeout": Reason.TIMEOUT, "failed": Reason.FAILED}


def _reason(name: str | None) -> Reason:
    return _REASONS.get(name or "failed", Reason.FAILED)


def nvml_readings(result: ChildResult, environ: Mapping[str, str]) -> dict[str, Reading]:
    """Turn what the NVML child printed (possibly partial) into readings."""
    data = result.data
    out: dict[str, Reading] = {}
    bindings = data.get("bindings") or {}
    init = data.get("init")
    if bindings.get("error"):
        why = missing(Reason.ABSENT, NVML_SOURCE, f"pynvml (the nvidia-ml-py package) cannot be imported by "
                      f"{bindings.get('python')}: {bindings['error']}")
        return {k: why for k in NVML_KEYS}
    if init is None:
        # The child never got past nvmlInit: it hung or crashed there.
        why = missing(result.reason or Reason.FAILED, NVML_SOURCE, result.explain() or "the NVML child reported nothing")
        return {k: why for k in NVML_KEYS}
    if result.cleanup:
        # Everything was read, then the cleanup call hung or crashed: a driver in a bad way, said
        # as such (the readings themselves are complete).
        init = {**init, "shutdown": {"status": result.status, "call": result.cleanup, "detail": result.explain()}}
    out["nvml.init"] = ok(init, NVML_SOURCE)
    lib = data.get("library_path")
    out["nvml.library_path"] = ok(lib, NVML_SOURCE) if lib else missing(
        Reason.ABSENT, NVML_SOURCE, "libnvidia-ml.so.1 was not loaded (not found on the loader path)")
    if init.get("code") != 0:
        why = missing(_reason(init.get("reason")), NVML_SOURCE,
                      f"nvmlInit failed: {init.get('name')} ({init.get('message')})")
        for key in NVML_KEYS:
            if key not in out:
                out[key] = why
        return out
    failure = None if result.ok else missing(result.reason or Reason.FAILED, NVML_SOURCE, result.explain())
    system = data.get("system") or {}
    system_missing = system.get("missing") or {}
    for field in ("driver_version", "cuda_driver_version", "device_count"):
        key = f"nvml.{field}"
        if field in system:
            out[key] = ok(system[field], NVML_SOURCE)
        elif field in system_missing:
            info = system_missing[field]
            out[key] = missing(_reason(info.get("reason")), NVML_SOURCE, f"{info.get('name')}: {info.get('message')}")
        else:
            out[key] = failure or missing(Reason.FAILED, NVML_SOURCE, f"the NVML child did not report {field}")
    gpus = data.get("gpus")
    count = system.get("device_count")
    if gpus is not None and (result.ok or len(gpus) == count):
        out["nvml.gpus"] = ok(gpus, NVML_SOURCE)
    elif count == 0:
        out["nvml.gpus"] = ok([], NVML_SOURCE)
    else:
        detail = result.explain() if failure else "the NVML child did not report the GPUs"
        if gpus:
            detail += f" (read {len(gpus)} of {count} GPUs before that)"
        out["nvml.gpus"] = missing((failure.reason if failure else None) or Reason.FAILED, NVML_SOURCE, detail)
    if out["nvml.gpus"].ok:
        parsed = parse_cuda_visible_devices(environ.get("CUDA_VISIBLE_DEVICES"))
        mapping = map_cuda_devices(parsed, gpus or [], environ.get("CUDA_DEVICE_ORDER"))
        out["visibility.cuda_devices"] = ok(mapping, "env+nvml")
    else:
        out["visibility.cuda_devices"] = missing(out["nvml.gpus"].reason or Reason.FAILED, "env+nvml",
                                                 "NVML did not list the GPUs")
    return out


def probe_nvml(host: Host, options: Options) -> dict[str, Reading]:
    """NVML alone (the driver child with only its NVML probe), in envdoctor's own interpreter."""
    return nvml_readings(run_driver_child(host, options, ("nvml",), sys.executable)["nvml"], host.environ)


# -- CUDA driver API -------------------------------------------------------------------------------------
CUDA_SOURCE = "child:cuda_probe"


def cuda_readings(result: ChildResult) -> dict[str, Reading]:
    data = result.data
    out: dict[str, Reading] = {}
    if data.get("load_error"):
        why = missing(Reason.ABSENT, CUDA_SOURCE, f"libcuda.so.1 cannot be loaded: {data['load_error']}")
        return {k: why for k in CUDA_KEYS}
    failure = None if result.ok else missing(result.reason or Reason.FAILED, CUDA_SOURCE, result.explain())
    if not data.get("library_path") and failure is not None and "driver_version" not in data:
        return {k: failure for k in CUDA_KEYS}
    lib = data.get("library_path")
    out["cuda.library_path"] = ok(lib, CUDA_SOURCE) if lib else (failure or missing(
        Reason.FAILED, CUDA_SOURCE, "libcuda.so.1 loaded but not found in /proc/self/maps"))
    if data.get("driver_version") is not None:
        out["cuda.driver_version"] = ok(data["driver_version"], CUDA_SOURCE)
    elif data.get("driver_version_error"):
        err = data["driver_version_error"]
        out["cuda.driver_version"] = missing(Reason.FAILED, CUDA_SOURCE, f"cuDriverGetVersion: {err.get('name')} "
                                             f"({err.get('message')})")
    else:
        out["cuda.driver_version"] = failure or missing(Reason.FAILED, CUDA_SOURCE, "not reported")
    init = data.get("init")
    if init is not None:
        out["cuda.init"] = ok(init, CUDA_SOURCE)
    else:
        out["cuda.init"] = failure or missing(Reason.FAILED, CUDA_SOURCE, "cuInit result not reported")
    if data.get("device_count") is not None:
        out["cuda.device_count"] = ok(data["device_count"], CUDA_SOURCE)
    elif init is not None and init.get("code") != 0:
        out["cuda.device_count"] = missing(Reason.FAILED, CUDA_SOURCE, f"cuInit failed with {init.get('name')}")
    elif data.get("device_count_error"):
        err = data["device_count_error"]
        out["cuda.device_count"] = missing(Reason.FAILED, CUDA_SOURCE, f"cuDeviceGetCount: {err.get('name')}")
    else:
        out["cuda.device_count"] = failure or missing(Reason.FAILED, CUDA_SOURCE, "not reported")
    return out


def probe_cuda(host: Host, options: Options) -> dict[str, Reading]:
    """cuInit alone (the driver child with only its CUDA probe), in the target interpreter."""
    return cuda_readings(run_driver_child(host, options, ("cuda",), options.python or host.python)["cuda"])


# -- the driver child: NVML and cuInit in one process -------------------------------------------------
#: Each probe's deadline in the driver child, as a multiple of ``options.timeout``. nvmlInit takes
#: well under a second with persistence mode on, a few seconds per GPU without it; cuInit creates a
#: context on every visible GPU: seconds on an 8-GPU node without persistence.
SCALES = {"nvml": 2.0, "cuda": 3.0}
#: Seconds past the last probe's own deadline before the parent ends the driver child itself: the
#: child reports a hung probe at that probe's deadline; this is the backstop when it cannot.
BACKSTOP = 0.5
#: A crashed child's unfinished probes are run again, each in a child of its own, when at least
#: this many seconds of their deadline are left: a crash kills both threads, and only alone does
#: each say whether it was the one that crashed.
RETRY_MIN = 0.3


def _driver_args(probes: Sequence[str], options: Options, python: str) -> dict[str, Any]:
    args: dict[str, Any] = {"deadlines": {p: options.timeout * SCALES[p] for p in probes},
                            "cleanup_grace": CLEANUP_GRACE, "started": time.monotonic()}
    if "nvml" in probes:
        # The child cannot import envdoctor: it gets NVML's code table in its arguments.
        args["nvml"] = {"codes": errors.nvml_child_table()}
    if "cuda" in probes:
        args["cuda"] = {}
    return args


def part(result: ChildResult, probe: str) -> ChildResult:
    """What the driver child reported under ``probe``'s name, as that probe's own child result:
    finished, hung (the child says so at the probe's deadline), or ended with the whole child."""
    prefix = probe + "."
    data = {k[len(prefix):]: v for k, v in result.data.items() if k.startswith(prefix)}
    stage = str(data.pop("_stage", "") or "")
    cleanup = str(data.pop("_cleanup", "") or "")
    finished = bool(data.pop("_done", False))
    error = data.pop("_error", None)
    hung = data.pop("_timeout", None)
    # Whatever befell the whole child (its exit code, its stderr, a flood of other output) is each probe's.
    mine = dataclasses.replace(result, data=data, stage=stage, cleanup="")
    if error:
        return dataclasses.replace(mine, status="failed", detail=f"the {probe} probe failed: {error}")
    if finished:
        return dataclasses.replace(mine, status="ok", detail="")
    if isinstance(hung, (int, float)):
        return dataclasses.replace(mine, status="timeout", seconds=float(hung), cleanup=cleanup)
    status = result.status if result.status != "ok" else "failed"
    return dataclasses.replace(mine, status=status, cleanup=cleanup if status == "timeout" else "",
                               detail=result.detail or f"the driver child ended before its {probe} probe finished")


def run_driver_child(host: Host, options: Options, probes: Sequence[str], python: str) -> dict[str, ChildResult]:
    """Run ``probes`` (``"nvml"``, ``"cuda"``) in one driver child under ``python``: each probe's
    own result. A child that crashed before two of them finished is run again for each alone."""
    began = time.monotonic()
    args = _driver_args(probes, options, python)
    result = host.run_child(driverstart.SCRIPT, args, timeout=max(args["deadlines"].values()) + BACKSTOP, python=python,
                            command=driverstart.command_for(python, nvml="nvml" in probes))
    if result.status == "absent":
        return {p: result for p in probes}
    parts = {p: part(result, p) for p in probes}
    again = [p for p in probes if parts[p].status == "crashed"]
    if len(again) > 1:
        spent = time.monotonic() - began
        timeout = min((options.timeout * SCALES[p] - spent) / SCALES[p] for p in again)
        if timeout * min(SCALES[p] for p in again) >= RETRY_MIN:
            parts.update(_each_alone(host, dataclasses.replace(options, timeout=timeout), again, python))
    return parts


def _each_alone(host: Host, options: Options, probes: Sequence[str], python: str) -> dict[str, ChildResult]:
    """Each probe in a driver child of its own, concurrently."""
    out: dict[str, ChildResult] = {}

    def one(probe: str) -> None:
        out[probe] = run_driver_child(host, options, (probe,), python)[probe]

    threads = [threading.Thread(target=one, args=(p,), name=f"driver-{p}", daemon=True) for p in probes[1:]]
    for t in threads:
        t.start()
    one(probes[0])
    for t in threads:
        t.join()
    return out


def same_interpreter(a: str, b: str) -> bool:
    """Whether two interpreter paths are one interpreter in one environment: the same path, or two
    names in one folder for one binary (a venv's ``python`` and ``python3``). A venv is found from
    the unresolved path's folder, so one binary reached from two folders may be two environments."""
    if a == b:
        return True
    try:
        return (os.path.dirname(os.path.abspath(a)) == os.path.dirname(os.path.abspath(b))
                and os.path.realpath(a) == os.path.realpath(b))
    except (OSError, ValueError):
        return False


def probe_driver_api(host: Host, options: Options) -> dict[str, Reading]:
    """NVML and cuInit. NVML needs nvidia-ml-py, so it runs in envdoctor's own interpreter; cuInit
    runs in the target's. One driver child when they are the same interpreter (the healthcheck's
    default, and a check of envdoctor's own environment), else one child in each, concurrently."""
    target = options.python or host.python
    if same_interpreter(target, sys.executable):
        results = run_driver_child(host, options, ("nvml", "cuda"), sys.executable)
    else:
        results = {}

        def nvml() -> None:
            results["nvml"] = run_driver_child(host, options, ("nvml",), sys.executable)["nvml"]

        thread = threading.Thread(target=nvml, name="driver-nvml", daemon=True)
        thread.start()
        results["cuda"] = run_driver_child(host, options, ("cuda",), target)["cuda"]
        thread.join()
    return {**nvml_readings(results["nvml"], host.environ), **cuda_readings(results["cuda"])}


DRIVER_PROBE = ProbeSpec("driver", probe_driver, DRIVER_KEYS, scale=1.0, healthcheck=True)
XID_PROBE = ProbeSpec("kernel-log", probe_xid, XID_KEYS, scale=1.0)
VISIBILITY_PROBE = ProbeSpec("visibility", probe_visibility, VISIBILITY_KEYS, scale=1.0, healthcheck=True)
#: NVML and cuInit, each alone: for a caller that wants only one of them.
NVML_PROBE = ProbeSpec("nvml", probe_nvml, NVML_KEYS, scale=SCALES["nvml"], healthcheck=True)
CUDA_PROBE = ProbeSpec("cuda-driver", probe_cuda, CUDA_KEYS, scale=SCALES["cuda"], healthcheck=True)
#: Both from one driver child; reported as the two runs ``nvml`` and ``cuda-driver``, so a hang
#: in one is named as before.
DRIVER_API_PROBE = ProbeSpec("nvml+cuda-driver", probe_driver_api, NVML_KEYS + CUDA_KEYS, scale=max(SCALES.values()),
                             healthcheck=True, parts=((NVML_PROBE.name, NVML_KEYS), (CUDA_PROBE.name, CUDA_KEYS)))
# The driver child first: it is what the healthcheck waits for.
PROBES = [DRIVER_API_PROBE, DRIVER_PROBE, XID_PROBE, VISIBILITY_PROBE]
