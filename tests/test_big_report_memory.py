"""A 58 MB saved report through the commands that read reports, within 500 MB (issue 26, item 11:
diff peaked at 626 MB: it held both reports, each parsed twice, and memos kept the first one's
facts alive). The big run is slow; the memos' release is checked fast."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

from envdoctor.model import Facts, ok


def test_the_checks_memos_let_a_report_go() -> None:
    from envdoctor.checks import _torch

    facts = Facts({"python.packages": ok({f"p{i}": "1.0" for i in range(1000)}),
                   "nvml.gpus": ok([{"index": 0, "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}])})
    assert _torch._packages(facts)["p1"] == "1.0" and _torch.gpus(facts)
    assert _torch._packages(facts) is _torch._packages(facts)  # still one answer per Facts
    del facts
    gc.collect()
    assert not _torch._PACKAGES and not _torch._GPUS  # the answers (a big copy) went with the facts


def test_a_commands_peak_is_its_own_not_that_of_the_process_measuring_it(tmp_path: Path) -> None:
    # A child's ru_maxrss counts the peak of the process it was forked from: measured straight from
    # a test worker grown to 540 MB, diff's 400 MB read as 540 (the two-worker suite failed on it).
    bench = Path(__file__).resolve().parent.parent / "bench"
    code = ("import os, sys; sys.path.insert(0, sys.argv[1]); import big_inputs\n"
            "ballast = bytearray(400 << 20)\n"
            "for i in range(0, len(ballast), 4096): ballast[i] = 1\n"
            "print(big_inputs.measure([sys.executable, '-c', 'x = bytearray(20 << 20)'], dict(os.environ), sys.argv[2])[1])")
    out = subprocess.run([sys.executable, "-c", code, str(bench), str(tmp_path)], capture_output=True, text=True,
                         check=True, timeout=120)
    assert int(out.stdout.split()[-1]) < 200 << 10, out.stdout  # KiB: the 20 MB command, not the 400 MB parent


def test_diff_of_two_58_mb_reports_stays_under_500_mb(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    try:
        import big_inputs
    finally:
        sys.path.pop(0)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    # Written by a child: this process must not hold the text while the measured one runs.
    subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import big_inputs; "
                    "open(sys.argv[2], 'w').write(big_inputs.many_facts_report())",
                    str(Path(big_inputs.__file__).parent), str(a)], check=True, timeout=300)
    b.write_bytes(a.read_bytes())
    assert a.stat().st_size > 55 << 20
    env = {**os.environ, "NO_COLOR": "1", "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}
    _, rss_kib, code = big_inputs.measure([sys.executable, "-m", "envdoctor", "diff", str(a), str(b)], env,
                                          str(tmp_path))
    assert code == 0
    assert rss_kib / 1024 < 500, f"{rss_kib / 1024:.0f} MB"
