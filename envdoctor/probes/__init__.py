"""Probes: read the world into Facts, concurrently, under one wall-clock budget.

A probe is ``func(host, options) -> {key: Reading}``. It never raises on purpose and must set
every key it declares in ``keys`` on every path; if its thread raises or outlives its deadline
the runner fills those keys with the reason (``crashed``/``timeout``), so a check always learns
*why* a fact is missing.

The parts: :mod:`.spec` (what a probe is), :mod:`.runner` (running them), :mod:`.builtin` (the
built-in ones). Probe modules import :mod:`.spec` only.
"""

from __future__ import annotations

from .builtin import builtin_probes, healthcheck_probes, iter_builtin_probes
from .runner import run_probes
from .spec import Options, ProbeFunc, ProbeSpec

__all__ = ["Options", "ProbeFunc", "ProbeSpec", "builtin_probes", "healthcheck_probes", "iter_builtin_probes",
           "run_probes"]
