"""``python -m envdoctor`` and the ``envdoctor`` command.

The signal path is installed before anything heavy is imported (click, rich): a Ctrl-C in the
first tenth of a second is then handled like any other, not a KeyboardInterrupt traceback. Then
start-up reads the run's Plan from ``sys.argv`` and starts its early children
(:mod:`envdoctor.pipeline.startup`), before click and the rest are imported. A plain
``healthcheck`` (Docker's, Kubernetes', NPD's, Slurm's) is answered without click at all.
"""

from __future__ import annotations

from envdoctor.process import lifecycle


def run() -> None:
    lifecycle.install_signal_handlers()
    import sys

    from .pipeline import startup

    argv = sys.argv[1:]
    startup.begin(argv)
    plan = startup.direct(argv)
    if plan is not None:  # a plain healthcheck: answered without click (envdoctor.pipeline.fast.direct)
        from envdoctor.pipeline.fast import direct

        direct(plan)  # returns only for a usage error click's options miss: click says it
    from envdoctor.commands.cli import run as cli_run

    cli_run()


if __name__ == "__main__":
    run()
