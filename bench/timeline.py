#!/usr/bin/env python3
"""Where the time of one ``envdoctor check`` goes: every record the torch child prints, stamped
when the parent reads it (the child flushes each one), plus the probes' ends and the exit.

    python bench/timeline.py [check options…]      e.g.  python bench/timeline.py --device cpu

Runs the real entry point (start-up's early torch child included) in this interpreter with two hooks: the Host's
record parser and the probe runner's ``on_done``. Times are seconds since this script started.
"""

from __future__ import annotations

import os
import sys
import time

T0 = time.monotonic()
LINES: list[tuple[float, str]] = []


def note(text: str) -> None:
    LINES.append((time.monotonic() - T0, text))


def main() -> None:
    import atexit

    from envdoctor.pipeline import startup
    from envdoctor.process import host

    real_begin = startup.begin

    def begin(argv: list[str]) -> None:
        real_begin(argv)
        started = any(early.started for early in startup._pending)
        note(f"start-up: {'torch child started' if started else 'nothing started'}")

    startup.begin = begin  # type: ignore[assignment]
    real_record = host.Records._record

    def record(self: host.Records, raw: bytes) -> None:
        stage_before = self.stage
        real_record(self, raw)
        text = raw.decode("utf-8", "replace")
        if self.stage != stage_before:
            note(f"child stage: {self.stage}")
        if '"_phase"' in text:
            note("child: end of the torch facts (phase)")
        if '"_done"' in text:
            note("child: final record")

    host.Records._record = record  # type: ignore[method-assign]

    from envdoctor.probes import runner

    real_run = runner.run_probes

    def run_probes(*args, **kwargs):  # type: ignore[no-untyped-def]
        inner = kwargs.get("on_done")

        def on_done(run):  # type: ignore[no-untyped-def]
            note(f"probe done: {run.name} ({run.seconds:.2f} s)")
            if inner:
                inner(run)

        kwargs["on_done"] = on_done
        return real_run(*args, **kwargs)

    runner.run_probes = run_probes  # type: ignore[assignment]
    import envdoctor.probes as probes

    probes.run_probes = run_probes  # type: ignore[attr-defined]

    def show() -> None:
        note("exit")
        out = sys.__stderr__
        assert out is not None
        for t, text in LINES:
            out.write(f"{t:7.3f}  {text}\n")
        out.flush()

    atexit.register(show)
    real_finish = os._exit

    def finish(code: int) -> None:
        show()
        real_finish(code)

    os._exit = finish  # type: ignore[assignment]
    sys.argv = ["envdoctor", "check", *sys.argv[1:]]
    from envdoctor.__main__ import run

    run()


if __name__ == "__main__":
    main()
