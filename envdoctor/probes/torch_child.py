"""One torch child for the python probe and the microchecks of one run.

``import torch`` is the slowest thing ``check`` does; two of them at once on a small machine (the
torch facts' child and the microchecks' child) made ``check --device cpu`` more than twice a plain
``check``. So when both probes run and the microchecks are planned, one child
(``child/torch_probe.py`` with ``{"micro": ...}``) imports torch once, reports the torch facts —
the python probe's readings are complete at that record — and then runs the microchecks in the
same process under their own deadline, the micro probe reading the rest of its records
(:class:`envdoctor.host.PhasedChild`).

The CLI hands a :class:`Shared` to the probes in ``Options.extra["torch_child"]``; whichever probe
asks first starts the child, and both get the same one (or both None: then each runs as before).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from .. import childargs
from ..host import Host, PhasedChild
from .spec import Options

KEY = "torch_child"


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
    shared = options.extra.get(KEY)
    if not isinstance(shared, Shared) or callable(options.extra.get("torch_probe")):
        return None
    return shared.get(lambda: _launch(host, options))


def _launch(host: Host, options: Options) -> PhasedChild | None:
    from . import micro, python_probe

    args, _ = micro.child_args(host, options)
    if args is None:
        return None
    # The child lives as long as the longer of the two deadlines; the facts' own deadline is
    # enforced by the python probe (PhasedChild.first), which abandons the child when it passes.
    timeout = max(python_probe.PROBE.deadline(options), micro.PROBE.deadline(options))
    return PhasedChild(host, childargs.TORCH_SCRIPT, childargs.torch_args(args), timeout, python=options.python)
