"""What a probe is: its options, its function type and its declaration (name, keys, deadline scale)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from envdoctor.knowledge.factkeys import validate_fact_keys
from envdoctor.process.host import ChildResult, Host

from ..model import Reading


@dataclass(frozen=True)
class Options:
    """What the user asked for, as probes see it."""

    timeout: float = 5.0  # seconds per probe (scaled per probe by ProbeSpec.scale)
    python: str | None = None  # target interpreter; None = the one running envdoctor
    python_chosen_by: str = ""  # why that interpreter (envdoctor.process.target); "" = envdoctor's own
    micro: bool = True  # run microchecks when a GPU is usable
    micro_only: bool = False
    device: str | None = None  # "cpu", "cuda", "cuda:N"
    compile: bool = False
    healthcheck: bool = False
    #: ``check --distributed``: the cluster check's own rendezvous judges MASTER_PORT.
    distributed: bool = False
    #: The microchecks to run (a subset, for tests and debugging); None: the whole set.
    micro_checks: tuple[str, ...] | None = None
    #: Self-test hook for the microchecks child (envdoctor/child/micro.py); never set in production.
    micro_inject: str = ""
    #: Seconds per timed microcheck loop; None: the child's own.
    micro_budget: float | None = None
    #: Seconds for the microchecks, instead of the scaled ``--timeout`` (tests sit out a hang with it).
    micro_deadline: float | None = None
    #: The run's one torch child (:class:`envdoctor.probes.torch_child.Shared`), handed in by the
    #: pipeline; None: each probe starts its own.
    torch_child: object | None = None
    #: ``check --distributed``: the rank child reports the torch facts (it imports torch once for both).
    torch_probe: Callable[[float], ChildResult] | None = None


ProbeFunc = Callable[[Host, Options], Mapping[str, Reading]]


@dataclass(frozen=True)
class ProbeSpec:
    name: str
    func: ProbeFunc
    keys: tuple[str, ...]
    scale: float = 1.0  # deadline = options.timeout * scale (+ grace)
    healthcheck: bool = False  # part of the fast `healthcheck` subset
    micro: bool = False  # a microcheck probe (run by --micro-only, skipped by --no-micro)
    #: On the critical path (imports torch, or measures speed): runs at normal priority; every
    #: other probe's commands run niced so they never slow those down on a small machine.
    critical: bool = False
    #: One probe that does the work of several (one child for NVML and cuInit) and reports each
    #: as a run of its own: ``((run name, its keys), …)``, together ``keys``. Each run's status
    #: comes from its own keys, so a hang in one is named as that one's.
    parts: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def __post_init__(self) -> None:
        if not self.parts:
            validate_fact_keys(self.keys, f"probe {self.name!r} keys", producer=f"probe:{self.name}")
            return
        if sorted(k for _, keys in self.parts for k in keys) != sorted(self.keys):
            raise ValueError(f"probe {self.name!r}: its parts' keys are not its keys")
        for name, keys in self.parts:
            validate_fact_keys(keys, f"probe {name!r} keys", producer=f"probe:{name}")

    def run_names(self) -> tuple[str, ...]:
        """The names its runs are reported under: its parts', else its own."""
        return tuple(name for name, _ in self.parts) or (self.name,)

    def deadline(self, options: Options) -> float:
        return options.timeout * self.scale
