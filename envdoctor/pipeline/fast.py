"""The fast path ``healthcheck`` and ``exec`` share: the healthcheck subset of probes and checks
under a hard budget, with one watchdog. No torch import unless ``--micro``; the driver child may
already be running (:mod:`.startup`)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from envdoctor.process.host import Host

from ..model import ProbeStatus
from ..report import Report
from .collect import Probing
from .plan import Plan


def watchdog(seconds: float, overrun: Callable[[], object]) -> threading.Event:
    """Call ``overrun`` (which answers and exits) after ``seconds`` unless the returned event is set
    first: whatever is stuck (a D-state child, a wedged thread), the command answers in time."""
    decided = threading.Event()

    def watch() -> None:
        if not decided.wait(seconds):
            overrun()

    threading.Thread(target=watch, name="watchdog", daemon=True).start()
    return decided


def run_fast(plan: Plan, host: Host, deadline: float, overrun: Callable[[], object]) -> tuple[Report, list[str]]:
    """(the Report, names of probes that hung) for ``plan`` (``plan.fast``; its ``budget`` bounds the
    probes); ``overrun`` answers when ``deadline`` seconds pass first. Raises RegistryError."""
    from . import judge

    decided = watchdog(deadline, overrun)
    probing = Probing(plan, host)
    checks, _ = judge.checks_for(plan)  # loaded while the children run
    from envdoctor.output import render  # noqa: F401 - imported during the overlap, used by the answer

    facts, runs = probing.wait()
    report = judge.judge(facts, runs, "live", plan, checks=checks)
    decided.set()
    return report, [r.name for r in runs if r.status is ProbeStatus.TIMEOUT]
