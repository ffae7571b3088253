"""Start the torch child before anything heavy is imported.

``envdoctor check`` and ``report`` spend most of their time waiting for the child that imports
torch; everything the parent imports first (click, the report model, the probes) delays it. So
the entry point, knowing only ``sys.argv``, starts that child at once, exactly as the python
probe would start it, and the probe later adopts it (:func:`take`) when its command line and
environment match to the byte. When they do not (an option changed them, a usage error ends the
run), the child is ended unused: the guess can cost a wasted start, never a wrong fact.

Only the standard library is imported here, and little of it.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

from . import childargs, lifecycle

#: The torch probe's script and the environment it gets, as :meth:`envdoctor.host.Host.run_child`
#: builds them for ``probes/python_probe.py``; its arguments come from :mod:`envdoctor.childargs`,
#: which the probes ask too (the microchecks run in the same child when they are planned).
SCRIPT = childargs.TORCH_SCRIPT
CHILD_ENV = {"PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1"}
#: Subcommands whose first probe is the torch child; any of these options means it is not.
COMMANDS = ("check", "report")
NOT_NOW = ("-h", "--help", "--distributed", "--micro-only", "--version")

_started: lifecycle.Early = []


class _Local:
    """What :mod:`envdoctor.target` asks of a Host, from ``os`` alone (Host imports too much)."""

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


def interpreter(argv: list[str]) -> str | None:
    """The target interpreter the CLI will examine: ``--python``'s, else the one discovered, in
    :mod:`envdoctor.target`'s one order. None when it would be a usage error."""
    from . import target

    value = _value(argv, "--python")
    local: Any = _Local()
    try:
        chosen = target.explicit(local, value) if value is not None else target.discover(local, os.getcwd())
    except (target.TargetError, OSError):
        return None
    return chosen.path


def _value(argv: list[str], name: str) -> str | None:
    """The last value of option ``name`` (``--name V`` or ``--name=V``) in ``argv``, else None."""
    value: str | None = None
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def micro_args(argv: list[str]) -> dict[str, Any] | None:
    """The microchecks' arguments the probes will give the torch child for these options (they
    run in it when planned: ``--device``, ``--no-micro``, ``--compile``, the driver's nodes), else None."""
    devices, _ = childargs.micro_devices("--no-micro" not in argv, _value(argv, "--device"), os.path.exists)
    return None if devices is None else childargs.micro_args(devices, "--compile" in argv)


def command_for(python: str, micro: dict[str, Any] | None = None) -> tuple[str, ...]:
    import json

    script = os.path.join(os.path.dirname(os.path.realpath(__file__)), "child", f"{SCRIPT}.py")
    return (python, script, json.dumps(childargs.torch_args(micro)))


def maybe_start(argv: list[str]) -> None:
    """Start the torch child when ``argv`` is a plain ``check``/``report`` run."""
    if not argv or argv[0] not in COMMANDS or any(a in NOT_NOW or a.startswith("--python=-") for a in argv):
        return
    python = interpreter(argv[1:])
    if python is None:
        return
    command = command_for(python, micro_args(argv[1:]))
    env = dict(os.environ)
    env.update(CHILD_ENV)
    lifecycle.start_early(_started, command, env, subprocess.DEVNULL)


def take(command: tuple[str, ...], env: dict[str, str]) -> subprocess.Popen[bytes] | None:
    """The prestarted child for exactly ``command`` and ``env``, else None. The torch child's own
    start ends every prestarted child it does not take: an unused torch import only steals CPU."""
    if not _started or len(command) < 2 or os.path.basename(command[1]) != f"{SCRIPT}.py":
        return None
    return lifecycle.take_early(_started, command, env)
