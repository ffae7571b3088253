"""Run checks over Facts; a check that raises becomes an ``error`` finding, never a traceback."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from envdoctor.kit import error
from envdoctor.knowledge import remedies
from envdoctor.model import SEVERITY, Facts, Finding, Reason, Remediation, Status
from envdoctor.registry import CheckSpec, Registry

_UNJUDGEABLE = (Reason.TIMEOUT, Reason.CRASHED)


def select(registry: Registry | Iterable[CheckSpec], only: Iterable[str] = (), skip: Iterable[str] = (),
           healthcheck: bool = False) -> tuple[list[CheckSpec], list[str]]:
    """The checks to run and the unknown ids the user named (to warn about)."""
    specs = list(registry)
    known = {s.id for s in specs}
    only_set, skip_set = set(only), set(skip)
    unknown = sorted((only_set | skip_set) - known)
    if healthcheck:
        specs = [s for s in specs if s.healthcheck]
    if only_set:
        specs = [s for s in specs if s.id in only_set]
    return [s for s in specs if s.id not in skip_set], unknown


def run_check(spec: CheckSpec, facts: Facts) -> list[Finding]:
    if not spec.judges_failures:
        broken = {k: r for k in spec.needs if (r := facts.get(k)).reason in _UNJUDGEABLE}
        if broken:
            detail = "; ".join(f"{k}: {r.describe()}" for k, r in broken.items())
            return [error(f"Could not judge: {spec.title}", detail=f"A fact this check needs could not be read ({detail}).",
                          evidence={k: r.describe() for k, r in broken.items()}, id=spec.id)]
    try:
        result = spec.func(facts)
        if result is None:
            found: list[Finding] = []
        elif isinstance(result, Finding):
            found = [result]
        else:
            found = list(result)
        out = []
        for f in found:
            if not isinstance(f, Finding):
                raise TypeError(f"check returned {type(f).__name__}, not a Finding")
            out.append(f if f.id else _with_id(f, spec.id))
        return out
    except Exception as exc:  # noqa: BLE001 - contain the crash, show where it happened
        import traceback  # only when a check crashed: not a cost of every healthcheck

        tb = traceback.extract_tb(exc.__traceback__)
        where = f" at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else ""
        return [error(f"Check crashed: {spec.title}",
                      detail=f"{type(exc).__name__}: {exc}{where}. This is a bug in the check ({spec.provider}); "
                             "the other checks still ran.", id=spec.id)]


def _with_id(finding: Finding, check_id: str) -> Finding:
    """A copy of a finding carrying its check's id. Not ``dataclasses.replace``: that validates and
    freezes the evidence a second time, which was a sixth of judging a report."""
    copy = object.__new__(Finding)
    copy.__dict__.update(finding.__dict__)
    object.__setattr__(copy, "id", check_id)
    return copy


def diagnose(facts: Facts, checks: Iterable[CheckSpec]) -> list[Finding]:
    findings: list[Finding] = []
    for spec in checks:
        findings.extend(run_check(spec, facts))
    return outside_managed_python(cohere(fold_symptoms(fold_judged(findings))), facts)


def _into_venv(rem: Remediation, managed: str) -> Remediation:
    commands = tuple(remedies.into_venv(c, managed) for c in rem.commands)
    alternatives = tuple(_into_venv(a, managed) for a in rem.alternatives)
    if commands == rem.commands and alternatives == rem.alternatives:
        return rem
    return dataclasses.replace(rem, commands=commands, alternatives=alternatives,
                               links=tuple(dict.fromkeys((*rem.links, remedies.PEP_668))))


def outside_managed_python(findings: list[Finding], facts: Facts) -> list[Finding]:
    """On an externally-managed interpreter (PEP 668: Debian 12's /usr/bin/python3) ``pip install``
    is refused, so every install a remedy runs there goes into a new venv of it instead
    (:func:`envdoctor.knowledge.remedies.into_venv`), said once in the remedy's words."""
    managed = facts.value("python.executable")
    if facts.value("python.externally_managed") is not True or not isinstance(managed, str):
        return findings
    out = []
    for f in findings:
        new = _into_venv(f.remediation, managed)
        if new is not f.remediation:
            why = (f"{managed} is externally managed (PEP 668: pip refuses to install into it): the command makes "
                   f"a venv of it ({remedies.NEW_VENV}) and installs there (on Debian and Ubuntu the venv module is "
                   "the python3-venv package).")
            f = dataclasses.replace(f, remediation=dataclasses.replace(new, text=f"{new.text} {why}".strip()))
        out.append(f)
    return out


# -- coherent remedies ----------------------------------------------------------------------------
# Checks judge alone; this is the one place their remedies are read together. The most severe finding
# that installs torch (ties: the earlier check, root causes come first) decides which torch to install;
# a less severe finding's command for another torch, or a driver upgrade when that torch is the CPU
# build, is left out with a note naming the finding that decided, so no screen tells a user to install
# two different builds, or to upgrade a driver for a GPU no build can use.
#
# It reads the typed commands (remedies.Command: a PipInstall's packages and variant, a PipUninstall,
# a DriverInstall), never the printed words. It runs on findings the checks have just made, whose
# command lines all carry their types; a saved report is re-judged by the checks, never cohered as read.

Target = remedies.Target


def _targets(rem: Remediation) -> list[Target]:
    found = list(remedies.torch_targets(remedies.typed(rem.commands)))
    for alt in rem.alternatives:
        found.extend(_targets(alt))
    return found


def _agrees(target: Target, decided: list[Target]) -> bool:
    return any((target[0] is None or d[0] is None or target[0] == d[0]) and
               (target[1] is None or d[1] is None or target[1] == d[1]) for d in decided)


def _contradicts(rem: Remediation, decided: list[Target]) -> bool:
    """Whether a remedy (without alternatives) asks for what the deciding finding rules out."""
    if any(not _agrees(t, decided) for t in _targets(rem)):
        return True
    cpu_only = bool(decided) and all(d[1] == "cpu" for d in decided)
    return cpu_only and remedies.installs_driver(rem.commands, rem.links)


def _kept(command: str, decided: list[Target]) -> bool:
    """Whether a command of a contradicted remedy stays: not a torch uninstall, and every torch it
    installs agrees with what was decided."""
    typed = command.command if isinstance(command, remedies.Line) else None
    if typed is None:
        return True
    return not typed.uninstalls_torch and all(_agrees(t, decided) for t in typed.torch_targets())


def _cohered(rem: Remediation, decided: list[Target]) -> Remediation | None:
    """``rem`` without the parts that contradict ``decided``; None when nothing had to go."""
    if rem.alternatives:
        kept = tuple(a for a in rem.alternatives if not _contradicts(a, decided))
        if len(kept) == len(rem.alternatives):
            return None
        if len(kept) >= 2:
            return dataclasses.replace(rem, alternatives=kept)
        if not kept:
            return Remediation(rem.text.rstrip(":").rstrip(), rem.commands, rem.links, (), rem.sources)
        only = kept[0]  # one way left: no "either … or …" any more
        text = only.text if rem.text.endswith(":") or not rem.text else f"{rem.text} {only.text}"
        return Remediation(text, rem.commands + only.commands, rem.links + only.links, (), rem.sources + only.sources)
    if not _contradicts(rem, decided):
        return None
    commands = tuple(c for c in rem.commands if _kept(c, decided))
    if not commands or remedies.installs_driver(rem.commands, rem.links):
        return Remediation("", (), (), (), rem.sources)  # what is left was about what went
    return Remediation(rem.text, commands, rem.links, (), rem.sources)


def cohere(findings: list[Finding]) -> list[Finding]:
    """The findings with every remedy that a more severe finding contradicts left out (see above)."""
    order = sorted(range(len(findings)), key=lambda i: (-SEVERITY[findings[i].status], i))
    out = list(findings)
    decider: Finding | None = None
    for i in order:
        f = out[i]
        if f.status in (Status.OK, Status.SKIP):
            continue
        if decider is None:
            decider = f if _targets(f.remediation) else None
            continue
        new = _cohered(f.remediation, _targets(decider.remediation))
        if new is None:
            continue
        note = f"(Left out here: a fix that {decider.id} ({decider.status.value}) rules out; follow {decider.id}'s remedy.)"
        out[i] = dataclasses.replace(f, remediation=dataclasses.replace(new, text=f"{new.text} {note}".strip()))
    return out


#: A finding whose evidence says ``"role": "symptom"`` is what another cause leads to ("CUDA is not available",
#: "JAX could not initialise its CUDA backend"; the role is data: envdoctor/data/messages.json's causes).
SYMPTOM = "symptom"


#: The check that quotes error lines no rule explains: within a status it follows every finding that explains.
UNEXPLAINED = "unexplained-error"
#: The check that names a catalogued message's cause when no other check judges it.
KNOWN_MESSAGE = "known-message"


def is_symptom(finding: Finding) -> bool:
    return finding.evidence.get("role") == SYMPTOM


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Worst first; within a status, causes before symptoms, and an unexplained error line after both (what explains
    the text stands above what nothing explains); otherwise in check order (stable)."""
    return sorted(findings, key=lambda f: (-SEVERITY[f.status], f.id == UNEXPLAINED, is_symptom(f)))


def fold_judged(findings: list[Finding]) -> list[Finding]:
    """``known-message``'s finding on rows another check judges (its evidence's ``judged_by``) is the fallback: when
    that check found something, the message is that check's to say, once, by the check whose id users look for
    (known-message then reports what it did before: a skip, every message judged by its own check); only when that
    check found nothing (its facts unread) does known-message's finding stand."""
    # a check that crashed (error) did not judge the message: known-message's fallback stands
    spoke = {f.id for f in findings if f.status in (Status.FAIL, Status.WARN) and f.id != KNOWN_MESSAGE}
    out: list[Finding] = []
    folded: list[str] = []
    for f in findings:
        by = [str(c) for c in f.evidence.get("judged_by") or ()] if f.id == KNOWN_MESSAGE else []
        if any(c in spoke for c in by):
            folded.extend(str(i) for i in f.evidence.get("text.messages") or ())
            continue
        out.append(f)
    if folded and not any(f.id == KNOWN_MESSAGE for f in out):
        out.append(Finding(KNOWN_MESSAGE, Status.SKIP, "Every catalogued message the text holds is judged by its own "
                           "check", evidence={"text.messages": folded[:10]}))
    return out


def fold_symptoms(findings: list[Finding]) -> list[Finding]:
    """A ``known-message`` symptom ("JAX could not initialise its CUDA backend", "a DataLoader worker died") in a text
    whose cause another check found (cudnn-mismatch, host-shm-size, loader-library, torch-cpu-build, …) is that
    cause's evidence, said once: it is folded into the first failing cause finding (its ``symptoms`` and a sentence
    of its detail), never left standing beside it as a rival. A warning names no cause for certain ("persistence
    mode is off" may be unrelated), so it takes no symptom."""
    judged = [f for f in findings if f.status not in (Status.OK, Status.SKIP)]
    # known-message's fallback on a row another check judges (fold_judged kept it: that check found nothing) is a
    # rival as much as a symptom is when another check found the cause ("Cuda failure 'CUDA driver version is
    # insufficient …'" next to driver-too-old's finding)
    symptoms = [f for f in judged if f.id == KNOWN_MESSAGE and (is_symptom(f) or f.evidence.get("judged_by"))]
    if not symptoms:
        return findings
    causes = sorted((f for f in judged if f.id not in (KNOWN_MESSAGE, UNEXPLAINED) and not is_symptom(f)),
                    key=lambda f: -SEVERITY[f.status])
    folded: dict[int, list[Finding]] = {}
    gone: set[int] = set()
    from envdoctor.knowledge import catalogue

    known = catalogue.causes()
    for sym in symptoms:
        # Only a failure names a cause for certain (a warning beside it, "persistence mode is off", may be unrelated),
        # and only one of the checks the data says lead to it (its cause's led_by; a fallback's own judging check).
        cause = known.get(str(sym.evidence.get("cause") or ""))
        leads = {*(cause.led_by if cause else ()), *(str(c) for c in sym.evidence.get("judged_by") or ())}
        host = next((c for c in causes if c.status is Status.FAIL and c.id in leads), None)
        if host is None:
            continue
        folded.setdefault(id(host), []).append(sym)
        gone.add(id(sym))
    out = []
    for f in findings:
        if id(f) in gone:
            continue
        if id(f) in folded:
            led = folded[id(f)]
            said = [(s.title, str((s.evidence.get("lines") or ("",))[0])) for s in led]
            ids = [str(i) for s in led for i in (s.evidence.get("text.messages") or ())]
            other = "".join(f" The alternative reading: {s.evidence['alternative']}." for s in led
                            if s.evidence.get("alternative"))
            f = dataclasses.replace(f, detail=f"{f.detail} {catalogue.explains_sentence(said)}{other}".strip(),
                                    evidence={**f.evidence, "symptoms": [*(f.evidence.get("symptoms") or ()), *ids]})
        out.append(f)
    return out
