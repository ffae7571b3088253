"""``envdoctor exec``, the container ENTRYPOINT preflight: judge the fast checks (the healthcheck's
fast path, :mod:`envdoctor.pipeline.fast`) and then become the command (``os.execvp``: same PID,
so signals and the exit code are the command's).

The fast checks are the healthcheck's: driver, NVML, cuInit, device nodes, visibility, GPU health,
the GPU count a node must show (``--expect-gpus``, the expect-gpus check); no torch import unless
``--micro``. When the environment fails, the command is not started and envdoctor exits
:attr:`ExitCode.PREFLIGHT` (78, ``EX_CONFIG`` of sysexits.h), a code a training script rarely
uses, so a Kubernetes ``podFailurePolicy`` can tell "this node's GPU stack is broken" from the
job's own failures.

Healthy, it says one line on stderr (a container log gets one line per start); with a problem,
the problems and their remedies first. ``ENVDOCTOR_SKIP_PREFLIGHT=1`` skips the preflight (one
line says so) and starts the command at once: ``docker run -it -e ENVDOCTOR_SKIP_PREFLIGHT=1 IMAGE
bash`` opens a shell on a node whose preflight fails, to debug it.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any, NoReturn

from envdoctor.model import Finding, Status
from envdoctor.pipeline.plan import Plan
from envdoctor.process import lifecycle
from envdoctor.process.lifecycle import ExitCode

#: The environment variable that skips the preflight (README "In a container").
SKIP_VARIABLE = "ENVDOCTOR_SKIP_PREFLIGHT"


def skip_requested(environ: Any = os.environ) -> bool:
    """``ENVDOCTOR_SKIP_PREFLIGHT`` set to 1 (or true/yes): start the command without judging."""
    return str(environ.get(SKIP_VARIABLE, "")).strip().lower() in ("1", "true", "yes")


def start_unchecked(command: Sequence[str]) -> NoReturn:
    """Become ``command`` without a preflight, saying so once (the log shows it was skipped)."""
    from envdoctor.redact import redact_text

    print(f"envdoctor exec: preflight skipped ({SKIP_VARIABLE}=1); starting {redact_text(command[0])}",
          file=sys.stderr)
    become(command)


def failing(findings: Sequence[Finding], fail_on: str) -> list[Finding]:
    """What stops the command: failures and envdoctor's own errors (a hung probe is a wedged
    driver), and with ``--fail-on warn`` warnings too."""
    bad = {Status.FAIL, Status.ERROR} | ({Status.WARN} if fail_on == "warn" else set())
    return [f for f in findings if f.status in bad]


def leave(line: str, code: int) -> NoReturn:
    """One line on stderr and exit ``code`` at once (the probe children ended first)."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - nowhere left to say it; the code still tells
        pass
    lifecycle.finish(code)


#: What Python's locale coercion (PEP 538) writes into LC_CTYPE when it starts in the C locale.
_COERCED = ("C.UTF-8", "C.utf8", "UTF-8")


def given_environment(initial: bytes | None = None) -> dict[str, str]:
    """The environment envdoctor was started with, for the command it becomes: ``os.environ``
    without what Python's own start-up added. In the C locale Python sets ``LC_CTYPE=C.UTF-8``
    (PEP 538) before ``os.environ`` is read, so the value is taken from the process's initial
    environment (``/proc/self/environ``, never changed by ``setenv``): unset there, it is dropped."""
    env = dict(os.environ)
    if env.get("LC_CTYPE") not in _COERCED:
        return env
    if initial is None:
        try:
            with open("/proc/self/environ", "rb") as fh:
                initial = fh.read()
        except OSError:
            return env
    given = {}
    for entry in initial.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep:
            given[os.fsdecode(name)] = os.fsdecode(value)
    if "LC_CTYPE" in given:
        env["LC_CTYPE"] = given["LC_CTYPE"]
    else:
        env.pop("LC_CTYPE", None)
    return env


def become(command: Sequence[str]) -> NoReturn:
    """Replace this process with ``command`` (same PID). Signal dispositions Python changed are
    put back first: it ignores SIGPIPE and SIGXFSZ, and an exec keeps ignored signals ignored, so
    the command would otherwise never die of a closed pipe. The probe children are ended and the
    output flushed before; nothing of envdoctor runs after."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - a closed stream must not keep the command from starting
        pass
    lifecycle.end_children(grace=0.2)
    for name in ("SIGPIPE", "SIGXFSZ", "SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):
                pass
    if not command or not command[0]:
        leave("envdoctor exec: '': command not found", ExitCode.NOT_FOUND)
    try:
        os.execvpe(command[0], list(command), given_environment())
    except ValueError as exc:  # a NUL byte in an argument
        leave(f"envdoctor exec: {command[0]!r}: {exc}", ExitCode.NOT_EXECUTABLE)
    except FileNotFoundError:
        leave(f"envdoctor exec: {command[0]}: command not found", ExitCode.NOT_FOUND)
    except PermissionError:
        leave(f"envdoctor exec: {command[0]}: permission denied", ExitCode.NOT_EXECUTABLE)
    except OSError as exc:
        leave(f"envdoctor exec: {command[0]}: {exc.strerror or exc}", ExitCode.NOT_EXECUTABLE)
    raise AssertionError("unreachable")  # pragma: no cover - execvp returns only by raising


def preflight(command: Sequence[str], plan: Plan, host: Any) -> NoReturn:
    """``envdoctor exec``: judge (``plan``: the fast path), print the findings to stderr, then become
    ``command`` or exit :attr:`ExitCode.PREFLIGHT`."""
    from envdoctor.pipeline.fast import run_fast
    from envdoctor.redact import redact_text
    from envdoctor.registry import RegistryError

    began = time.monotonic()
    code = int(ExitCode.PREFLIGHT)

    def overrun() -> NoReturn:
        # The hard budget, as healthcheck's: whatever is stuck (a D-state child, a wedged thread), we answer.
        leave(f"envdoctor exec: preflight exceeded its --max-seconds {plan.budget:g} budget; not starting "
              f"{redact_text(command[0])} (exit {code})", ExitCode.PREFLIGHT)

    try:
        report, hung = run_fast(plan, host, plan.deadline or 0.0, overrun)
    except RegistryError as exc:
        leave(redact_text(f"envdoctor exec: {exc}; not starting {command[0]} (exit {int(ExitCode.INCOMPLETE)})"),
              ExitCode.INCOMPLETE)
    from envdoctor.output.render import make_console, render_terminal

    bad = failing(report.findings, plan.fail_on)
    problems = [f for f in report.findings if f.status in (Status.FAIL, Status.ERROR, Status.WARN)]
    if problems or hung:  # healthy: the one line below is all a container log gets
        render_terminal(report, make_console(stderr=True), verbose_hint=False)  # exec has no -v
    seconds = time.monotonic() - began
    if bad or hung:
        names = [f"probe {h} hung" for h in hung] + list(dict.fromkeys(f.id for f in bad))
        leave(redact_text(f"envdoctor exec: preflight failed in {seconds:.1f}s ({', '.join(names)}); "
                          f"not starting {command[0]} (exit {code}; {SKIP_VARIABLE}=1 starts it unchecked)"),
              ExitCode.PREFLIGHT)
    print(f"envdoctor exec: preflight passed in {seconds:.1f}s; starting {redact_text(command[0])}", file=sys.stderr)
    become(command)
