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
import signal
import shutil
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

    def read_text(self, path: str | os.PathLike[str], limit: int = 1 << 20) -> tuple[str | None, Reason | None, str]:
        """(text, None, "") or (None, reason, detail). Reads at most ``limit`` bytes."""
        try:
            with open(self.path(path), "rb") as fh:
                return decode(fh.read(limit)), None, ""
        except FileNotFoundError:
            return None, Reason.ABSENT, f"{path} does not exist"
        except PermissionError:
            return None, Reason.DENIED, f"permission denied reading {path}"
        except IsADirectoryError:
            return None, Reason.FAILED, f"{path} is a directory"
        except OSError as exc:
            return None, Reason.FAILED, f"{path}: {exc.strerror or exc}"

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
            root = str(self.root.resolve())
            if real.startswith(root):
                return "/" + os.path.relpath(real, root).lstrip("./") if real != root else "/"
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
    for t in readers:
        t.start()
    if stdin is not None and proc.stdin is not None:
        try:
            proc.stdin.write(stdin)
            proc.stdin.close()
        except OSError:
            pass
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
