"""Start-up: the run's :class:`~.plan.Plan` from ``sys.argv`` before click is imported, and the
children it will need started from it at once.

``check`` and ``report`` spend most of their time waiting for the child that imports torch, and
``healthcheck`` is a race between its own imports and its one driver child; everything the
parent imports first (click, the report model, the probes) delays them. So the entry point builds
the Plan from ``argv`` (:func:`plan_from_argv`: the only place ``sys.argv`` is parsed by hand),
starts those children from it (:func:`begin`), and click, once it has built its own Plan from the
same options, adopts them when the two Plans are equal (:func:`adopt`): then the Host gets them
(``Host(early=…)``). When they differ (an option start-up does not read, a usage error), the
children are ended unused: the guess can cost a wasted start, never a wrong fact.

Only the standard library is imported here (and :mod:`envdoctor.process.target`, which needs no more).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from envdoctor.process import childargs, driverstart, lifecycle, prestart

from .plan import Plan

_pending: list[lifecycle.Early] = []


class _Local:
    """What :mod:`envdoctor.process.target` asks of a Host, from ``os`` alone (Host imports too much)."""

    class _Path:
        def __init__(self, path: str) -> None:
            self._p = path

        def is_file(self) -> bool:
            return os.path.isfile(self._p)

        def is_dir(self) -> bool:
            return os.path.isdir(self._p)

    def path(self, path: str) -> _Local._Path:
        return self._Path(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def access(self, path: str, mode: int) -> bool:
        return os.access(path, mode)

    def getenv(self, name: str, default: str | None = None) -> str | None:
        return os.environ.get(name, default)

    def which(self, name: str) -> str | None:
        import shutil

        return shutil.which(name)


def interpreter(given: str | None) -> tuple[str, str] | None:
    """(the target interpreter, why) the CLI will examine: ``--python``'s, else the one discovered,
    in :mod:`envdoctor.process.target`'s one order. None when it would be a usage error."""
    from envdoctor.process import target

    local: Any = _Local()
    try:
        chosen = target.explicit(local, given) if given is not None else target.discover(local, target.working_dir())
    except (target.TargetError, OSError):
        return None
    return chosen.path, chosen.chosen_by


def healthcheck_budget(max_seconds: float) -> float:
    """The probes' share of the healthcheck's ``--max-seconds`` (the rest is the answer's)."""
    return max(0.3, max_seconds - 0.3)


#: ``healthcheck --npd`` without ``--max-seconds``: node-problem-detector kills a plugin after its
#: ``timeout`` (5s by default, pkg/custompluginmonitor/types/config.go), so the answer comes first.
NPD_MAX_SECONDS = 4.0


def healthcheck_max_seconds(given: float | None, output: str) -> float:
    """``--max-seconds``, or its default: 5, or 4 with ``--npd``."""
    if given is not None:
        return given
    return NPD_MAX_SECONDS if output == "npd" else 5.0


def exec_deadline(max_seconds: float) -> float:
    """When ``exec``'s watchdog answers: a second after the probes' budget."""
    return max_seconds + 1.0


# -- reading argv ------------------------------------------------------------------------------
_FLAG, _VALUE, _MANY = "flag", "value", "many"
#: option -> (Plan field, kind, value or converter); exactly the options click declares for the
#: command (envdoctor/commands/cli.py). An option not listed here means no Plan (and no early start).
_COLLECT: dict[str, tuple[str, str, Any]] = {
    "--python": ("python", _VALUE, str), "--timeout": ("timeout", _VALUE, float),
    "--no-micro": ("micro", _FLAG, False), "--micro-only": ("micro_only", _FLAG, True),
    "--device": ("device", _VALUE, str), "--compile": ("compile", _FLAG, True),
    "--only": ("only", _MANY, str), "--skip": ("skip", _MANY, str), "--fail-on": ("fail_on", _VALUE, str),
    "-v": ("verbose", _FLAG, True), "--verbose": ("verbose", _FLAG, True),
}
#: Where the verdict is also written for the fleet's engines (``healthcheck`` and ``check``).
_ENGINES: dict[str, tuple[str, str, Any]] = {
    "--prometheus-textfile": ("prometheus_textfile", _VALUE, str),
    "--prometheus-failures-only": ("prometheus_failures_only", _FLAG, True),
    "--nfd-features": ("nfd_features", _VALUE, str), "--nfd-expiry": ("nfd_expiry", _VALUE, float),
}
_OPTIONS: dict[str, dict[str, tuple[str, str, Any]]] = {
    "check": {**_COLLECT, **_ENGINES, "--json": ("output", _FLAG, "json"), "-o": ("output_file", _VALUE, str),
              "--output": ("output_file", _VALUE, str), "--expect-gpus": ("expect_gpus", _VALUE, int)},
    "report": {**_COLLECT, "--json": ("output", _FLAG, "json"), "--markdown": ("output", _FLAG, "markdown"),
               "-o": ("output_file", _VALUE, str), "--output": ("output_file", _VALUE, str)},
    "healthcheck": {"--max-seconds": ("budget", _VALUE, float), "--micro": ("micro", _FLAG, True),
                    "--python": ("python", _VALUE, str), "--expect-gpus": ("expect_gpus", _VALUE, int),
                    "--npd": ("output", _FLAG, "npd"), "--slurm": ("output", _FLAG, "slurm"), **_ENGINES},
}
_DEFAULTS: dict[str, dict[str, Any]] = {
    "check": {"command": "check"},
    "report": {"command": "report", "output": "json"},
    "healthcheck": {"command": "healthcheck", "fast": True, "micro": False, "output": "line"},
}


def _parse(options: dict[str, tuple[str, str, Any]], args: list[str]) -> dict[str, Any] | None:
    fields: dict[str, Any] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        spec = options.get(name)
        if spec is None:
            return None  # an argument, --help, an option of another command: click decides, alone
        field, kind, conv = spec
        if kind == _FLAG:
            if eq:
                return None
            fields[field] = conv
        else:
            if not eq:
                i += 1
                if i >= len(args):
                    return None
                inline = args[i]
            try:
                value = conv(inline)
            except ValueError:
                return None
            fields[field] = (*fields.get(field, ()), value) if kind == _MANY else value
        i += 1
    return fields


def plan_from_argv(argv: list[str]) -> Plan | None:
    """The Plan click will build for ``argv`` (``sys.argv[1:]``) for a plain ``check``, ``report``
    or ``healthcheck`` run, else None (another command, an option read here is not, a usage error)."""
    if not argv or argv[0] not in _OPTIONS:
        return None
    fields = _parse(_OPTIONS[argv[0]], argv[1:])
    if fields is None:
        return None
    fields = {**_DEFAULTS[argv[0]], **fields}
    if argv[0] == "healthcheck":
        max_seconds = healthcheck_max_seconds(fields.get("budget"), fields["output"])
        fields["budget"] = healthcheck_budget(max_seconds)
        fields["deadline"] = max_seconds
        if fields.get("python") is not None:
            chosen = interpreter(fields["python"])
            if chosen is None:
                return None
            fields["python"] = chosen[0]
        return Plan(**fields)
    chosen = interpreter(fields.get("python"))
    if chosen is None:
        return None
    fields["python"], fields["python_chosen_by"] = chosen
    return Plan(**fields)


#: The healthcheck options the click-free path takes (:func:`direct`), each checked here as click
#: checks it; a command line with any other (``--python``, the engines', ``--help``) goes through click.
_DIRECT = ("--max-seconds", "--micro", "--expect-gpus", "--npd", "--slurm")
#: click's ranges of those options (envdoctor/commands/cli.py: ``Seconds(0.5, 600)``, ``IntRange(0)``).
_MAX_SECONDS = (0.5, 600.0)


def direct(argv: list[str]) -> Plan | None:
    """The Plan of a ``healthcheck`` command line click would take exactly as it is and build the
    same Plan from (options in :data:`_DIRECT` only, every value in click's range, not both
    ``--npd`` and ``--slurm``, no shell completion asked): then the answer needs no click
    (:func:`envdoctor.pipeline.fast.direct`). Else None, and click decides (and words any usage error)."""
    if not argv or argv[0] != "healthcheck" or "_ENVDOCTOR_COMPLETE" in os.environ:
        return None
    options = _OPTIONS["healthcheck"]
    fields = _parse({name: options[name] for name in _DIRECT}, argv[1:])
    if fields is None or {"--npd", "--slurm"} <= set(argv[1:]):
        return None
    given = fields.get("budget")
    if given is not None and not (_MAX_SECONDS[0] <= given <= _MAX_SECONDS[1]):  # NaN fails both: click's too
        return None
    if fields.get("expect_gpus", 0) < 0:
        return None
    return plan_from_argv(argv)


# -- the early children ------------------------------------------------------------------------
def _torch_child(plan: Plan, exists: Callable[[str], bool]) -> tuple[str, ...] | None:
    """The torch child's command line for ``plan``: the probes' own (probes/torch_child.py asks
    :mod:`envdoctor.process.childargs` the same questions from the same Plan)."""
    if plan.command not in ("check", "report") or plan.micro_only or plan.distributed or plan.python is None:
        return None
    devices, _ = childargs.micro_devices(plan.micro, plan.device, exists)
    micro = None if devices is None else childargs.micro_args(devices, plan.compile)
    return prestart.command_for(plan.python, micro)


def _driver_child(plan: Plan) -> tuple[str, ...] | None:
    """The driver child's command line for ``plan``: NVML and cuInit in envdoctor's own interpreter
    (with ``--python``, cuInit runs in that one: no early start)."""
    if plan.command != "healthcheck" or plan.python is not None:
        return None
    return driverstart.command_for(sys.executable, nvml=True)


def start(plan: Plan) -> lifecycle.Early:
    """Start the children ``plan`` begins with; the Early that holds them."""
    early = lifecycle.Early(plan)
    env = dict(os.environ)
    env.update(prestart.CHILD_ENV)
    torch = _torch_child(plan, os.path.exists)
    if torch is not None:
        early.start(torch, env, subprocess.DEVNULL)
    driver = _driver_child(plan)
    if driver is not None:
        early.start(driver, env, subprocess.PIPE)
    return early


def begin(argv: list[str]) -> None:
    """The entry point's first step: the Plan from ``argv`` and its early children, kept for :func:`adopt`."""
    plan = plan_from_argv(argv)
    if plan is not None:
        _pending.append(start(plan))


def adopt(plan: Plan) -> lifecycle.Early | None:
    """The early children when they were started for exactly ``plan`` (click's Plan of this run),
    for ``Host(early=…)``; else None, and any child started for another Plan is ended."""
    found = None
    while _pending:
        early = _pending.pop()
        if found is None and early.plan == plan:
            found = early
        else:
            early.end()
    return found
