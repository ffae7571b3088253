"""Start the driver child (NVML and cuInit: ``child/driver_probe.py``) before anything heavy is
imported.

``envdoctor healthcheck`` is a race between its own imports (click, the report model, the checks)
and its one child. Started from the entry point, knowing only ``sys.argv``, the child starts its
interpreter and imports its bindings while the parent imports, then waits for its arguments on
stdin; the probe adopts it (:func:`take`) when its command line and environment match to the byte,
and sends them. When they do not, the child is ended unused: the guess can cost a wasted start,
never a wrong fact. The command line is :func:`command_for`'s, warm or cold, so both runs are the
same child.

Only the standard library is imported here, and little of it.
"""

from __future__ import annotations

import os
import subprocess
import sys

from . import lifecycle

SCRIPT = "driver_probe"
#: The environment a child gets on top of the Host's (as Host.run_child builds it).
CHILD_ENV = {"PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1"}
#: Subcommands whose driver child runs in envdoctor's own interpreter with both probes; any of these
#: options means it may not (``--python`` puts cuInit in another interpreter).
COMMANDS = ("healthcheck",)
NOT_NOW = ("-h", "--help", "--python", "--version")

_started: lifecycle.Early = []
_folder: list[str | None] = []


def bindings_folder() -> str | None:
    """The sys.path folder this interpreter imports pynvml from (found, not imported), or None."""
    if not _folder:
        _folder.append(_find_bindings())
    return _folder[0]


def _find_bindings() -> str | None:
    import importlib.util

    try:
        spec = importlib.util.find_spec("pynvml")
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None)
    if spec is None or not origin or not os.path.isfile(origin):
        return None
    folder = os.path.dirname(origin)
    return os.path.dirname(folder) if spec.submodule_search_locations else folder


def command_for(python: str, nvml: bool) -> tuple[str, ...]:
    """The driver child's command line: without site (``-S``: its probes need the standard library
    and pynvml only), arguments on stdin (``-``), and, with NVML, the folder pynvml is imported
    from (the child imports it from there while it waits, and sets site up should that fail).
    Without that folder it runs with site, as any script."""
    script = os.path.join(os.path.dirname(os.path.realpath(__file__)), "child", f"{SCRIPT}.py")
    if not nvml:
        return (python, "-S", script, "-")
    folder = bindings_folder()
    return (python, "-S", script, "-", folder) if folder else (python, script, "-")


def maybe_start(argv: list[str]) -> None:
    """Start the driver child when ``argv`` is a plain ``healthcheck`` run."""
    if not argv or argv[0] not in COMMANDS or any(a in NOT_NOW or a.startswith("--python=") for a in argv):
        return
    command = command_for(sys.executable, nvml=True)
    env = dict(os.environ)
    env.update(CHILD_ENV)
    lifecycle.start_early(_started, command, env, subprocess.PIPE)


def take(command: tuple[str, ...], env: dict[str, str]) -> subprocess.Popen[bytes] | None:
    """The started driver child for exactly ``command`` and ``env``, else None; a driver child
    started for anything else is ended (its stdin closes: it leaves without touching a driver)."""
    if not _started or len(command) < 3 or f"{SCRIPT}.py" not in map(os.path.basename, command[1:3]):
        return None
    return lifecycle.take_early(_started, command, env)
