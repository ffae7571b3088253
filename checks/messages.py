"""What a pasted text's messages say when no other check judges them.

``known-message``: each catalogue row (envdoctor/data/messages.json, the code strings of errors.json) the text
holds whose facts no other check judges (``judged_by: null``) names its cause, once per cause, worst first,
with the remedy the row leads to (for the framework that printed it, or none).

``unexplained-error``: a line that reports an error and that no signature or catalogue row explains is
quoted as a warning, with the package of the traceback's last frame: an error is never read as health.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from envdoctor.knowledge import catalogue, compat, remedies

from ..kit import Remediation, evidence, fail, skip, warn
from ..model import Facts, Finding
from ..registry import CheckResult, check
from ._common import framework_version

#: At most this many findings per check: a looping log says each thing once.
MAX_FINDINGS = 5
_RANK_WORDS = {0: "a fatal signal or exit", 1: "an exception", 2: "an error", 3: "a failure"}


def _container(facts: Facts) -> str | None:
    reading = facts.get("host.container")
    return str(reading.value) if reading.ok and reading.value else None


def _hosts(groups: list[tuple[str, list[dict[str, Any]]]], causes: Mapping[str, Any]) -> dict[str, str]:
    """Symptom cause id -> the failing cause group of this text it is folded into: one its ``led_by`` names."""
    hosts = [cid for cid, rows in groups if _role(rows) == "cause" and not _judged(rows) and rows[0]["severity"] == "fail"]
    host_of: dict[str, str] = {}
    for cid, rows in groups:
        if _role(rows) == "symptom":
            led = causes[cid].led_by if cid in causes else ()
            host = next((h for h in hosts if h in led and h != cid), None)
            if host is not None:
                host_of[cid] = host
    return host_of


@check("known-message", "Every message the text holds is understood", needs=("text.messages",))
def known_message(facts: Facts) -> CheckResult:
    reading = facts.get("text.messages")
    ev = evidence(facts, "text.messages")
    if not reading.ok:
        return skip("The text holds no catalogued message", detail=reading.describe(), evidence=ev)
    causes = catalogue.causes()
    by_cause: dict[str, list[dict[str, Any]]] = {}
    # A line that a judged row of the same emitter also reads ("… killed by signal: Bus error. It is possible that
    # dataloader's workers are out of shared memory") is that row's check's to judge: the wider row says no more.
    judged = {(str(row.get("line")), row.get("emitter")) for row in reading.value or ()
              if row.get("judged_by") is not None}
    for row in reading.value or ():
        if row.get("judged_by") is None and (str(row.get("line")), row.get("emitter")) in judged:
            continue
        # A judged row is said here too, as the fallback: when its own check judges it, the pipeline folds this
        # finding into that check's (pipeline/diagnose.py fold_judged), so a message is never left unsaid.
        if row.get("severity") in ("fail", "warn"):
            by_cause.setdefault(str(row["cause"]), []).append(dict(row))
    _one_symptom_per_line(by_cause)
    _one_reading_per_sentence(by_cause)
    if not by_cause:
        return skip("Every catalogued message the text holds is judged by its own check", evidence=ev)
    python = facts.value("python.executable")
    found: list[Finding] = []
    # Causes before symptoms ("JAX could not initialise its CUDA backend" is what a cuDNN mismatch leads to): a
    # symptom the same text explains is folded into the first cause's finding as its evidence, said once.
    groups = sorted(by_cause.items(), key=lambda kv: (_role(kv[1]) == "symptom", kv[1][0]["severity"] != "fail"))
    # a judged row's fallback explains nothing here: its check's finding takes the symptoms (fold_symptoms). A symptom
    # is folded only into a failing cause the data says leads to it (its cause's ``led_by``); beside any other it
    # stands, after the causes.
    host_of = _hosts(groups, causes)
    explained = [(cid, rows) for cid, rows in groups if cid in host_of]
    for cause_id, rows in groups:
        if (cause_id, rows) in explained:
            continue
        cause = causes.get(cause_id)
        title = cause.title if cause else cause_id
        first = rows[0]
        said = _tensorflow(facts, rows, python) if first.get("remedy") == "tensorflow-cuda" else \
            message_remedy(first.get("remedy"), python, _container(facts))
        if cause_id in _ARCH_CAUSES and said is not None and (arch := _toolkit_for_arch(facts, rows)):
            said = Remediation(f"{arch} {said.text}", said.commands, said.links)
        lines = list(dict.fromkeys(str(r["line"]) for r in rows))
        detail = (f"{first['emitter']} says: \"{lines[0][:300]}\""
                  + (f" (and {len(lines) - 1} more line(s) of this cause)" if len(lines) > 1 else "")
                  + f". Catalogue row {first['id']} (envdoctor/data/messages.json).")
        verified = any(r.get("verified", True) for r in rows if r["severity"] == "fail")
        if first["severity"] == "fail" and not verified:
            detail += (" The row's wording was not read in its emitter's source (verified: false), so this is a "
                       "warning at most.")
        said_ev: dict[str, Any] = {"text.messages": [r["id"] for r in rows][:10], "lines": lines[:5],
                                   "role": _role(rows)}
        if cause and cause.alternative:
            said_ev["alternative"] = cause.alternative
        if _judged(rows):
            said_ev["judged_by"] = sorted({str(r["judged_by"]) for r in rows})
        said_ev["cause"] = cause_id
        mine = [(cid, srows) for cid, srows in explained if host_of[cid] == cause_id]
        if mine:
            led = [(causes[cid].title if cid in causes else cid, str(srows[0]["line"])) for cid, srows in mine]
            detail += " " + catalogue.explains_sentence(led)
            said_ev["symptoms"] = [str(srows[0]["id"]) for _, srows in mine]
        worst = [first] + [srows[0] for _, srows in mine]
        failing = any(r["severity"] == "fail" and r.get("verified", True) for r in worst)
        # a judged row's fallback without a command to give can at most warn
        failing = failing and (said is not None or not said_ev.get("judged_by"))
        make = fail if failing and (verified or first["severity"] != "fail") else warn
        found.append(make(title, detail=detail, evidence=said_ev, remedy=said))
    return found[:MAX_FINDINGS]


#: The causes whose line names a GPU architecture a compiler does not know (nvcc's compute_NN, ptxas' sm_NN).
_ARCH_CAUSES = ("nvcc-unknown-arch", "ptxas-unknown-arch")
_ARCH_RE = re.compile(r"(?:compute_|sm_)?(\d{2,3})[a-z]?$")


def _toolkit_for_arch(facts: Facts, rows: list[dict[str, Any]]) -> str | None:
    """Which CUDA toolkits compile for the architecture the line names (compat.json's toolkit_targets), and, when
    the text shows nvcc's own version line, why this one does not: "nvcc 11.7 targets CC 3.5–8.7; compute_90 (CC
    9.0) needs CUDA 11.8 or newer"."""
    cc = None
    for row in rows:
        for arg in row.get("args") or ():
            if m := _ARCH_RE.search(str(arg).strip("'\" ")):
                digits = m.group(1)
                cc = (int(digits[:-1]), int(digits[-1]))
                break
        if cc:
            break
    if cc is None:
        return None
    fitting = []
    for target in compat.data()["toolkit_targets"]["rows"]:
        span = compat.toolkit_range(str(target["cuda"]))
        if span and span[0] <= cc <= span[1]:
            fitting.append(str(target["cuda"]))
    want = f"CC {cc[0]}.{cc[1]}"
    nvcc = facts.value("toolkit.nvcc_version")
    span = compat.toolkit_range(str(nvcc)) if nvcc else None
    this = f"nvcc {nvcc} compiles for CC {span[0][0]}.{span[0][1]}–{span[1][0]}.{span[1][1]} (its version line); " \
        if span else ""
    if not fitting:
        return f"{this}no CUDA toolkit in envdoctor's table compiles for {want}." if this else None
    newest = max(fitting, key=lambda v: tuple(int(x) for x in v.split(".")))
    oldest = min(fitting, key=lambda v: tuple(int(x) for x in v.split(".")))
    if span and cc > span[1]:
        return f"{this}{want} needs CUDA {oldest} or newer."
    if span and cc < span[0]:
        return f"{this}{want} was last compiled for by CUDA {newest}: build for a newer architecture, or use that toolkit."
    return f"{this}CUDA {oldest} to {newest} compile for {want}."


def _tensorflow(facts: Facts, rows: list[dict[str, Any]], python: str | None) -> Remediation:
    """TensorFlow's remedy for this platform: on native Windows (its lines name .dll files, or the OS was read) GPU
    TensorFlow ended with 2.10 (TensorFlow's install page), elsewhere its ``and-cuda`` extra."""
    shown = [*rows, *(facts.value("text.messages") or ())]
    windows = facts.value("host.os") == "Windows" or any(".dll" in str(r.get("line", "")).lower() for r in shown) or any(
        str(f.get("library", "")).lower().endswith(".dll") for f in facts.value("torch.loader_failures") or ())
    text, commands, links = remedies.tensorflow_gpu(python, windows, framework_version(facts, "tensorflow"))
    return Remediation(text, commands, links)


def _fixed_words(row_id: str) -> int:
    """How much of a row's format is fixed text: of two rows one line is an instance of, the longer says more."""
    row = _rows_by_id().get(row_id)
    return len(catalogue._PLACEHOLDER_RE.sub("", row.format)) if row else 0


@functools.lru_cache(maxsize=1)
def _rows_by_id() -> dict[str, catalogue.Message]:
    return {row.id: row for row in catalogue.messages()}


def _one_symptom_per_line(by_cause: dict[str, list[dict[str, Any]]]) -> None:
    """A line two symptom rows read (torch's "NCCL error in: …, unhandled cuda error …" is also NCCL's "unhandled cuda
    error") is the most specific row's: one line says one thing."""
    symptoms = [(cid, r) for cid, rows in by_cause.items() for r in rows
                if (r.get("role") or catalogue.role_of(cid)) == "symptom"]
    best: dict[str, tuple[int, str]] = {}
    for _cid, r in symptoms:
        score = _fixed_words(str(r.get("id")))
        line = str(r.get("line"))
        if line not in best or score > best[line][0]:
            best[line] = (score, str(r.get("id")))
    for cid in list(by_cause):
        kept = [r for r in by_cause[cid] if not ((r.get("role") or catalogue.role_of(cid)) == "symptom"
                                                 and best.get(str(r.get("line")), (0, r.get("id")))[1] != r.get("id"))]
        if kept:
            by_cause[cid] = kept
        else:
            del by_cause[cid]


def _one_reading_per_sentence(by_cause: dict[str, list[dict[str, Any]]]) -> None:
    """A line two rows of one emitter read (JAX's "Found cuDNN version …, but JAX was built against …" is also its
    "Found <library> version …") is the most specific row's."""
    best: dict[tuple[str, str, str], tuple[int, str]] = {}

    def key(cid: str, r: dict[str, Any]) -> tuple[str, str, str]:
        # a cause's sentence and the symptom's that wraps it ("CUDA backend failed to initialize: Found cuDNN …")
        # are two sentences of one line: only rows of one role compete
        return str(r.get("line")), str(r.get("emitter")), str(r.get("role") or catalogue.role_of(cid))

    for cid, rows in by_cause.items():
        for r in rows:
            k, score = key(cid, r), _fixed_words(str(r.get("id")))
            if k not in best or score > best[k][0]:
                best[k] = (score, str(r.get("id")))
    for cid in list(by_cause):
        kept = [r for r in by_cause[cid] if best[key(cid, r)][1] == r.get("id")]
        if kept:
            by_cause[cid] = kept
        else:
            del by_cause[cid]


def _judged(rows: list[dict[str, Any]]) -> bool:
    """Every row of the group is judged by another check: known-message's finding on them is the fallback."""
    return all(r.get("judged_by") for r in rows)


def _role(rows: list[dict[str, Any]]) -> str:
    """A cause's rows are a symptom when every one of them is (the row's role, else its cause's, in the data)."""
    return "symptom" if all((r.get("role") or catalogue.role_of(r.get("cause"))) == "symptom" for r in rows) else "cause"


def message_remedy(name: str | None, python: str | None, container: str | None) -> Remediation | None:
    said = remedies.message_remedy(name, python, container)
    return Remediation(said[0], said[1], said[2]) if said else None


@check("unexplained-error", "Every error line in the text is explained", needs=("text.error_lines",))
def unexplained_error(facts: Facts) -> CheckResult:
    reading = facts.get("text.error_lines")
    ev = evidence(facts, "text.error_lines")
    if not reading.ok or not reading.value:
        return skip("The text shows no error line that no rule explains", detail=reading.describe(), evidence=ev)
    entries = [e for e in reading.value if isinstance(e, Mapping) and e.get("line")]  # no line: nothing to quote
    if not entries:
        return skip("The text shows no error line that no rule explains", evidence=ev)
    found = []
    for entry in entries[:MAX_FINDINGS]:
        line = str(entry["line"])
        pkg = entry.get("package")
        where = f", raised in {pkg}" if pkg else ""
        found.append(warn(f"Unexplained error: {line[:110]}" + ("…" if len(line) > 110 else ""),
                          detail=f"The text reports {_RANK_WORDS.get(int(entry.get('rank', 2)), 'an error')}{where} that "
                                 f"no envdoctor rule explains: \"{line[:400]}\". It is a problem until shown otherwise: "
                                 "read it with the lines around it.",
                          evidence={"line": line[:400], "package": pkg}))
    more = len(entries) - len(found)
    if more > 0:
        last = found[-1]
        found[-1] = warn(last.title, detail=last.detail + f" ({more} more unexplained error line(s) in the text.)",
                         evidence=last.evidence)
    return found
