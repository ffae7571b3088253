#!/usr/bin/env python3
"""Cost of judging big but legal inputs, and of refusing ones over the documented limits.

    python bench/big_inputs.py [--runs N] [--before SRC]
    python bench/big_inputs.py --commands [--runs N]   # the 58 MB report through every command

Makes the inputs in a temporary folder (a 50 MB report, a 20,000-GPU report, a 150,000-GPU-line
paste, 4 million empty lines, a small report as the floor), then runs
``envdoctor diagnose FILE --json > /dev/null`` round by round, interleaving the inputs (and, with
``--before SRC``, the same command from another source tree, e.g. an export of an older commit),
so a noisy machine slows all of them alike. Prints, per input: median wall seconds with the
min-max spread, median peak RSS, the ratio to the floor, and with --before the paired
after/before ratio of each round (median and spread).

Targets (issue 13): the 50 MB report in under 5 s and under 500 MB; the 20,000-GPU report in
under 5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

GPU = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0", "pci_bus_id": "00000000:18:00.0",
       "compute_capability": "9.0", "memory_total": 85 << 30, "memory_used": 1 << 20, "architecture": 9, "brand": 2,
       "persistence_mode": 1, "compute_mode": 0, "mig_mode": {"current": 0, "pending": 0},
       "ecc_mode": {"current": 1, "pending": 1}, "ecc_uncorrected_volatile": 0, "ecc_uncorrected_aggregate": 0,
       "retired_pages_pending": 0, "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": 0, "failure": 0},
       "pcie": {"gen": 5, "max_gen": 5, "width": 16, "max_width": 16}, "clocks_event_reasons": 0, "temperature": 40,
       "power_usage_mw": 70000, "power_limit_mw": 700000, "utilization": {"gpu": 0, "memory": 0},
       "compute_processes": 0, "compute_pids": [], "missing": {}}
BASE = {"torch.version": {"value": "2.6.0+cu126"}, "python.version": {"value": "3.12.1"},
        "torch.cuda_version": {"value": "12.6"}, "torch.arch_list": {"value": ["sm_80", "sm_86", "sm_90"]},
        "nvml.driver_version": {"value": "570.124.06"}, "nvml.cuda_driver_version": {"value": 12080},
        "nvml.init": {"value": {"code": 0, "name": "NVML_SUCCESS", "reason": None, "message": ""}},
        "nvml.device_count": {"value": 8}, "nvml.gpus": {"value": [dict(GPU, index=i) for i in range(8)]}}


INPUTS = ["floor (small report)", "report 20,000 GPUs", "report 50 MB", "paste 150,000 GPU lines",
          "paste 4,000,000 empty lines", "report 58 MB, many facts"]

#: The commands run on the 58 MB report (issue 26, item 11: it peaked at 618 MB; the bar is 500 MB).
#: ``{f}`` is the report, ``{g}`` a second copy of it (diff), ``{d}`` a folder holding both (fleet).
COMMANDS = {"diagnose": ["diagnose", "{f}"], "diagnose --json": ["diagnose", "{f}", "--json"],
            "diagnose --markdown": ["diagnose", "{f}", "--markdown"], "diff": ["diff", "{f}", "{g}"],
            "fleet": ["fleet", "{d}"], "fleet --json": ["fleet", "{d}", "--json"]}


def many_facts_report() -> str:
    """~58 MB the way a big real report is big: a huge ``python.packages``, a long ``env.vars``,
    big ``libs.*`` copy listings, ldd output and mapped libraries, and many findings with evidence
    (a report saved by ``report -o`` keeps its findings)."""
    site = "/opt/conda/envs/train/lib/python3.12/site-packages"
    copy = {"path": "", "version": "12.6.77", "source": "site-packages", "package": "nvidia-cuda-runtime-cu12",
            "soname": "libcudart.so.12", "loaded": False, "size": 712_000, "sha256": "0" * 64}
    facts = {**BASE,
             "python.packages": {"value": {f"package-{i}": f"{i % 90}.{i % 7}.{i % 13}" for i in range(250_000)}},
             "env.vars": {"value": {f"TORCH_SETTING_{i}": f"/srv/cache/{i}/" + "v" * 40 for i in range(40_000)}},
             "libs.cudart_copies": {"value": [dict(copy, path=f"{site}/nvidia/cuda_runtime/lib/libcudart.so.12.{i}")
                                              for i in range(30_000)]},
             "libs.cudnn_copies": {"value": [dict(copy, path=f"{site}/nvidia/cudnn/lib/libcudnn.so.9.{i}",
                                                  soname="libcudnn.so.9", package="nvidia-cudnn-cu12")
                                             for i in range(30_000)]},
             "libs.nccl_copies": {"value": [dict(copy, path=f"{site}/nvidia/nccl/lib/libnccl.so.2.{i}",
                                                 soname="libnccl.so.2", package="nvidia-nccl-cu12")
                                            for i in range(20_000)]},
             "torch.loaded_libraries": {"value": {"cudart": [f"{site}/nvidia/cuda_runtime/lib/libcudart.so.12.{i}"
                                                             for i in range(60_000)]}}}
    findings = [{"id": f"check-{i % 97}", "status": ("ok", "warn", "fail", "skip")[i % 4],
                 "title": f"finding {i} about package-{i}", "detail": "d" * 200,
                 "evidence": {"python.packages": {f"package-{j}": "1.0" for j in range(i % 50)},
                              "paths": [f"{site}/x/{i}/{j}.so" for j in range(14)]},
                 "remediation": {"text": "Reinstall it.", "commands": [f"pip install package-{i}==1.0"], "links": []},
                 "gpus": []} for i in range(10_000)]
    return json.dumps({"schema_version": 1, "facts": facts, "findings": findings})


def _report(facts: dict[str, object]) -> str:
    return json.dumps({"schema_version": 1, "facts": facts})


def make_inputs(folder: Path) -> dict[str, Path]:
    n = 20_000
    gpus = [dict(GPU, index=i, uuid=f"GPU-{i:08d}") for i in range(n)]
    devices = [{"index": i, "name": GPU["name"], "capability": [9, 0], "total_memory": 85 << 30} for i in range(n)]
    inputs = {
        "floor (small report)": _report(BASE),
        "report 20,000 GPUs": _report({**BASE, "nvml.gpus": {"value": gpus}, "nvml.device_count": {"value": n},
                                       "torch.devices": {"value": devices}}),
        # 50 MB the way a real report gets big: many packages, many mapped libraries, long lists.
        "report 50 MB": _report({**BASE, "python.packages": {"value": {f"pkg-{i}": f"{i % 90}.{i % 7}.0"
                                                                       for i in range(600_000)}},
                                 "torch.loaded_libraries": {"value": {"cudart": [
                                     f"/opt/conda/envs/train/lib/python3.12/site-packages/nvidia/cuda_runtime/lib/"
                                     f"libcudart.so.12.{i}" for i in range(310_000)]}}}),
        "paste 150,000 GPU lines": "PyTorch version: 2.6.0+cu126\nCUDA used to build PyTorch: 12.6\nGPU models and "
                                   "configuration:\n" + "".join(f"GPU {i}: NVIDIA H100 80GB HBM3\n" for i in range(150_000)),
        "paste 4,000,000 empty lines": "PyTorch version: 2.6.0+cu126\n" + "\n" * 4_000_000,
        "report 58 MB, many facts": many_facts_report(),
    }
    assert list(inputs) == INPUTS
    paths = {}
    for i, (name, text) in enumerate(inputs.items()):
        path = folder / f"input-{i}.txt"
        path.write_text(text)
        paths[name] = path
    return paths


#: Starts argv[1:] and prints its wall seconds, peak RSS (KiB) and exit code. It runs in a small
#: interpreter of its own because a child's ru_maxrss is the larger of its own peak and the peak
#: RSS of the process it was forked (or vforked) from, kept across exec: measured straight from a
#: test run that had grown to 540 MB, a 400 MB command read as 540 MB.
_MEASURER = """
import os, subprocess, sys, time
began = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
print(time.perf_counter() - began, usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""


def measure(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, int, int]:
    """(wall seconds, peak RSS in KiB, exit code) of ``argv``, measured from a small process (see
    _MEASURER). Run away from the checkout: ``python -m`` puts the working directory first on
    sys.path, ahead of PYTHONPATH (``--before``)."""
    out = subprocess.run([sys.executable, "-I", "-S", "-c", _MEASURER, *argv], env=env, cwd=cwd,
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), int(out[1]), int(out[2])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--before", help="a source tree to compare with (put first on PYTHONPATH)")
    ap.add_argument("--commands", action="store_true",
                    help="run every command of COMMANDS on the 58 MB many-facts report (peak RSS per command)")
    ap.add_argument("--make", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.make:
        make_inputs(Path(args.make))
        return 0
    if args.commands:
        return commands(args.runs)
    env = {**os.environ, "NO_COLOR": "1", "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}
    variants = {"after": dict(env)}
    if args.before:
        variants["before"] = {**env, "PYTHONPATH": os.path.abspath(args.before)}
        variants["after"]["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    with tempfile.TemporaryDirectory() as tmp:
        # Made by a child process: a forked child's peak RSS counts the parent's pages before its
        # exec, so this process must not hold the inputs while measuring.
        subprocess.run([sys.executable, __file__, "--make", tmp], check=True)
        paths = {name: Path(tmp) / f"input-{i}.txt" for i, name in enumerate(INPUTS)}
        for name, path in paths.items():
            print(f"input {name}: {path.stat().st_size / 1e6:.1f} MB", flush=True)
        runs: dict[tuple[str, str], list[tuple[float, int, int]]] = {}
        for r in range(args.runs):
            for name, path in paths.items():
                for variant, venv in variants.items():
                    cmd = [sys.executable, "-m", "envdoctor", "diagnose", str(path), "--json"]
                    runs.setdefault((name, variant), []).append(measure(cmd, venv, tmp))
            print(f"round {r + 1}/{args.runs} done", flush=True)
    floor = statistics.median(w for w, _, _ in runs[("floor (small report)", "after")])
    print(f"\n{'input':30} {'variant':7} {'median s':>9} {'min-max s':>13} {'RSS MB':>7} {'x floor':>8} {'exit':>5}")
    for (name, variant), rs in runs.items():
        walls = [w for w, _, _ in rs]
        rss = statistics.median(m for _, m, _ in rs) / 1024
        codes = sorted({c for _, _, c in rs})
        print(f"{name:30} {variant:7} {statistics.median(walls):9.2f} {min(walls):6.2f}-{max(walls):<6.2f} "
              f"{rss:7.0f} {statistics.median(walls) / floor:8.1f} {','.join(map(str, codes)):>5}")
    if args.before:
        print("\npaired after/before wall-time ratio per round (median, min-max):")
        for name in paths:
            ratios = [a[0] / b[0] for a, b in zip(runs[(name, "after")], runs[(name, "before")], strict=False)]
            print(f"  {name:30} {statistics.median(ratios):6.3f}  {min(ratios):.3f}-{max(ratios):.3f}")
    ok = True
    for name, limit_s, limit_mb in (("report 50 MB", 5.0, 500), ("report 20,000 GPUs", 5.0, None)):
        rs = runs[(name, "after")]
        wall, rss = statistics.median(w for w, _, _ in rs), statistics.median(m for _, m, _ in rs) / 1024
        met = wall < limit_s and (limit_mb is None or rss < limit_mb)
        ok = ok and met
        print(f"target {name}: {wall:.2f} s (< {limit_s:g} s)" + (f", {rss:.0f} MB (< {limit_mb} MB)" if limit_mb else "")
              + f": {'met' if met else 'NOT met'}")
    return 0 if ok else 1


def commands(runs: int) -> int:
    """Each command of COMMANDS on the 58 MB many-facts report: median wall seconds and peak RSS;
    the bar is 500 MB for every one of them."""
    env = {**os.environ, "NO_COLOR": "1", "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1", "COLUMNS": "120"}
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, __file__, "--make", tmp], check=True)
        name = "report 58 MB, many facts"
        src = Path(tmp) / f"input-{INPUTS.index(name)}.txt"
        folder = Path(tmp) / "fleet"
        folder.mkdir()
        f, g = folder / "node-a.json", folder / "node-b.json"
        src.rename(f)
        g.write_bytes(f.read_bytes())
        print(f"input {name}: {f.stat().st_size / 1e6:.1f} MB", flush=True)
        got: dict[str, list[tuple[float, int, int]]] = {}
        for _ in range(runs):
            for label, argv in COMMANDS.items():
                args = [a.format(f=f, g=g, d=folder) for a in argv]
                got.setdefault(label, []).append(measure([sys.executable, "-m", "envdoctor", *args], env, tmp))
    ok = True
    print(f"\n{'command':22} {'median s':>9} {'RSS MB':>7} {'exit':>5}")
    for label, rs in got.items():
        wall, rss = statistics.median(w for w, _, _ in rs), max(m for _, m, _ in rs) / 1024
        ok = ok and rss < 500
        print(f"{label:22} {wall:9.2f} {rss:7.0f} {','.join(str(c) for c in sorted({c for _, _, c in rs})):>5}"
              + ("" if rss < 500 else "  over 500 MB"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
