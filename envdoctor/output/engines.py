"""The fleet's own engines: one verdict from the Report the pipeline built (``pipeline/judge.py``),
written in each engine's contract. The checks decide; nothing here judges a fact again.

- **Prometheus**, node_exporter's textfile collector: a ``*.prom`` file in the text exposition
  format, written to a temporary file in the same folder and renamed ("To atomically push …
  ``mv``", and "**Note:** Timestamps are not supported": node_exporter README, "Textfile
  Collector"; https://github.com/prometheus/node_exporter#textfile-collector). Names, HELP/TYPE
  lines and label escaping follow https://prometheus.io/docs/instrumenting/exposition_formats/
  (label values escape ``\\``, ``"`` and newline; HELP escapes ``\\`` and newline) and the naming
  guide https://prometheus.io/docs/practices/naming/ (one ``envdoctor_`` prefix, base units in
  the name: ``_seconds``, ``_timestamp_seconds``; ``_info`` for a constant 1 carrying labels).
- **Kubernetes node-problem-detector**, custom plugin monitor: exit 0 OK, 1 NonOK, anything else
  Unknown (``pkg/custompluginmonitor/types/types.go`` ``OK/NonOK/Unknown``;
  ``pkg/custompluginmonitor/plugin/plugin.go`` maps the exit status and cuts the trimmed stdout
  at ``max_output_length``, 80 by default in ``types/config.go``, which also sets the plugin
  ``timeout`` default of 5s). So the answer is one line, at most 80 bytes, naming the cause
  without counts or times (the condition's message changes only when the cause does).
- **Node Feature Discovery**, the ``local`` source's feature files: ``<key>[=<value>]`` lines,
  ``#`` comments, ``# +expiry-time=<RFC 3339>`` after which the lines are ignored, at most 65,536
  bytes, dot files ignored so a writer writes ``.name`` and renames it
  (``source/local/local.go`` ``MaxFeatureFileSize``, ``DirectivePrefix``; NFD
  ``docs/usage/customization-guide.md`` "Local feature source"). Labels carry the
  ``feature.node.kubernetes.io/`` namespace (unprefixed names are deprecated there; the
  kubernetes.io namespace is denied except this one) and Kubernetes label syntax (name part
  ≤ 63 of ``[A-Za-z0-9._-]`` starting and ending alphanumeric; value ≤ 63, the same or empty:
  https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set).

Only the standard library, the model and the exit codes are imported: the healthcheck's watchdog writes an
"unknown" verdict through this module when the probes overrun.
"""

from __future__ import annotations

import enum
import os
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from envdoctor import __version__
from envdoctor.model import Finding, Status
from envdoctor.process.lifecycle import NpdExit
from envdoctor.redact import redact_text

if TYPE_CHECKING:
    from envdoctor.report import Report


class State(str, enum.Enum):
    HEALTHY = "healthy"
    PROBLEM = "problem"  # a check failed
    UNKNOWN = "unknown"  # a probe hung, a check crashed, the run overran or nothing was judged


#: NPD cuts the plugin's trimmed stdout at ``max_output_length`` (80 by default).
NPD_MAX_BYTES = 80
#: The most series one textfile holds (an 8-GPU node with every check listed fits well below).
MAX_SERIES = 50
#: NFD ignores a feature file larger than this (``source/local/local.go`` ``MaxFeatureFileSize``).
NFD_MAX_BYTES = 65536
NFD_PREFIX = "feature.node.kubernetes.io/"
NFD_FILE = "envdoctor"  # the file name when --nfd-features names a folder


@dataclass(frozen=True)
class Verdict:
    """One verdict for every engine: the state and its stable cause (check ids or probe names)."""

    state: State
    failing: tuple[str, ...] = ()  # ids of the checks that failed, sorted
    errors: tuple[str, ...] = ()  # ids of the checks that crashed or whose probe failed, sorted
    hung: tuple[str, ...] = ()  # probes that never answered, sorted
    why: str = ""  # for an unknown verdict without a finding: what could not run
    findings: tuple[Finding, ...] = field(default=(), repr=False, compare=False)

    @property
    def healthy(self) -> bool:
        return self.state is State.HEALTHY


def verdict(findings: Iterable[Finding], hung: Iterable[str] = ()) -> Verdict:
    """The verdict of a judged run. A hang or a check error is unknown (never healthy); a failure is
    a problem; healthy needs no failure and at least one check that judged facts it read (ok or warn; a
    run where every check skipped judged nothing: unknown)."""
    found = tuple(findings)
    hung_ = tuple(sorted(set(hung)))
    failing = tuple(sorted({f.id for f in found if f.status is Status.FAIL}))
    errors = tuple(sorted({f.id for f in found if f.status is Status.ERROR}))
    if hung_ or errors:
        return Verdict(State.UNKNOWN, failing, errors, hung_, findings=found)
    if failing:
        return Verdict(State.PROBLEM, failing, findings=found)
    if not any(f.status in (Status.OK, Status.WARN) for f in found):  # a warning judged read facts too
        return Verdict(State.UNKNOWN, why="no check could judge this node", findings=found)
    return Verdict(State.HEALTHY, findings=found)


def unknown(why: str) -> Verdict:
    """The verdict when envdoctor could not finish (its time budget, a registry that cannot load)."""
    return Verdict(State.UNKNOWN, why=why)


# -- node-problem-detector -------------------------------------------------------------------------
def npd_exit(v: Verdict) -> NpdExit:
    return {State.HEALTHY: NpdExit.OK, State.PROBLEM: NpdExit.NON_OK}.get(v.state, NpdExit.UNKNOWN)


def _fit(head: str, items: Sequence[str], limit: int = NPD_MAX_BYTES) -> str:
    """``head`` and as many of ``items`` as fit in ``limit`` bytes, then ``,…more`` (no count:
    the same cause gives the same line)."""
    line = head
    for i, item in enumerate(items):
        sep = "" if i == 0 else ","
        rest = len(items) - i - 1
        candidate = line + sep + item
        if len((candidate + (",+more" if rest else "")).encode()) <= limit:
            line = candidate
            continue
        return line + ("+more" if i == 0 else ",+more")
    return line


def npd_line(v: Verdict) -> str:
    """The first (and only) stdout line of the NPD plugin: ≤ 80 bytes, the same for the same cause."""
    if v.state is State.HEALTHY:
        return "envdoctor: healthy"
    if v.state is State.PROBLEM:
        return _fit("envdoctor: failed: ", v.failing)
    if v.hung:
        return _fit("envdoctor: unknown: probe hung: ", v.hung)
    if v.errors:
        return _fit("envdoctor: unknown: check error: ", v.errors)
    return _fit("envdoctor: unknown: ", [redact_text(v.why)[:60] or "could not run"])


# -- Prometheus textfile -----------------------------------------------------------------------------
_HELP = {
    "envdoctor_info": "envdoctor's version (constant 1).",
    "envdoctor_up": "1 when every probe answered and every check ran; 0 when the verdict is unknown.",
    "envdoctor_healthy": "1 when no check failed and the node was judged healthy; else 0.",
    "envdoctor_last_run_timestamp_seconds": "When this run of envdoctor finished (Unix time).",
    "envdoctor_run_duration_seconds": "How long this run of envdoctor took.",
    "envdoctor_findings": "Findings of this run by status.",
    "envdoctor_probe_hung": "A probe that did not answer within the run's budget (constant 1).",
    "envdoctor_check_status": "A check's status on this node (constant 1; the status is the label).",
    "envdoctor_gpu_check_status": "A check's status for one GPU (constant 1; the status is the label).",
    "envdoctor_gpu_info": "A GPU NVML listed (constant 1).",
}
_STATUS_ORDER = (Status.FAIL, Status.ERROR, Status.WARN, Status.OK, Status.SKIP)


def label_value(value: Any) -> str:
    """A label value escaped for the text format (backslash, double quote, newline), redacted."""
    text = redact_text(str(value))
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _series(metric: str, value: float, /, **labels: Any) -> tuple[str, str]:
    body = ",".join(f'{k}="{label_value(v)}"' for k, v in labels.items())
    number = repr(float(value)) if isinstance(value, float) and not float(value).is_integer() else str(int(value))
    return metric, f"{metric}{{{body}}} {number}" if body else f"{metric} {number}"


def _gpu_labels(report: Report | None) -> dict[int, tuple[str, str]]:
    """NVML index -> (uuid, name), from the report's facts (views: the one typed read)."""
    if report is None:
        return {}
    from envdoctor import views

    out: dict[int, tuple[str, str]] = {}
    for g in views.gpus(report.facts):
        index = g.index if g.index is not None else g.position
        out[index] = (g.uuid or "", g.name or "")
    return out


def prometheus_text(v: Verdict, report: Report | None, *, command: str, finished: float, seconds: float,
                    failures_only: bool = False, limit: int = MAX_SERIES) -> str:
    """The textfile for one run: at most ``limit`` series, the summary gauges first, then failures,
    then (unless ``failures_only``) the counts, warnings, GPUs and passing checks. No timestamps."""
    gpus = _gpu_labels(report)
    must: list[tuple[str, str]] = [
        _series("envdoctor_info", 1, command=command, version=__version__),
        _series("envdoctor_up", 0 if v.state is State.UNKNOWN else 1, command=command),
        _series("envdoctor_healthy", 1 if v.healthy else 0, command=command),
        _series("envdoctor_last_run_timestamp_seconds", round(finished, 3), command=command),
        _series("envdoctor_run_duration_seconds", round(seconds, 3), command=command),
    ]
    must += [_series("envdoctor_probe_hung", 1, command=command, probe=p) for p in v.hung]

    def of(f: Finding) -> list[tuple[str, str]]:
        if f.gpus and f.status is not Status.OK:
            return [_series("envdoctor_gpu_check_status", 1, command=command, check=f.id, status=f.status.value,
                            gpu=i, uuid=gpus.get(i, ("", ""))[0]) for i in f.gpus]
        return [_series("envdoctor_check_status", 1, command=command, check=f.id, status=f.status.value)]

    ordered = sorted((f for f in v.findings if f.status is not Status.SKIP),
                     key=lambda f: (_STATUS_ORDER.index(f.status), f.id))
    bad = [s for f in ordered if f.status in (Status.FAIL, Status.ERROR) for s in of(f)]
    rest: list[tuple[str, str]] = []
    if not failures_only:
        counts = {s: 0 for s in _STATUS_ORDER}
        for f in v.findings:
            counts[f.status] += 1
        rest += [_series("envdoctor_findings", n, command=command, status=s.value) for s, n in counts.items()]
        rest += [s for f in ordered if f.status is Status.WARN for s in of(f)]
        rest += [_series("envdoctor_gpu_info", 1, command=command, gpu=i, uuid=u, name=n)
                 for i, (u, n) in sorted(gpus.items())]
        rest += [s for f in ordered if f.status is Status.OK for s in of(f)]
    kept = (must + bad + rest)[:max(limit, len(must))]
    lines: list[str] = []
    for name in _HELP:  # one block per family, HELP and TYPE first (the text format's grouping)
        family = [text for n, text in kept if n == name]
        if family:
            lines += [f"# HELP {name} {_HELP[name]}", f"# TYPE {name} gauge", *family]
    return "\n".join(lines) + "\n"


def _write_replace(path: str, text: str) -> None:
    """The one atomic writer (:func:`envdoctor.report.write_atomic`: a dot-named temporary file in the same
    folder, within NAME_MAX whatever the target's name, renamed over ``path``), readable by the engine's
    user (0644). node_exporter reads only ``*.prom`` and NFD skips dot files: neither sees the temporary."""
    from envdoctor.report import write_atomic

    write_atomic(path, text, mode=0o644)

def write_prometheus(path: str, text: str) -> None:
    """The temporary name starts with a dot and ends ``.tmp``: node_exporter reads only ``*.prom``."""
    _write_replace(path, text)


# -- Node Feature Discovery ----------------------------------------------------------------------------
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?")


def valid_label(name: str, value: str) -> bool:
    """Kubernetes label syntax for a name in the ``feature.node.kubernetes.io`` namespace."""
    return _LABEL_NAME.fullmatch(name) is not None and _LABEL_VALUE.fullmatch(value) is not None


def nfd_labels(v: Verdict, report: Report | None) -> dict[str, str]:
    """The node's labels (names without the namespace): its state, the failing checks, and what the
    facts say about torch and the GPUs where they were read. A label whose value is not valid label
    syntax is left out, never mangled into another value."""
    labels = {"envdoctor.healthy": "true" if v.healthy else "false", "envdoctor.state": v.state.value}
    for check_id in v.failing:
        labels[f"envdoctor.fail.{check_id}"] = "true"
    if report is not None:
        from envdoctor import views

        facts = report.facts
        if variant := views.torch_variant(facts):
            labels["envdoctor.torch-variant"] = variant
        arch = next((f for f in v.findings if f.id == "torch-arch-support"), None)
        if arch is not None and arch.status in (Status.OK, Status.FAIL):
            labels["envdoctor.torch-arch-supported"] = "true" if arch.status is Status.OK else "false"
        found = views.gpus(facts)
        if facts.get("nvml.gpus").ok:
            labels["envdoctor.gpu-count"] = str(len(found))
        from envdoctor.knowledge import versions

        ccs = sorted({g.compute_capability for g in found if g.compute_capability})
        if len(ccs) == 1:
            labels["envdoctor.gpu-compute-capability"] = versions.cc_text(ccs[0])
        if (cuda := views.driver_cuda(facts)) is not None:
            labels["envdoctor.driver-cuda"] = versions.cuda_from_int(cuda)
    return {k: str(val) for k, val in labels.items() if valid_label(k, str(val))}


def nfd_text(v: Verdict, report: Report | None, *, now: datetime | None = None,
             expires_in: float = 900.0) -> str:
    """The feature file: a comment, the expiry directive, then ``namespace/name=value`` lines (kept
    under NFD's size limit)."""
    now = now or datetime.now(timezone.utc)
    expiry = (now + timedelta(seconds=expires_in)).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    head = [f"# envdoctor {__version__}: written {now.astimezone(timezone.utc):%Y-%m-%dT%H:%M:%SZ}",
            f"# +expiry-time={expiry}"]
    text = "\n".join(head) + "\n"
    for name, value in sorted(nfd_labels(v, report).items()):
        line = f"{NFD_PREFIX}{name}={value}\n"
        if len((text + line).encode()) > NFD_MAX_BYTES:
            break
        text += line
    return text


def nfd_path(given: str) -> str:
    """``--nfd-features``: a folder (features.d) gets the file ``envdoctor`` in it; else the file."""
    return os.path.join(given, NFD_FILE) if os.path.isdir(given) else given


def write_nfd(path: str, text: str) -> None:
    """Written as a dot file (NFD ignores those) and renamed into place."""
    _write_replace(path, text)


# -- all of them ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Targets:
    """Where one run's verdict is also written (the command-line options)."""

    prometheus: str | None = None
    failures_only: bool = False
    nfd: str | None = None
    nfd_expiry: float = 900.0

    def __bool__(self) -> bool:
        return bool(self.prometheus or self.nfd)


def target_problem(targets: Targets) -> str | None:
    """Why a target cannot be written (checked before any probing), or None."""
    paths: list[tuple[str, str]] = []
    if targets.prometheus:
        if not targets.prometheus.endswith(".prom"):
            return f"--prometheus-textfile {targets.prometheus}: the name must end in .prom (node_exporter " \
                   "reads only *.prom)"
        paths.append(("--prometheus-textfile", targets.prometheus))
    if targets.nfd:
        path = nfd_path(targets.nfd)
        if os.path.basename(path).startswith("."):
            return f"--nfd-features {targets.nfd}: NFD ignores a file whose name starts with a dot"
        paths.append(("--nfd-features", path))
    for option, path in paths:
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            return f"{option} {path}: the folder {folder} does not exist"
        if not os.access(folder, os.W_OK | os.X_OK):
            return f"{option} {path}: the folder {folder} is not writable"
        if os.path.isdir(path):
            return f"{option} {path}: is a folder"
    return None


def publish(targets: Targets, v: Verdict, report: Report | None, *, command: str, seconds: float) -> list[str]:
    """Write every target; the problems (one line each) of those that could not be written. Never
    raises: the verdict's exit code is the answer whatever happens to a file."""
    problems: list[str] = []
    finished = time.time()
    if targets.prometheus:
        try:
            write_prometheus(targets.prometheus, prometheus_text(v, report, command=command, finished=finished,
                                                                 seconds=seconds,
                                                                 failures_only=targets.failures_only))
        except OSError as exc:
            problems.append(f"cannot write {targets.prometheus}: {exc.strerror or exc}")
        except Exception as exc:  # noqa: BLE001 - a bug here must not take the verdict with it
            problems.append(f"envdoctor could not write {targets.prometheus} ({type(exc).__name__}: {exc})")
    if targets.nfd:
        path = nfd_path(targets.nfd)
        try:
            write_nfd(path, nfd_text(v, report, expires_in=targets.nfd_expiry))
        except OSError as exc:
            problems.append(f"cannot write {path}: {exc.strerror or exc}")
        except Exception as exc:  # noqa: BLE001
            problems.append(f"envdoctor could not write {path} ({type(exc).__name__}: {exc})")
    return [redact_text(p) for p in problems]


def targets_of(plan: Any) -> Targets:
    """The targets a :class:`~envdoctor.pipeline.plan.Plan` names."""
    return Targets(prometheus=plan.prometheus_textfile, failures_only=plan.prometheus_failures_only,
                   nfd=plan.nfd_features, nfd_expiry=plan.nfd_expiry)


def hung_probes(report: Report) -> list[str]:
    """The probes of ``report`` that never answered (the fast path returns the same list)."""
    from envdoctor.model import ProbeStatus

    return [r.name for r in report.probes if r.status is ProbeStatus.TIMEOUT]


def finish(plan: Any, report: Report | None, hung: Iterable[str], seconds: float,
           why: str = "") -> tuple[Verdict, list[str]]:
    """The run's verdict (``why``: it could not finish, there is no report) written to every target
    ``plan`` names; (the verdict, problems writing it)."""
    v = unknown(why) if report is None else verdict(report.findings, hung)
    targets = targets_of(plan)
    problems = publish(targets, v, report, command=plan.command, seconds=seconds) if targets else []
    return v, problems
