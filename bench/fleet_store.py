#!/usr/bin/env python3
"""`envdoctor fleet` at scale: 100,000 saved reports, with and without the Parquet store.

    python bench/fleet_store.py [--reports 100000] [--runs 3] [--jobs 2] [--template report.json]

Writes N reports of 8-GPU nodes into a temporary folder (from ``--template``, or from a fresh
``envdoctor report --json --no-micro`` of this machine, with the GPU facts of an H100 node laid
over it: driver, CUDA, torch, cuDNN, NCCL, 8 GPUs with their own UUIDs, one finding per GPU) in
varied configurations (2 % another torch, 1 % another driver, 0.5 % NCCL_ALGO set, 0.1 % H200s,
2 single-node outliers with their own kernel), 2.7 % failing gpu-xid on GPU 3, 1 % erroring
nccl-mismatch, plus 5 corrupt files. Then, round by round, interleaved:

  * ``envdoctor fleet DIR --json``
  * ``envdoctor fleet DIR --json --store S.parquet``
  * ``envdoctor fleet S.parquet --json``
  * the ratio base: one Python process that reads and ``json.loads`` every file

and prints, for each, the median wall time with its spread (min-max), its ratio to the base of the
same round (median, min-max), and its peak RSS (the largest process, and the sum over its process
group sampled every 0.2 s: the workers included), and its CPU seconds (workers included). The three fleet outputs must be identical and
must count what was generated. Target (issue 23): ``fleet DIR`` on 100,000 reports in at most 60 s
and 1 GB on 2 cores.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

FLOOR = r"""
import json, os, sys
n = 0
for root, dirs, files in os.walk(sys.argv[1]):
    dirs.sort()
    for name in sorted(files):
        try:
            with open(os.path.join(root, name), "rb") as fh:
                json.loads(fh.read())
            n += 1
        except (ValueError, RecursionError):
            pass
print(n)
"""

NODE = "@@NODE@@"
GIB = 1 << 30
CORRUPT = ['{"schema_version": 1, "facts": {', "[" * 50000, "", "\x00\x01", '{"a": 1}']


def template(path: str | None, envdoctor: str) -> dict[str, Any]:
    if path:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    out = subprocess.run([envdoctor, "report", "--json", "--no-micro"], capture_output=True, text=True, check=False)
    return json.loads(out.stdout)


def gpu_node(base: dict[str, Any]) -> dict[str, Any]:
    """The template as an 8-GPU H100 node whose hostname and GPU UUIDs are :data:`NODE`."""
    rep = copy.deepcopy(base)
    facts = rep.setdefault("facts", {})

    def put(key: str, value: Any) -> None:
        facts[key] = {"value": value}

    put("launch.hostname", NODE)
    put("nvml.driver_version", "570.124.06")
    put("nvml.cuda_driver_version", 12080)
    put("nvml.gpus", [{"index": i, "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{NODE}-{i:04d}",
                       "memory_total": 80 * GIB, "compute_capability": "9.0", "pci_bus_id": f"00000000:{0x18 + i:02X}:00.0",
                       "ecc_mode": "Enabled", "persistence_mode": "Enabled", "power_limit_w": 700} for i in range(8)])
    put("torch.version", "2.6.0+cu126")
    put("torch.cuda_version", "12.6")
    put("torch.cudnn_version", 90501)
    put("torch.nccl_version", "2.21.5")
    put("host.kernel", "5.15.0-119-generic")
    findings = [f for f in rep.get("findings") or [] if f.get("id") != "gpu-ecc"]
    findings += [{"id": "gpu-ecc", "status": "ok", "title": f"GPU {i}: no uncorrectable ECC error", "detail": "",
                  "evidence": {}, "remediation": {"text": "", "commands": [], "links": []}, "gpus": [i]}
                 for i in range(8)]
    rep["findings"] = findings
    return rep


def variant(i: int, n: int) -> tuple[str, ...]:
    """The ways report ``i`` of ``n`` differs from the majority."""
    flags: list[str] = []
    if i % 50 == 7:
        flags.append("torch")
    if i % 100 == 13:
        flags.append("driver")
    if i % 200 == 17:
        flags.append("nccl_env")
    if i % 1000 == 23:
        flags.append("h200")
    if i in (n // 3, (2 * n) // 3):
        flags.append(f"kernel{i}")
    if i % 37 == 5:
        flags.append("xid")
    if i % 101 == 9:
        flags.append("nccl_error")
    return tuple(flags)


def apply(base: dict[str, Any], flags: tuple[str, ...]) -> dict[str, Any]:
    rep = copy.deepcopy(base)
    facts = rep["facts"]
    for flag in flags:
        if flag == "torch":
            facts["torch.version"] = {"value": "2.5.1+cu124"}
            facts["torch.cuda_version"] = {"value": "12.4"}
        elif flag == "driver":
            facts["nvml.driver_version"] = {"value": "535.183.01"}
        elif flag == "nccl_env":
            env = dict((facts.get("env.vars") or {}).get("value") or {})
            env["NCCL_ALGO"] = "Ring"
            facts["env.vars"] = {"value": env}
        elif flag == "h200":
            for g in facts["nvml.gpus"]["value"]:
                g["name"], g["memory_total"] = "NVIDIA H200", 141 * GIB
        elif flag.startswith("kernel"):
            facts["host.kernel"] = {"value": f"6.8.0-{flag[6:]}-generic"}
        elif flag == "xid":
            rep["findings"].append({"id": "gpu-xid", "status": "fail", "title": "GPU 3: Xid 79 (fallen off the bus)",
                                    "detail": "", "evidence": {}, "remediation": {"text": "", "commands": [], "links": []},
                                    "gpus": [3]})
        elif flag == "nccl_error":
            rep["findings"].append({"id": "nccl-mismatch", "status": "error", "title": "the check failed",
                                    "detail": "", "evidence": {}, "remediation": {"text": "", "commands": [], "links": []},
                                    "gpus": []})
    return rep


def generate(folder: str, base: dict[str, Any], count: int, per_folder: int = 1000) -> dict[str, Any]:
    """``count`` reports (``per_folder`` a sub-folder) and 5 corrupt files; returns what `fleet`
    must find: reports, unreadable files, configurations, failing nodes, nodes per failing check."""
    node = gpu_node(base)
    encoded: dict[tuple[str, ...], tuple[bytes, bytes]] = {}
    configs: set[tuple[str, ...]] = set()
    failing = 0
    per_check = {"gpu-xid": 0, "nccl-mismatch": 0}
    for i in range(count):
        flags = variant(i, count)
        if flags not in encoded:
            head, _, tail = json.dumps(apply(node, flags)).encode().partition(NODE.encode())
            encoded[flags] = head, tail
        head, tail = encoded[flags]
        name = f"gpu-{i:06d}".encode()
        data = head + name + tail.replace(NODE.encode(), name)
        sub = os.path.join(folder, f"rack{i // per_folder:03d}")
        if i % per_folder == 0:
            os.makedirs(sub, exist_ok=True)
        with open(os.path.join(sub, f"gpu-{i:06d}.json"), "wb") as fh:
            fh.write(data)
        configs.add(tuple(f for f in flags if f not in ("xid", "nccl_error")))
        failing += "xid" in flags or "nccl_error" in flags
        per_check["gpu-xid"] += "xid" in flags
        per_check["nccl-mismatch"] += "nccl_error" in flags
    for i, text in enumerate(CORRUPT):
        with open(os.path.join(folder, f"corrupt{i}.json"), "w", encoding="utf-8") as fh:
            fh.write(text)
    return {"reports": count, "corrupt": len(CORRUPT), "configurations": len(configs), "failing_nodes": failing,
            "per_check": per_check}


def verify(result: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    """What a fleet result gets wrong against what was generated."""
    got = {"reports": result["reports"], "corrupt": len(result["corrupt"]),
           "configurations": len(result["configurations"]), "failing_nodes": len(result["failures_by_node"]),
           "per_check": {c: row["nodes"] for c, row in result["failures_by_check"].items()}}
    return [f"{k}: {got[k]} != {v}" for k, v in expected.items() if got[k] != v]


def _group_rss(pgid: int) -> int:
    """Sum of the resident memory (bytes) of every process in process group ``pgid``."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                fields = fh.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            total += int(fields[21]) * page
    return total


def timed(argv: list[str]) -> tuple[float, int, str, int, int, float]:
    """(seconds, exit code, stdout, peak RSS of its largest process, peak RSS summed over its group,
    CPU seconds of it and its workers: the figure a loaded machine changes least)."""
    peak = [0]
    with tempfile.TemporaryFile() as out:
        began = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL, start_new_session=True)
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.2):
                peak[0] = max(peak[0], _group_rss(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - began
        done.set()
        sampler.join()
        out.seek(0)
        return (seconds, os.waitstatus_to_exitcode(status), out.read().decode(), usage.ru_maxrss * 1024, peak[0],
                usage.ru_utime + usage.ru_stime)


def spread(values: list[float], fmt: Callable[[float], str]) -> str:
    return f"median {fmt(statistics.median(values))} (min {fmt(min(values))}, max {fmt(max(values))})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reports", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2, help="fleet's worker processes (the target is for 2 cores)")
    ap.add_argument("--template", help="a saved report to copy (default: a fresh one of this machine)")
    ap.add_argument("--keep", help="generate into this folder and keep it (default: a temporary one)")
    args = ap.parse_args()
    envdoctor = shutil.which("envdoctor", path=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    if not envdoctor:
        print("envdoctor is not installed next to this interpreter", file=sys.stderr)
        return 2
    base = template(args.template, envdoctor)
    with tempfile.TemporaryDirectory(prefix="envdoctor-fleet-store-") as tmp:
        folder = args.keep or os.path.join(tmp, "reports")
        os.makedirs(folder, exist_ok=True)
        began = time.perf_counter()
        expected = generate(folder, base, args.reports)
        size = sum(os.path.getsize(os.path.join(r, n)) for r, _, files in os.walk(folder) for n in files)
        print(f"{args.reports} reports + 5 corrupt files, {size / 1e9:.2f} GB, generated in "
              f"{time.perf_counter() - began:.0f} s; {os.cpu_count()} CPU(s), fleet -j {args.jobs}, "
              f"load average before: {os.getloadavg()[0]:.1f}")
        store = os.path.join(tmp, "fleet.parquet")
        fleet = [envdoctor, "fleet", "--json", "-j", str(args.jobs)]
        commands = {"fleet DIR": [*fleet, folder], "fleet DIR --store": [*fleet, folder, "--store", store],
                    "fleet STORE": [*fleet, store], "json.loads floor": [sys.executable, "-c", FLOOR, folder]}
        times: dict[str, list[float]] = {k: [] for k in commands}
        rss: dict[str, list[tuple[int, int]]] = {k: [] for k in commands}
        cpu: dict[str, list[float]] = {k: [] for k in commands}
        outputs: dict[str, str] = {}
        for _ in range(args.runs):
            for name, argv in commands.items():
                seconds, rc, out, largest, group, used = timed(argv)
                times[name].append(seconds)
                cpu[name].append(used)
                rss[name].append((largest, group))
                if name.startswith("fleet"):
                    if rc not in (0, 1):
                        print(f"{name} exited {rc}", file=sys.stderr)
                        return 1
                    outputs[name] = out
        result = json.loads(outputs["fleet DIR"])
        wrong = verify(result, expected)
        if len({outputs[k] for k in outputs}) != 1:
            wrong.append("the three fleet commands printed different results")
        print(f"fleet read {result['reports']} reports, {len(result['configurations'])} configurations, "
              f"{len(result['corrupt'])} unreadable, {len(result['failures_by_node'])} failing nodes; "
              f"store {os.path.getsize(store) / 1e6:.1f} MB")
        for name, values in times.items():
            ratios = [t / f for t, f in zip(values, times["json.loads floor"], strict=True)]
            print(f"  {name:18s} {spread(values, lambda v: f'{v:6.1f} s')}  ratio to floor "
                  f"{spread(ratios, lambda v: f'{v:.2f}x')}  CPU {statistics.median(cpu[name]):.0f} s  peak RSS {max(r[0] for r in rss[name]) / 1e6:.0f} MB "
                  f"(largest process), {max(r[1] for r in rss[name]) / 1e6:.0f} MB (all its processes)")
        print(f"  load average after: {os.getloadavg()[0]:.1f} (a load above the CPU count slows every command)")
        ok = statistics.median(times["fleet DIR"]) <= 60 and max(r[1] for r in rss["fleet DIR"]) <= 1e9
        print(f"  target: fleet DIR on {args.reports} reports in <= 60 s and <= 1 GB -> {'meets' if ok else 'MISSES'}")
        for line in wrong:
            print(f"  WRONG: {line}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
