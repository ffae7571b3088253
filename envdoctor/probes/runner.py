"""Run probes concurrently under one wall-clock budget; a probe that raises or outlives its deadline
gets its keys filled with the reason (``crashed``/``timeout``), so a check always learns *why* a
fact is missing."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping

from envdoctor.process import lifecycle
from envdoctor.process.host import Host

from ..model import Facts, ProbeRun, ProbeStatus, Reading, Reason, missing
from .spec import Options, ProbeSpec


class ProbeNotStarted(RuntimeError):
    """The probe could not even start (no thread left): recorded as its error, never raised."""


# Extra seconds a probe thread gets beyond its own deadline before the runner gives up on it:
# the deadline inside the probe (host.run) should always fire first.
_GRACE = 1.5


def run_probes(
    host: Host,
    options: Options,
    probes: Iterable[ProbeSpec],
    on_done: Callable[[ProbeRun], None] | None = None,
    budget: float | None = None,
    background_nice: int = 10,
) -> tuple[Facts, list[ProbeRun]]:
    """Run probes concurrently; returns the merged facts and how each probe went.

    ``budget`` caps the total wall time (the healthcheck's hard limit): probes still running
    then are abandoned and reported as timeouts. Probes off the critical path run their commands
    at ``background_nice`` (0: none; the healthcheck's probes are all it does, and niced on a
    busy node they would miss its deadline)."""
    began = time.monotonic()
    specs: list[ProbeSpec] = []
    readings: dict[str, Reading] = {}
    runs: dict[str, ProbeRun] = {}
    lock = threading.Lock()
    starts: dict[str, float] = {}
    closed = threading.Event()  # a probe that finishes after we gave up on it is ignored

    def record(spec: ProbeSpec, result: Mapping[str, Reading] | None, exc: BaseException | None) -> None:
        seconds = time.monotonic() - starts[spec.name]
        if exc is not None:
            made = [ProbeRun(name, ProbeStatus.ERROR, seconds, f"{type(exc).__name__}: {exc}")
                    for name in spec.run_names()]
            fill = {k: missing(Reason.CRASHED, f"probe:{spec.name}", f"probe raised {type(exc).__name__}: {exc}")
                    for k in spec.keys}
        else:
            got = dict(result or {})
            fill = {k: got.pop(k, missing(Reason.NOT_COLLECTED, f"probe:{spec.name}",
                                                f"probe {spec.name} declares {k} but did not set it (a bug)")) for k in spec.keys}
            fill.update(got)
            parts = spec.parts or ((spec.name, tuple(fill)),)
            made = [ProbeRun(name, ProbeStatus.of(fill[k].reason for k in keys), seconds) for name, keys in parts]
        with lock:
            if closed.is_set():
                return
            readings.update(fill)
            for one in made:
                runs[one.name] = one
        for one in made:
            if on_done:
                on_done(one)

    def work(spec: ProbeSpec, on: Host) -> None:
        try:
            result = spec.func(on, options)
        except BaseException as exc:  # noqa: BLE001 - a probe bug becomes a reason, not a crash
            record(spec, None, exc)
        else:
            record(spec, result, None)

    # Plain daemon threads, not an executor: a probe stuck past every deadline must never keep
    # the interpreter from exiting (ThreadPoolExecutor joins its workers at exit).
    threads: dict[str, tuple[ProbeSpec, threading.Thread]] = {}
    background = host.niced(background_nice) if background_nice else host
    for spec in probes:  # started as they arrive (see iter_builtin_probes)
        specs.append(spec)
        starts[spec.name] = time.monotonic()
        thread = threading.Thread(target=work, args=(spec, host if spec.critical else background),
                                  name=f"probe-{spec.name}", daemon=True)
        _start(thread, lambda exc, spec=spec: record(spec, None, exc))  # type: ignore[misc]
        threads[spec.name] = (spec, thread)  # one never started is not alive: joined at once
    for name, (spec, thread) in threads.items():
        remaining = starts[name] + spec.deadline(options) + _GRACE - time.monotonic()
        if budget is not None:
            remaining = min(remaining, began + budget - time.monotonic())
        lifecycle.join(thread, max(remaining, 0.0))  # sliced: the main thread stays responsive to signals
    with lock:
        closed.set()
        for name, (spec, _) in threads.items():
            if spec.run_names()[0] not in runs:
                _abandon(spec, time.monotonic() - starts[name], readings, runs, on_done)
        ordered = [runs[n] for s in specs for n in s.run_names()]
        return Facts(dict(readings)), ordered


def _start(thread: threading.Thread, refused: Callable[[BaseException], None]) -> None:
    """Start ``thread``; ``refused(error)`` when the system refuses (out of threads, processes or memory)."""
    try:
        thread.start()
    except RuntimeError as exc:  # "can't start new thread"
        refused(ProbeNotStarted(f"could not start a thread for it ({exc})"))


def _abandon(spec: ProbeSpec, seconds: float, readings: dict[str, Reading], runs: dict[str, ProbeRun],
             on_done: Callable[[ProbeRun], None] | None) -> None:
    """A probe given up on: its runs timed out, its keys say so."""
    for run_name in spec.run_names():
        runs[run_name] = ProbeRun(run_name, ProbeStatus.TIMEOUT, seconds,
                                  f"probe {run_name} did not finish within {seconds:.1f} s")
        if on_done:
            on_done(runs[run_name])
    for key in spec.keys:
        readings.setdefault(key, missing(Reason.TIMEOUT, f"probe:{spec.name}",
                                         f"probe {spec.name} did not finish within {seconds:.1f} s"))
