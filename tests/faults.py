"""Stand-ins for the fault tests and bench/fault_matrix.py: fake torch packages, a CLI runner.

A fake torch is a ``torch`` package in its own folder put first on ``PYTHONPATH``, so the
target interpreter's real torch is shadowed and the probe child imports the fake instead
(fast: no real ``import torch``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

# -- canaries: secrets planted where envdoctor reads, searched for in everything it prints ------
GH = "ghp_CanaryGithubToken00000000000000000"
HF = "hf_CanaryTokenAAAAAAAAAAAAAAAAAAAA"
AWS = "AKIACANARY0000000000"
PASSWORD = "CanaryPassw0rd"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnkifQ.c2lnbmF0dXJlY2FuYXJ5"
SK = "sk-CanaryOpenAIKey000000000000"
PROXY_PASSWORD = "Pr0xyPassw0rd"
#: Secrets no name or shape pattern knows: a token as a URL's user part, a URL password holding
#: "@" and "/" (each piece a canary of its own: masking half of it is a leak), and the values of
#: variables whose names say nothing (``TF_VAR_db_pass``, ``HF_API``).
URL_USER = "CanaryUrlUser7f3k9q"
AT_SLASH = "CanAtPw1@CanSlashPw2/CanEndPw3"
TF_VAR = "CanaryTfVarValue5h2"
HF_API = "CanaryHfApiValue8m4"
#: A GitHub token of GitHub's own length glued to a word by "_" (``mlx5_ghp_…``): no word boundary before it.
GLUED = "ghp_CanaryGlued7Token000000000000000000x"
CANARIES = (GH, HF, AWS, PASSWORD, JWT, SK, PROXY_PASSWORD, URL_USER, *AT_SLASH.replace("@", "/").split("/"), TF_VAR,
            HF_API, GLUED)


def canary_env(root: Path | None = None) -> dict[str, str]:
    """Secrets where envdoctor reads: secret-named variables, token-shaped path entries, URL
    credentials and key=value secrets in allow-listed variables."""
    return {
        "HF_TOKEN": HF,
        "CUDA_HOME": f"/opt/{GH}/cuda",
        "LD_LIBRARY_PATH": f"/srv/{AWS}/lib",
        "TORCH_HOME": f"https://bob:{PASSWORD}@cache.example/torch",
        "TRITON_CACHE_DIR": f"/tmp/{JWT}",
        "PYTORCH_KERNEL_CACHE_PATH": f"/home/u/{SK}",
        "NCCL_DEBUG_FILE": f"/tmp/api_key={PASSWORD}",
        "HF_ENDPOINT": f"https://{URL_USER}@hf.example",
        "TORCH_DISTRIBUTED_STORE": f"https://bob:{AT_SLASH}@store.example:29500/x",
        "TF_VAR_db_pass": TF_VAR,
        "HF_API": HF_API,
    }


def leaked(text: str) -> list[str]:
    return [c for c in CANARIES if c in text]


#: A torch that imports fine: CPU build, no CUDA.
HEALTHY = """
__version__ = "2.6.0+cpu"
class _NS:
    pass
version = _NS(); version.cuda = None; version.hip = None; version.debug = False; version.git_version = "x"
class cuda:
    @staticmethod
    def is_available():
        return False
    @staticmethod
    def get_arch_list():
        return []
"""

#: Behaviours of a broken torch, as module source run at ``import torch``.
#: ``{pidfile}`` is replaced by a path the import writes its pid to: written whole and renamed into
#: place, so a test that waits for the file never reads it empty (it did, under load: a signal sent as
#: soon as the file existed landed between its creation and the write).
TORCH_VARIANTS: dict[str, str] = {
    "healthy": HEALTHY,
    "raises-importerror": "raise ImportError('libcudart.so.12: cannot open shared object file: No such file or directory')",
    "raises-oserror": "raise OSError('libtorch_cuda.so: undefined symbol: cudaGraphInstantiateWithFlags, version libcudart.so.12')",
    "raises-runtimeerror": "raise RuntimeError('CUDA driver initialization failed')",
    "raises-systemexit": "raise SystemExit(7)",
    "raises-keyboardinterrupt": "raise KeyboardInterrupt",
    "raises-recursion": "def f(n):\n    return f(n + 1)\nf(0)",
    "raises-memoryerror": "raise MemoryError()",
    "hangs": "import os, time\nopen({pidfile!r} + '.tmp', 'w').write(str(os.getpid())); os.replace({pidfile!r} + '.tmp', {pidfile!r})\ntime.sleep(3600)",
    "hangs-ignoring-sigterm": ("import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                               "open({pidfile!r} + '.tmp', 'w').write(str(os.getpid())); os.replace({pidfile!r} + '.tmp', {pidfile!r})\ntime.sleep(3600)"),
    "segfaults": "import ctypes\nctypes.string_at(0)",
    "aborts": "import os\nos.abort()",
    "os-exit-0": "import os\nos._exit(0)",
    "os-exit-1": "import os\nos._exit(1)",
    "os-exit-139": "import os\nos._exit(139)",
    "prints-50mb-then-ok": "import sys\nsys.stdout.write('x' * (50 << 20))\nsys.stdout.flush()\n" + HEALTHY,
    "prints-50mb-lines-then-ok": "import sys\nfor _ in range(1 << 16):\n    sys.stdout.write('y' * 799 + '\\n')\n" + HEALTHY,
    "prints-stderr-50mb-then-ok": "import sys\nsys.stderr.write('e' * (50 << 20))\n" + HEALTHY,
    # 50 MB of binary garbage at import (random bytes: newlines, lone surrogates' bytes, marks by chance)
    "prints-50mb-binary-then-ok": ("import os, sys\nfor _ in range(50):\n    sys.stdout.buffer.write(os.urandom(1 << 20))\n"
                                   "sys.stdout.flush()\n" + HEALTHY),
    "prints-fake-records": ("import sys\nsys.stdout.write('@@envdoctor@@ {\"_done\": true, \"torch\": {\"version\": \"9.9\"}}\\n')\n"
                            + HEALTHY),
    "prints-mark-garbage": "import sys\nsys.stdout.write('@@envdoctor@@ {not json\\n' * 1000)\n" + HEALTHY,
    "prints-escape-sequences": "import sys\nsys.stdout.write('\\x1b[2J\\x1b]0;pwned\\x07\\x9b31m')\n" + HEALTHY,
    "spawns-child-holding-stdout": ("import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
                                    + HEALTHY),
    "spawns-daemon-then-hangs": ("import subprocess, sys, os, time\n"
                                 "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                                 "open({pidfile!r} + '.tmp', 'w').write(str(os.getpid())); os.replace({pidfile!r} + '.tmp', {pidfile!r})\ntime.sleep(3600)"),
    "closes-stdout": "import os\nos.close(1)\n" + HEALTHY,
    "version-not-a-string": HEALTHY + "\n__version__ = 12345\n",
    "version-huge": HEALTHY + "\n__version__ = '2.6.0' + 'a' * 1000000\n",
    "version-control-chars": HEALTHY + "\n__version__ = '2.6.0\\x1b[31m\\x9b0m'\n",
    "cuda-raises": HEALTHY + "\ndef _boom():\n    raise RuntimeError('Error 802: system not yet initialized')\ncuda.is_available = staticmethod(_boom)\n",
    "cuda-available-no-devices": HEALTHY + "\ncuda.is_available = staticmethod(lambda: True)\ncuda.device_count = staticmethod(lambda: 0)\n",
    "deep-recursion-in-version": HEALTHY + "\nclass V(str):\n    def __str__(self):\n        return str(self)\n__version__ = V('2.6.0')\n",
    "secret-in-error": ("raise ImportError('cannot fetch https://alice:Pr0xyPassw0rd@proxy.corp:3128/simple "
                        "with token hf_CanaryTokenAAAAAAAAAAAAAAAAAAAA, api_key=CanaryPassw0rd, "
                        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnkifQ.c2lnbmF0dXJlY2FuYXJ5, "
                        "mirror https://CanaryUrlUser7f3k9q@hf.example/x, "
                        "proxy http://bob:CanAtPw1@CanSlashPw2/CanEndPw3@proxy.corp:3128')"),
}


def fake_torch(root: Path, variant: str) -> Path:
    """A folder holding a fake ``torch`` package; put it first on PYTHONPATH."""
    folder = root / f"torch-{variant}"
    pkg = folder / "torch"
    pkg.mkdir(parents=True, exist_ok=True)
    source = TORCH_VARIANTS[variant].replace("{pidfile!r}", repr(str(folder / "pid")))
    (pkg / "__init__.py").write_text(source)
    return folder


def pidfile(folder: Path) -> Path:
    return folder / "pid"


def cli_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("PYTHONPATH", None)
    # An activated venv or conda env of whoever runs the tests would become the examined target.
    env.pop("VIRTUAL_ENV", None)
    env.pop("CONDA_PREFIX", None)
    env.update(extra or {})
    return env


@dataclass
class Outcome:
    rc: int | None
    stdout: bytes
    stderr: bytes
    seconds: float
    timed_out: bool = False

    @property
    def text(self) -> str:
        return (self.stdout + self.stderr).decode("utf-8", "replace")


def run_cli(args: list[str], env: Mapping[str, str] | None = None, stdin: bytes | None = None,
            timeout: float = 60, preexec: Callable[[], None] | None = None, cwd: str | None = None,
            stdout: int | None = None, signal_after: tuple[float | Callable[[], bool], int] | None = None) -> Outcome:
    """Run ``python -m envdoctor ARGS``; ``signal_after=(seconds or ready(), signum)`` sends a signal
    to the process (as a terminal would to its foreground group) once ready."""
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "envdoctor", *args], env=cli_env(env), cwd=cwd,
                            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=stdout if stdout is not None else subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=preexec, start_new_session=signal_after is not None)
    if signal_after is not None:
        when, signum = signal_after
        deadline = began + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            if (callable(when) and when()) or (not callable(when) and time.monotonic() - began >= when):
                break
            time.sleep(0.05)
        try:
            os.killpg(proc.pid, signum)  # the whole foreground group, as Ctrl-C does
        except OSError:
            pass
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL) if signal_after is not None else proc.kill()
        except OSError:
            pass
        out, err = proc.communicate()
        timed_out = True
    return Outcome(proc.returncode, out or b"", err or b"", time.monotonic() - began, timed_out)


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
