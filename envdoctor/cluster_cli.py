"""The `check --distributed` command body: options -> cluster.run -> output -> the shared exit code.
Kept apart from cli.py so the single-machine commands never import the cluster code."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import click

from .report import EXIT_USAGE

#: SELF-TEST hook (never set in production): passed to every rank's child, see child/dist.py.
INJECT_ENV = "ENVDOCTOR_DIST_INJECT"


def run_distributed(collect: Callable[..., Any], judge: Callable[..., Any], *, python: str | None, timeout: float,
                    device: str | None, only: tuple[str, ...], skip: tuple[str, ...], fail_on: str, verbose: bool,
                    init_timeout: float, collective_timeout: float, min_busbw: float | None, as_json: bool,
                    output: str | None) -> None:
    from .cluster import ClusterOptions, NotLaunched, run
    from .host import Host

    options = ClusterOptions(init_timeout=init_timeout, collective_timeout=collective_timeout, min_busbw=min_busbw,
                             probe_deadline=timeout * 6 + 1.5, device=device,
                             inject=os.environ.get(INJECT_ENV, ""), fail_on=fail_on)

    def collect_rank(extra: dict[str, Any]) -> Any:
        # The cluster check measures the collective itself; the per-GPU microchecks would compete with it.
        return collect(python, timeout, True, False, device, False, only, skip, progress=False, extra=extra)

    host = Host(python=python)
    try:
        outcome = run(host, collect_rank, judge, options, publish=lambda o: _publish(o, as_json, output, verbose, fail_on))
    except NotLaunched as exc:
        click.echo(f"envdoctor: error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    if not outcome.published:
        _publish(outcome, as_json, output, verbose, fail_on)
    # Leave at once: an abandoned child must not delay the exit code every rank shares.
    os._exit(outcome.code)


def _publish(outcome: Any, as_json: bool, output: str | None, verbose: bool, fail_on: str) -> None:
    from .cluster import cluster_json
    from .render import make_console, render_terminal

    if outcome.cluster is not None and outcome.report is not None:
        text = cluster_json(outcome.report, outcome.cluster, fail_on)
        if output:
            import socket

            from .launch import expand_output
            from .report import write_atomic

            output = expand_output(output, os.environ, socket.gethostname())

            try:
                write_atomic(output, text)
                click.echo(f"envdoctor: wrote {output}", err=True)
            except OSError as exc:
                click.echo(f"envdoctor: error: cannot write {output}: {exc.strerror or exc}", err=True)
        if as_json:
            click.echo(text, nl=False)
        else:
            from .cluster_render import render_cluster

            render_cluster(outcome.report, outcome.cluster, make_console(), verbose=verbose)
    elif outcome.report is not None:
        render_terminal(outcome.report, make_console(), verbose=verbose)
    if outcome.line:
        click.echo(f"envdoctor: {outcome.line}", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
