"""What a report examined: the checks that passed on facts that were read, kept apart from the ones
that could not be judged because the facts they need were not read ("not in the text" for a paste)
and the ones that do not apply here. "No problems found" is said only about what was examined.

A skip could not be judged when the fact it cites first (the one its verdict would rest on; see
CONTRIBUTING, "Evidence") was not read: it carries a reason, or is null where the registry does not
make null a reading. Every other skip does not apply (no container, no Jupyter server, a CPU build).
The screen, the Markdown and the JSON summary all ask this module, so they say the same thing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from envdoctor.knowledge import factkeys
from envdoctor.model import Facts, Finding, Reason, Status
from envdoctor.record import Record

_NOT_SHOWN = (Reason.NOT_IN_REPORT, Reason.NOT_COLLECTED)
#: What decides most problems, with the facts any one of which shows it. A text that shows none of a group's
#: facts cannot rule those problems out, so "No problems found" is not said about it, however many checks passed.
CORE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("torch's build", ("torch.version",)),
    ("the driver", ("nvml.driver_version", "driver.kernel_module_version")),
    ("the GPUs", ("nvml.gpus", "torch.devices")),
)


def _kind(origin: str) -> str:
    """``paste``, ``report`` or ``live``, from a Report's origin (``paste:stdin``, ``report:r.json``)."""
    head = origin.split(":", 1)[0]
    return head if head in ("paste", "report") else "live"


def why_unread(facts: Facts, key: str, origin: str = "live") -> str | None:
    """Why ``key`` was not read, in a few words (``not in the text``, ``absent``), or None when it was."""
    reading = facts.get(key)
    kind = _kind(origin)
    if reading.reason is None:
        entry = factkeys.lookup(key)
        if reading.value is not None or entry is None or entry.type.endswith("|null"):
            return None
        return "not in the text" if kind == "paste" else "not read"
    if reading.reason in _NOT_SHOWN or reading.reason is Reason.SKIPPED:
        return {"paste": "not in the text", "report": "not in the report"}.get(kind, "not probed")
    return reading.reason.value


def unjudged_because(finding: Finding, facts: Facts, origin: str = "live") -> str | None:
    """For a skip that could not be judged: why its deciding fact is missing; None for every other finding."""
    if finding.status is not Status.SKIP:
        return None
    first = next(iter(finding.evidence), None)
    if first is None or factkeys.lookup(first) is None:
        return None
    return why_unread(facts, first, origin)


class Examined(Record):
    """The findings of one report, counted by what they say about the environment."""

    problems: int  # fail, error, warn
    passed: int  # ok: judged healthy on facts that were read
    unjudged: Counter[str]  # skips for want of a fact, by why it is missing
    not_applicable: int  # every other skip
    kind: str  # "paste", "report", "live"
    not_shown: tuple[str, ...] = ()  # the CORE groups a paste or a saved report does not show

    @classmethod
    def of(cls, findings: Iterable[Finding], facts: Facts, origin: str = "live") -> Examined:
        problems = passed = not_applicable = 0
        unjudged: Counter[str] = Counter()
        for f in findings:
            if f.status in (Status.FAIL, Status.ERROR, Status.WARN):
                problems += 1
            elif f.status is Status.OK:
                passed += 1
            elif (why := unjudged_because(f, facts, origin)) is not None:
                unjudged[why] += 1
            else:
                not_applicable += 1
        kind = _kind(origin)
        not_shown = () if kind == "live" else tuple(
            name for name, keys in CORE
            if all(facts.get(k).reason in _NOT_SHOWN or why_unread(facts, k, origin) == "not in the text"
                   for k in keys))
        return cls(problems, passed, unjudged, not_applicable, kind, not_shown)

    @property
    def unjudged_count(self) -> int:
        return sum(self.unjudged.values())

    def unjudged_words(self) -> str:
        """``55 could not be judged: not in the text`` / ``3 could not be judged (absent: 2, denied: 1)``."""
        n = self.unjudged_count
        if not n:
            return ""
        if len(self.unjudged) == 1:
            return f"{n} could not be judged: {next(iter(self.unjudged))}"
        return f"{n} could not be judged (" + ", ".join(f"{w}: {c}" for w, c in self.unjudged.most_common()) + ")"

    def headline(self) -> str | None:
        """The sentence for a report with no problem, saying only what was examined; None when there
        are problems. A text that showed nothing judgeable is never told "No problems found"."""
        if self.problems:
            return None
        where = {"paste": "this text shows", "report": "this report shows"}.get(self.kind, "was examined")
        unjudged = self.unjudged_words()
        if self.passed:
            checks = f"{self.passed} check{'s' if self.passed != 1 else ''} passed"
            if self.not_shown:
                missing = ", ".join(self.not_shown[:-1]) + (" or " if len(self.not_shown) > 1 else "") + \
                    self.not_shown[-1]
                decide = "decide" if len(self.not_shown) > 1 else "decides"
                from envdoctor.knowledge.remedies import COLLECT_ENV

                return (f"Nothing wrong in what {where} ({checks}), but it does not show {missing}, which {decide} "
                        f"most problems" + (f"; {unjudged}" if unjudged else "") +
                        f". For a full judgement paste the output of `{COLLECT_ENV}`.")
            return f"No problems found in what {where} ({checks})" + (f"; {unjudged}." if unjudged else ".")
        subject = {"paste": " in this text", "report": " in this report"}.get(self.kind, "")
        n = self.unjudged_count
        if n and set(self.unjudged) <= {"not in the text", "not in the report"}:
            shows = "it does not show" if self.kind in ("paste", "report") else "were not read"
            checks = f"{n} checks need" if n != 1 else "1 check needs"
            return f"Nothing{subject} could be judged: {checks} facts {shows}."
        if n:
            return f"Nothing{subject} could be judged ({n} check{'s' if n != 1 else ''}: " + ", ".join(
                f"{w} {c}" for w, c in self.unjudged.most_common()) + ")."
        return f"No check applies to what {where}."

    def counts(self) -> list[str]:
        """The non-problem counts for the line under the problems: ``13 ok``, ``40 could not be judged: …``,
        ``5 not applicable here``."""
        parts = [f"{self.passed} ok"] if self.passed else []
        if self.unjudged_count:
            parts.append(self.unjudged_words())
        if self.not_applicable:
            parts.append(f"{self.not_applicable} not applicable here")
        return parts


__all__ = ["Examined", "unjudged_because", "why_unread"]
