"""Facts (with the probe runs they came with) -> the Report: the one place a Report is built.

The registry is loaded once per process (:func:`registry`), the checks a Plan selects once per
selection (:func:`checks_for`). A live run, a saved report or a paste, a batch of files and rank
0's cluster report are all judged here, so every output says the same about the same facts.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

from envdoctor.pipeline.diagnose import diagnose, select, sort_findings

from ..model import Facts, ProbeRun
from ..registry import CheckSpec, Registry, load_registry
from ..report import Report, mask_env_facts
from .plan import Plan


@functools.lru_cache(maxsize=4)
def registry(builtin: tuple[str, ...] | None = None) -> Registry:
    """The check registry (``builtin``: only these built-in modules, for the fast path), loaded once
    per process. Raises RegistryError."""
    return load_registry(builtin=builtin)


def known_ids() -> list[str]:
    return [s.id for s in registry()]


@functools.lru_cache(maxsize=8)
def _selected(only: tuple[str, ...], skip: tuple[str, ...], micro_only: bool) -> tuple[tuple[CheckSpec, ...],
                                                                                      tuple[str, ...]]:
    reg = registry()
    if micro_only:
        only = only + tuple(s.id for s in reg if s.micro)
    checks, unknown = select(reg, only, skip)
    warnings = list(reg.warnings) + [f"unknown check id {u!r} (see `envdoctor list`)" for u in unknown]
    return tuple(checks), tuple(warnings)


def checks_for(plan: Plan) -> tuple[tuple[CheckSpec, ...], tuple[str, ...]]:
    """(the checks ``plan`` runs, warnings: the registry's and unknown ids). Raises RegistryError."""
    if plan.fast:
        return tuple(fast_checks(plan.micro)), ()
    return _selected(tuple(plan.only), tuple(plan.skip), plan.micro_only)


@functools.lru_cache(maxsize=2)
def fast_checks(micro: bool) -> list[CheckSpec]:
    """The healthcheck's checks, from its own built-in modules (and the plugins') only; raises
    RegistryError. A microcheck in the healthcheck subset runs only with ``micro``."""
    from ..checks import HEALTHCHECK

    return [s for s in select(registry(HEALTHCHECK + (("micro",) if micro else ())), healthcheck=True)[0]
            if micro or not s.micro]


def judge(facts: Facts, runs: Iterable[ProbeRun] = (), origin: str = "live", plan: Plan | None = None,
          checks: Sequence[CheckSpec] | None = None) -> Report:
    """Judge ``facts`` with the checks ``plan`` selects (or ``checks``: rank 0's cluster checks).
    The compatibility table's date is named unless the fast path judged (its checks never read the table)."""
    plan = plan or Plan()
    selected, warnings = checks_for(plan)
    as_of: str | None = None
    if not plan.fast:
        from envdoctor.knowledge import compat

        as_of = compat.as_of()
    facts = mask_env_facts(facts)  # no check quotes a value a report would not show
    # worst first, as every renderer shows them: a saved report (--json) lists its problems first too
    return Report(facts=facts, findings=tuple(sort_findings(diagnose(facts, selected if checks is None else checks))),
                  probes=tuple(runs), origin=origin, compat_as_of=as_of, warnings=warnings)
