"""The Plan: everything one run was asked to do, frozen, built once from the command's options
(click) or from ``sys.argv`` (:mod:`.startup`); two Plans for the same command line are equal.

Only :mod:`envdoctor.record` (``sys`` and ``typing``) is imported here: start-up builds a Plan before click
is imported, and before it starts the early children (a dataclass would import :mod:`inspect` first).
"""

from __future__ import annotations

from envdoctor.record import Record


class Plan(Record):
    """What a run collects and judges, and how it answers."""

    command: str = "check"  # check, report, healthcheck, exec, diagnose, distributed
    #: The target interpreter (envdoctor.process.target) and why it was chosen; None: envdoctor's own.
    python: str | None = None
    python_chosen_by: str = ""
    timeout: float = 5.0  # seconds per probe (each probe scales it)
    micro: bool = True
    micro_only: bool = False
    device: str | None = None  # "cpu", "cuda", "cuda:N" for the microchecks
    compile: bool = False
    #: Test and debugging knobs of the microchecks child (see probes/torch_child.py).
    micro_checks: tuple[str, ...] | None = None
    micro_inject: str = ""
    micro_budget: float | None = None
    micro_deadline: float | None = None
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    fail_on: str = "fail"
    verbose: bool = False
    #: "terminal", "json", "markdown" (report/diagnose), "line" (healthcheck) or "npd" (healthcheck
    #: --npd: node-problem-detector's plugin answer, envdoctor/output/engines.py) or "slurm" (healthcheck
    #: --slurm: drain/resume this node, envdoctor/commands/slurm.py).
    output: str = "terminal"
    output_file: str | None = None
    #: The fast path (healthcheck, exec): the healthcheck subset of probes and checks; the probes get
    #: ``budget`` seconds and a watchdog answers after ``deadline`` seconds, whatever is stuck.
    fast: bool = False
    budget: float | None = None
    deadline: float | None = None
    #: ``--expect-gpus N``: a fact (``plan.expect_gpus``) the expect-gpus check reads.
    expect_gpus: int | None = None
    distributed: bool = False
    #: Where the verdict is also written for the fleet's engines (envdoctor/output/engines.py):
    #: a node_exporter textfile (only failures with ``prometheus_failures_only``), an NFD feature file
    #: or features.d folder whose labels expire after ``nfd_expiry`` seconds.
    prometheus_textfile: str | None = None
    prometheus_failures_only: bool = False
    nfd_features: str | None = None
    nfd_expiry: float = 900.0
