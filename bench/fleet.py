#!/usr/bin/env python3
"""`envdoctor fleet` over many saved reports, against the floor of merely parsing them.

    python bench/fleet.py [--reports 10000] [--runs 3] [--template report.json]

Writes N reports into a temporary folder (from ``--template``, or from a fresh
``envdoctor report --json --no-micro`` of this machine): 2 % with another torch, 1 % with another
driver and NCCL_ALGO set, 3 % with a failing check, plus 5 corrupt files. Then, interleaving the
two commands round by round, prints the median wall time of

  * ``envdoctor fleet DIR --json`` (target: 10,000 reports in under 10 s on 2 cores), and
  * the floor: one Python process that opens and ``json.load``s every file,

with their ratio and the spread (min-max) of each.
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
import time

FLOOR = r"""
import json, os, sys
n = 0
for name in sorted(os.listdir(sys.argv[1])):
    try:
        with open(os.path.join(sys.argv[1], name), "rb") as fh:
            json.loads(fh.read())
        n += 1
    except (ValueError, RecursionError):
        pass
print(n)
"""


def template(path: str | None, envdoctor: str) -> dict:
    if path:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    out = subprocess.run([envdoctor, "report", "--json", "--no-micro"], capture_output=True, text=True, check=False)
    return json.loads(out.stdout)


def generate(folder: str, base: dict, count: int) -> None:
    for i in range(count):
        changed = (i % 50 == 0 and i) or i % 100 == 1 or i % 33 == 2
        rep = copy.deepcopy(base) if changed else base
        facts = rep["facts"]
        if i % 50 == 0 and i:
            facts["torch.version"] = {"value": "2.12.0+cu126"}
        if i % 100 == 1:
            facts["nvml.driver_version"] = {"value": "535.183.01"}
            env = dict(facts.get("env.vars", {}).get("value") or {})
            env["NCCL_ALGO"] = "Ring"
            facts["env.vars"] = {"value": env}
        if i % 33 == 2:
            rep["findings"] = list(rep["findings"]) + [{"id": "gpu-xid", "status": "fail", "title": "Xid 79"}]
        with open(os.path.join(folder, f"node{i:05d}.json"), "w", encoding="utf-8") as fh:
            json.dump(rep, fh)
    for i, text in enumerate(['{"schema_version": 1, "facts": {', "[" * 50000, "", "\x00\x01", '{"a": 1}']):
        with open(os.path.join(folder, f"corrupt{i}.json"), "w", encoding="utf-8") as fh:
            fh.write(text)


def timed(argv: list[str]) -> tuple[float, int, str, int]:
    """(seconds, exit code, stdout, peak RSS in KiB of the largest process of its tree)."""
    with tempfile.TemporaryFile() as out:
        began = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - began
        out.seek(0)
        return seconds, os.waitstatus_to_exitcode(status), out.read().decode(), usage.ru_maxrss


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reports", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--template", help="a saved report to copy (default: a fresh one of this machine)")
    args = ap.parse_args()
    envdoctor = shutil.which("envdoctor", path=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    if not envdoctor:
        print("envdoctor is not installed next to this interpreter", file=sys.stderr)
        return 2
    base = template(args.template, envdoctor)
    with tempfile.TemporaryDirectory(prefix="envdoctor-fleet-") as folder:
        generate(folder, base, args.reports)
        size = sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder))
        print(f"{args.reports} reports + 5 corrupt files, {size / 1e6:.0f} MB, {os.cpu_count()} CPU(s), "
              f"load average before: {os.getloadavg()[0]:.1f}")
        commands = {"fleet": [envdoctor, "fleet", folder, "--json"], "floor": [sys.executable, "-c", FLOOR, folder]}
        times: dict[str, list[float]] = {k: [] for k in commands}
        rss: dict[str, list[int]] = {k: [] for k in commands}
        check = ""
        for _ in range(args.runs):
            for name, argv in commands.items():
                seconds, rc, out, peak = timed(argv)
                times[name].append(seconds)
                rss[name].append(peak)
                if name == "fleet":
                    if rc not in (0, 1):
                        print(f"envdoctor fleet exited {rc}", file=sys.stderr)
                        return 1
                    check = out
        result = json.loads(check)
        print(f"fleet read {result['reports']} reports, {len(result['configurations'])} configurations, "
              f"{len(result['corrupt'])} unreadable, {len(result['failures_by_node'])} failing nodes")
        for name, values in times.items():
            print(f"  {name:6s} median {statistics.median(values):6.2f} s  (min {min(values):.2f}, max {max(values):.2f})"
                  f"   peak RSS {max(rss[name]) / 1024:.0f} MB (largest process)")
        print(f"  load average after: {os.getloadavg()[0]:.1f} (others share this machine: a load above the CPU "
              "count slows both commands)")
        ratios = [f / g for f, g in zip(times["fleet"], times["floor"], strict=True)]
        print(f"  fleet / floor: median {statistics.median(ratios):.2f}x (min {min(ratios):.2f}, max {max(ratios):.2f})")
        verdict = "meets" if statistics.median(times["fleet"]) < 10 else "MISSES"
        print(f"  target: {args.reports} reports in under 10 s -> {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
