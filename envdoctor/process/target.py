"""Which interpreter's torch is examined: ``--python`` (an interpreter, or a venv/conda folder) or
uv's discovery order, and a check that it is a Python at all, before anything is probed.

Without ``--python`` the order is uv's (docs.astral.sh/uv/concepts/python-versions, "Discovery of
Python versions"): the active ``VIRTUAL_ENV``, then ``CONDA_PREFIX``, then a ``.venv`` in the
working directory or one of its parents; then envdoctor's own interpreter when torch is installed
beside it (envdoctor installed into the training venv and called by its full path); then
``python3`` on ``PATH``. The torch of envdoctor's own venv is examined only when it is there: the
README says never to install torch into envdoctor's venv, so that venv lacking torch says nothing
about the user's training environment.

A target that is missing, a folder without an interpreter, or a program that is not Python
(``/bin/true``) is a usage error with one line: run as the target, its children would fail in ways
that read like a driver crash.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from typing import TYPE_CHECKING

from envdoctor.record import Record

if TYPE_CHECKING:  # only its methods are used: envdoctor.pipeline.startup passes a lighter stand-in
    from envdoctor.process.host import Host

#: Where a venv (``python -m venv``, virtualenv, uv) or a conda environment keeps its interpreter.
_IN_FOLDER = ("bin/python", "bin/python3", "Scripts/python.exe", "python.exe")
#: The oldest Python the child scripts run on (tests/test_child_scripts.py keeps them 3.5 syntax).
OLDEST = (3, 5)
#: Seconds the target has to say which Python it is (``-S``: no site import, so a cold disk is the cost).
VERIFY_TIMEOUT = 15.0
_PROBE_CODE = "import sys; sys.stdout.write('envdoctor-target %d.%d.%d' % tuple(sys.version_info[:3]))"
_ANSWER = re.compile(r"envdoctor-target (\d+)\.(\d+)\.(\d+)")

OWN_WITH_TORCH = "envdoctor's own interpreter: torch is installed beside it"
OWN_FALLBACK = "envdoctor's own interpreter: no venv found and no python3 on PATH"


class TargetError(Exception):
    """The target cannot be examined; ``str()`` is the one line shown (exit 2)."""


class Target(Record):
    path: str
    chosen_by: str  # "--python", "VIRTUAL_ENV", "CONDA_PREFIX", ".venv in …", OWN_WITH_TORCH, "python3 on PATH"
    own: bool = False  # envdoctor's own interpreter: nothing to verify


def working_dir() -> str | None:
    """The working directory, or None when it was deleted or cannot be read (then no ``.venv``
    is searched for above it, and a relative path cannot be made absolute)."""
    try:
        return os.getcwd()
    except OSError:
        return None


def _absolute(path: str, what: str) -> str:
    if os.path.isabs(path):
        return path
    here = working_dir()
    if here is None:
        raise TargetError(f"{what}: a relative path, and the working directory no longer exists (or cannot be "
                          "read); give the full path or cd to a folder that exists")
    return os.path.join(here, path)


def interpreter_in(host: Host, folder: str) -> str | None:
    """The interpreter of a venv or conda folder, or None when it has none. Raises TargetError
    when the folder cannot be read (a mode-000 folder: a permission, not a missing venv)."""
    for rel in _IN_FOLDER:
        candidate = os.path.join(folder, rel)
        try:
            if host.path(candidate).is_file():
                return candidate
        except OSError as exc:
            raise TargetError(f"cannot read {folder}: {exc.strerror or exc}") from None
    return None


def explicit(host: Host, given: str) -> Target:
    """``--python``: a path, a name on PATH, or a venv/conda folder."""
    try:
        return _explicit(host, given)
    except OSError as exc:  # a folder on the way that cannot be read, a working directory gone
        raise TargetError(f"--python {given}: {exc.strerror or exc}") from None


def _explicit(host: Host, given: str) -> Target:
    # A folder named without a slash (``--python torchvenv``) is still a folder, not a command name.
    found = given if os.sep in given or host.path(given).is_dir() else host.which(given)
    if not found:
        raise TargetError(f"--python {given}: not on PATH")
    if host.path(found).is_dir():
        inside = interpreter_in(host, found)
        if inside is None:
            raise TargetError(f"--python {given}: a folder without bin/python, not a venv or conda environment")
        found = inside
    elif not host.exists(found):
        raise TargetError(f"--python {given}: no such file")
    elif not host.path(found).is_file():
        raise TargetError(f"--python {given}: not a file (a broken link?)")
    if not host.access(found, os.X_OK):
        raise TargetError(f"--python {given}: not executable")
    # Absolute (not resolved: a venv's bin/python link must stay the venv's), so the header and
    # the children name the same file whatever their working directory.
    return Target(os.path.normpath(_absolute(found, f"--python {given}")), "--python")


def discover(host: Host, cwd: str | None, torch_beside: bool | None = None) -> Target:
    """uv's order (module docstring). ``cwd``: None when the working directory is gone (no
    ``.venv`` is looked for). ``torch_beside``: whether torch is importable next to envdoctor
    (None = look, without importing it)."""
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        folder = host.getenv(var)
        if folder:
            try:
                inside = interpreter_in(host, folder)
            except TargetError as exc:
                raise TargetError(f"{var}={folder}: {exc}; deactivate it or pass --python") from None
            if inside is None:
                raise TargetError(f"{var}={folder} has no bin/python; deactivate it or pass --python")
            return Target(inside, var)
    here = os.path.abspath(cwd) if cwd is not None else "/"
    while cwd is not None:
        try:
            inside = interpreter_in(host, os.path.join(here, ".venv"))
        except TargetError:  # a folder above that cannot be read holds no .venv we could use
            inside = None
        if inside is not None:
            return Target(inside, f".venv in {here}")
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    if torch_beside is None:
        torch_beside = importlib.util.find_spec("torch") is not None
    if torch_beside:
        return Target(sys.executable, OWN_WITH_TORCH, own=True)
    on_path = host.which("python3")
    if on_path:
        return Target(on_path, "python3 on PATH")
    return Target(sys.executable, OWN_FALLBACK, own=True)


def verify(host: Host, target: Target, timeout: float | None = None) -> None:
    """Run the target once with ``-E -s -S`` (flags Python 2 knows too, so an old Python is named
    as such): it must say it is a Python of at least :data:`OLDEST`. ``timeout``: the run's own
    deadline (``--timeout``), at least 1 s and at most :data:`VERIFY_TIMEOUT`."""
    if target.own or os.path.realpath(target.path) == os.path.realpath(sys.executable):
        return
    where = f"--python {target.path}" if target.chosen_by == "--python" else f"{target.path} ({target.chosen_by})"
    limit = VERIFY_TIMEOUT if timeout is None else min(VERIFY_TIMEOUT, max(1.0, float(timeout)))
    result = host.run([target.path, "-E", "-s", "-S", "-c", _PROBE_CODE], timeout=limit)
    if result.status == "timeout":
        raise TargetError(f"{where} did not answer within {limit:g} s; is it a Python interpreter?")
    if result.status != "ok":
        raise TargetError(f"{where} cannot be run: {result.detail}")
    match = _ANSWER.search(result.stdout)
    if match is None:
        said = f"exited {result.returncode}" if result.returncode else "printed none"
        raise TargetError(f"{where} is not a Python interpreter (asked for its version, it {said})")
    version = tuple(int(g) for g in match.groups())
    if version[:2] < OLDEST:
        raise TargetError(f"{where} is Python {'.'.join(map(str, version))}; envdoctor examines Python "
                          f"{OLDEST[0]}.{OLDEST[1]} or newer")


def choose(host: Host, given: str | None, cwd: str | None) -> Target:
    """The verified target: ``--python`` when given, else discovered."""
    target = explicit(host, given) if given else discover(host, cwd)
    verify(host, target)
    return target
