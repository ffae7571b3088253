"""Probes: read the world into Facts, concurrently, under one wall-clock budget.

A probe is ``func(host, options) -> {key: Reading}``. It never raises on purpose and must set
every key it declares in ``keys`` on every path; if its thread raises or outlives its deadline
the runner fills those keys with the reason (``crashed``/``timeout``), so a check always learns
*why* a fact is missing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from .. import lifecycle
from ..host import Host
from ..model import Facts, ProbeRun, Reading, Reason, missing


@dataclass(frozen=True)
class Options:
    """What the user asked for, as probes see it."""

    timeout: float = 5.0  # seconds per probe (scaled per probe by ProbeSpec.scale)
    python: str | None = None  # target interpreter; None = the one running envdoctor
    micro: bool = True  # run microchecks when a GPU is usable
    micro_only: bool = False
    device: str | None = None  # "cpu", "cuda", "cuda:N"
    compile: bool = False
    healthcheck: bool = False
    extra: Mapping[str, object] = field(default_factory=dict)


ProbeFunc = Callable[[Host, Options], Mapping[str, Reading]]


@dataclass(frozen=True)
class ProbeSpec:
    name: str
    func: ProbeFunc
    keys: tuple[str, ...]
    scale: float = 1.0  # deadline = options.timeout * scale (+ grace)
    healthcheck: bool = False  # part of the fast `healthcheck` subset
    micro: bool = False  # a microcheck probe (run by --micro-only, skipped by --no-micro)
    #: On the critical path (imports torch, or measures speed): runs at normal priority; every
    #: other probe's commands run niced so they never slow those down on a small machine.
    critical: bool = False

    def deadline(self, options: Options) -> float:
        return options.timeout * self.scale


def iter_builtin_probes() -> Iterator[ProbeSpec]:
    """The built-in probes, listed explicitly. The torch probe comes first and the other probe
    modules are imported only after it is yielded: run_probes starts each probe as it arrives,
    so the slowest child (``import torch``) is already running while the rest load."""
    from . import python_probe

    yield from python_probe.PROBES
    from . import host_probe

    yield from host_probe.PROBES
    from . import libraries, micro, nvidia

    yield from nvidia.PROBES
    yield from libraries.PROBES
    yield from micro.PROBES


def builtin_probes() -> list[ProbeSpec]:
    return list(iter_builtin_probes())


# Extra seconds a probe thread gets beyond its own deadline before the runner gives up on it:
# the deadline inside the probe (host.run) should always fire first.
_GRACE = 1.5


def run_probes(
    host: Host,
    options: Options,
    probes: Iterable[ProbeSpec],
    on_done: Callable[[ProbeRun], None] | None = None,
    budget: float | None = None,
) -> tuple[Facts, list[ProbeRun]]:
    """Run probes concurrently; returns the merged facts and how each probe went.

    ``budget`` caps the total wall time (the healthcheck's hard limit): probes still running
    then are abandoned and reported as timeouts."""
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
            run = ProbeRun(spec.name, "error", seconds, f"{type(exc).__name__}: {exc}")
            fill = {k: missing(Reason.CRASHED, f"probe:{spec.name}", f"probe raised {type(exc).__name__}: {exc}")
                    for k in spec.keys}
        else:
            got = dict(result or {})
            fill = {k: got.pop(k, missing(Reason.NOT_COLLECTED, f"probe:{spec.name}",
                                                f"probe {spec.name} declares {k} but did not set it (a bug)")) for k in spec.keys}
            fill.update(got)
            statuses = {r.reason for r in fill.values()}
            status = "timeout" if Reason.TIMEOUT in statuses else "crashed" if Reason.CRASHED in statuses else "ok"
            run = ProbeRun(spec.name, status, seconds)
        with lock:
            if closed.is_set():
                return
            readings.update(fill)
            runs[spec.name] = run
        if on_done:
            on_done(run)

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
    background = host.niced(10)
    for spec in probes:  # started as they arrive (see iter_builtin_probes)
        specs.append(spec)
        starts[spec.name] = time.monotonic()
        thread = threading.Thread(target=work, args=(spec, host if spec.critical else background),
                                  name=f"probe-{spec.name}", daemon=True)
        thread.start()
        threads[spec.name] = (spec, thread)
    for name, (spec, thread) in threads.items():
        remaining = starts[name] + spec.deadline(options) + _GRACE - time.monotonic()
        if budget is not None:
            remaining = min(remaining, began + budget - time.monotonic())
        lifecycle.join(thread, max(remaining, 0.0))  # sliced: the main thread stays responsive to signals
    with lock:
        closed.set()
        for name, (spec, _) in threads.items():
            if name in runs:
                continue
            seconds = time.monotonic() - starts[name]
            runs[name] = ProbeRun(name, "timeout", seconds, f"probe {name} did not finish within {seconds:.1f} s")
            for key in spec.keys:
                readings.setdefault(key, missing(Reason.TIMEOUT, f"probe:{name}",
                                                 f"probe {name} did not finish within {seconds:.1f} s"))
            if on_done:
                on_done(runs[name])
        ordered = [runs[s.name] for s in specs]
        return Facts(dict(readings)), ordered
