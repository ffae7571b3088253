#!/usr/bin/env python3
"""Time of `envdoctor check --distributed` under torchrun (Gloo on the CPU, 127.0.0.1), 2 and 4 ranks,
against one plain `envdoctor check --no-micro` (what a single rank's probes cost).

    python bench/cluster.py [--runs 3] [--ranks 2 4]

Round by round (interleaved, so a noisy neighbour hits every command alike) it runs the plain
check and one torchrun launch per rank count, each on a free port, and prints the median wall
time with its spread (min-max) and the ratio to the plain check. Every launch must exit 0.
On a GPU machine the same command runs NCCL (see bench/gpu_validate.sh).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    began = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    return time.perf_counter() - began, proc.returncode, proc.stdout + proc.stderr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    args = ap.parse_args()
    envdoctor = shutil.which("envdoctor", path=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    if not envdoctor:
        print("envdoctor is not installed next to this interpreter", file=sys.stderr)
        return 2
    env = {**os.environ, "NO_COLOR": "1", "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}

    def launch(n: int) -> list[str]:
        return [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={n}", "--master-addr=127.0.0.1",
                f"--master-port={free_port()}", "-m", "envdoctor", "check", "--distributed"]

    names = ["check (1 process)"] + [f"--distributed, {n} ranks" for n in args.ranks]
    times: dict[str, list[float]] = {n: [] for n in names}
    print(f"{os.cpu_count()} CPU(s), load average before: {os.getloadavg()[0]:.1f}")
    for _ in range(args.runs):
        for name in names:
            argv = [envdoctor, "check", "--no-micro"] if name.startswith("check") else launch(int(name.split()[1]))
            seconds, rc, out = timed(argv, env)
            if rc != 0 and not name.startswith("check"):
                print(f"{name} exited {rc}:\n{out[-2000:]}", file=sys.stderr)
                return 1
            times[name].append(seconds)
    floor = times[names[0]]
    for name in names:
        values = times[name]
        ratios = [v / f for v, f in zip(values, floor, strict=True)]
        print(f"  {name:26s} median {statistics.median(values):6.2f} s (min {min(values):.2f}, max {max(values):.2f})"
              f"   / check: {statistics.median(ratios):.2f}x (min {min(ratios):.2f}, max {max(ratios):.2f})")
    print(f"  load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
