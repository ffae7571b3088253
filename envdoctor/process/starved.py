"""A process starved of threads, processes, file descriptors or memory (``ulimit -u/-n/-v``, a
cgroup's pids.max): what the system refused, said in one line (exit 3), never a traceback.

Probes that cannot start say so in their own facts (the runner and the Host record it); this is
for what fails outside them (the probe thread itself, the start-up's own imports and pipes)."""

from __future__ import annotations

import errno

#: errno values that mean "a limit was reached", not "this input is wrong".
_LIMITS = {errno.EMFILE: "ulimit -n", errno.ENFILE: "the system's open-file limit", errno.EAGAIN: "ulimit -u",
           errno.ENOMEM: "ulimit -v"}


def limit_hit(exc: BaseException) -> str | None:
    """The one line for an exception that is a resource limit, else None."""
    if isinstance(exc, MemoryError):
        return "out of memory (is `ulimit -v` or the container's memory limit too low?)"
    if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        return "the system refused a new thread (is `ulimit -u` or the container's pids limit too low?)"
    if isinstance(exc, OSError) and exc.errno in _LIMITS:
        return f"{exc.strerror or exc} (is `{_LIMITS[exc.errno]}` too low?)"
    return None
