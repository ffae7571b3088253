"""``envdoctor healthcheck --slurm``: the healthcheck's verdict, acted on as a Slurm HealthCheckProgram.

Slurm's contract (slurm.conf(5), Slurm 22.05, "HealthCheckProgram"; https://slurm.schedmd.com/slurm.conf.html):
the program runs as root on every compute node that is not NOT_RESPONDING, every HealthCheckInterval
seconds (and once when slurmd starts), on the node states HealthCheckNodeState names; its environment
holds only ``SLURMD_NODENAME`` (no PATH: seen on slurmd 22.05); Slurm ignores its exit code and output:
"Any action to be taken must be explicitly performed by the program (e.g. execute "scontrol update
NodeName=foo State=drain Reason=tmp_file_system_full" to drain a node)"; it "will be killed if it does
not terminate normally within 60 seconds".

Ownership of a drain is its reason's first word, as LBNL NHC does (helpers/node-mark-offline and
node-mark-online in https://github.com/mej/nhc: the leader ``NHC:``; a node offline for another
reason is never onlined, and that reason is never overwritten). Here the leader is ``envdoctor:``:

* unhealthy (a check failed, or a driver probe hung: a wedged driver) -> drain the node with
  ``envdoctor: <check id>: <short cause>`` unless someone else drained it (then left alone); exit 1;
* healthy -> resume the node when, and only when, its drain reason starts ``envdoctor:``; exit 0;
* envdoctor could not judge (a probe crashed or could not run, a missing tool, scontrol absent or
  failing, the budget overrun) -> one ``error:`` line, exit 3, the node untouched: a node is never
  drained because envdoctor could not look.

The whole run is bounded by :data:`HARD_SECONDS` (< Slurm's 60 s).
"""

from __future__ import annotations

import os
import re
import socket
import threading
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from envdoctor.model import Finding, Status
from envdoctor.process import lifecycle
from envdoctor.process.lifecycle import ExitCode
from envdoctor.record import Record

#: The first word of every drain reason envdoctor writes: whoever's reason starts otherwise owns the drain.
PREFIX = "envdoctor:"
#: A reason longer than this is cut (``sinfo -R`` shows reasons in one line; Slurm keeps them whole).
REASON_LIMIT = 160
#: Each scontrol call (a show, then at most one update) is abandoned after this.
SCONTROL_SECONDS = 5.0
#: Slurm kills a HealthCheckProgram after 60 s; envdoctor answers (error, node untouched) before.
HARD_SECONDS = 55.0
#: The largest --max-seconds the Slurm mode takes: the probes' budget + two scontrol calls < HARD_SECONDS.
MAX_BUDGET = HARD_SECONDS - 2 * SCONTROL_SECONDS - 1.0
#: Where scontrol is looked for when there is no PATH at all (slurmd gives its programs none).
SLURM_BIN_DIRS = ("/usr/bin", "/usr/local/bin", "/opt/slurm/bin", "/usr/sbin", "/usr/local/sbin")

#: The probes whose hang is the driver's (NVML, cuInit, the driver's own files: envdoctor/probes/nvidia.py):
#: a wedged driver drains the node; any other probe's hang is envdoctor not knowing.
DRIVER_PROBES = frozenset({"nvml", "cuda-driver", "nvml+cuda-driver", "driver"})

UNHEALTHY = "unhealthy"
HEALTHY = "healthy"
ERROR = "error"


class Verdict(Record):
    """What the checks said: ``kind`` is healthy, unhealthy or error; ``check`` and ``cause`` name the
    first failing (or, for an error, the first erroring) check; ``more`` counts the others."""

    kind: str
    check: str = ""
    cause: str = ""
    more: int = 0


class NodeState(Record):
    """A node as ``scontrol show node`` reports it: its State (``IDLE+DRAIN``), whether the DRAIN flag is
    set, and its Reason without the ``[user@time]`` Slurm appends ("" when none)."""

    state: str
    drained: bool
    reason: str


def verdict(findings: Iterable[Finding], hung: Iterable[str]) -> Verdict:
    """The healthcheck's verdict (:func:`envdoctor.output.engines.verdict`, the one every protocol answers
    from) sorted into what may drain a node: a failure or a hung probe (a wedged driver) is unhealthy; an
    error, or a run in which no check could judge the node, is envdoctor not knowing (never a drain, never
    a resume)."""
    from envdoctor.output.engines import State
    from envdoctor.output.engines import verdict as judged

    v = judged(findings, hung)
    fails = [f for f in v.findings if f.status is Status.FAIL]
    if fails:
        return Verdict(UNHEALTHY, fails[0].id, fails[0].title, len(fails) - 1 + len(v.hung))
    wedged = [h for h in v.hung if h in DRIVER_PROBES]
    if wedged:
        return Verdict(UNHEALTHY, "probe-hung", f"the {wedged[0]} probe did not answer (a wedged driver)",
                       len(v.hung) - 1)
    if v.hung:  # another probe (the host's, the visibility's, --micro's torch): envdoctor could not look
        return Verdict(ERROR, "probe-hung", f"the {v.hung[0]} probe did not answer", len(v.hung) - 1)
    errors = [f for f in v.findings if f.status is Status.ERROR]
    if errors:
        # The error that says what to do first (nvml-init: "NVML crashed the process that loaded it"),
        # ahead of the checks that could not judge because of it.
        first = sorted(errors, key=lambda e: not (e.remediation.text or e.remediation.commands))[0]
        return Verdict(ERROR, first.id, first.title, len(errors) - 1)
    if v.state is State.HEALTHY:
        return Verdict(HEALTHY)
    return Verdict(ERROR, "no-verdict", v.why or "no check could judge this node")


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]+")


def drain_reason(v: Verdict) -> str:
    """``envdoctor: <check id>: <short cause>`` (``(+N more)`` when others failed too), one printable,
    redacted line of at most :data:`REASON_LIMIT` characters."""
    from envdoctor.redact import redact_text

    more = f" (+{v.more} more)" if v.more else ""
    head = f"{PREFIX} {v.check}: "
    room = REASON_LIMIT - len(head) - len(more)
    # Every user reads a reason (sinfo -R): redacted, as every output is.
    cause = _UNPRINTABLE.sub(" ", redact_text(v.cause)).strip()
    if len(cause) > room:
        cause = cause[: max(room - 1, 0)].rstrip() + "…"
    return head + cause + more


def owned(reason: str) -> bool:
    """Whether a drain reason is envdoctor's (its first word is :data:`PREFIX`)."""
    return reason.strip().startswith(PREFIX)


def node_name(environ: Mapping[str, str]) -> str:
    """The node's Slurm name: ``SLURMD_NODENAME`` (slurmd sets it for the HealthCheckProgram, prolog and
    epilog), else the short host name (NHC's default, ``hostname -s``)."""
    given = environ.get("SLURMD_NODENAME", "").strip()
    return given or socket.gethostname().split(".")[0]


_REASON_STAMP = re.compile(r"\s*\[[^\[\]]*@[^\[\]]*\]\s*$")


def parse_show_node(text: str) -> NodeState | None:
    """The State and Reason of ``scontrol show node NAME``'s output, or None when it has no State.
    ``Reason=`` runs to the end of its line (it may hold spaces and ``=``); Slurm ends it with
    ``[user@time]``, which is dropped."""
    state = reason = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Reason="):
            reason = _REASON_STAMP.sub("", stripped[len("Reason="):]).strip()
        elif state is None:
            m = re.search(r"(?:^|\s)State=(\S+)", stripped)
            if m:
                state = m.group(1)
    if state is None:
        return None
    flags = state.upper().split("+")
    drained = "DRAIN" in flags or state.upper().startswith("DRAIN")
    return NodeState(state, drained, reason or "")


def _scontrol(host: Any, environ: Mapping[str, str]) -> str | None:
    """scontrol on PATH; with no PATH at all (slurmd's environment), in :data:`SLURM_BIN_DIRS`."""
    if "PATH" in environ:
        found = host.which("scontrol")
        return str(found) if found else None
    for folder in SLURM_BIN_DIRS:
        path = os.path.join(folder, "scontrol")
        if os.access(path, os.X_OK):
            return path
    return None


def _run_scontrol(host: Any, scontrol: str, args: list[str]) -> tuple[bool, str]:
    """(ok, stdout or why) of ``scontrol ARGS`` under :data:`SCONTROL_SECONDS`."""
    result = host.run([scontrol, *args], timeout=SCONTROL_SECONDS)
    if result.ok:
        return True, result.stdout
    why = (result.stderr.strip().splitlines() or [result.detail or result.status])[-1]
    if result.status == "ok":
        why = f"exit {result.returncode}: {why}"
    return False, f"scontrol {' '.join(args[:2])} failed ({why})"


def act(v: Verdict, host: Any, environ: Mapping[str, str], began: float) -> tuple[str, int]:
    """Apply ``v`` to this node through scontrol: (the one line to print, the exit code). ``began`` is
    the run's start (time.monotonic): each line gives the seconds from it to the answer."""
    import time

    from envdoctor.output.render import safe

    node = node_name(environ)

    def took() -> str:
        return f"({time.monotonic() - began:.2f}s)"
    if v.kind == ERROR:
        more = f" (+{v.more} more)" if v.more else ""
        return safe(f"error {took()}: envdoctor could not judge {node}: {v.check}: {v.cause}{more}; "
                    "node left as it is"), ExitCode.INCOMPLETE
    scontrol = _scontrol(host, environ)
    if scontrol is None:
        return (f"error {took()}: scontrol not found on PATH: "
                f"{v.kind}, node {node} left as it is"), ExitCode.INCOMPLETE
    ok, shown = _run_scontrol(host, scontrol, ["show", "node", node])
    current = parse_show_node(shown) if ok else None
    if current is None:
        why = shown if not ok else f"scontrol show node {node} printed no State"
        return safe(f"error {took()}: {why}: {v.kind}, node {node} left as it is"), ExitCode.INCOMPLETE
    theirs = current.drained and not owned(current.reason)
    if v.kind == HEALTHY:
        if current.drained and owned(current.reason):
            ok, why = _run_scontrol(host, scontrol, ["update", f"nodename={node}", "state=resume"])
            if not ok:
                return safe(f"error {took()}: healthy, but {why}: {node} stays drained"), ExitCode.INCOMPLETE
            return safe(f"healthy {took()}: resumed {node} (it was drained for \"{current.reason}\")"), ExitCode.OK
        if theirs:
            return safe(f"healthy {took()}: {node} is drained by someone else (\"{current.reason}\"): "
                        "left alone"), ExitCode.OK
        return f"healthy {took()}", ExitCode.OK
    reason = drain_reason(v)
    if theirs:
        return safe(f"unhealthy {took()}: {reason[len(PREFIX):].strip()}; {node} is already drained by someone else "
                    f"(\"{current.reason}\"): left alone"), ExitCode.FAIL
    if current.drained and current.reason == reason:
        return safe(f"unhealthy {took()}: {node} stays drained: {reason}"), ExitCode.FAIL
    ok, why = _run_scontrol(host, scontrol, ["update", f"nodename={node}", "state=drain", f"reason={reason}"])
    if not ok:
        return safe(f"error {took()}: unhealthy, but {why}: {reason}"), ExitCode.INCOMPLETE
    return safe(f"unhealthy {took()}: drained {node}: {reason}"), ExitCode.FAIL


def hard_deadline(began: float) -> None:
    """Answer (an error, the node untouched) and exit when :data:`HARD_SECONDS` have passed since
    ``began`` (time.monotonic), whatever is still running: Slurm would kill the program at 60 s."""
    import time

    def expire() -> NoReturn:
        lifecycle.answer(f"error ({HARD_SECONDS:.0f}s): envdoctor did not finish within {HARD_SECONDS:.0f} s; "
                         "node left as it is", ExitCode.INCOMPLETE)

    timer = threading.Timer(max(HARD_SECONDS - (time.monotonic() - began), 0.0), expire)
    timer.daemon = True
    timer.start()


def overrun_line(max_seconds: float) -> str:
    """The answer when the healthcheck's own --max-seconds budget ran out before a verdict."""
    return (f"error ({max_seconds:.2f}s): envdoctor exceeded its --max-seconds budget before a verdict; "
            "node left as it is")
