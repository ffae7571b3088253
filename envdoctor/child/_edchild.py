"""Helpers shared by the child scripts (stdlib only; importable because the scripts' own folder
is sys.path[0] when they run)."""

import json
import os
import re
import sys
import traceback
from _thread import allocate_lock, get_ident

MARK = "@@envdoctor@@ "
_out = sys.stdout

#: The signal on which a child writes every thread's Python stack to its stderr: the parent sends
#: it at the deadline, just before it ends the child, so a hang says where it hung.
STACKS_SIGNAL = "SIGUSR2"


def _arm_stack_dump():
    """Dump the stacks on STACKS_SIGNAL to a copy of fd 2 taken now: a check that redirects fd 2
    for a while (the DataLoader's worker capture) must not swallow the dump."""
    try:
        import faulthandler
        import signal

        stream = os.fdopen(os.dup(2), "w")
        faulthandler.register(getattr(signal, STACKS_SIGNAL), file=stream, all_threads=True, chain=False)
        return stream
    except Exception:  # no fd 2, no such signal on this platform: the deadline still ends the child
        return None


_stacks_stream = _arm_stack_dump()
#: Thread id -> the namespace its records are written under (see :func:`namespaced`); one lock
#: around the writer, so records of two threads never interleave within a line.
_namespaces = {}
_lock = allocate_lock()


def args():
    """The parent's arguments: JSON in argv[1], or, when argv[1] is ``-``, one JSON line on stdin
    (a child started before its parent knew them waits there; end of input means none)."""
    try:
        if len(sys.argv) > 1 and sys.argv[1] == "-":
            line = sys.stdin.readline()
            return json.loads(line) if line.strip() else {}
        return json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    except (ValueError, OSError):
        return {}


def finite(value):
    """``value`` with NaN and infinities as None, in nested dicts and lists too: json.dumps writes
    them as bare ``NaN``/``Infinity`` tokens, which are not JSON and which strict readers of a
    saved report reject. (A NaN loss is exactly what a broken GPU produces.)"""
    if isinstance(value, float):
        return value if value - value == 0.0 else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def namespaced(name):
    """From now on, the records this thread emits are written under ``name``: ``{"init": x}``
    becomes ``{"name.init": x}`` (stages, appends, cleanup and done too), so two probes running
    in threads of one child (NVML and cuInit) never overwrite each other's keys."""
    _namespaces[get_ident()] = name


def _prefixed(record, ns):
    out = {}
    for key, value in record.items():
        if key == "_append":
            out[key] = dict((ns + "." + k, v) for k, v in value.items())
        else:
            out[ns + "." + key] = value
    return out


def emit(**record):
    """Print one record; flushed at once so a later hang or crash cannot lose it."""
    ns = _namespaces.get(get_ident())
    if ns:
        record = _prefixed(record, ns)
    line = MARK + json.dumps(finite(record), default=str) + "\n"
    with _lock:
        _out.write(line)
        _out.flush()


def stage(name):
    emit(_stage=name)


def append(key, item):
    """Add ``item`` to the list ``key`` on the parent's side: N items cost O(N) output, where
    re-emitting the whole list after each one cost O(N^2)."""
    emit(_append={key: item})


#: The namespaces whose probe has announced its cleanup call (driver_probe shortens their deadline).
cleanups = set()


def cleanup(name):
    """Everything is reported; ``name`` (e.g. nvmlShutdown) is only cleanup. The parent gives it a
    short grace and reports a hang in it as such, instead of waiting out the deadline."""
    cleanups.add(_namespaces.get(get_ident()))
    emit(_cleanup=name)


def done(**record):
    record["_done"] = True
    emit(**record)


def exit_now():
    """Leave at once after the final record, flushing what was printed: the parent has what it
    needs, and an interpreter's teardown (torch's takes a quarter of a second) helps nobody.
    Called by the scripts' ``__main__`` blocks only, so one script run inside another (the rank
    child runs the torch probe's ``main``) carries on."""
    for stream in (_out, sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(0)


def error_text(exc):
    """The last line of a traceback, as users see it ('ImportError: libcudart.so.12: ...')."""
    lines = traceback.format_exception_only(type(exc), exc)
    return "".join(lines).strip()[-2000:]


def mapped_files():
    """The files this process has mapped, each once, in ``/proc/self/maps`` order: what the loader
    really picked, whatever the search path said. Raises OSError where there is no /proc."""
    with open("/proc/self/maps", "rb") as fh:
        text = fh.read().decode("utf-8", "replace")
    seen = set()
    files = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        # Unnamed and pseudo mappings ([heap], [vdso]) have no sixth field or no leading "/".
        if len(parts) == 6 and parts[5].startswith("/"):
            path = parts[5].strip()
            if path not in seen:
                seen.add(path)
                files.append(path)
    return files


def mapped(pattern):
    """The first mapped file whose path matches ``pattern`` (None when none does or maps is
    unreadable)."""
    try:
        files = mapped_files()
    except OSError:
        return None
    rx = re.compile(pattern)
    for path in files:
        if rx.search(path):
            return path
    return None
