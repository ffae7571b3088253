"""The command line: each command is a declaration: options -> :class:`~.pipeline.plan.Plan` ->
the pipeline (collect -> judge) -> a renderer -> an exit code (:class:`~.lifecycle.ExitCode`).

No probing or judging logic lives here. Startup order matters for speed: the probes (above all
the torch child, the slowest part of every run) start before rich and the checks are imported,
so that work overlaps the child's ``import torch`` (:mod:`envdoctor.pipeline.collect`).

Exit codes: 0 no failure, 1 at least one failure (or warning with ``--fail-on warn``),
2 usage error or unusable input, 3 envdoctor could not complete (a probe hung, a check crashed).
Every usage error is one line, ``envdoctor: error: …``, click's and ours alike.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

import click

from envdoctor import __version__
from envdoctor.pipeline.plan import Plan
from envdoctor.process import lifecycle
from envdoctor.process.lifecycle import ExitCode
from envdoctor.redact import redact_text, redact_tree

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class InputError(click.ClickException):
    """Unusable input or output path: exit 2, one line."""

    exit_code = ExitCode.USAGE


class Incomplete(click.ClickException):
    """envdoctor itself cannot run as configured (e.g. two plugins claim one check id): exit 3."""

    exit_code = ExitCode.INCOMPLETE


def error_line(message: str, ctx: click.Context | None = None) -> str:
    """The one format of every usage error and unusable input: one line, ``envdoctor: error: …``;
    click's own usage errors name the command's help."""
    hint = f" (`{ctx.command_path} -h` lists the options)" if ctx is not None else ""
    from envdoctor.inputs import shown_name  # a file name's ESC/BEL never reaches the terminal raw

    return f"envdoctor: error: {shown_name(redact_text(message))}{hint}"


class Seconds(click.FloatRange):
    """A finite number of seconds in a range. ``float("nan")`` passes every comparison-based
    range check (NaN compares false both ways) and ``inf`` is no deadline at all."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        return super().convert(number, param, ctx)


class Interpreter(click.ParamType):
    """``--python``: an interpreter (a path or a name on PATH) or a venv/conda folder, resolved and
    verified to be a Python here (:mod:`envdoctor.process.target`), so a typo or ``/bin/true`` is a usage
    error (exit 2, one line) before anything is probed."""

    name = "path"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from envdoctor.process.host import Host
        from envdoctor.process.target import TargetError, explicit, verify

        host = Host()
        # The run's own deadline (--timeout / --max-seconds are eager: read before --python wherever
        # they are written), so a target that hangs is named within it, not after 15 s.
        given = (ctx.params.get("timeout") or ctx.params.get("max_seconds")) if ctx is not None else None
        try:
            target = explicit(host, str(value))
            verify(host, target, timeout=given)
        except TargetError as exc:
            raise InputError(str(exc)) from None
        return target.path


def _target(python: str | None, chosen_by: str | None = None) -> tuple[str, str]:
    """The interpreter whose torch is examined and why: ``--python`` (already verified) or uv's
    discovery order; an unusable discovered one is exit 2 before any probing."""
    if python:
        return python, chosen_by or "--python"
    from envdoctor.process.host import Host
    from envdoctor.process.target import TargetError, choose, working_dir

    try:
        target = choose(Host(), None, working_dir())
    except TargetError as exc:
        raise InputError(str(exc)) from None
    return target.path, target.chosen_by


def _internal_error(exc: BaseException) -> int:
    """A bug of envdoctor's reaching the top: one line and exit 3 (:func:`~.lifecycle.internal_error`)."""
    return lifecycle.internal_error(exc)


def run() -> None:
    """The console entry point: the click group under the one signal path and output layer
    (see :mod:`envdoctor.process.lifecycle`); every way out ends the child groups and exits at once."""
    lifecycle.guard_streams()
    lifecycle.install_signal_handlers()
    code: int = ExitCode.OK
    try:
        try:
            # One name, however it was started (`python -m envdoctor` too): the usage lines and the
            # completion variable `_ENVDOCTOR_COMPLETE` are the command's.
            result = main.main(prog_name="envdoctor", standalone_mode=False)
            code = result if isinstance(result, int) else ExitCode.OK
        except click.exceptions.Exit as exc:
            code = exc.exit_code
        except click.UsageError as exc:
            click.echo(error_line(exc.format_message(), exc.ctx), err=True)
            code = exc.exit_code
        except click.ClickException as exc:
            click.echo(error_line(exc.format_message()), err=True)
            code = exc.exit_code
        except click.Abort:
            code = ExitCode.SIGINT
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (ExitCode.OK if exc.code is None else ExitCode.FAIL)
    except Exception as exc:  # noqa: BLE001 - the last resort: one line and its exit code, never a traceback
        code = lifecycle.top_level_code(exc)
    lifecycle.finish(code)


def _options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by `check` and `report` (they collect the same way)."""
    decorators = [
        click.option("--python", "python", metavar="PATH", type=Interpreter(),
                     help="Interpreter (or venv/conda folder) whose torch is examined (default: $VIRTUAL_ENV, "
                     "$CONDA_PREFIX, a .venv here or above, envdoctor's own when torch is beside it, python3)."),
        click.option("--timeout", type=Seconds(0.1, 600), default=5.0, show_default=True, is_eager=True,
                     help="Deadline in seconds per probe (the torch probe gets 6x)."),
        click.option("--no-micro", is_flag=True, help="Skip the GPU microchecks."),
        click.option("--micro-only", is_flag=True, help="Run only the microchecks."),
        click.option("--device", metavar="cuda:N|cpu",
                     help="Device for the microchecks; 'cpu' runs the whole set on the CPU."),
        click.option("--compile", "compile_", is_flag=True, help="Also run a torch.compile microcheck."),
    ]
    for deco in reversed(decorators):
        func = deco(func)
    return _judge_options(func)


def _judge_options(func: Callable[..., Any]) -> Callable[..., Any]:
    decorators = [
        click.option("--only", multiple=True, metavar="ID", help="Run only this check (repeatable)."),
        click.option("--skip", multiple=True, metavar="ID", help="Do not run this check (repeatable)."),
        click.option("--fail-on", type=click.Choice(["fail", "warn"]), default="fail", show_default=True,
                     help="Lowest status that makes the exit code 1."),
        click.option("-v", "--verbose", is_flag=True, help="Show passing checks, skipped ones and all facts."),
    ]
    for deco in reversed(decorators):
        func = deco(func)
    return func


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, prog_name="envdoctor")
def main() -> None:
    """envdoctor: a GPU environment doctor for PyTorch on NVIDIA GPUs.

    \b
    envdoctor check                  probe this machine, judge it, print remedies
    envdoctor report --json -o F     the full report for a bug ticket (or --markdown)
    envdoctor diagnose F             re-judge a saved report or a pasted collect_env text
    envdoctor healthcheck            fast 0/1 probe for Docker HEALTHCHECK / Kubernetes
    envdoctor healthcheck --slurm    Slurm HealthCheckProgram: drain/resume this node
    envdoctor check --distributed    under torchrun/srun: one cluster report on rank 0
    envdoctor diff A B               what differs between two saved reports
    envdoctor fleet DIR              many saved reports: configurations, outliers, failures
    envdoctor list                   the registered checks
    envdoctor fix [--yes]            plan, snapshot, apply, verify, roll back (the Python environment)

    Exit codes: 0 no failure, 1 a failure, 2 usage error, 3 envdoctor could not complete.
    """


def _known_ids(only: Iterable[str], skip: Iterable[str]) -> None:
    """Unknown ``--only``/``--skip`` ids are a usage error (exit 2) naming the nearest known id,
    checked before any probe starts: a typo must not print an empty table and exit 0."""
    named = [(opt, i) for opt, ids in (("--only", only), ("--skip", skip)) for i in ids]
    if not named:
        return
    import difflib

    from envdoctor.pipeline import judge
    from envdoctor.registry import RegistryError

    try:
        known = judge.known_ids()
    except RegistryError as exc:
        raise Incomplete(str(exc)) from None
    for opt, given in named:
        if given not in known:
            near = difflib.get_close_matches(given, known, n=1, cutoff=0.5)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise InputError(f"{opt} {given!r}: no such check ({hint}`envdoctor list` shows every id)")


def _writable_output(output: str | None) -> None:
    """``-o FILE`` whose folder is missing or not writable: exit 2 before seconds of probing."""
    if not output:
        return
    if "%" in output:
        import socket

        from envdoctor.knowledge.launch import expand_output

        output = expand_output(output, os.environ, socket.gethostname())
    from envdoctor.report import OutputTargetError, check_target, standard_stream

    if standard_stream(output) is not None:
        return
    try:
        check_target(output)
    except OutputTargetError as exc:
        raise InputError(str(exc)) from None
    except OSError:
        pass  # said when it is written
    try:
        folder = os.path.dirname(os.path.abspath(output))
    except OSError:  # a relative name, and the working directory was deleted
        raise InputError(f"cannot write {output}: the working directory no longer exists") from None
    if not os.path.isdir(folder):
        raise InputError(f"cannot write {output}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"cannot write {output}: the folder {folder} is not writable")


# -- the pipeline ------------------------------------------------------------------------------
def _live_plan(command: str, *, python: str | None, timeout: float, no_micro: bool, micro_only: bool,
               device: str | None, compile_: bool, only: tuple[str, ...], skip: tuple[str, ...], fail_on: str,
               verbose: bool, chosen_by: str | None = None, **more: Any) -> Plan:
    """The Plan of a live run from its options, checked before anything is probed: ``--device``,
    ``--only``/``--skip`` ids, the target interpreter."""
    if device and not (device == "cpu" or device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit())):
        raise click.BadParameter(f"{device!r} is not cpu, cuda or cuda:N", param_hint="--device")
    _known_ids(only, skip)
    python, chosen_by = _target(python, chosen_by)
    return Plan(command=command, python=python, python_chosen_by=chosen_by, timeout=timeout, micro=not no_micro,
                micro_only=micro_only, device=device, compile=compile_, only=tuple(only), skip=tuple(skip),
                fail_on=fail_on, verbose=verbose, **more)


def _host(plan: Plan) -> Any:
    """The Host for ``plan``, with the children start-up began for this very Plan."""
    from envdoctor.pipeline import startup
    from envdoctor.process.host import Host

    return Host(python=plan.python, early=startup.adopt(plan))


def _run(plan: Plan, progress: bool) -> Any:
    """collect -> judge: the Report of a live run."""
    from envdoctor.pipeline.collect import collect
    from envdoctor.pipeline.judge import judge
    from envdoctor.registry import RegistryError

    facts, runs = collect(plan, _host(plan), progress)
    try:
        return judge(facts, runs, "live", plan)
    except RegistryError as exc:
        raise Incomplete(str(exc)) from None


def _emit_warnings(warnings: Iterable[str]) -> None:
    for w in warnings:
        click.echo(f"envdoctor: warning: {redact_text(w)}", err=True)


# -- the fleet's engines (envdoctor/output/engines.py) ----------------------------------------------
def _engine_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Where `healthcheck` and `check` also write their verdict: node_exporter, NFD."""
    decorators = [
        click.option("--prometheus-textfile", metavar="FILE.prom",
                     help="Also write the verdict as metrics for node_exporter's textfile collector (a *.prom "
                     "file in its --collector.textfile.directory; written, then renamed)."),
        click.option("--prometheus-failures-only", is_flag=True,
                     help="--prometheus-textfile: only the summary gauges and the failing checks."),
        click.option("--nfd-features", metavar="DIR|FILE",
                     help="Also write Node Feature Discovery labels: a features.d folder (the file envdoctor "
                     "in it) or a file."),
        click.option("--nfd-expiry", type=Seconds(60, 30 * 86400), default=900.0, show_default=True,
                     help="--nfd-features: seconds until NFD ignores the labels (# +expiry-time)."),
    ]
    for deco in reversed(decorators):
        func = deco(func)
    return func


def _engine_fields(prometheus_textfile: str | None, prometheus_failures_only: bool, nfd_features: str | None,
                   nfd_expiry: float) -> dict[str, Any]:
    """The Plan's engine fields, checked before any probe starts (exit 2, one line)."""
    if prometheus_failures_only and not prometheus_textfile:
        raise click.UsageError("--prometheus-failures-only belongs to --prometheus-textfile")
    if prometheus_textfile or nfd_features:
        from envdoctor.output.engines import Targets, target_problem

        problem = target_problem(Targets(prometheus=prometheus_textfile, nfd=nfd_features))
        if problem:
            raise InputError(problem)
    return {"prometheus_textfile": prometheus_textfile, "prometheus_failures_only": prometheus_failures_only,
            "nfd_features": nfd_features, "nfd_expiry": nfd_expiry}


def _publish(plan: Plan, rep: Any, hung: Iterable[str], seconds: float, why: str = "") -> Any:
    """Write the verdict to the engines ``plan`` names; the Verdict."""
    from envdoctor.output.engines import finish

    verdict, problems = finish(plan, rep, hung, seconds, why)
    _emit_warnings(problems)
    return verdict


# -- commands ----------------------------------------------------------------------------------
def _cluster_options(func: Callable[..., Any]) -> Callable[..., Any]:
    decorators = [
        click.option("--distributed", is_flag=True,
                     help="Cluster check: run under torchrun/srun on every rank; rank 0 prints one report."),
        click.option("--init-timeout", type=click.FloatRange(1, 3600), default=30.0, show_default=True,
                     help="--distributed: seconds every rank has to arrive."),
        click.option("--collective-timeout", type=click.FloatRange(1, 3600), default=30.0, show_default=True,
                     help="--distributed: seconds the all-reduce may take on every rank."),
        click.option("--min-busbw", type=click.FloatRange(0), metavar="GBPS",
                     help="--distributed: fail when the all-reduce bus bandwidth is below this."),
        click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of the screen "
                     "(with --distributed: the cluster report, on rank 0)."),
        click.option("-o", "--output", type=click.Path(dir_okay=False), help="Also write the report (JSON) to FILE, "
                     "atomically; %N %j %t %n as for report (with --distributed: rank 0 writes the cluster report)."),
        click.option("--expect-gpus", type=click.IntRange(0), metavar="N",
                     help="Fail when fewer than N GPUs are visible (as healthcheck --expect-gpus)."),
    ]
    for deco in reversed(decorators):
        func = deco(func)
    return func


@main.command(context_settings=CONTEXT, short_help="Probe this machine, judge it, print remedies.")
@_options
@_cluster_options
@_engine_options
def check(python: str | None, timeout: float, no_micro: bool, micro_only: bool, device: str | None,
          compile_: bool, only: tuple[str, ...], skip: tuple[str, ...], fail_on: str, verbose: bool,
          distributed: bool, init_timeout: float, collective_timeout: float, min_busbw: float | None,
          as_json: bool, output: str | None, expect_gpus: int | None, **engines: Any) -> None:
    """Probe this machine, judge it, and print every finding with its remedy.

    \b
    With --distributed, started on every rank by torchrun (or srun), it also checks the launch,
    forms a process group (NCCL when every rank has a GPU, else Gloo) within --init-timeout,
    compares every rank's configuration and runs an all-reduce (exact sum, bus bandwidth); rank 0
    prints one cluster report and every rank exits with the same code.
    """
    began = time.monotonic()
    if distributed and (engines["prometheus_textfile"] or engines["nfd_features"]):
        raise click.UsageError("--prometheus-textfile and --nfd-features are per node: run them without --distributed")
    if distributed:
        from envdoctor.commands.distributed import Publish, run_distributed
        from envdoctor.pipeline.cluster import NotLaunched

        # Every rank examines the interpreter the launcher started (its rank child imports torch
        # there), unless --python says otherwise: discovery would name another one. The cluster
        # check measures the collective itself: the per-GPU microchecks would compete with it.
        plan = _live_plan("distributed", python=python or sys.executable, timeout=timeout, no_micro=True,
                          micro_only=False, device=device, compile_=False, only=only, skip=skip, fail_on=fail_on,
                          verbose=verbose, chosen_by=None if python else "started by the launcher",
                          distributed=True, output="json" if as_json else "terminal", output_file=output,
                          expect_gpus=expect_gpus)
        _writable_output(output)  # a missing folder is exit 2 on every rank, before any probing
        try:
            run_distributed(plan, init_timeout=init_timeout, collective_timeout=collective_timeout,
                            min_busbw=min_busbw, publish=Publish(as_json=as_json, output=output, verbose=verbose,
                                                                 fail_on=fail_on))
        except NotLaunched as exc:
            raise InputError(str(exc)) from None
        return
    if min_busbw is not None:
        raise click.UsageError("--min-busbw measures the cluster's all-reduce: it needs --distributed")
    _writable_output(output)
    plan = _live_plan("check", python=python, timeout=timeout, no_micro=no_micro, micro_only=micro_only, device=device,
                      compile_=compile_, only=only, skip=skip, fail_on=fail_on, verbose=verbose,
                      output="json" if as_json else "terminal", output_file=output, expect_gpus=expect_gpus,
                      **_engine_fields(**engines))
    rep = _run(plan, progress=True)
    if as_json:  # the report on stdout, as `report --json` writes it (the file, too, with -o)
        _emit_warnings(rep.warnings)
        _write(rep, "json", None)
    else:
        from envdoctor.output.render import make_console, render_terminal

        render_terminal(rep, make_console(), verbose=verbose)
    if output:
        _write(rep, "json", output)
    if plan.prometheus_textfile or plan.nfd_features:
        from envdoctor.output.engines import hung_probes

        _publish(plan, rep, hung_probes(rep), time.monotonic() - began)
    sys.exit(rep.exit_code(fail_on))


@main.command(context_settings=CONTEXT, short_help="The full report for a bug ticket (JSON or Markdown).")
@click.option("--json", "fmt", flag_value="json", default=True, help="JSON (default).")
@click.option("--markdown", "fmt", flag_value="markdown", help="Markdown for a GitHub issue.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True),
              help="Write to FILE (atomically); %N (host), %j (job id), %t (rank), %n (node) are filled in.")
@_options
def report(fmt: str, output: str | None, python: str | None, timeout: float, no_micro: bool, micro_only: bool,
           device: str | None, compile_: bool, only: tuple[str, ...], skip: tuple[str, ...], fail_on: str,
           verbose: bool) -> None:
    """The full report: facts, findings, and what did not run and why."""
    _writable_output(output)
    plan = _live_plan("report", python=python, timeout=timeout, no_micro=no_micro, micro_only=micro_only,
                      device=device, compile_=compile_, only=only, skip=skip, fail_on=fail_on, verbose=verbose,
                      output=fmt, output_file=output)
    rep = _run(plan, progress=bool(output))
    _emit_warnings(rep.warnings)
    _write(rep, fmt, output)
    sys.exit(rep.exit_code(fail_on))


def _write(rep: Any, fmt: str, output: str | None) -> None:
    from envdoctor.report import OutputTargetError, standard_stream, to_json_chunks, write_atomic

    if fmt == "json":
        text: Iterable[str] = to_json_chunks(rep)
    else:
        from envdoctor.output.render import render_markdown

        text = (render_markdown(rep),)
    if output and "%" in output:
        import socket

        from envdoctor.knowledge.launch import expand_output

        output = expand_output(output, os.environ, socket.gethostname())
    stream = standard_stream(output) if output else None
    if stream is not None:  # `-o /dev/stdout`: the stream itself
        output = None
        if stream == 2:
            for piece in text:
                sys.stderr.write(piece)
            return
    if output:
        try:
            write_atomic(output, text)
        except OutputTargetError as exc:
            raise InputError(str(exc)) from None
        except OSError as exc:
            raise InputError(f"cannot write {output}: {exc.strerror or exc}") from None
        click.echo(f"envdoctor: wrote {redact_text(output)}", err=True)
    else:
        for piece in text:  # in pieces: a 50 MB report is never encoded in one go
            for at in range(0, len(piece), 1 << 20):
                sys.stdout.write(piece[at:at + (1 << 20)])


@main.command(context_settings=CONTEXT, short_help="Re-judge a saved report or a pasted text.")
@click.argument("files", metavar="[FILE…|DIR]", nargs=-1)
@click.option("--json", "fmt", flag_value="json", help="Print the re-judged report as JSON.")
@click.option("--markdown", "fmt", flag_value="markdown", help="Print it as Markdown.")
@_judge_options
def diagnose(files: tuple[str, ...], fmt: str | None, only: tuple[str, ...], skip: tuple[str, ...], fail_on: str,
             verbose: bool) -> None:
    """Re-judge a saved JSON report, or a pasted collect_env / nvidia-smi text (FILE, or - or a
    pipe for stdin), with today's checks. Touches nothing of this machine.

    \b
    Several files or a folder are judged in one process, one result per file (a line, or with
    --json one object per file); the exit code is the worst of theirs."""
    files = files or (_diagnose_input(None),)
    _known_ids(only, skip)
    if "-" in files and sys.stdin is not None and sys.stdin.isatty():
        # A terminal waits for the paste: say so, or it looks hung.
        click.echo("envdoctor: paste the text (a report, collect_env or nvidia-smi output, error lines), "
                   "then Ctrl-D on an empty line", err=True)
    plan = Plan(command="diagnose", only=tuple(only), skip=tuple(skip), fail_on=fail_on, verbose=verbose,
                output=fmt or "terminal")
    if len(files) == 1 and not os.path.isdir(files[0]):
        _diagnose_one(files[0], plan)
    _diagnose_many(files, plan)


def _diagnose_one(file: str, plan: Plan) -> NoReturn:
    from envdoctor.pipeline.many import judge_path
    from envdoctor.registry import RegistryError

    try:
        judged = judge_path(file, plan)
    except RegistryError as exc:
        raise Incomplete(str(exc)) from None
    if judged.report is None:
        raise InputError(judged.error)
    rep = judged.report
    if plan.output != "terminal":
        _emit_warnings(rep.warnings)
        _write(rep, plan.output, None)
    else:
        from envdoctor.output.render import make_console, render_terminal

        render_terminal(rep, make_console(), verbose=plan.verbose)
    sys.exit(rep.exit_code(plan.fail_on))


def _diagnose_input(file: str | None) -> str:
    """No FILE: standard input when something is piped or redirected into it, else a usage error."""
    if file:
        return file
    if sys.stdin is None or sys.stdin.isatty():
        raise InputError("diagnose: give a FILE (a saved report or a pasted text), or pipe one in: "
                         "envdoctor diagnose < report.json")
    return "-"


def _diagnose_many(items: tuple[str, ...], plan: Plan) -> NoReturn:
    from envdoctor.pipeline.judge import checks_for
    from envdoctor.pipeline.many import expand, judge_path, summary_line, summary_record, worst_exit
    from envdoctor.registry import RegistryError

    if plan.output == "markdown":
        raise click.UsageError("--markdown takes one file; for many use --json or the one-line results")
    try:
        _emit_warnings(checks_for(plan)[1])
    except RegistryError as exc:
        raise Incomplete(str(exc)) from None
    codes: list[int] = []
    as_json = plan.output == "json"
    if as_json:
        import json

        sys.stdout.write("[")
    paths = list(expand(items))
    if not paths:  # only empty folders: said, not an empty result
        raise InputError(f"no reports in {' '.join(items)}")
    for i, path in enumerate(paths):
        judged = judge_path(path, plan)
        codes.append(judged.exit_code(plan.fail_on))
        if as_json:
            record = summary_record(judged, plan.fail_on)
            sys.stdout.write(("," if i else "") + "\n" + json.dumps(record, ensure_ascii=False))
        else:
            click.echo(summary_line(judged, plan.fail_on))
    if as_json:
        sys.stdout.write("\n]\n")
    sys.exit(worst_exit(codes))


@main.command(context_settings=CONTEXT, short_help="One line, exit 0/1, for Docker and Kubernetes probes.")
@click.option("--max-seconds", type=Seconds(0.5, 600), default=None, is_eager=True,
              help="Hard time budget; exceeding it is unhealthy (default: 5; 4 with --npd).")
@click.option("--micro", is_flag=True, help="Also run the device-touch microcheck.")
@click.option("--python", "python", metavar="PATH", type=Interpreter(), help="Target interpreter (for --micro).")
@click.option("--expect-gpus", type=click.IntRange(0), metavar="N",
              help="Unhealthy (exit 1) when fewer than N GPUs are visible.")
@click.option("--npd", is_flag=True, help="Answer as a node-problem-detector custom plugin: one line of at most 80 "
              "bytes naming the cause; exit 0 healthy, 1 a problem, 2 unknown (a hang, anything that could not run).")
@click.option("--slurm", is_flag=True,
              help="Slurm HealthCheckProgram/prolog mode: drain this node when unhealthy (reason 'envdoctor: "
                   "CHECK: CAUSE'), resume it when healthy if envdoctor drained it; exit 3 and no change when "
                   "envdoctor could not judge.")
@_engine_options
def healthcheck(max_seconds: float | None, micro: bool, python: str | None, expect_gpus: int | None, npd: bool,
                slurm: bool, **engines: Any) -> None:
    """Fast container/Kubernetes probe: one line, exit 0 healthy / 1 unhealthy. Never imports torch
    unless --micro is given; a hung probe is unhealthy. The exit code is the answer even when
    the line cannot be written (stdout closed or full)."""
    from envdoctor.pipeline.fast import answer_healthcheck, healthcheck_problem
    from envdoctor.pipeline.startup import healthcheck_budget, healthcheck_max_seconds

    began = time.monotonic()
    if slurm and npd:
        raise click.UsageError("--slurm and --npd are two protocols: give one")
    output = "npd" if npd else "slurm" if slurm else "line"
    seconds = healthcheck_max_seconds(max_seconds, output)
    problem = healthcheck_problem(output, seconds)
    if problem:
        raise click.UsageError(problem)
    plan = Plan(command="healthcheck", fast=True, micro=micro, python=python, budget=healthcheck_budget(seconds),
                deadline=seconds, expect_gpus=expect_gpus, output=output, **_engine_fields(**engines))
    answer_healthcheck(plan, began)


@main.command("exec", context_settings={**CONTEXT, "ignore_unknown_options": True, "allow_interspersed_args": False},
              short_help="Container ENTRYPOINT: preflight, then become CMD.")
@click.option("--fail-on", type=click.Choice(["fail", "warn"]), default="fail", show_default=True,
              help="Lowest status that keeps the command from starting.")
@click.option("--micro", is_flag=True, help="Also run the device-touch microcheck (imports torch).")
@click.option("--expect-gpus", type=click.IntRange(0), metavar="N", help="Fail when fewer than N GPUs are visible.")
@click.option("--max-seconds", type=Seconds(0.5, 600), default=10.0, show_default=True,
              help="Budget for the preflight; a probe still running then has hung (a failure).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- CMD [ARGS]...")
def exec_(fail_on: str, micro: bool, expect_gpus: int | None, max_seconds: float, command: tuple[str, ...]) -> None:
    """Container ENTRYPOINT preflight: run the fast checks (the healthcheck's), print the findings
    to stderr, then become CMD (exec: same PID, signals and exit code are CMD's). When the
    environment fails, CMD is not started and the exit code is 78."""
    from envdoctor.commands.execute import preflight, skip_requested, start_unchecked
    from envdoctor.pipeline.startup import exec_deadline

    if skip_requested():  # ENVDOCTOR_SKIP_PREFLIGHT=1: debugging a node whose preflight fails
        start_unchecked(command)

    python = None
    if micro:  # the microcheck imports torch: in the training interpreter, found as `check` finds it
        from envdoctor.process.host import Host
        from envdoctor.process.target import TargetError, choose, working_dir

        try:
            found = choose(Host(), None, working_dir())
        except TargetError as exc:
            from envdoctor.commands.execute import leave

            leave(error_line(str(exc)), ExitCode.USAGE)  # the one usage-error format
        python = found.path
    plan = Plan(command="exec", fast=True, micro=micro, python=python, budget=max_seconds,
                deadline=exec_deadline(max_seconds), expect_gpus=expect_gpus, fail_on=fail_on, output="terminal")
    preflight(command, plan, _host(plan))


@main.command(context_settings=CONTEXT, short_help="Plan, snapshot, apply, verify, roll back the Python env.")
@click.option("--python", "python", metavar="PATH", type=Interpreter(),
              help="Interpreter (or venv/conda folder) to fix (default: found as `check` finds it).")
@click.option("--yes", is_flag=True, help="Apply the plan (without it, fix only prints the plan).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan and the outcome as JSON.")
@click.option("--torch-index", metavar="URL|DIR", help="Base of the PyTorch variant indexes instead of PyTorch's "
              "(a mirror URL, or a folder of <variant>/ wheel folders read offline).")
@click.option("--timeout", type=Seconds(0.1, 600), default=5.0, show_default=True, help="Deadline in seconds per probe.")
@click.option("--restore", metavar="DIR", help="Put the environment back as the snapshot DIR holds it "
              "(<venv>/.envdoctor-fix/<time>/), e.g. after envdoctor was killed mid-fix.")
def fix(python: str | None, yes: bool, as_json: bool, torch_index: str | None, timeout: float,
        restore: str | None) -> None:
    """Fix the Python environment: plan, snapshot, apply, verify, roll back.

    \b
    The failing findings whose remedies act inside the environment become a plan (each step: the
    finding, the exact command, the interpreter and installer); driver, toolkit, container and
    system steps are printed, never run. Nothing changes without --yes. Before any change the
    freeze and the installed files are kept in <venv>/.envdoctor-fix/<time>/; a failed step, a
    failed verification or Ctrl-C puts them back. Exit 0 fixed and verified, 1 nothing to fix or
    not all fixed (rolled back), 2 usage, 3 could not complete."""
    from envdoctor.commands.fix import restore_snapshot, run_fix

    if restore:
        sys.exit(restore_snapshot(restore, echo=click.echo))
    path, chosen_by = _target(python)
    plan = Plan(command="fix", python=path, python_chosen_by=chosen_by, timeout=timeout, micro=False)
    sys.exit(run_fix(plan, yes=yes, as_json=as_json, torch_index=torch_index, echo=click.echo))


def _show(result: dict[str, Any], as_json: bool, renderer: str) -> None:
    """A diff or fleet result (already redacted) as JSON or through its rich renderer."""
    if as_json:
        import json

        click.echo(json.dumps(result, indent=2, ensure_ascii=False))
        return
    from envdoctor.output import fleet as fleet_render
    from envdoctor.output.render import make_console

    getattr(fleet_render, renderer)(result, make_console())


@main.command(context_settings=CONTEXT, short_help="What differs between two saved reports.")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def diff(a: str, b: str, as_json: bool) -> None:
    """What differs between two saved reports (or pastes), most likely to matter first: driver,
    CUDA, torch build, cuDNN, NCCL, GPUs, then Python, packages and environment; each with the
    checks that judge it. Exit 0 no difference, 1 differences, 2 unusable input."""
    from envdoctor.commands.saved import diff_reports
    from envdoctor.registry import RegistryError
    from envdoctor.report import ReportError

    try:
        result = redact_tree(diff_reports(a, b))
    except ReportError as exc:
        raise InputError(str(exc)) from None
    except RegistryError as exc:
        raise Incomplete(str(exc)) from None
    _show(result, as_json, "render_diff")
    sys.exit(ExitCode.FAIL if result["differences"] or result["verdicts"] else ExitCode.OK)


@main.command(context_settings=CONTEXT, short_help="Many saved reports: configurations, outliers, failures.")
@click.argument("items", metavar="FILES|DIR", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--rejudge", is_flag=True, help="Judge every report with today's checks (slower) instead of "
              "reading the findings it was saved with.")
@click.option("-j", "--jobs", type=click.IntRange(1, 64), help="Worker processes (default: CPUs, at most 8).")
@click.option("--store", "store", metavar="FILE.parquet", help="Also write one row per node × check to this "
              "Parquet file (needs pyarrow in envdoctor's environment); `envdoctor fleet FILE.parquet` "
              "reads it back.")
def fleet(items: tuple[str, ...], as_json: bool, rejudge: bool, jobs: int | None, store: str | None) -> None:
    """Many saved reports (e.g. `srun envdoctor report --json -o reports/%N.json`), or a store
    written by --store: identical configurations grouped, outliers named, failures counted by
    check and by node. Unreadable files are listed and skipped. Exit 0 all alike and passing,
    1 outliers/failures/unreadable files, 2 nothing readable."""
    from envdoctor.commands.saved import fleet as run_fleet
    from envdoctor.commands.saved import fleet_exit
    from envdoctor.commands.store import StoreError, check_store_args
    from envdoctor.registry import RegistryError

    try:
        check_store_args(items, store)
        # Not built through a Report: redacted here, for every format (file names and facts may hold secrets).
        result = redact_tree(run_fleet(items, rejudge=rejudge, jobs=jobs, store=store))
    except RegistryError as exc:
        raise Incomplete(str(exc)) from None
    except StoreError as exc:
        raise InputError(str(exc)) from None
    if not result["reports"] and not result["corrupt"]:
        raise InputError(f"no reports in {' '.join(items)}")
    _show(result, as_json, "render_fleet")
    sys.exit(fleet_exit(result))


@main.command("list", context_settings=CONTEXT, short_help="The registered checks and who provides them.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable list.")
def list_checks(as_json: bool) -> None:
    """The registered checks: id, title, what they verify, and who provides them."""
    from envdoctor.pipeline.judge import registry as checks
    from envdoctor.registry import RegistryError

    try:
        registry = checks()
    except RegistryError as exc:
        raise Incomplete(str(exc)) from None
    _emit_warnings(registry.warnings)
    rows: list[dict[str, Any]] = [{"id": s.id, "title": redact_text(s.title), "description": redact_text(s.description),
                                   "provider": redact_text(s.provider), "healthcheck": s.healthcheck, "micro": s.micro}
                                  for s in registry]
    if as_json:
        import json

        click.echo(json.dumps(_versioned_list(rows), indent=2))
        return
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from envdoctor.output.render import make_console, safe

    console = make_console()
    if not console.is_terminal:  # on a pipe: one line per check, tab-separated, never wrapped
        for r in rows:
            click.echo("\t".join((r["id"], safe(r["title"]), safe(r["provider"]), _healthcheck_cell(r) or "no")))
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    for col in ("id", "title", "provider", "healthcheck"):
        table.add_column(col, style="cyan" if col == "id" else None, no_wrap=col in ("id", "provider"))
    for r in rows:
        table.add_row(Text(r["id"]), Text(safe(r["title"])), Text(safe(r["provider"])), _healthcheck_cell(r))
    console.print(table)


#: The shape of ``list --json``; raised when a field is removed or changes meaning (added ones keep it).
LIST_SCHEMA_VERSION = 1


def _versioned_list(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``list --json``: an object that says what it is and which shape, like a report."""
    return {"kind": "envdoctor-check-list", "schema_version": LIST_SCHEMA_VERSION, "envdoctor_version": __version__,
            "checks": rows}


def _healthcheck_cell(row: dict[str, Any]) -> str:
    if not row["healthcheck"]:
        return ""
    return "with --micro" if row["micro"] else "yes"


if __name__ == "__main__":
    run()
