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

import copy
import json
import os
import re
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

from envdoctor.model import Reason
from envdoctor.process import lifecycle

#: Marks a JSON record a child script printed on stdout; anything else on stdout is noise
#: (libraries print banners and warnings there).
CHILD_MARK = "@@envdoctor@@ "
CHILD_DIR = Path(__file__).resolve().parent.parent / "child"
MAX_OUTPUT = 8 * 1024 * 1024
#: One child record (a JSON line) larger than this is dropped and counted, never kept: no probe
#: prints anything near it (a GPU's record is a few KB), so it can only be a flood.
MAX_RECORD = 4 * 1024 * 1024
#: The stderr tail kept from a child (its last words are what explains a crash).
STDERR_TAIL = 64 * 1024
#: Seconds a child may spend in a cleanup call (``nvmlShutdown``) once it has said everything
#: is read; a cleanup that takes longer is reported as hung, not waited for to the deadline.
CLEANUP_GRACE = 2.0
_REAP_GRACE = 0.3
#: Seconds a file read may take: /proc/driver/nvidia and sysfs reads go through the kernel
#: driver, which blocks the reader for good when the GPU or driver is wedged.
READ_TIMEOUT = 2.0

#: Non-record stdout from a child above this many bytes is a flood worth saying.
FLOOD_BYTES = 1 << 20

RunStatus = Literal["ok", "timeout", "crashed", "failed", "absent", "denied"]

#: Seconds a child that printed its final record still gets to exit by itself; after that it is
#: ended and not waited for (its interpreter teardown tells us nothing).
DONE_GRACE = 0.05


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
    #: Bytes the child printed on stdout that were not records (a library's banner, or a flood).
    noise: int = 0
    #: Records dropped: not JSON, or larger than MAX_RECORD.
    dropped: int = 0
    #: The cleanup call (``nvmlShutdown``) the child was in when it hung or died after it had
    #: reported everything; "" when it finished or never got that far.
    cleanup: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def reason(self) -> Reason | None:
        return None if self.status == "ok" else Reason(self.status)

    def explain(self) -> str:
        """One line saying what went wrong, for a fact's ``detail``."""
        flood = f"; it printed {self.noise / 1e6:.1f} MB of other output" if self.noise >= FLOOD_BYTES else ""
        if self.status == "timeout":
            where = f" (stuck in {self.stage})" if self.stage else ""
            if self.cleanup:
                return f"{self.cleanup} gave no answer within {self.seconds:.1f} s, after everything was read{flood}"
            at = hung_at(self.stderr)
            return f"no answer within {self.seconds:.1f} s{where}{f', at {at}' if at else ''}{flood}"
        if self.status == "crashed":
            where = f" during {self.stage}" if self.stage else ""
            return f"{self.detail}{where}{flood}"
        return f"{self.detail}{flood}" if self.detail else flood.lstrip("; ")


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
        early: lifecycle.Early | None = None,
    ) -> None:
        self.environ: dict[str, str] = dict(os.environ if environ is None else environ)
        self.root = Path(root) if root else None
        self.python = python or sys.executable
        self.nice = nice
        #: Children started before click for this very run (envdoctor.pipeline.startup); a command
        #: this host runs takes the one started with its command line and environment.
        self.early = early

    def niced(self, increment: int) -> Host:
        """The same host whose commands run at lower CPU priority (``nice -n``): probes off the
        critical path must not steal a core from the child that imports torch."""
        other = Host(self.environ, self.root, self.python, nice=increment, early=self.early)
        return other

    # -- files ----------------------------------------------------------------------------
    def path(self, path: str | os.PathLike[str]) -> Path:
        p = Path(path)
        if self.root is not None and p.is_absolute():
            return self.root / p.relative_to("/")
        return p

    def _os(self, path: str | os.PathLike[str]) -> str | os.PathLike[str]:
        """:meth:`path` for the ``os`` calls below, without building a Path when there is no
        stand-in root (a thousand LD_LIBRARY_PATH folders meant ten thousand of them)."""
        return path if self.root is None else self.path(path)

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
        return os.path.lexists(self._os(path))

    def list_dir(self, path: str | os.PathLike[str]) -> list[str]:
        try:
            return sorted(os.listdir(self._os(path)))
        except OSError:
            return []

    def realpath(self, path: str | os.PathLike[str]) -> str:
        real = os.path.realpath(self._os(path))
        if self.root is not None:
            root = os.path.realpath(self.root)
            if real == root:
                return "/"
            if real.startswith(root.rstrip(os.sep) + os.sep):
                return real[len(root.rstrip(os.sep)):]
        return real

    def is_file(self, path: str | os.PathLike[str]) -> bool:
        return os.path.isfile(self._os(path))

    def access(self, path: str | os.PathLike[str], mode: int) -> bool:
        return os.access(self._os(path), mode)

    def statvfs(self, path: str | os.PathLike[str]) -> os.statvfs_result | None:
        try:
            return os.statvfs(self._os(path))
        except OSError:
            return None

    # -- environment ------------------------------------------------------------------------
    def getenv(self, name: str, default: str | None = None) -> str | None:
        return self.environ.get(name, default)

    def which(self, name: str) -> str | None:
        import shutil  # here: shutil (with bz2, lzma) is ~4 ms of the healthcheck's start otherwise

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

    def listeners(self) -> list[dict[str, Any]] | str:
        """Listening TCP sockets of this network namespace with the process that owns each (psutil):
        ``{"address", "port", "pid", "uid", "cmdline": [...]}``; a string says why none could be read.
        Owners of other users' sockets need root to be named (pid None otherwise)."""
        if self.root is not None:
            return f"a re-rooted host ({self.root}) has no sockets of its own"
        try:
            import psutil

            conns = psutil.net_connections(kind="tcp")
        except Exception as exc:  # noqa: BLE001 - AccessDenied (macOS), an unreadable /proc/net: no list
            return f"listening sockets not readable: {type(exc).__name__}: {exc}"
        out: list[dict[str, Any]] = []
        owners: dict[int, tuple[int | None, list[str]]] = {}
        for c in conns:
            if c.status != psutil.CONN_LISTEN or not c.laddr:
                continue
            if c.pid is not None and c.pid not in owners:
                try:
                    proc = psutil.Process(c.pid)
                    owners[c.pid] = (proc.uids().effective, proc.cmdline())
                except Exception:  # noqa: BLE001 - gone or not ours to read: the socket still counts
                    owners[c.pid] = (None, [])
            uid, cmdline = owners.get(c.pid, (None, [])) if c.pid is not None else (None, [])
            out.append({"address": c.laddr.ip, "port": c.laddr.port, "pid": c.pid, "uid": uid, "cmdline": cmdline})
        return out

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
        records: Records | None = None,
    ) -> CommandResult:
        """Run ``argv`` (never through a shell) with a hard deadline. With ``records``, stdout is
        parsed as child records while it streams (and not kept), so memory stays bounded."""
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
            proc = (self.early.take(command, full_env) if self.early is not None else None) or subprocess.Popen(
                command,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=full_env,
                close_fds=True,
                cwd=lifecycle.child_cwd(),
                **lifecycle.own_group(),
            )
        except FileNotFoundError:
            return CommandResult(argv, "absent", detail=f"{exe} does not exist")
        except PermissionError as exc:
            return CommandResult(argv, "denied", detail=f"cannot execute {exe}: {exc.strerror}")
        except OSError as exc:
            return CommandResult(argv, "failed", detail=f"cannot execute {exe}: {exc.strerror or exc}")
        except ValueError as exc:  # a NUL byte in an argument or the environment, '=' in a name
            return CommandResult(argv, "failed", detail=f"cannot execute {exe}: {exc}")
        lifecycle.register(proc)
        try:
            out, err, rc, timed_out = _collect(proc, timeout, stdin, records)
        finally:
            lifecycle.release(proc, abandoned=proc.returncode is None)
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
        command: Sequence[str] | None = None,
        records: Records | None = None,
    ) -> ChildResult:
        """Run ``envdoctor/child/<script>.py`` in the target interpreter with a deadline.

        The script is stdlib-only (the target may lack envdoctor and everything else), gets
        ``args`` as JSON in argv[1], and prints records ``CHILD_MARK + json`` on stdout.
        ``command`` replaces that command line (``python -S script - …``, see
        :mod:`envdoctor.process.driverstart`); ``args`` then go to the child's stdin, one JSON line.
        ``records`` is for :class:`PhasedChild`, which reads them while the child runs.
        """
        path = CHILD_DIR / f"{script}.py"
        interpreter = python or self.python
        child_env = {"PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1"}
        if env:
            child_env.update(env)
        records = records if records is not None else Records()
        given = json.dumps(args if args is not None else {})
        argv = list(command) if command else [interpreter, str(path), given]
        result = self.run(argv, timeout=timeout, env=child_env, records=records,
                          stdin=(given + "\n").encode() if command else None)
        data, stage, done = records.data, records.stage, records.done
        noise, dropped = records.noise, records.dropped
        stderr = result.stderr[-20000:]
        if result.status == "absent":
            return ChildResult("absent", detail=f"interpreter {interpreter} not found")
        if result.status == "failed" or (result.status == "ok" and not done and not data and not stage):
            # Never started (no process, no thread, no file descriptor left) or died before its
            # first record (an interpreter or ``_edchild`` that cannot start): the child never ran
            # its probe, so nothing of what it examines failed. Could-not-run is an error.
            return ChildResult("crashed", data, stage, result.returncode, stderr, result.seconds,
                               not_started(script, result.detail or _last_line(stderr) or
                                           f"it exited with code {result.returncode} before its first record"),
                               noise=noise, dropped=dropped)
        cleanup = records.cleanup if not done else ""
        if result.status in ("timeout", "crashed", "denied"):
            return ChildResult(result.status, data, stage, result.returncode, stderr, result.seconds, result.detail,
                               cleanup=cleanup, noise=noise, dropped=dropped)
        if result.status != "ok":
            return ChildResult("failed", data, stage, result.returncode, stderr, result.seconds, result.detail, noise=noise, dropped=dropped)
        if not done:
            tail = _last_line(stderr)
            detail = f"child {script} exited with code {result.returncode} before finishing"
            # Exit 0 before the final record is no normal end (a library calling _exit(0) inside
            # nvmlInit): the child died while reading, as with a signal. Exit 1 is its own error.
            return ChildResult("crashed" if result.returncode != 1 else "failed", data, stage,
                               result.returncode, stderr, result.seconds, f"{detail}: {tail}" if tail else detail,
                               cleanup=cleanup, noise=noise, dropped=dropped)
        return ChildResult("ok", data, stage, result.returncode, stderr, result.seconds, noise=noise, dropped=dropped)


def not_started(script: str, why: str) -> str:
    """The detail of a child that never ran its probe (one home for the wording)."""
    return f"the {script} child could not start ({why}): nothing it examines was read"


class Records:
    """Child records parsed from stdout as it streams: ``CHILD_MARK + json`` lines are merged into
    ``data`` (``{"_append": {key: item}}`` appends to a list, so a child reports N items in O(N)
    output); every other byte is counted as ``noise`` and dropped. Memory is bounded by the
    merged data and one record (at most MAX_RECORD), whatever the child prints."""

    _LINE = re.compile(rb"(?m)^" + re.escape(CHILD_MARK.encode()) + rb"[^\n]*\n")

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.stage = ""
        self.done = False
        self.cleanup = ""
        self.noise = 0
        self.dropped = 0
        self.cleanup_started = threading.Event()
        self.finished = threading.Event()  # the final record (``_done``) is in
        #: ``{"_phase": name}`` records seen: name -> (data, stage, noise, dropped) as they stood then.
        self.phases: dict[str, tuple[dict[str, Any], str, int, int]] = {}
        self.phase_event = threading.Event()  # a phase ended (or, for PhasedChild, the child did)
        self.abort = threading.Event()  # the reader gave up: the child is abandoned as on a timeout
        self._carry = b""
        self._skipping = False  # inside a line longer than MAX_RECORD

    def feed(self, block: bytes) -> None:
        if self._skipping:
            nl = block.find(b"\n")
            if nl < 0:
                self.noise += len(block)
                return
            self.noise += nl + 1
            block = block[nl + 1:]
            self._skipping = False
        buf = self._carry + block if self._carry else block
        last = buf.rfind(b"\n")
        if last < 0:
            complete, rest = b"", buf
        else:
            complete, rest = buf[:last + 1], buf[last + 1:]
        if complete:
            pos = 0  # noise is counted as it comes, so a phase's snapshot has its own
            for match in self._LINE.finditer(complete):
                self.noise += match.start() - pos
                pos = match.end()
                self._record(match.group()[len(CHILD_MARK):])
            self.noise += len(complete) - pos
        if len(rest) > MAX_RECORD:
            if rest.startswith(CHILD_MARK.encode()):
                self.dropped += 1
            self.noise += len(rest)
            rest = b""
            self._skipping = True
        self._carry = rest

    def close(self) -> None:
        if self._carry:
            if self._carry.startswith(CHILD_MARK.encode()):
                self._record(self._carry[len(CHILD_MARK):])
            else:
                self.noise += len(self._carry)
            self._carry = b""

    def _record(self, raw: bytes) -> None:
        if len(raw) > MAX_RECORD:
            self.dropped += 1
            return
        try:
            record = json.loads(raw)
        except ValueError:
            self.dropped += 1
            return
        if not isinstance(record, dict):
            self.dropped += 1
            return
        self.stage = str(record.pop("_stage", self.stage) or self.stage)
        if "_cleanup" in record:
            self.cleanup = self.stage = str(record.pop("_cleanup"))
            self.cleanup_started.set()
        appends = record.pop("_append", None)
        if isinstance(appends, dict):
            for key, item in appends.items():
                current = self.data.get(key)
                if not isinstance(current, list):
                    current = self.data[key] = []
                current.append(item)
        done = bool(record.pop("_done", False))
        phase = record.pop("_phase", None)
        self.data.update(record)
        if isinstance(phase, str) and phase not in self.phases:
            self.phases[phase] = (copy.deepcopy(self.data), self.stage, self.noise, self.dropped)
            self.phase_event.set()
        if done:
            self.done = True
            self.finished.set()


def _last_line(text: str) -> str:
    for line in reversed(text.strip().splitlines()):
        if line.strip():
            return line.strip()[:300]
    return ""


def _read_block(stream: Any) -> bytes:
    return stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)


def _pump_out(stream: Any, head: list[bytes], records: Records | None) -> None:
    """stdout: streamed into ``records``, else kept up to MAX_OUTPUT (the rest read and dropped)."""
    total = 0
    try:
        while block := _read_block(stream):
            if records is not None:
                records.feed(block)
            elif total < MAX_OUTPUT:
                head.append(block[: MAX_OUTPUT - total])
            total += len(block)
    except (OSError, ValueError):
        pass
    _close(stream)
    if records is not None:
        records.close()


def _close(stream: Any) -> None:
    """The pipe's reader closes it at its end (its only user): no ResourceWarning, no fd left."""
    try:
        stream.close()
    except (OSError, ValueError):
        pass


def _pump_err(stream: Any, tail: list[bytes]) -> None:
    """stderr: only its last STDERR_TAIL bytes are kept."""
    size = 0
    try:
        while block := _read_block(stream):
            tail.append(block)
            size += len(block)
            while size - len(tail[0]) >= STDERR_TAIL:
                size -= len(tail.pop(0))
    except (OSError, ValueError):
        pass
    _close(stream)


#: The signal on which a child script writes its stacks: ``_edchild.STACKS_SIGNAL`` (the child scripts
#: import nothing of envdoctor; tests/test_host.py holds the two names equal).
STACKS_SIGNAL = "SIGUSR2"
#: Seconds a hung child script gets to write its stacks before it is ended.
STACKS_GRACE = 0.5
_STACKS_MARK = b"(most recent call first)"


def _ask_for_stacks(proc: subprocess.Popen[bytes], tail: list[bytes]) -> None:
    """Signal a hung child script to write every thread's stack to its stderr, and wait (at most
    STACKS_GRACE) until the dump is in and the stream went quiet. Only the child itself is
    signalled: its own children (DataLoader workers) inherited the handler, not the question."""
    if _state(proc.pid) in ("D", "Z", "T", "t", ""):
        return  # stuck in the kernel, dead or stopped: no handler runs, the grace would only be lost
    try:
        os.kill(proc.pid, getattr(signal, STACKS_SIGNAL))
    except (OSError, AttributeError):
        return
    end = time.monotonic() + STACKS_GRACE
    seen = -1
    while time.monotonic() < end and proc.poll() is None:
        time.sleep(0.05)
        size = sum(len(b) for b in tail)
        if size == seen and _STACKS_MARK in b"".join(tail[-8:]):
            return
        seen = size


def _state(pid: int) -> str:
    """The process's state letter from /proc (R, S, D, Z, T…); "" when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
        return stat[stat.rindex(")") + 2:].split()[0]
    except (OSError, ValueError, IndexError):
        return ""


def hung_at(stderr: str) -> str:
    """Where a hung child's main thread was, from the stacks it wrote when asked: its innermost
    frame, and the innermost frame of the child script's own code when that is further out
    ("queues.py:113 in get, from micro.py:744 in _load"); "" when there is no dump.

    faulthandler lists the newest thread first, so the main thread's block is the last of its dump;
    other text with the same heading (a C++ exception's ``frame #0:`` list from torch) is passed over."""
    frames: list[tuple[str, str, str]] = []
    for block in reversed(stderr.split("(most recent call first):")[1:]):
        for line in block.splitlines()[1:]:
            m = re.match(r'\s+File "([^"]*)", line (\d+) in (\S+)', line)
            if not m:
                break
            frames.append((os.path.basename(m.group(1)), m.group(2), m.group(3)))
        if frames:
            break
    if not frames:
        return ""
    inner = f"{frames[0][0]}:{frames[0][1]} in {frames[0][2]}"
    scripts = {p.name for p in CHILD_DIR.glob("*.py")}
    own = next((f for f in frames if f[0] in scripts), None)
    if own is None or own is frames[0]:
        return inner
    return f"{inner}, from {own[0]}:{own[1]} in {own[2]}"


def _kill_and_abandon(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.wait(timeout=_REAP_GRACE)
    except subprocess.TimeoutExpired:
        pass  # unkillable (D state): abandon it


def _collect(proc: subprocess.Popen[bytes], timeout: float, stdin: bytes | None,
             records: Records | None = None) -> tuple[bytes, bytes, int | None, bool]:
    """Read both pipes in daemon threads and wait up to ``timeout``; on expiry kill the group
    and abandon it. Daemon readers mean an unkillable child never blocks our exit. stdout is
    kept up to MAX_OUTPUT (or streamed into ``records``), stderr's last STDERR_TAIL bytes."""
    head: list[bytes] = []
    tail: list[bytes] = []
    readers = [
        threading.Thread(target=_pump_out, args=(proc.stdout, head, records), daemon=True),
        threading.Thread(target=_pump_err, args=(proc.stderr, tail), daemon=True),
    ]
    if stdin is not None and proc.stdin is not None:
        # Written from a thread too: a child that never reads its stdin would block a write
        # larger than the pipe buffer forever, deadline or not.
        readers.append(threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True))
    for t in readers:
        t.start()
    outcome = _wait(proc, timeout, records)
    timed_out = outcome == "timeout"
    if timed_out:
        if records is not None:  # one of our child scripts: it says where it hung first
            _ask_for_stacks(proc, tail)
        _kill_and_abandon(proc)
    elif outcome == "done" and proc.poll() is None:
        # Everything is said; its teardown (torch's takes a quarter of a second) is not waited for.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        return b"".join(head), b"".join(tail)[-STDERR_TAIL:], 0, False
    # The group may have left grandchildren holding the pipes open; don't wait for them.
    for t in readers:
        t.join(timeout=_REAP_GRACE if not timed_out else 0.1)
    return b"".join(head), b"".join(tail)[-STDERR_TAIL:], proc.returncode, timed_out


def _wait(proc: subprocess.Popen[bytes], timeout: float, records: Records | None) -> str:
    """"exited" when ``proc`` exited in time, "done" when its final record is in and it did not
    exit within DONE_GRACE after it, "timeout" otherwise. Once the child announces a cleanup
    call, it has at most CLEANUP_GRACE more seconds."""
    end = time.monotonic() + max(timeout, 0.01)
    shortened = False
    while True:
        remaining = end - time.monotonic()
        if remaining <= 0:
            return "timeout"
        if records is None:
            try:
                proc.wait(timeout=remaining)
                return "exited"
            except subprocess.TimeoutExpired:
                return "timeout"
        # Woken by the final record itself, not by polling the process.
        if records.abort.is_set():
            return "timeout"
        if records.finished.wait(min(remaining, 0.05)):
            try:
                proc.wait(timeout=DONE_GRACE)
                return "exited"
            except subprocess.TimeoutExpired:
                return "done"
        if proc.poll() is not None:
            return "exited"
        if not shortened and records.cleanup_started.is_set():
            shortened = True
            end = min(end, time.monotonic() + CLEANUP_GRACE)


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
        _close(self.proc.stdout)
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
        _close(self.proc.stderr)

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
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=lifecycle.child_cwd(),
                                env=full_env, close_fds=True, **lifecycle.own_group())
    except (OSError, ValueError) as exc:
        return f"cannot start {host.python}: {getattr(exc, 'strerror', None) or exc}"
    return LiveChild(proc)


class PhasedChild:
    """A child script whose records two readers consume in two phases: the first phase ends at its
    record ``{"_phase": name}`` and :meth:`first` answers at once with everything up to there, the
    child running on; :meth:`final` answers when the child is done, with all of it (the one torch
    child: its torch facts, then the microchecks it runs in the same process).

    The whole child runs under ``timeout``, through :meth:`Host.run_child` in a thread of its own;
    :meth:`first` has its own deadline, and when that passes before the phase ends the child is
    abandoned (its process group killed, not waited for) exactly as on a timeout, so both readers
    learn where it hung. A child that exits or crashes before the phase gives both readers that
    result."""

    def __init__(self, host: Host, script: str, args: Any, timeout: float, python: str | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self.script = script
        self.records = Records()
        self.began = time.monotonic()
        self._result: ChildResult | None = None
        self._over = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(host, script, args, timeout, python, env),
                                        name=f"child-{script}", daemon=True)
        self._thread.start()

    def _run(self, host: Host, script: str, args: Any, timeout: float, python: str | None,
             env: Mapping[str, str] | None) -> None:
        try:
            self._result = host.run_child(script, args, timeout=timeout, env=env, python=python, records=self.records)
        except BaseException as exc:  # noqa: BLE001 - handed to the readers as a failed run
            self._result = ChildResult("failed", dict(self.records.data), self.records.stage,
                                       detail=f"{type(exc).__name__}: {exc}")
        finally:
            self._over.set()
            self.records.phase_event.set()

    def reached(self, phase: str) -> bool:
        return phase in self.records.phases

    def first(self, phase: str, timeout: float) -> ChildResult:
        """Everything up to ``phase`` as an ``ok`` result, as soon as it is in; else how the child
        ended before it, or (``timeout`` seconds after the start) the timeout it is abandoned with."""
        end = self.began + timeout
        while phase not in self.records.phases and not self._over.is_set():
            remaining = end - time.monotonic()
            if remaining <= 0:
                self.records.abort.set()
                break
            if self.records.phase_event.is_set():  # another phase ended: poll for this one
                time.sleep(min(remaining, 0.05))
            else:
                self.records.phase_event.wait(remaining)
        if phase in self.records.phases:
            data, stage, noise, dropped = self.records.phases[phase]
            return ChildResult("ok", data, stage, None, "", time.monotonic() - self.began, noise=noise, dropped=dropped)
        return self.final()

    def final(self, timeout: float | None = None) -> ChildResult:
        """The whole child's result once it ended; when it has not ended ``timeout`` seconds after
        its start (the second reader's own deadline), it is abandoned and that timeout is the result."""
        if timeout is not None and not self._over.wait(max(self.began + timeout - time.monotonic(), 0.0)):
            self.records.abort.set()
        # The run's own deadline, or the abort, ends it; a little grace for abandoning the group.
        self._over.wait(None if timeout is None else 2.0)
        if self._result is not None:
            return self._result
        seconds = time.monotonic() - self.began
        return ChildResult("timeout", dict(self.records.data), self.records.stage, None, "", seconds,
                           f"child {self.script} gave no answer within {seconds:.1f} s")
