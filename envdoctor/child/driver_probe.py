"""Child: the NVIDIA driver below torch, NVML (nvml_probe) and the CUDA driver API (cuda_probe),
in one process.

Each probe runs in a thread of its own and writes its records under its own name (``nvml.init``,
``cuda.init``; see ``_edchild.namespaced``), so a hang in one (``nvmlInit`` wedged in the driver)
still lets the other report: ctypes lets go of the interpreter while a driver call blocks. Each
has its own deadline, counted from the parent's spawn (``started``, on the machine's monotonic
clock); a probe that announced its cleanup call (``nvmlShutdown``) gets at most
``cleanup_grace`` more seconds. When every probe has finished or run out of time, the child says
which ran out (``nvml._timeout``: the seconds it had) and leaves, abandoning the hung thread; the
parent's own deadline, a little later, is the backstop for a child that cannot even do that.

Command line: ``python -S driver_probe.py - [FOLDER]`` (``envdoctor/process/driverstart.py``): no site,
since a probe needs only the standard library and pynvml, imported from FOLDER (the parent's
sys.path entry for it) while the child waits for its arguments, one JSON line on stdin (see
``nvml_probe.import_bindings``): ``{"nvml": {"codes": …}, "cuda": {}, "deadlines": {"nvml": s,
"cuda": s}, "cleanup_grace": s, "started": t}``; a probe runs when its name is given. The parent
may start it before it knows them (the healthcheck does, from the entry point).
"""

import os as _os
import sys as _sys

# The script's own folder holds _edchild and its siblings; PYTHONSAFEPATH=1 (or -P, -I) leaves it
# off sys.path, and the child must still start (never a "No module named '_edchild'").
_HERE = _os.path.dirname(_os.path.abspath(__file__))
if _HERE not in _sys.path[:1]:
    _sys.path.insert(0, _HERE)

import sys
import threading
import time

import _edchild
import cuda_probe
import nvml_probe
from _edchild import args, done, emit, error_text, exit_now, namespaced

PROBES = ("nvml", "cuda")


def run(name, given, finished, changed):
    namespaced(name)
    try:
        (nvml_probe if name == "nvml" else cuda_probe).main(given)
    except BaseException as exc:  # a bug in a probe is its own failure, not the other probe's
        emit(_error=error_text(exc))
        done()
    finally:
        finished.add(name)
        changed.set()


def cleanup_started(name):
    """Whether probe ``name`` has announced its cleanup call (everything else is reported)."""
    return name in _edchild.cleanups


def start_time(given):
    """The parent's spawn time on this machine's monotonic clock, else this child's own start."""
    now = time.monotonic()
    started = given.get("started")
    if isinstance(started, (int, float)) and 0 <= now - started <= 60:
        return started
    return now


def warm_up():
    """Import pynvml from the folder named after ``-`` while the parent still prepares the
    arguments: no driver is touched by an import (libnvidia-ml is loaded by nvmlInit). The folder,
    if any, for the NVML probe."""
    folder = sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "-" else None
    if folder:
        try:
            nvml_probe.import_bindings(folder)
        except Exception:
            pass  # the NVML probe tries again and says why
    return folder


def main():
    folder = warm_up()
    given = args()
    if folder and isinstance(given.get("nvml"), dict):
        given["nvml"].setdefault("path", folder)
    began = start_time(given)
    deadlines = given.get("deadlines") or {}
    grace = float(given.get("cleanup_grace") or 2.0)
    threads = {}
    finished = set()
    changed = threading.Event()  # a probe finished
    for name in PROBES:
        if isinstance(given.get(name), dict):
            thread = threading.Thread(target=run, args=(name, given[name], finished, changed), name=name)
            thread.daemon = True  # a thread hung in the driver must not keep the process alive
            thread.start()
            threads[name] = thread
    ends = dict((name, began + float(deadlines.get(name) or 10.0)) for name in threads)
    cleaning = {}
    timed_out = {}
    while threads:
        changed.clear()  # before looking: a probe finishing from here on wakes the wait below
        now = time.monotonic()
        for name in list(threads):
            if name in finished:
                del threads[name]
                continue
            if name not in cleaning and cleanup_started(name):
                cleaning[name] = now
                ends[name] = min(ends[name], now + grace)
            if now >= ends[name]:
                timed_out[name + "._timeout"] = round(now - began, 3)
                del threads[name]
        if threads:
            # Woken at once by a finished probe; a cleanup call is noticed within 50 ms.
            changed.wait(max(0.001, min(0.05, min(ends[name] for name in threads) - now)))
    done(**timed_out)


if __name__ == "__main__":
    main()
    exit_now()
