"""The driver child's command line (NVML and cuInit: ``child/driver_probe.py``).

``envdoctor healthcheck`` is a race between its own imports (click, the report model, the checks)
and its one child. Started by start-up (:mod:`envdoctor.pipeline.startup`) from the Plan, the
child starts its interpreter and imports its bindings while the parent imports, then waits for its
arguments on stdin; the probe adopts it and sends them. The command line is :func:`command_for`'s,
warm or cold, so both runs are the same child.

Only the standard library is imported here, and little of it.
"""

from __future__ import annotations

import os

SCRIPT = "driver_probe"
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
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "child", f"{SCRIPT}.py")
    if not nvml:
        return (python, "-S", script, "-")
    folder = bindings_folder()
    return (python, "-S", script, "-", folder) if folder else (python, script, "-")
