#!/usr/bin/env python3
"""Speed and memory of envdoctor, as ratios measured in one run (this machine is noisy).

    python bench/speed.py [--python PATH] [--runs N]

Prints, interleaving the commands round by round and taking medians:
  * `envdoctor check` wall time / `python -c "import torch"` (the floor any torch-probing tool
    pays; target <= 1.2x),
  * `python -m torch.utils.collect_env` / the same floor (for comparison: it judges nothing),
  * `envdoctor healthcheck` wall time (target <= 0.3 s) and peak RSS of its whole process tree
    (target <= 60 MB).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, int, int]:
    """(wall seconds, peak RSS in KiB of the process and its waited-for descendants, exit code)."""
    began = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - began
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss, proc.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=sys.executable, help="interpreter with torch (default: this one)")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    envdoctor = shutil.which("envdoctor", path=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    if not envdoctor:
        print("envdoctor is not installed next to this interpreter", file=sys.stderr)
        return 2
    env = {**os.environ, "NO_COLOR": "1"}
    commands = {
        "import torch (floor)": [args.python, "-c", "import torch"],
        "envdoctor check": [envdoctor, "check", "--python", args.python],
        "collect_env": [args.python, "-m", "torch.utils.collect_env"],
        "envdoctor healthcheck": [envdoctor, "healthcheck"],
    }
    results: dict[str, list[tuple[float, int, int]]] = {k: [] for k in commands}
    for argv in commands.values():  # warm the page cache once
        measure(argv, env)
    for _ in range(args.runs):
        for name, argv in commands.items():
            results[name].append(measure(argv, env))

    def med(name: str) -> float:
        return statistics.median(r[0] for r in results[name])

    floor = med("import torch (floor)")
    print(f"{'command':<24} {'median s':>9} {'min s':>7} {'max s':>7} {'peak RSS MB':>12} {'exit':>5}")
    for name in commands:
        walls = [r[0] for r in results[name]]
        rss = max(r[1] for r in results[name]) / 1024
        codes = sorted({r[2] for r in results[name]})
        print(f"{name:<24} {med(name):>9.3f} {min(walls):>7.3f} {max(walls):>7.3f} {rss:>12.1f} {codes!s:>5}")
    check_ratio = med("envdoctor check") / floor
    collect_ratio = med("collect_env") / floor
    hc = med("envdoctor healthcheck")
    hc_rss = max(r[1] for r in results["envdoctor healthcheck"]) / 1024
    print()
    print(f"envdoctor check / import torch       = {check_ratio:.2f}x  (target <= 1.20x) "
          f"{'OK' if check_ratio <= 1.2 else 'OVER'}")
    print(f"collect_env / import torch           = {collect_ratio:.2f}x  (reference)")
    print(f"envdoctor healthcheck wall           = {hc:.3f} s (target <= 0.30 s) {'OK' if hc <= 0.3 else 'OVER'}")
    print(f"envdoctor healthcheck peak RSS       = {hc_rss:.1f} MB (target <= 60 MB) {'OK' if hc_rss <= 60 else 'OVER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
