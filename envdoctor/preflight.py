"""What operators run before a workload: the GPU count a node must show (``--expect-gpus``) and
``envdoctor exec``, the container ENTRYPOINT preflight that judges the fast checks and then
becomes the command (``os.execvp``: same PID, so signals and the exit code are the command's).

The fast checks are the healthcheck's: driver, NVML, cuInit, device nodes, visibility, GPU health;
no torch import unless ``--micro``. When the environment fails, the command is not started and
envdoctor exits :data:`EXIT_PREFLIGHT` (78, ``EX_CONFIG`` of sysexits.h), a code a training
script rarely uses, so a Kubernetes ``podFailurePolicy`` can tell "this node's GPU stack is
broken" from the job's own failures.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, NoReturn

from . import lifecycle
from .model import Facts, Finding, ProbeStatus, Reason, Status

#: ``envdoctor exec``: the environment failed its preflight, the command was not started.
EXIT_PREFLIGHT = 78
#: The shell's codes for a command that cannot be started: not found, not executable.
EXIT_NOT_FOUND, EXIT_NOT_EXECUTABLE = 127, 126
EXPECT_ID = "expect-gpus"


def visible_gpus(facts: Facts) -> tuple[int | None, str]:
    """How many GPUs a CUDA program here would see, and from which fact: ``cuDeviceGetCount``
    (honours CUDA_VISIBLE_DEVICES), else the CUDA ordinals matched to NVML, else NVML's count."""
    from .views import VisibleDevices, gpus

    count = facts.value("cuda.device_count")
    if isinstance(count, int) and not isinstance(count, bool):
        return count, "cuDeviceGetCount"
    mapped = VisibleDevices.from_facts(facts)
    if mapped.mapped:
        return len(mapped.devices), "CUDA_VISIBLE_DEVICES over NVML"
    reading = facts.get("nvml.gpus")
    if reading.ok:
        return len(gpus(facts)), "NVML"
    if reading.reason is Reason.ABSENT:  # no NVIDIA driver or library at all: none visible, for sure
        return 0, f"NVML ({reading.describe()})"
    return None, reading.describe()


def expect_gpus(facts: Facts, expected: int) -> Finding:
    """``--expect-gpus N``: fewer visible GPUs than N is a failure (a node that lost a GPU, a pod
    scheduled without its GPU request, CUDA_VISIBLE_DEVICES hiding them)."""
    count, how = visible_gpus(facts)
    evidence = {"expected": expected, "visible": count, "counted by": how}
    if count is None and expected > 0:
        return Finding(EXPECT_ID, Status.FAIL, f"No GPU could be counted; {expected} expected",
                       detail=f"The GPUs could not be read ({how}).", evidence=evidence)
    if count is not None and count < expected:
        return Finding(EXPECT_ID, Status.FAIL, f"{count} GPU(s) visible, {expected} expected",
                       detail=f"{count} visible ({how}), fewer than --expect-gpus {expected}: a GPU is missing from "
                              "this node or this container, or CUDA_VISIBLE_DEVICES hides it.", evidence=evidence)
    return Finding(EXPECT_ID, Status.OK, f"{count if count is not None else 'Any number of'} GPU(s) visible "
                   f"({expected} expected)", evidence=evidence)


def fast_options(specs: Sequence[Any], budget: float, python: str | None, micro: bool) -> Any:
    """The healthcheck's probe options under ``budget`` seconds: each probe gets most of it for its own
    deadline, so a hang is reported by the probe (with the stage it hung in) before the budget runs out."""
    from .probes import Options

    scale = max((s.scale for s in specs if not s.micro), default=1.0)
    return Options(timeout=max(0.1, min(5.0, budget * 0.8 / scale)), python=python, micro=micro, device=None,
                   healthcheck=True)


def fast_checks(micro: bool) -> list[Any]:
    """The healthcheck's checks, from its own built-in modules (and the plugins') only; raises
    RegistryError. A microcheck in the healthcheck subset runs only with ``micro``."""
    from .checks import HEALTHCHECK
    from .diagnose import select
    from .registry import load_registry

    registry = load_registry(builtin=HEALTHCHECK + (("micro",) if micro else ()))
    checks = [s for s in select(registry, healthcheck=True)[0] if not s.micro]
    if micro:
        checks += [s for s in registry if s.micro and s.healthcheck]
    return checks


def fast_probes(micro: bool, budget: float, python: str | None = None) -> tuple[threading.Thread, dict[str, Any]]:
    """The healthcheck's probes started in a thread (joined by the caller, who loads the checks
    meanwhile); the dict gets ``facts`` and ``runs``. Not niced: on a busy node the probes are all
    a healthcheck does, and niced they missed its budget."""
    from .host import Host
    from .probes import healthcheck_probes, run_probes

    specs = healthcheck_probes(micro)
    options = fast_options(specs, budget, python, micro)
    probed: dict[str, Any] = {}

    def work() -> None:
        probed["facts"], probed["runs"] = run_probes(Host(python=options.python), options, specs, budget=budget,
                                                     background_nice=0)

    worker = threading.Thread(target=work, name="probes", daemon=True)
    worker.start()
    return worker, probed


def fast_findings(micro: bool, expected: int | None, budget: float, python: str | None = None) -> tuple[Any, list[str]]:
    """The healthcheck's probes and checks (with ``micro`` its device-touch microcheck too) under
    ``budget`` seconds: (Report, names of probes that hung)."""
    from .diagnose import diagnose
    from .report import Report

    worker, probed = fast_probes(micro, budget, python)
    checks = fast_checks(micro)  # loaded while the children run
    lifecycle.join(worker)
    facts, runs = probed["facts"], probed["runs"]
    findings = diagnose(facts, checks)
    if expected is not None:
        findings.append(expect_gpus(facts, expected))
    hung = [r.name for r in runs if r.status is ProbeStatus.TIMEOUT]
    return Report(facts=facts, findings=tuple(findings), probes=tuple(runs)), hung


def failing(findings: Sequence[Finding], fail_on: str) -> list[Finding]:
    """What stops the command: failures and envdoctor's own errors (a hung probe is a wedged
    driver), and with ``--fail-on warn`` warnings too."""
    bad = {Status.FAIL, Status.ERROR} | ({Status.WARN} if fail_on == "warn" else set())
    return [f for f in findings if f.status in bad]


def _leave(line: str, code: int) -> NoReturn:
    """One line on stderr and exit ``code`` at once (the probe children ended first)."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - nowhere left to say it; the code still tells
        pass
    lifecycle.finish(code)


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
    try:
        os.execvp(command[0], list(command))
    except FileNotFoundError:
        _leave(f"envdoctor exec: {command[0]}: command not found", EXIT_NOT_FOUND)
    except PermissionError:
        _leave(f"envdoctor exec: {command[0]}: permission denied", EXIT_NOT_EXECUTABLE)
    except OSError as exc:
        _leave(f"envdoctor exec: {command[0]}: {exc.strerror or exc}", EXIT_NOT_EXECUTABLE)
    raise AssertionError("unreachable")  # pragma: no cover - execvp returns only by raising


def preflight(command: Sequence[str], fail_on: str, micro: bool, expected: int | None, budget: float) -> NoReturn:
    """``envdoctor exec``: judge, print the findings to stderr, then become ``command`` or exit
    :data:`EXIT_PREFLIGHT`."""
    from .redact import redact_text
    from .render import make_console, render_terminal

    began = time.monotonic()
    decided = threading.Event()

    def watchdog() -> None:
        # The hard budget, as healthcheck's: whatever is stuck (a D-state child, a wedged thread), we answer.
        if not decided.wait(budget + 1.0):
            _leave(f"envdoctor exec: preflight exceeded its --max-seconds {budget:g} budget; not starting "
                   f"{redact_text(command[0])} (exit {EXIT_PREFLIGHT})", EXIT_PREFLIGHT)

    threading.Thread(target=watchdog, daemon=True).start()
    python = None
    if micro:  # the microcheck imports torch: in the training interpreter, found as `check` finds it
        from .host import Host
        from .target import TargetError, choose

        try:
            python = choose(Host(), None, os.getcwd()).path
        except TargetError as exc:
            _leave(f"envdoctor exec: {exc}", 2)
    report, hung = fast_findings(micro, expected, budget, python)
    decided.set()
    bad = failing(report.findings, fail_on)
    render_terminal(report, make_console(stderr=True))
    seconds = time.monotonic() - began
    if bad or hung:
        names = [f"probe {h} hung" for h in hung] + list(dict.fromkeys(f.id for f in bad))
        _leave(redact_text(f"envdoctor exec: preflight failed in {seconds:.1f}s ({', '.join(names)}); "
                           f"not starting {command[0]} (exit {EXIT_PREFLIGHT})"), EXIT_PREFLIGHT)
    print(f"envdoctor exec: preflight passed in {seconds:.1f}s; starting {redact_text(command[0])}", file=sys.stderr)
    become(command)
