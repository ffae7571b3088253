"""The fast path ``healthcheck`` and ``exec`` share: the healthcheck subset of probes and checks
under a hard budget, with one watchdog. No torch import unless ``--micro``; the driver child may
already be running (:mod:`.startup`)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from envdoctor.process import lifecycle
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


# -- the healthcheck's answer ------------------------------------------------------------------
def healthcheck_problem(output: str, seconds: float) -> str | None:
    """The usage error of a healthcheck Plan click's options cannot catch alone, or None: ``--slurm``
    takes ``--max-seconds`` up to :data:`~envdoctor.commands.slurm.MAX_BUDGET`."""
    if output != "slurm":
        return None
    from envdoctor.commands import slurm as slurm_mode

    if seconds > slurm_mode.MAX_BUDGET:
        return (f"--slurm takes --max-seconds up to {slurm_mode.MAX_BUDGET:.0f} "
                "(Slurm kills a HealthCheckProgram after 60 s)")
    return None


def _say(text: str) -> None:
    """One line on stderr (NPD logs it; the engines' warnings)."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def publish(plan: Plan, rep: Report | None, hung: Iterable[str], seconds: float, why: str = "") -> Any:
    """Write the verdict to the engines ``plan`` names (warnings on stderr); the Verdict."""
    from envdoctor.output.engines import finish
    from envdoctor.redact import redact_text

    verdict, problems = finish(plan, rep, hung, seconds, why)
    for problem in problems:
        _say(f"envdoctor: warning: {redact_text(problem)}")
    return verdict


def host_for(plan: Plan) -> Host:
    """The Host for ``plan``, with the children start-up began for this very Plan."""
    from . import startup

    return Host(python=plan.python, early=startup.adopt(plan))


def answer_healthcheck(plan: Plan, began: float) -> NoReturn:
    """The whole ``healthcheck`` for a checked ``plan`` (``plan.deadline``: its ``--max-seconds``;
    ``plan.output``: line, npd or slurm), from the probes to the exit code; ``began`` is when the
    command started (time.monotonic). Reached from click's command and from start-up alike
    (:func:`direct`), so both answer the same."""
    from envdoctor.process.lifecycle import ExitCode, NpdExit
    from envdoctor.redact import redact_text
    from envdoctor.registry import RegistryError

    seconds = float(plan.deadline or 5.0)
    npd, slurm = plan.output == "npd", plan.output == "slurm"
    if slurm:
        from envdoctor.commands import slurm as slurm_mode

        slurm_mode.hard_deadline(began)

    def unknown(line: str, why: str) -> NoReturn:
        from envdoctor.output.engines import npd_line

        verdict = publish(plan, None, (), time.monotonic() - began, why)
        if npd:
            _say(line)
            lifecycle.answer(npd_line(verdict), NpdExit.UNKNOWN)
        if slurm:  # envdoctor could not judge: no reason to drain a node
            lifecycle.answer(f"error: {line}; node left as it is", ExitCode.INCOMPLETE)
        lifecycle.answer(line, ExitCode.FAIL)

    def overrun() -> NoReturn:
        if slurm:
            publish(plan, None, (), time.monotonic() - began, "no answer within --max-seconds")
            lifecycle.answer(slurm_mode.overrun_line(seconds), ExitCode.INCOMPLETE)
        unknown(f"unhealthy ({seconds:.2f}s): envdoctor exceeded its --max-seconds budget",
                "no answer within --max-seconds")

    # The probes first (the driver child is already running: envdoctor.pipeline.startup), then,
    # while they run, the checks and what the answer needs.
    try:
        rep, hung = run_fast(plan, host_for(plan), seconds, overrun)
    except RegistryError as exc:  # a registry that cannot load is an unhealthy answer
        unknown(f"unhealthy: {redact_text(str(exc))}", "the checks could not be loaded")
    from envdoctor.output.render import healthcheck_line

    healthy, line = healthcheck_line(rep.findings, time.monotonic() - began, hung)
    if plan.prometheus_textfile or plan.nfd_features or npd:
        verdict = publish(plan, rep, hung, time.monotonic() - began)
        if npd:
            from envdoctor.output.engines import npd_exit, npd_line

            _say(line)  # NPD logs stderr; stdout is the condition's message
            lifecycle.answer(npd_line(verdict), npd_exit(verdict))
    if slurm:
        lifecycle.answer(*slurm_mode.act(slurm_mode.verdict(rep.findings, hung), Host(), os.environ, began))
    # Leave at once: an abandoned child or probe thread must not delay the answer.
    lifecycle.answer(line, ExitCode.OK if healthy else ExitCode.FAIL)


def direct(plan: Plan) -> None:
    """``healthcheck`` without click: start-up read a command line click would take as it is
    (:func:`envdoctor.pipeline.startup.direct`), so the answer needs neither click nor the CLI
    module (~30 ms of imports, a sixth of a healthcheck). Guarded as the CLI guards every command:
    a closed stdout, an exhausted limit or a bug is one line and its exit code, never a traceback.
    Returns (having done nothing) for a Plan with a usage error: click words it."""
    began = time.monotonic()
    if healthcheck_problem(plan.output, float(plan.deadline or 5.0)) is not None:
        return
    code: int = lifecycle.ExitCode.OK
    try:
        try:
            lifecycle.guard_streams()  # as the CLI's run(): a closed stdout, a narrow encoding
            answer_healthcheck(plan, began)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (lifecycle.ExitCode.OK if exc.code is None
                                                               else lifecycle.ExitCode.FAIL)
    except Exception as exc:  # noqa: BLE001 - the last resort: one line and its exit code, as the CLI's run()
        code = lifecycle.top_level_code(exc)
    lifecycle.finish(code)

