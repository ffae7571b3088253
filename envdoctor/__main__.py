"""``python -m envdoctor`` and the ``envdoctor`` command.

The signal path is installed before anything heavy is imported (click, rich): a Ctrl-C in the
first tenth of a second is then handled like any other, not a KeyboardInterrupt traceback.
"""

from __future__ import annotations

from . import lifecycle


def run() -> None:
    lifecycle.install_signal_handlers()
    import sys

    from . import driverstart, prestart

    prestart.maybe_start(sys.argv[1:])  # the torch child, before click and the rest are imported
    driverstart.maybe_start(sys.argv[1:])  # the healthcheck's driver child, likewise
    from .cli import run as cli_run

    cli_run()


if __name__ == "__main__":
    run()
