"""The `check --distributed` command body: Plan -> cluster.run (the pipeline's collect and judge
on every rank) -> output -> the shared exit code. Kept apart from cli.py so the single-machine
commands never import the cluster code."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

import click

from envdoctor.pipeline.plan import Plan
from envdoctor.probes.torch_child import FACTS_SCALE

#: SELF-TEST hook (never set in production): passed to every rank's child, see child/dist.py.
INJECT_ENV = "ENVDOCTOR_DIST_INJECT"


@dataclass(frozen=True)
class Publish:
    """How rank 0 shows the cluster report."""

    as_json: bool = False
    output: str | None = None
    verbose: bool = False
    fail_on: str = "fail"


def run_distributed(plan: Plan, *, init_timeout: float, collective_timeout: float, min_busbw: float | None,
                    publish: Publish) -> None:
    """Raises cluster.NotLaunched (a usage error) when no launcher started this process."""
    from envdoctor.pipeline.cluster import ClusterOptions, run
    from envdoctor.process.host import Host

    options = ClusterOptions(init_timeout=init_timeout, collective_timeout=collective_timeout, min_busbw=min_busbw,
                             probe_deadline=plan.timeout * FACTS_SCALE + 1.5, device=plan.device,
                             inject=os.environ.get(INJECT_ENV, ""), fail_on=plan.fail_on)
    host = Host(python=plan.python)
    outcome = run(host, plan, options, publish=lambda o: _publish(o, publish))
    if not outcome.published:
        _publish(outcome, publish)
    # Leave at once: an abandoned child must not delay the exit code every rank shares.
    os._exit(outcome.code)


def _publish(outcome: Any, how: Publish) -> None:
    from envdoctor.output.render import make_console, render_terminal
    from envdoctor.pipeline.cluster import cluster_json

    if outcome.cluster is not None and outcome.report is not None:
        text = cluster_json(outcome.report, outcome.cluster, how.fail_on)
        if how.output:
            import socket

            from envdoctor.knowledge.launch import expand_output
            from envdoctor.redact import redact_text
            from envdoctor.report import OutputTargetError, standard_stream, write_atomic

            output = expand_output(how.output, os.environ, socket.gethostname())
            try:
                if standard_stream(output) == 1:  # `-o /dev/stdout`
                    if not how.as_json:
                        click.echo(text, nl=False)
                else:
                    write_atomic(output, text)
                    click.echo(f"envdoctor: wrote {redact_text(output)}", err=True)
            except OutputTargetError as exc:  # a FIFO, a device: said, and the rank's child still ended
                click.echo(f"envdoctor: error: {redact_text(str(exc))}", err=True)
            except OSError as exc:
                click.echo(f"envdoctor: error: cannot write {redact_text(output)}: {redact_text(str(exc.strerror or exc))}",
                           err=True)
        if how.as_json:
            click.echo(text, nl=False)
        else:
            from envdoctor.output.cluster import render_cluster

            render_cluster(outcome.report, outcome.cluster, make_console(), verbose=how.verbose)
    elif outcome.report is not None:
        render_terminal(outcome.report, make_console(), verbose=how.verbose)
    if outcome.line:
        click.echo(f"envdoctor: {outcome.line}", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
