"""Plan -> probes -> (Facts, runs). The probes run in a thread while the caller's main thread
imports the judging side and rich (and shows a spinner on a terminal): that overlaps the torch
child's ``import torch``, the slowest part of every run.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from envdoctor.knowledge.factkeys import validate_fact_keys
from envdoctor.process import lifecycle
from envdoctor.process.host import ChildResult, Host

from ..model import Facts, ProbeRun, ok
from ..probes import Options, ProbeSpec, healthcheck_probes, iter_builtin_probes, run_probes
from .plan import Plan

#: The facts a Plan itself gives (envdoctor/knowledge/factkeys.py: written for the commands that take them).
PLAN_SOURCE = "plan"
PLAN_KEYS = ("plan.expect_gpus",)
PLAN_COMMANDS = ("check", "distributed", "healthcheck", "exec")
for _command in PLAN_COMMANDS:
    validate_fact_keys(PLAN_KEYS, "envdoctor.pipeline.collect PLAN_KEYS", producer=f"command:{_command}")


def options_for(plan: Plan, torch_probe: Callable[[float], ChildResult] | None = None) -> Options:
    """What the probes see of ``plan``. A full run shares one torch child between the torch facts
    and the microchecks (probes/torch_child.py) unless the cluster check's rank child reports the
    torch facts (``torch_probe``)."""
    shared = None
    if not plan.fast and torch_probe is None:
        from ..probes import torch_child

        shared = torch_child.Shared()
    timeout = plan.timeout
    if plan.fast:
        # Each probe gets most of the budget for its own deadline, so a hang is reported by the
        # probe (with the stage it hung in) before the budget runs out.
        scale = max((s.scale for s in healthcheck_probes(plan.micro) if not s.micro), default=1.0)
        timeout = max(0.1, min(5.0, (plan.budget or 5.0) * 0.8 / scale))
    return Options(timeout=timeout, python=plan.python, python_chosen_by=plan.python_chosen_by, micro=plan.micro,
                   micro_only=plan.micro_only, device=plan.device, compile=plan.compile, healthcheck=plan.fast,
                   distributed=plan.distributed, micro_checks=plan.micro_checks, micro_inject=plan.micro_inject,
                   micro_budget=plan.micro_budget, micro_deadline=plan.micro_deadline, torch_child=shared,
                   torch_probe=torch_probe)


def plan_facts(plan: Plan) -> dict[str, Any]:
    """The readings the Plan itself gives: what the user asked the checks to hold the machine to."""
    return {} if plan.expect_gpus is None else {"plan.expect_gpus": ok(plan.expect_gpus, PLAN_SOURCE)}


def specs_for(plan: Plan) -> Iterable[ProbeSpec]:
    if plan.fast:
        return healthcheck_probes(plan.micro)
    specs: Iterable[ProbeSpec] = iter_builtin_probes()
    if plan.micro_only:
        specs = [s for s in specs if s.micro or s.name in ("host", "python")]
    return specs


class Probing:
    """The probes of ``plan`` running in a thread; :meth:`wait` joins them (with a spinner when asked)."""

    def __init__(self, plan: Plan, host: Host, torch_probe: Callable[[float], ChildResult] | None = None) -> None:
        self.plan = plan
        self.pending: set[str] = set()
        self._lock = threading.Lock()  # the probe threads change `pending` while the spinner reads it
        self._result: dict[str, Any] = {}
        options = options_for(plan, torch_probe)
        specs = specs_for(plan)

        def started(spec: ProbeSpec) -> ProbeSpec:
            with self._lock:
                self.pending.update(spec.run_names())
            return spec

        def finished(run: ProbeRun) -> None:
            with self._lock:
                self.pending.discard(run.name)

        def work() -> None:
            try:
                if plan.fast:  # not niced: on a busy node the probes are all a healthcheck does
                    self._result["out"] = run_probes(host, options, specs, budget=plan.budget, background_nice=0)
                else:
                    self._result["out"] = run_probes(host, options, (started(s) for s in specs), on_done=finished)
            except BaseException as exc:  # noqa: BLE001 - raised again in the main thread (wait)
                self._result["error"] = exc

        self.began = time.monotonic()
        self.thread = threading.Thread(target=work, name="probes", daemon=True)
        try:
            self.thread.start()
        except RuntimeError:  # no thread left: probe here (each probe then says what it could not start)
            work()

    def wait(self, progress: bool = False) -> tuple[Facts, list[ProbeRun]]:
        if progress and sys.stderr.isatty():
            from envdoctor.output.render import make_console

            console = make_console(stderr=True)
            with console.status("probing…", spinner="dots") as status:
                while self.thread.is_alive():
                    self.thread.join(0.1)
                    elapsed = time.monotonic() - self.began
                    with self._lock:
                        names = ", ".join(sorted(self.pending))
                    slow = " (taking unexpectedly long)" if elapsed > 10 else ""
                    status.update(f"probing: {names} {elapsed:.0f}s{slow}")
        else:
            lifecycle.join(self.thread)
        if "out" not in self._result:
            raise self._result.get("error") or RuntimeError("the probes ended without a result")
        facts, runs = self._result["out"]
        extra = plan_facts(self.plan)
        return (facts.merged(extra) if extra else facts), runs


def collect(plan: Plan, host: Host, progress: bool = False,
            torch_probe: Callable[[float], ChildResult] | None = None) -> tuple[Facts, list[ProbeRun]]:
    """Run ``plan``'s probes on ``host``: (facts, runs). Meanwhile the checks and rich are imported
    (they are needed next); with ``progress`` a spinner on a terminal names the probes still running."""
    probing = Probing(plan, host, torch_probe)
    overlap(plan)
    return probing.wait(progress)


def overlap(plan: Plan) -> None:
    """What the run needs next, imported while the children run: the checks (the registry,
    cached) and the renderers (~25 ms off the end). A registry that cannot load says so later, when judged."""
    from ..registry import RegistryError
    from . import judge

    try:
        judge.checks_for(plan)
    except RegistryError:
        pass
    from envdoctor.output import render  # noqa: F401
    if plan.output == "terminal" and not plan.fast:
        # The renderer imports rich inside its functions (the healthcheck never loads it): for the
        # terminal, what its first call would import (~60 modules, ~45 ms) is imported now, while
        # the torch child still imports torch, not after it.
        import shutil  # noqa: F401 - the console's terminal size

        import rich.box
        import rich.console
        import rich.panel
        import rich.table
        import rich.text  # noqa: F401

        from envdoctor.output import examined  # noqa: F401
        from envdoctor.process import encoding  # noqa: F401
