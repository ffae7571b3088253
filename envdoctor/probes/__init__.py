"""Probes: read the world into Facts, concurrently, under one wall-clock budget.

A probe is ``func(host, options) -> {key: Reading}``. It never raises on purpose and must set
every key it declares in ``keys`` on every path; if its thread raises or outlives its deadline
the runner fills those keys with the reason (``crashed``/``timeout``), so a check always learns
*why* a fact is missing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

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

    def deadline(self, options: Options) -> float:
        return options.timeout * self.scale


def builtin_probes() -> list[ProbeSpec]:
    """The built-in probes, listed explicitly (imported lazily to keep startup fast)."""
    from . import host_probe, python_probe

    specs: list[ProbeSpec] = [*host_probe.PROBES, *python_probe.PROBES]
    for name in _OPTIONAL:
        try:
            module = __import__(f"{__name__}.{name}", fromlist=["PROBES"])
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            continue
        specs.extend(module.PROBES)
    return specs


# Probe modules added by other areas of the project; each defines PROBES.
_OPTIONAL = ("nvidia", "libraries", "micro")

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
    specs = list(probes)
    readings: dict[str, Reading] = {}
    runs: dict[str, ProbeRun] = {}
    lock = threading.Lock()
    starts: dict[str, float] = {}
    closed = threading.Event()  # a probe that finishes after we gave up on it is ignored

    def record(spec: ProbeSpec, fut: Future[Mapping[str, Reading]]) -> None:
        seconds = time.monotonic() - starts[spec.name]
        exc = fut.exception()
        if exc is not None:
            run = ProbeRun(spec.name, "error", seconds, f"{type(exc).__name__}: {exc}")
            fill = {k: missing(Reason.CRASHED, f"probe:{spec.name}", f"probe raised {type(exc).__name__}: {exc}")
                    for k in spec.keys}
        else:
            result = dict(fut.result() or {})
            fill = {k: result.pop(k, missing(Reason.NOT_COLLECTED, f"probe:{spec.name}")) for k in spec.keys}
            fill.update(result)
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

    pool = ThreadPoolExecutor(max_workers=max(1, len(specs)), thread_name_prefix="probe")
    futures: dict[str, tuple[ProbeSpec, Future[Mapping[str, Reading]]]] = {}
    for spec in specs:
        starts[spec.name] = time.monotonic()
        fut = pool.submit(spec.func, host, options)
        fut.add_done_callback(lambda f, s=spec: record(s, f))
        futures[spec.name] = (spec, fut)
    for name, (spec, fut) in futures.items():
        remaining = starts[name] + spec.deadline(options) + _GRACE - time.monotonic()
        if budget is not None:
            remaining = min(remaining, began + budget - time.monotonic())
        try:
            fut.result(timeout=max(remaining, 0.0))
        except Exception:  # noqa: BLE001 - the exception is recorded by the callback
            pass
    pool.shutdown(wait=False, cancel_futures=True)
    with lock:
        closed.set()
        for name, (spec, fut) in futures.items():
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
