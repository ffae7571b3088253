"""How the envdoctor process ends: its child process groups, signals, its output streams, exit codes.

Probe children each lead their own process group (so a hung child and whatever it started are
killed together; see :func:`own_group` for why a group and not a session), which
also means the terminal's Ctrl-C never reaches them: envdoctor must end them itself.
Every child group is registered here while it lives; one signal path (SIGINT, SIGTERM, SIGHUP)
kills every registered group, notes those that do not die (stuck in the kernel, D state), prints
one line and exits ``128 + signal``. The normal exit goes through :func:`finish` too, so a
probe that was abandoned past its deadline never outlives the run.

Output: stdout and stderr are wrapped once at start (:func:`guard_streams`). A write to stdout
that fails (a full disk, a closed stream, a reader that went away: ``EPIPE``) raises
:class:`OutputError`, which the entry point turns into one line on stderr and exit 3
(:attr:`ExitCode.INCOMPLETE`: the output is incomplete). A reader that went away (``EPIPE``:
``envdoctor list | head -1``) is no failure of envdoctor's: the run stops quietly, nothing on
stderr, exit 141 (128 + SIGPIPE), as git, pip and coreutils do. A failing stderr is dropped
silently: there is nowhere left to say it.
"""

from __future__ import annotations

import enum
import errno
import io
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, NoReturn

from envdoctor.process.starved import limit_hit


class ExitCode(enum.IntEnum):
    """Every exit code envdoctor gives, in one place (README "Exit codes" lists the same)."""

    OK = 0  # no failure (healthcheck: healthy; diff: no difference)
    FAIL = 1  # a failure, or a warning with --fail-on warn (healthcheck: unhealthy)
    USAGE = 2  # a usage error or unusable input
    INCOMPLETE = 3  # envdoctor could not complete (a probe hung, a check crashed, the output failed)
    PREFLIGHT = 78  # exec: the environment failed its preflight, the command was not started (EX_CONFIG)
    NOT_EXECUTABLE = 126  # exec: the command cannot be run (the shell's code)
    NOT_FOUND = 127  # exec: no such command (the shell's code)
    SIGHUP = 129  # the signal path: 128 + the signal number, as shells report them
    SIGINT = 130
    SIGPIPE = 141  # the reader of stdout went away (`| head -1`): quiet, as git and coreutils are
    SIGTERM = 143


class NpdExit(enum.IntEnum):
    """``healthcheck --npd``: node-problem-detector's custom-plugin exit codes (its
    pkg/custompluginmonitor/types/types.go ``OK``/``NonOK``/``Unknown``; plugin.go maps any other to Unknown)."""

    OK = 0  # healthy
    NON_OK = 1  # a check failed
    UNKNOWN = 2  # a probe hung, a check crashed, envdoctor could not run or judged nothing


#: Exit codes of the signal path.
SIGNALS = {signal.SIGINT: ExitCode.SIGINT, signal.SIGTERM: ExitCode.SIGTERM, signal.SIGHUP: ExitCode.SIGHUP}

_lock = threading.RLock()  # re-entrant: the signal handler runs on the main thread, which may hold it
_children: dict[int, subprocess.Popen[bytes]] = {}
_ending = threading.Event()
_reported = threading.Event()  # the output failure was already said


# -- child process groups ----------------------------------------------------------------------
def own_group() -> dict[str, Any]:
    """Popen arguments that make a child lead its own process group, inside our session.

    A group, so a hung child and everything it started are killed together (``killpg``); not a
    session of its own (``start_new_session``): on Linux every session gets its own scheduler
    autogroup, inside which a ``nice`` value competes only with itself, so niced
    off-critical-path probes still took half the CPU from the torch child."""
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}  # pragma: no cover - Python 3.10


def end_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill a child's group without waiting for it; it stays registered until reaped."""
    _kill_group(proc.pid)
    try:
        if proc.poll() is not None:
            release(proc)
    except OSError:
        pass


def register(proc: subprocess.Popen[bytes]) -> None:
    """Track a child that leads its own process group (:func:`own_group`)."""
    with _lock:
        _children[proc.pid] = proc
    if _ending.is_set():  # started while the signal path was already ending everything
        _kill_group(proc.pid)


class Early:
    """Children started before click is imported (:mod:`envdoctor.pipeline.startup`: the torch
    child of ``check``/``report``, the driver child of ``healthcheck``) for the run ``plan`` (a
    :class:`~envdoctor.pipeline.plan.Plan`), handed to the Host (``Host(early=…)``) once click's own
    Plan for the run is found equal. A start that fails is left to the probe, which starts the child
    again and says why it cannot."""

    def __init__(self, plan: Any) -> None:
        self.plan = plan
        self._children: list[tuple[tuple[str, ...], dict[str, str], subprocess.Popen[bytes]]] = []

    def start(self, command: tuple[str, ...], env: dict[str, str], stdin: int) -> None:
        """Start ``command`` in a group of its own for a probe to take (:meth:`take`)."""
        try:
            proc = subprocess.Popen(command, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                    close_fds=True, cwd=child_cwd(), **own_group())
        except (OSError, ValueError):
            return
        register(proc)
        self._children.append((command, env, proc))

    @property
    def started(self) -> list[tuple[str, ...]]:
        return [command for command, _, _ in self._children]

    def take(self, command: tuple[str, ...], env: dict[str, str]) -> subprocess.Popen[bytes] | None:
        """The child started for this very ``command`` and ``env`` (the Plans were equal, so this is
        a check that the probe asks for the child the plan started, not the decision), else None.
        A command that runs none of the early children's scripts changes nothing; one that runs such
        a script takes its child, and every other one is ended (an unused early start only steals CPU)."""
        scripts = {os.path.basename(part) for started, _, _ in self._children for part in started[1:4]
                   if part.endswith(".py")}
        if not scripts.intersection(os.path.basename(part) for part in command[1:4]):
            return None
        found = None
        while self._children:
            started_command, started_env, proc = self._children.pop()
            if found is None and started_command == command and started_env == env:
                found = proc
            else:
                end_group(proc)
        return found

    def end(self) -> None:
        """End every child not taken (the run turned out to be another one)."""
        while self._children:
            end_group(self._children.pop()[2])


def release(proc: subprocess.Popen[bytes], abandoned: bool = False) -> None:
    """The child was reaped; with ``abandoned`` (left behind unkillable, state D) it stays
    registered, so the exit tries once more and the signal path names it."""
    if abandoned and proc.returncode is None:
        return
    with _lock:
        _children.pop(proc.pid, None)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def end_children(grace: float = 0.5) -> tuple[int, list[int]]:
    """SIGKILL every registered group and reap what dies within ``grace`` seconds.
    Returns (groups ended, pids that did not die: stuck in the kernel)."""
    with _lock:
        procs = list(_children.values())
    for proc in procs:
        _kill_group(proc.pid)
    deadline = time.monotonic() + grace
    stuck: list[int] = []
    for proc in procs:
        while True:
            try:
                if proc.poll() is not None:
                    break
            except OSError:
                break
            if time.monotonic() >= deadline:
                stuck.append(proc.pid)
                break
            time.sleep(0.01)
    with _lock:
        for proc in procs:
            if proc.pid not in stuck:
                _children.pop(proc.pid, None)
    return len(procs) - len(stuck), stuck


def _on_signal(signum: int, frame: Any) -> None:
    if _ending.is_set():
        return
    _ending.set()
    ended, stuck = end_children()
    name = signal.Signals(signum).name
    line = f"envdoctor: interrupted by {name}; ended {ended} probe process group(s)"
    if stuck:
        line += (f"; {len(stuck)} stuck in the kernel (state D) could not be ended: pid "
                 + ", ".join(map(str, stuck)))
    _write_fd(2, line + "\n")
    os._exit(SIGNALS.get(signal.Signals(signum), 128 + signum))


def join(thread: threading.Thread, timeout: float | None = None) -> None:
    """``thread.join(timeout)`` in short slices. A signal sent to the process may be delivered to
    any of its threads; Python runs the handler only on the main thread, and only when that
    thread gets back to running bytecode, which a plain join (a lock wait) never does until the
    thread ends. Sliced, the main thread answers a Ctrl-C within a tenth of a second."""
    end = None if timeout is None else time.monotonic() + timeout
    while thread.is_alive():
        step = 0.1 if end is None else min(0.1, end - time.monotonic())
        if step <= 0:
            return
        thread.join(step)


def install_signal_handlers() -> None:
    """The one signal path (call from the main thread, before any probe starts)."""
    for sig in SIGNALS:
        try:
            signal.signal(sig, _on_signal)
        except (OSError, ValueError):  # not the main thread, or a platform without SIGHUP
            pass


# -- output streams ------------------------------------------------------------------------------
class OutputError(Exception):
    """stdout cannot take the output; ``str()`` is the one line shown. ``quiet``: the reader
    closed the pipe (EPIPE), which is said with exit 141 only."""

    def __init__(self, message: str, quiet: bool = False) -> None:
        super().__init__(message)
        self.quiet = quiet


def child_cwd() -> str | None:
    """Where a child starts: here (None), or ``/`` when this working directory was deleted or
    cannot be read (an interpreter started there fails in ways that read like a broken install)."""
    try:
        os.getcwd()
        return None
    except OSError:
        return "/"


def write_line(text: str) -> None:
    """One line on stderr through the file descriptor (the Python stream may be what failed)."""
    _write_fd(2, text.rstrip("\n") + "\n")


def _write_fd(fd: int, text: str) -> None:
    try:
        os.write(fd, text.encode("utf-8", "replace"))
    except OSError:
        pass


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
        return "the reader closed the pipe"
    if isinstance(exc, OSError) and exc.errno is not None:
        return exc.strerror or os.strerror(exc.errno)
    return str(exc) or type(exc).__name__


class GuardedStream(io.TextIOBase):
    """A text stream whose failures are :class:`OutputError` (stdout) or dropped (stderr)."""

    def __init__(self, stream: Any, name: str, strict: bool) -> None:
        super().__init__()
        self._stream = stream
        self._name = name
        self._strict = strict
        self.broken = stream is None
        self._pipe_gone = False
        self._why: str | None = None

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self._stream, "errors", None)

    def _fail(self, exc: BaseException | None) -> None:
        self.broken = True
        if exc is not None and isinstance(exc, OSError) and exc.errno == errno.EPIPE:
            self._pipe_gone = True
        if exc is not None and self._why is None:
            # The first failure's cause is the one said: a probe that swallowed it (click tries
            # ``write("")``) must not turn a full disk into "it is closed".
            self._why = _describe(exc)
        if self._strict:
            why = self._why or "it is closed"
            raise OutputError(f"cannot write to {self._name} ({why}); the output is incomplete",
                              quiet=self._pipe_gone) from None

    def write(self, text: str) -> int:
        if self.broken:
            self._fail(None)
            return 0
        if not isinstance(text, str):  # a text stream, as click's probes expect (bytes go to .buffer)
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        try:
            return int(self._stream.write(text))
        except (OSError, ValueError) as exc:
            self._fail(exc)
            return 0

    def write_bytes(self, data: bytes) -> int:
        """Bytes for the real stream's buffer (click writes shell completion scripts as bytes),
        after the text already written, with the same guard."""
        if self.broken:
            self._fail(None)
            return 0
        if not data:
            return 0
        try:
            buffer = getattr(self._stream, "buffer", None)
            if buffer is None:
                return int(self._stream.write(data.decode(self.encoding, "replace")))
            self._stream.flush()
            written = int(buffer.write(data))
            buffer.flush()
            return written
        except (OSError, ValueError) as exc:
            self._fail(exc)
            return 0

    @property
    def buffer(self) -> Any:
        """Bytes go through :meth:`write` too, so their failures are guarded the same way."""
        return _BytesView(self)

    def flush(self) -> None:
        if self.broken:
            if self._strict and self._stream is None:
                self._fail(None)
            return
        try:
            self._stream.flush()
        except (OSError, ValueError) as exc:
            self._fail(exc)

    def isatty(self) -> bool:
        try:
            return bool(self._stream.isatty())
        except (AttributeError, OSError, ValueError):
            return False

    def fileno(self) -> int:
        if self._stream is None:
            raise io.UnsupportedOperation("closed")
        return int(self._stream.fileno())

    def writable(self) -> bool:
        return True

    def close(self) -> None:  # interpreter shutdown closes sys.stdout: never the real one twice
        pass


class _BytesView(io.RawIOBase):
    """``GuardedStream.buffer``: a binary view whose writes are the guarded stream's."""

    def __init__(self, owner: GuardedStream) -> None:
        super().__init__()
        self._owner = owner

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return self._owner.write_bytes(bytes(data))

    def flush(self) -> None:
        self._owner.flush()

    def close(self) -> None:
        pass


def guard_streams() -> None:
    """Wrap stdout/stderr once. A closed fd 0/1/2 is reopened on /dev/null first, so a file we
    open later can never land on it (and get the report written into it)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                null = os.open(os.devnull, os.O_RDWR)
                if null != fd:
                    os.dup2(null, fd)
                    os.close(null)
            except OSError:
                pass
    from envdoctor.process.encoding import degrade

    for stream in (sys.stdout, sys.stderr):
        if not isinstance(stream, GuardedStream):
            degrade(stream)  # an encoding that cannot hold a character degrades, never fails the run
    if not isinstance(sys.stdout, GuardedStream):
        sys.stdout = GuardedStream(sys.stdout, "standard output", strict=True)
    if not isinstance(sys.stderr, GuardedStream):
        sys.stderr = GuardedStream(sys.stderr, "standard error", strict=False)


def report_output_error(exc: OutputError) -> int:
    if exc.quiet:  # the reader went away: nothing to say, as a coreutils tool would
        _reported.set()
        return ExitCode.SIGPIPE
    if not _reported.is_set():
        _reported.set()
        _write_fd(2, f"envdoctor: error: {exc}\n")
    return ExitCode.INCOMPLETE


def internal_error(exc: BaseException) -> int:
    """A bug of envdoctor's reaching the top: one line on stderr and exit 3, so a HealthCheckProgram, a
    prolog or NPD never reads it as "unhealthy"; ``ENVDOCTOR_DEBUG=1`` shows the traceback."""
    if os.environ.get("ENVDOCTOR_DEBUG") == "1":
        import traceback

        traceback.print_exception(exc)
    try:
        from envdoctor.redact import redact_text

        said = redact_text(str(exc))[:300]
    except Exception:  # noqa: BLE001 - nothing more to import (a limit hit): the type alone
        said = "?"
    write_line(f"envdoctor: error: internal error ({type(exc).__name__}: {said}); "
               "please report it (ENVDOCTOR_DEBUG=1 shows the traceback)")
    return ExitCode.INCOMPLETE


def top_level_code(exc: Exception) -> int:
    """The exit code of an exception that reached a command's top (the CLI's and the click-free healthcheck's),
    its one line written: a closed or failing output, an exhausted limit (``cannot complete: …``, exit 3), or a
    bug (one line, exit 3, never 1: a failure)."""
    if isinstance(exc, OutputError):
        return report_output_error(exc)
    if isinstance(exc, (MemoryError, RuntimeError, OSError)):
        line = limit_hit(exc)  # imported with this module: out of file descriptors, no import would work here
        if line is not None:
            write_line(f"envdoctor: error: cannot complete: {line}")
            return ExitCode.INCOMPLETE
    return internal_error(exc)


def finish(code: int) -> NoReturn:
    """Flush, end every child group still registered, and leave at once: an abandoned probe
    thread or an executor waiting on a hung child must not delay the exit."""
    try:
        sys.stdout.flush()
    except OutputError as exc:
        code = report_output_error(exc)
    try:
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - nowhere left to report it
        pass
    end_children(grace=0.2)
    os._exit(code)


def answer(line: str, code: int) -> NoReturn:
    """Print one verdict line and exit with ``code`` whatever happens to the line: for
    ``healthcheck`` the exit code is the answer (Docker and Kubernetes read only that), so a
    closed or full stdout loses the line, never the verdict."""
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except OutputError:
        pass
    try:
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass
    end_children(grace=0.2)
    os._exit(code)
