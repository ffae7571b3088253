"""One torch child for the python probe and the microchecks of one run.

``import torch`` is the slowest thing ``check`` does; two of them at once on a small machine (the
torch facts' child and the microchecks' child) made ``check --device cpu`` more than twice a plain
``check``. So when both probes run and the microchecks are planned, one child
(``child/torch_probe.py`` with ``{"micro": ...}``) imports torch once, reports the torch facts —
the python probe's readings are complete at that record — and then runs the microchecks in the
same process under their own deadline, the micro probe reading the rest of its records
(:class:`envdoctor.process.host.PhasedChild`).

The pipeline hands a :class:`Shared` to the probes in ``Options.torch_child``; whichever probe
asks first starts the child, and both get the same one (or both None: then each runs as before).
What the child is asked (:func:`child_args`) and for how long (:func:`facts_deadline`,
:func:`micro_deadline`) is decided here, for both probes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from envdoctor.process import childargs
from envdoctor.process.host import Host, PhasedChild

from .spec import Options

#: Self-test hooks the microchecks child honours (see envdoctor/child/micro.py); tests pass one
#: through ``Options.micro_inject``. Never set in production.
INJECTIONS = ("corrupt_matmul", "nan_matmul", "hang", "segfault", "sigbus_worker", "sigbus_worker_unsignalled",
              "sigbus_worker_stuck", "hang_worker")
#: Deadline scales (x ``--timeout``): torch import alone takes 1-3 s warm and can take 20+ s on a
#: cold network filesystem. With the default --timeout 5 the microchecks get 120 s for the whole
#: set (CUDA init, ~6 s per GPU, and room for eight GPUs), plus 180 s when compiling.
FACTS_SCALE = 6.0
MICRO_SCALE = 24.0
COMPILE_SCALE = 36.0


def facts_deadline(options: Options) -> float:
    """The torch facts' deadline (the python probe's)."""
    return options.timeout * FACTS_SCALE


def micro_deadline(options: Options) -> float:
    """The microchecks' deadline; it grows with ``--compile``: Inductor's first compile takes tens of seconds."""
    if options.micro_deadline is not None:
        return float(options.micro_deadline)  # tests: a hang sat out without shortening the torch facts' deadline
    if options.healthcheck:  # only the device touch, inside the healthcheck's own budget
        return options.timeout
    return options.timeout * (MICRO_SCALE + (COMPILE_SCALE if options.compile else 0.0))


def plan(host: Host, options: Options) -> tuple[list[str] | None, str]:
    """(devices for the child, "") or (None, why the microchecks are skipped). An empty list
    means "every visible CUDA device"."""
    return childargs.micro_devices(options.micro, options.device, host.exists)


def child_args(host: Host, options: Options) -> tuple[dict[str, Any] | None, str]:
    """(the microchecks' arguments, "") or (None, why they are skipped): asked by the micro probe
    and, for one torch child, by the python probe."""
    devices, why = plan(host, options)
    if devices is None:
        return None, why
    checks: list[str] | None = None
    if options.healthcheck:
        checks = ["device"]  # healthcheck --micro: only the device touch
    elif options.micro_checks is not None:
        checks = [str(c) for c in options.micro_checks]  # a subset, for tests and debugging
    if options.micro_inject and options.micro_inject not in INJECTIONS:
        return None, f"unknown self-test injection {options.micro_inject!r}"
    return childargs.micro_args(devices, bool(options.compile), checks, options.micro_inject, options.micro_budget), ""


class Shared:
    """The one torch child of a run, started on first request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._asked = False
        self._child: PhasedChild | None = None

    def get(self, start: Callable[[], PhasedChild | None]) -> PhasedChild | None:
        with self._lock:
            if not self._asked:
                self._asked = True
                self._child = start()
            return self._child


def start(host: Host, options: Options) -> PhasedChild | None:
    """The run's one torch child, started now if need be; None when this run has no shared child
    (no :class:`Shared` handed in, ``check --distributed``'s rank child reports the torch facts, or
    no microchecks are planned)."""
    shared = options.torch_child
    if not isinstance(shared, Shared) or options.torch_probe is not None:
        return None
    return shared.get(lambda: _launch(host, options))


def _launch(host: Host, options: Options) -> PhasedChild | None:
    args, _ = child_args(host, options)
    if args is None:
        return None
    # The child lives as long as the longer of the two deadlines; the facts' own deadline is
    # enforced by the python probe (PhasedChild.first), which abandons the child when it passes.
    timeout = max(facts_deadline(options), micro_deadline(options))
    return PhasedChild(host, childargs.TORCH_SCRIPT, childargs.torch_args(args), timeout, python=options.python)
