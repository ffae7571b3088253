"""Bounded cost on hostile text (issue 10): ``diagnose`` of a 4 MB paste of any shape must take
under 2 s and under 200 MB. Each shape is built to hit one reader's worst case (one huge line, every
line a signature candidate, every pair of lines a re-wrap candidate, statements, NCCL logs, markup,
noise); each run is a fresh child (parse + every built-in check), so its peak memory is its own.

Runs are interleaved (shape A, B, C, … then again) and each shape's time and memory are printed as
ratios to the budget (1.00 = at the limit) with their spread over the repeats.

Run: python bench/hostile_paste.py [--repeats N]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

SIZE = 3_990_000  # characters; parse_text refuses more than 4_000_000
TIME_BUDGET_S = 2.0
MEMORY_BUDGET_MB = 200.0

# Each builder is Python source evaluated in the child, so the text is never piped through.
SHAPES: dict[str, str] = {
    "one-line": "'x' * SIZE",
    "wrapped-bus-error": "'RuntimeError: DataLoader worker (pid 1) is killed by signal: Bus\\nmemory (shm) x\\n' * (SIZE // 70)",
    "nccl-log": "'host:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0 Bootstrap : x\\n' * (SIZE // 80)",
    "statements": "'- **PyTorch version (GPU?)**: 2.1.0+cu121 (True) | Driver | 535.104.05 |\\n' * (SIZE // 75)",
    "launch-lines": "'CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node=8 t.py invalid device ordinal\\n' * (SIZE // 80)",
    "dll-and-xid": "('Error loading \"C:\\\\\\\\a\\\\\\\\' + 'b' * 200 + '.dll\" NVRM: Xid (PCI:0000:01:00): 79, fallen off the bus\\n') * (SIZE // 280)",
    "markup-noise": "('> ```\\n<details>\\n| a | b |\\n**x**: ' + ':' * 50 + '\\n') * (SIZE // 80)",
    "unicode-noise": "(''.join(map(chr, range(0x4e00, 0x4e60))) + '\\u202e\\x00\\u00a0:=|' + '\\n') * (SIZE // 103)",
    # Every line different (a counter), so repeated-line folding does not help: the line cap must.
    "unique-evidence-lines": "''.join(f'r{i}: NCCL WARN Bootstrap : no socket interface found; CUDA error: invalid device ordinal {i}\\n' for i in range(SIZE // 90))",
    "unique-statements": "''.join(f'- torch version {i}: 2.{i}.0+cu121 | driver: 5{i % 100}.1.{i} | cuDNN {i}.1\\n' for i in range(SIZE // 70))",
    "unique-long-tokens": "''.join(f'torch aa bb {i} ' + 'x' * 570 + '\\n' for i in range(SIZE // 590))",
    "unique-slog-lines": "''.join(f'msg=\"inference compute\" {i} ' + 'a' * 1950 + '\\n' for i in range(SIZE // 1980))",
    "collect-env-repeated": "open(CORPUS + '/pytorch-43058-cu102-driver-418.txt', encoding='utf-8').read() * 400",
}

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
SIZE = {size}
CORPUS = str(Path({root!r}) / 'tests' / 'corpus')
from envdoctor.pipeline.diagnose import diagnose
from envdoctor.parsers import ParseError, parse_text
from envdoctor.registry import load_registry
registry = load_registry(plugins=False)
text = ({builder})[:SIZE]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
began = time.perf_counter()
try:
    findings = diagnose(parse_text(text), registry)
    outcome = f"{{len(findings)}} findings"
except ParseError as exc:
    outcome = "refused: " + str(exc)[:60]
seconds = time.perf_counter() - began
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"seconds": seconds, "peak_mb": peak / 1024, "grown_mb": (peak - base) / 1024,
                  "chars": len(text), "outcome": outcome}}))
"""


def run(shape: str, root: str) -> dict[str, float | str]:
    code = CHILD.format(size=SIZE, root=root, builder=SHAPES[shape])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    from pathlib import Path

    repeats = int(argv[argv.index("--repeats") + 1]) if "--repeats" in argv else 3
    root = str(Path(__file__).resolve().parent.parent)
    results: dict[str, list[dict[str, float | str]]] = {s: [] for s in SHAPES}
    for _ in range(repeats):  # interleaved: every shape once per round
        for shape in SHAPES:
            results[shape].append(run(shape, root))
    print(f"{'shape':22}  {'time/2s (min med max)':24}  {'peak MB/200 (min med max)':27}  outcome")
    worst_t = worst_m = 0.0
    for shape, runs in results.items():
        t = sorted(float(r["seconds"]) / TIME_BUDGET_S for r in runs)
        m = sorted(float(r["peak_mb"]) / MEMORY_BUDGET_MB for r in runs)
        worst_t, worst_m = max(worst_t, t[-1]), max(worst_m, m[-1])
        print(f"{shape:22}  {t[0]:.2f} {statistics.median(t):.2f} {t[-1]:.2f}{'':10}  "
              f"{m[0]:.2f} {statistics.median(m):.2f} {m[-1]:.2f}{'':13}  {runs[-1]['outcome']}")
    print(f"\nworst time ratio {worst_t:.2f}, worst memory ratio {worst_m:.2f} (1.00 = the issue's limit; "
          "memory is the child's whole peak RSS, interpreter and imports included)")
    return 0 if worst_t < 1 and worst_m < 1 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
