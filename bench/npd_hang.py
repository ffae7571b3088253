"""node-problem-detector's bar for ``envdoctor healthcheck --npd`` with nvmlInit hung (issue 23):
exit 2 (Unknown, never 0) within NPD's 5 s plugin timeout, p99 over 20 runs, first line <= 80 bytes.

Each run is the command deploy/node-problem-detector/envdoctor-monitor.json configures, over the
stand-in libnvidia-ml whose nvmlInit never returns (tests/fakes/fake_nvml.c ``init_hang``), timed
from the process start as NPD times it (interpreter start-up included). Prints every figure and
exits 1 when a run missed the contract.

    .venv/bin/python bench/npd_hang.py [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BAR_S = 5.0  # NPD's default plugin timeout (pkg/custompluginmonitor/types/config.go)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    runs = parser.parse_args().runs
    from tests.conftest import compile_shared

    config = json.loads((ROOT / "deploy" / "node-problem-detector" / "envdoctor-monitor.json").read_text())
    [rule] = config["rules"]
    limit = int(config["pluginConfig"]["max_output_length"])
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        fakes = ROOT / "tests" / "fakes"
        compile_shared(fakes / "fake_nvml.c", folder / "nvml", "libnvidia-ml.so.1", soname="libnvidia-ml.so.1")
        compile_shared(fakes / "fake_cuda.c", folder / "cuda", "libcuda.so.1", soname="libcuda.so.1")
        (folder / "nvml.cfg").write_text("count=2\ninit_hang=1\n")
        (folder / "cuda.cfg").write_text("count=2\n")
        env = dict(os.environ, ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD="1", FAKE_NVML_CONFIG=str(folder / "nvml.cfg"),
                   FAKE_CUDA_CONFIG=str(folder / "cuda.cfg"),
                   LD_LIBRARY_PATH=os.pathsep.join((str(folder / "nvml"), str(folder / "cuda"))))
        times: list[float] = []
        bad: list[str] = []
        lines: set[str] = set()
        for i in range(runs):
            began = time.monotonic()
            proc = subprocess.run([sys.executable, "-m", "envdoctor", *rule["args"]], capture_output=True, text=True,
                                  env=env, timeout=60, cwd=ROOT)
            seconds = time.monotonic() - began
            times.append(seconds)
            first = (proc.stdout.splitlines() or [""])[0]
            lines.add(first)
            if proc.returncode != 2 or len(first.encode()) > limit or seconds > BAR_S:
                bad.append(f"run {i}: exit {proc.returncode}, {seconds:.2f}s, {first!r}")
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]
    print(f"healthcheck --npd, nvmlInit hung, {runs} runs: p50 {statistics.median(times):.2f}s "
          f"p99 {p99:.2f}s max {ordered[-1]:.2f}s (bar {BAR_S:.1f}s); exit 2 every run: {not bad}")
    print(f"first lines: {sorted(lines)}")
    for line in bad:
        print(line)
    return 1 if bad or p99 > BAR_S or len(lines) != 1 else 0


if __name__ == "__main__":
    sys.exit(main())
