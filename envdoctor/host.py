"""The one door to the outside world: commands, child interpreters, files and the environment.

Probes never call ``subprocess``, ``open`` on system paths or ``os.environ`` themselves; they go
through a :class:`Host`. Tests build a Host with their own environment, ``PATH`` (fake
executables) and a ``root`` folder standing in for ``/`` (fake ``/proc``, ``/sys``), so the
real probe code runs without mocks.

Deadlines are enforced by abandoning, never by waiting: a child stuck in the kernel driver can
sit in uninterruptible sleep (D state) where even SIGKILL does not reap it, so we kill its
process group, give it a moment, and walk away with what it printed so far.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .model import Reason

#: Marks a JSON record a child script printed on stdout; anything else on stdout is noise
#: (libraries print banners and warnings there).
CHILD_MARK = "@@envdoctor@@ "
CHILD_DIR = Path(__file__).resolve().parent / "child"
MAX_OUTPUT = 8 * 1024 * 1024
_REAP_GRACE = 0.3
#: Seconds a file read may take: /proc/driver/nvidia and sysfs reads go through the kernel
#: driver, which blocks the reader for good when the GPU or driver is wedged.
READ_TIMEOUT = 2.0

RunStatus = Literal["ok", "timeout", "crashed", "failed", "absent", "denied"]


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    status: RunStatus
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.returncode == 0

    @property
    def reason(self) -> Reason | None:
        return None if self.status == "ok" else Reason(self.status)


@dataclass(frozen=True)
class ChildResult:
    """What a child script reported. ``data`` merges every record it printed, in order,
    so a child that hangs half-way still gives what it read before hanging;
    ``stage`` is the last step it announced (``{"_stage": "nvmlInit"}``)."""

    status: RunStatus
    data: dict[str, Any] = field(default_factory=dict)
    stage: str = ""
    returncode: int | None = None
    stderr: str = ""
    seconds: float = 0.0
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def reason(self) -> Reason | None:
        return None if self.status == "ok" else Reason(self.status)

    def explain(self) -> str:
        """One line saying what went wrong, for a fact's ``detail``."""
        if self.status == "timeout":
            where = f" (stuck in {self.stage})" if self.stage else ""
            return f"no answer within {self.seconds:.1f} s{where}"
        if self.status == "crashed":
            where = f" during {self.stage}" if self.stage else ""
            return f"{self.detail}{where}"
        return self.detail


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except (ValueError, AttributeError):
        return f"signal {-code}"


def decode(data: bytes) -> str:
    """Bytes from the outside world -> text; never raises on non-UTF-8."""
    return data.decode("utf-8", errors="replace")


class Host:
    """Access to the machine. Every argument is for tests and remote targets:

    ``environ`` replaces ``os.environ`` (for reads *and* for children), ``root`` re-roots
    absolute file paths (``/proc/x`` -> ``root/proc/x``), ``python`` is the target interpreter.
    """

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        root: str | os.PathLike[str] | None = None,
        python: str | None = None,
        nice: int = 0,
    ) -> None:
        self.environ: dict[str, str] = dict(os.environ if environ is None else environ)
        self.root = Path(root) if root else None
        self.python = python or sys.executable
        self.nice = nice

    def niced(self, increment: int) -> Host:
        """The same host whose commands run at lower CPU priority (``nice -n``): probes off the
        critical path must not steal a core from the child that imports torch."""
        other = Host(self.environ, self.root, self.python, nice=increment)
        return other

    # -- files ----------------------------------------------------------------------------
    def path(self, path: str | os.PathLike[str]) -> Path:
        p = Path(path)
        if self.root is not None and p.is_absolute():
            return self.root / p.relative_to("/")
        return p

    def read_text(self, path: str | os.PathLike[str], limit: int = 1 << 20,
                  timeout: float = READ_TIMEOUT) -> tuple[str | None, Reason | None, str]:
        """(text, None, "") or (None, reason, detail). Reads at most ``limit`` bytes of a regular
        file within ``timeout`` seconds. FIFOs and device nodes are refused without reading:
        opening a FIFO waits for a writer and ``/dev/kmsg`` waits for the next kernel message.
        A read that outlives the deadline is abandoned in its daemon thread."""
        target = self.path(path)
        try:
            data = call_with_deadline(_read_regular, timeout, target, limit)
        except TimeoutError:
            return None, Reason.TIMEOUT, f"reading {path} gave no answer within {timeout:g} s"
        except FileNotFoundError:
            return None, Reason.ABSENT, f"{path} does not exist"
        except PermissionError:
            return None, Reason.DENIED, f"permission denied reading {path}"
        except IsADirectoryError:
            return None, Reason.FAILED, f"{path} is a directory"
        except _NotRegular as exc:
            return None, Reason.FAILED, f"{path} is {exc}, not a regular file: not read"
        except OSError as exc:
            return None, Reason.FAILED, f"{path}: {exc.strerror or exc}"
        except ValueError as exc:  # a NUL byte in the path
            return None, Reason.FAILED, f"{path!r}: {exc}"
        return decode(data), None, ""

    def exists(self, path: str | os.PathLike[str]) -> bool:
        return os.path.lexists(self.path(path))

    def list_dir(self, path: str | os.PathLike[str]) -> list[str]:
        try:
            return sorted(os.listdir(self.path(path)))
        except OSError:
            return []

    def realpath(self, path: str | os.PathLike[str]) -> str:
        real = os.path.realpath(self.path(path))
        if self.root is not None:
            root = os.path.realpath(self.root)
            if real == root:
                return "/"
            if real.startswith(root.rstrip(os.sep) + os.sep):
                return real[len(root.rstrip(os.sep)):]
        return real

    def access(self, path: str | os.PathLike[str], mode: int) -> bool:
        return os.access(self.path(path), mode)

    def statvfs(self, path: str | os.PathLike[str]) -> os.statvfs_result | None:
        try:
            return os.statvfs(self.path(path))
        except OSError:
            return None

    # -- environment ------------------------------------------------------------------------
    def getenv(self, name: str, default: str | None = None) -> str | None:
        return self.environ.get(name, default)

    def which(self, name: str) -> str | None:
        return shutil.which(name, path=self.environ.get("PATH", os.defpath))

    # -- names and sockets (launch checks; never any traffic: lookups and local binds only) --
    def resolve(self, name: str, timeout: float = 2.0) -> tuple[list[str], str]:
        """(addresses, "") or ([], why). ``getaddrinfo`` with a deadline: a lookup stuck on an
        unreachable DNS server is abandoned, not waited for."""
        import socket

        def lookup() -> list[str]:
            infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
            return sorted({str(info[4][0]) for info in infos})

        try:
            return call_with_deadline(lookup, timeout), ""
        except TimeoutError:
            return [], f"looking up {name} gave no answer within {timeout:g} s"
        except (OSError, UnicodeError) as exc:
            return [], f"{name} does not resolve ({getattr(exc, 'strerror', None) or exc})"

    def local_addresses(self) -> dict[str, list[str]]:
        """Interface name -> its IP addresses (psutil)."""
        try:
            import socket

            import psutil

            return {name: [a.address for a in addrs if a.family in (socket.AF_INET, socket.AF_INET6)]
                    for name, addrs in psutil.net_if_addrs().items()}
        except Exception:  # noqa: BLE001 - an unreadable interface list is just empty
            return {}

    def port_in_use(self, address: str, port: int) -> str | None:
        """Why ``address:port`` cannot be listened on (another process holds it), else None.
        A bind on a local address, closed at once; nothing is sent."""
        import socket

        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((address, port))
            return None
        except OSError as exc:
            return exc.strerror or str(exc)
        finally:
            sock.close()

    # -- commands ---------------------------------------------------------------------------
    def run(
        self,
        argv: Sequence[str],
        timeout: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        """Run ``argv`` (never through a shell) with a hard deadline."""
        argv = tuple(str(a) for a in argv)
        exe = argv[0] if os.sep in argv[0] else self.which(argv[0])
        if exe is None:
            return CommandResult(argv, "absent", detail=f"{argv[0]} not found on PATH")
        full_env = dict(self.environ)
        if env:
            full_env.update(env)
        command: tuple[str, ...] = (exe, *argv[1:])
        nice_exe = self.which("nice") if self.nice > 0 else None
        if nice_exe:
            command = (nice_exe, "-n", str(self.nice), *command)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=full_env,
                start_new_session=True,
                close_fds=True,
            )
        except FileNotFoundError:
            return CommandResult(argv, "absent", detail=f"{exe} does not exist")
        except PermissionError as exc:
            return CommandResult(argv, "denied", detail=f"cannot execute {exe}: {exc.strerror}")
        except OSError as exc:
            return CommandResult(argv, "failed", detail=f"cannot execute {exe}: {exc.strerror or exc}")
        except ValueError as exc:  # a NUL byte in an argument or the environment, '=' in a name
            return CommandResult(argv, "failed", detail=f"cannot execute {exe}: {exc}")
        out, err, rc, timed_out = _collect(proc, timeout, stdin)
        seconds = time.monotonic() - start
        if timed_out:
            return CommandResult(argv, "timeout", rc, decode(out), decode(err), seconds,
                                 f"{os.path.basename(exe)} gave no answer within {timeout:g} s")
        if rc is not None and rc < 0:
            return CommandResult(argv, "crashed", rc, decode(out), decode(err), seconds,
                                 f"{os.path.basename(exe)} was killed by {_signal_name(rc)}")
        return CommandResult(argv, "ok", rc, decode(out), decode(err), seconds)

    def run_child(
        self,
        script: str,
        args: Any = None,
        timeout: float = 5.0,
        env: Mapping[str, str] | None = None,
        python: str | None = None,
    ) -> ChildResult:
        """Run ``envdoctor/child/<script>.py`` in the target interpreter with a deadline.

        The script is stdlib-only (the target may lack envdoctor and everything else), gets
        ``args`` as JSON in argv[1], and prints records ``CHILD_MARK + json`` on stdout.
        """
        path = CHILD_DIR / f"{script}.py"
        interpreter = python or self.python
        child_env = {"PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1"}
        if env:
            child_env.update(env)
        result = self.run([interpreter, str(path), json.dumps(args if args is not None else {})],
                          timeout=timeout, env=child_env)
        data: dict[str, Any] = {}
        stage = ""
        for line in result.stdout.splitlines():
            if not line.startswith(CHILD_MARK):
                continue
            try:
                record = json.loads(line[len(CHILD_MARK):])
            except ValueError:
                continue
            if isinstance(record, dict):
                stage = str(record.pop("_stage", stage) or stage)
                data.update(record)
        done = bool(data.pop("_done", False))
        stderr = result.stderr[-20000:]
        if result.status == "absent":
            return ChildResult("absent", detail=f"interpreter {interpreter} not found")
        if result.status in ("timeout", "crashed", "denied"):
            return ChildResult(result.status, data, stage, result.returncode, stderr, result.seconds, result.detail)
        if result.status != "ok":
            return ChildResult("failed", data, stage, result.returncode, stderr, result.seconds, result.detail)
        if not done:
            tail = _last_line(stderr)
            detail = f"child {script} exited with code {result.returncode} before finishing"
            return ChildResult("crashed" if result.returncode not in (0, 1) else "failed", data, stage,
                               result.returncode, stderr, result.seconds, f"{detail}: {tail}" if tail else detail)
        return ChildResult("ok", data, stage, result.returncode, stderr, result.seconds)


def _last_line(text: str) -> str:
    for line in reversed(text.strip().splitlines()):
        if line.strip():
            return line.strip()[:300]
    return ""


def _collect(proc: subprocess.Popen[bytes], timeout: float, stdin: bytes | None) -> tuple[bytes, bytes, int | None, bool]:
    """Read both pipes in daemon threads and wait up to ``timeout``; on expiry kill the group
    and abandon it. Daemon readers mean an unkillable child never blocks our exit."""
    chunks: dict[str, list[bytes]] = {"out": [], "err": []}

    def pump(stream: Any, key: str) -> None:
        total = 0
        try:
            while True:
                block = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
                if not block:
                    break
                if total < MAX_OUTPUT:
                    chunks[key].append(block[: MAX_OUTPUT - total])
                total += len(block)
        except (OSError, ValueError):
            pass

    readers = [
        threading.Thread(target=pump, args=(proc.stdout, "out"), daemon=True),
        threading.Thread(target=pump, args=(proc.stderr, "err"), daemon=True),
    ]
    if stdin is not None and proc.stdin is not None:
        # Written from a thread too: a child that never reads its stdin would block a write
        # larger than the pipe buffer forever, deadline or not.
        readers.append(threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True))
    for t in readers:
        t.start()
    timed_out = False
    try:
        proc.wait(timeout=max(timeout, 0.01))
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            proc.wait(timeout=_REAP_GRACE)
        except subprocess.TimeoutExpired:
            pass  # unkillable (D state): abandon it
    # The group may have left grandchildren holding the pipes open; don't wait for them.
    for t in readers:
        t.join(timeout=_REAP_GRACE if not timed_out else 0.1)
    return b"".join(chunks["out"]), b"".join(chunks["err"]), proc.returncode, timed_out


def _feed(stream: Any, data: bytes) -> None:
    try:
        stream.write(data)
        stream.close()
    except (OSError, ValueError):
        pass


class _NotRegular(Exception):
    """A path that is not a regular file (FIFO, device node, socket)."""


def _read_regular(target: Path, limit: int) -> bytes:
    # O_NONBLOCK so that opening a FIFO does not wait for a writer; cleared again before
    # reading so a regular file reads as usual.
    fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory", str(target))
        if not stat.S_ISREG(mode):
            kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
                    else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
                    else "a special file")
            raise _NotRegular(kind)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        chunks: list[bytes] = []
        left = limit
        while left > 0:
            block = os.read(fd, min(left, 1 << 16))
            if not block:
                break
            chunks.append(block)
            left -= len(block)
        return b"".join(chunks)
    finally:
        os.close(fd)


def call_with_deadline(fn: Any, timeout: float, *args: Any) -> Any:
    """``fn(*args)`` in a daemon thread; its result or exception, or :class:`TimeoutError` when
    it has not returned within ``timeout`` seconds (the thread is abandoned, never joined: a
    read stuck in the kernel cannot be interrupted)."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=work, name="envdoctor-read", daemon=True)
    thread.start()
    thread.join(max(timeout, 0.0))
    if thread.is_alive():
        raise TimeoutError(f"no answer within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


class LiveChild:
    """A child script we talk to while it runs (the cluster check's rank child): records arrive
    on a queue as the child prints them, lines go to its stdin, and the parent always decides
    how long to wait. ``kill`` abandons it like every other child (process group, no waiting)."""

    EOF_RECORD: dict[str, Any] = {"_eof": True}

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        import queue

        self.proc = proc
        self.records: queue.Queue[dict[str, Any]] = queue.Queue()
        self.stderr_tail: list[str] = []
        # Records under these keys are also kept aside for whoever waits for them (wait_for).
        self._side: dict[str, Any] = {}
        self._side_ready = threading.Condition()
        self.last_stage = ""
        threading.Thread(target=self._pump_out, daemon=True).start()
        self._err_thread = threading.Thread(target=self._pump_err, daemon=True)
        self._err_thread.start()

    def _pump_out(self) -> None:
        assert self.proc.stdout is not None
        try:
            for raw in self.proc.stdout:
                line = decode(raw)
                if not line.startswith(CHILD_MARK):
                    continue
                try:
                    record = json.loads(line[len(CHILD_MARK):])
                except ValueError:
                    continue
                if isinstance(record, dict):
                    self.last_stage = str(record.get("_stage") or record.get("probe_stage") or self.last_stage)
                    with self._side_ready:
                        self._side.update(record)
                        self._side_ready.notify_all()
                    self.records.put(record)
        except (OSError, ValueError):
            pass
        with self._side_ready:
            self._side["_eof"] = True
            self._side_ready.notify_all()
        self.records.put(dict(self.EOF_RECORD))

    def wait_for(self, key: str, timeout: float) -> tuple[Any, str]:
        """(value, "") once a record carried ``key``; (None, "timeout"|"eof") otherwise."""
        end = time.monotonic() + timeout
        with self._side_ready:
            while key not in self._side:
                if self._side.get("_eof"):
                    return None, "eof"
                left = end - time.monotonic()
                if left <= 0:
                    return None, "timeout"
                self._side_ready.wait(min(left, 0.5))
            return self._side[key], ""

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        try:
            for raw in self.proc.stderr:
                self.stderr_tail.append(decode(raw).rstrip()[:500])
                del self.stderr_tail[:-40]
        except (OSError, ValueError):
            pass

    def stderr_lines(self, wait: float = 0.5) -> list[str]:
        """The last stderr lines; waits up to ``wait`` s for the child's stderr to close first."""
        self._err_thread.join(timeout=wait)
        return list(self.stderr_tail)

    def next(self, timeout: float) -> dict[str, Any] | None:
        """The next record, ``{"_eof": True}`` once the child's stdout closed, None on timeout."""
        import queue

        try:
            return self.records.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            return None

    def send(self, message: Mapping[str, Any]) -> bool:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps(message, default=str) + "\n").encode("utf-8"))
            self.proc.stdin.flush()
            return True
        except (OSError, ValueError, AssertionError):
            return False

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=_REAP_GRACE)
        except subprocess.TimeoutExpired:
            pass  # unkillable: abandoned


def start_live_child(host: Host, script: str, args: Any, env: Mapping[str, str] | None = None) -> LiveChild | str:
    """Start ``envdoctor/child/<script>.py`` in the host's target interpreter; a LiveChild or why not."""
    full_env = dict(host.environ)
    full_env.update({"PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"})
    if env:
        full_env.update(env)
    argv = [host.python, str(CHILD_DIR / f"{script}.py"), json.dumps(args)]
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=full_env, start_new_session=True, close_fds=True)
    except (OSError, ValueError) as exc:
        return f"cannot start {host.python}: {getattr(exc, 'strerror', None) or exc}"
    return LiveChild(proc)
