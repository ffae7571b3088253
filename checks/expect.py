"""What the operator asked the node to show (``healthcheck``/``exec --expect-gpus N``), judged from
the facts: the Plan's ``plan.expect_gpus`` against the GPUs a CUDA program here would see. Not asked
(no ``plan.expect_gpus`` fact: any other command, a saved report, a paste), the check does not run."""

from __future__ import annotations

from ..kit import fail, ok
from ..model import Facts, Reason, Remediation
from ..registry import CheckResult, check
from ..views import VisibleDevices, gpus


def visible_gpus(facts: Facts) -> tuple[int | None, str]:
    """How many GPUs a CUDA program here would see, and from which fact: ``cuDeviceGetCount``
    (honours CUDA_VISIBLE_DEVICES), else the CUDA ordinals matched to NVML, else NVML's count."""
    count = facts.value("cuda.device_count")
    if isinstance(count, int) and not isinstance(count, bool):
        return count, "cuDeviceGetCount"
    mapped = VisibleDevices.from_facts(facts)
    if mapped.mapped:
        return len(mapped.devices), "CUDA_VISIBLE_DEVICES over NVML"
    reading = facts.get("nvml.gpus")
    if reading.ok:
        return len(gpus(facts)), "NVML"
    if reading.reason is Reason.ABSENT:  # no NVIDIA driver or library at all: none visible, for sure
        return 0, f"NVML ({reading.describe()})"
    return None, reading.describe()


def _remedy(facts: Facts) -> Remediation | None:
    from envdoctor.knowledge import remedies  # only on a failure: the healthcheck's path stays lean

    container = facts.value("host.container")
    said = remedies.message_remedy("no-visible-gpu", None, str(container) if container else None)
    return Remediation(*said) if said else None


@check("expect-gpus", "The node shows the GPUs --expect-gpus asks for", healthcheck=True,
       needs=("plan.expect_gpus",))
def expect_gpus(facts: Facts) -> CheckResult:
    """``--expect-gpus N``: fewer visible GPUs than N is a failure (a node that lost a GPU, a pod
    scheduled without its GPU request, CUDA_VISIBLE_DEVICES hiding them)."""
    expected = facts.value("plan.expect_gpus")
    if not isinstance(expected, int) or isinstance(expected, bool):
        return None  # not asked: nothing to hold the node to
    count, how = visible_gpus(facts)
    evidence = {"expected": expected, "visible": count, "counted by": how}
    remedy = _remedy(facts) if count is None or count < expected else None
    if count is None and expected > 0:
        return fail(f"No GPU could be counted; {expected} expected", detail=f"The GPUs could not be read ({how}).",
                    evidence=evidence, remedy=remedy)
    if count is not None and count < expected:
        return fail(f"{count} GPU(s) visible, {expected} expected",
                    detail=f"{count} visible ({how}), fewer than --expect-gpus {expected}: a GPU is missing from "
                           "this node or this container, or CUDA_VISIBLE_DEVICES hides it.", evidence=evidence,
                    remedy=remedy)
    return ok(f"{count if count is not None else 'Any number of'} GPU(s) visible ({expected} expected)",
              evidence=evidence)
