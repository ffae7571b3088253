"""The real-case corpus: every paste parses, every case is well formed, and the built-in checks
never fail a healthy case and do not fall below the accuracy measured so far (issue 4's bar is
>= 90% of broken cases with the expected check as the top `fail`; bench/corpus_accuracy.py prints it)."""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from envdoctor.parsers import evidence, parse_text
from tests.corpus_judged import judged

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
CASES = json.loads((CORPUS / "cases.json").read_text(encoding="utf-8"))["cases"]


@functools.lru_cache(maxsize=1)
def _bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("corpus_accuracy", ROOT / "bench" / "corpus_accuracy.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    # dataclasses resolve annotations through sys.modules, so register before executing.
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


@functools.lru_cache(maxsize=1)
def _evaluated():  # type: ignore[no-untyped-def]
    """The bench's judgement of the corpus, once per process (two tests read it)."""
    return _bench().evaluate(CORPUS)


def _known_ids() -> set[str]:
    import re

    text = (ROOT / "docs" / "FACTS.md").read_text(encoding="utf-8")
    section = text.split("## Check ids", 1)[1]
    return set(re.findall(r"`([a-z0-9]+(?:-[a-z0-9]+)+)`", section))


def test_cases_are_well_formed() -> None:
    known = _known_ids() | {"healthy"}
    files = {c["file"] for c in CASES}
    assert len(files) == len(CASES), "a paste is listed twice"
    assert files == {p.name for p in CORPUS.glob("*.txt")}, "every .txt is a case and every case has its .txt"
    for case in CASES:
        assert case["source"].startswith("https://github.com/"), case["file"]
        assert case["symptom"].strip() and case["root_cause"].strip(), case["file"]
        assert case["expected"] in known, f"{case['file']}: unknown check id {case['expected']!r}"


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_every_paste_parses(case: dict) -> None:
    facts = parse_text((CORPUS / case["file"]).read_text(encoding="utf-8"))
    # Every paste yields at least one fact a check can judge; otherwise it could not be a case.
    judgeable = ("torch.version", "torch.cuda_version", "nvml.driver_version", "nvml.init", "torch.devices",
                 "torch.arch_list", "cuda.init", "cuda.driver_version", "torch.library_errors", "nvml.gpus",
                 "torch.cudnn_version", "driver.kernel_module_version", "container.cuda_requirement",
                 "torch.companion_cuda", *evidence.KEYS)
    failed_reads = [facts.get(k).reason for k in ("nvml.driver_version", "cuda.init")]
    assert any(facts.get(k).ok for k in judgeable) or any(r is not None and r.value in ("failed", "absent")
                                                            for r in failed_reads), case["file"]
    assert isinstance(case.get("with_messages", False), bool) and isinstance(case["partial"], bool)


#: The strict accuracy measured when this floor was last raised (200/212 on 240 cases). Issue 4's
#: bar is 90%; bench/corpus_accuracy.py prints the misses. This guards against regressions;
#: raise it as the corpus grows.
ACCURACY_FLOOR = 0.93


def test_no_healthy_case_fails_and_accuracy_does_not_regress() -> None:
    outcomes, stats = _evaluated()
    wrong = [f"{o.file}: expected {o.expected}, got {o.got}" for o in outcomes
             if o.expected != "healthy" and not o.correct]
    false_alarms = [f"{o.file}: {', '.join(o.fails)}" for o in outcomes if o.expected == "healthy" and o.fails]
    assert not false_alarms, "healthy cases with a fail:\n" + "\n".join(false_alarms)
    assert stats["broken_accuracy"] >= ACCURACY_FLOOR, (
        f"{stats['broken_right']}/{stats['broken']} broken cases right:\n" + "\n".join(wrong))


#: Issue 10's bar for the exact remedy where the thread gives one (cases.json's `remedy`).
REMEDY_FLOOR = 0.8


def test_the_top_finding_names_the_threads_remedy() -> None:
    outcomes, stats = _evaluated()
    missed = [f"{o.file}: wanted {o.remedy!r}, said {o.said[:160]!r}" for o in outcomes if o.remedy and not o.remedy_right]
    assert stats["with_remedy"] and stats["remedy_right"] / stats["with_remedy"] >= REMEDY_FLOOR, "\n".join(missed)


def test_every_fail_on_the_corpus_says_what_to_run() -> None:
    """'Say exactly what to do': each failing finding on a real paste carries a command to run."""
    from envdoctor.model import Status

    bare = []
    for file, facts, findings in judged():
        assert facts is not None, f"{file}: the parser refused a corpus paste"
        bare += [f"{file}: {f.id}" for f in findings if f.status is Status.FAIL and not f.remediation.command_lines()]
    assert not bare, "\n".join(bare)


def test_mangled_pastes_never_crash_a_check() -> None:
    """Each real paste with 40 characters replaced by hostile ones (NUL, bidi marks, markup, stray
    digits and dots): parsing either refuses it clearly or every check judges it without crashing."""
    import random

    from envdoctor.model import Status
    from envdoctor.parsers import ParseError
    from envdoctor.pipeline.diagnose import diagnose
    from envdoctor.registry import load_registry

    registry = load_registry(plugins=False)
    rng = random.Random(20261129)
    hostile = ["\x00", "\u202e", "(", ")", "\\", "[bold]", "\n", "é", "9", ".", "+", "-", ":", "\u00a0", "x"]
    crashed = []
    for case in CASES:
        chars = list((CORPUS / case["file"]).read_text(encoding="utf-8", errors="replace"))
        for _ in range(40):
            if chars:
                chars[rng.randrange(len(chars))] = rng.choice(hostile)
        try:
            facts = parse_text("".join(chars))
        except ParseError:
            continue
        crashed += [f"{case['file']}: {f.id}: {f.detail[:120]}" for f in diagnose(facts, registry)
                    if f.status is Status.ERROR]
    assert not crashed, "\n".join(crashed)


def test_no_check_crashes_on_any_real_paste() -> None:
    """Each real paste as it was pasted: no check raises (an ``error`` finding names a bug in a check)."""
    from envdoctor.model import Status

    crashed = []
    for file, _facts, findings in judged():
        crashed += [f"{file}: {f.id}: {f.detail[:160]}" for f in findings
                    if f.status is Status.ERROR and "bug in the check" in f.detail]
    assert not crashed, "\n".join(crashed)


@pytest.mark.parametrize("drop", ["path", "kind", "symbol", "library", "provider", "family", "version_node"])
def test_a_loader_record_missing_a_field_crashes_no_check(drop: str) -> None:
    """A saved report's loader records may come from an older producer or a hand edit: a record without
    one of its fields (or an undefined symbol the message did not name, as WinError 127's) is judged."""
    from envdoctor.knowledge.messages import loader_errors
    from envdoctor.model import Facts, Status, ok
    from envdoctor.pipeline.diagnose import diagnose
    from envdoctor.registry import load_registry

    lines = ["OSError: [WinError 127] The specified procedure could not be found. Error loading "
             '"C:\\venv\\Lib\\site-packages\\torch\\lib\\cudnn_adv_infer64_8.dll" or one of its dependencies.',
             "ImportError: /opt/venv/lib/python3.11/site-packages/torchvision/_C.so: undefined symbol: "
             "_ZN3c1017RegisterOperatorsD1Ev",
             "OSError: /usr/local/cuda/lib64/libcudnn_cnn_train.so.8: undefined symbol: "
             "_ZN5cudnn3cnn5infer22queryClusterPropertiesERPhS3_, version libcudnn_cnn_infer.so.8",
             "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory"]
    records = [dict(r) for r in loader_errors("\n".join(lines))]
    assert records
    for r in records:
        r.pop(drop, None)
    facts = Facts({"torch.loader_failures": ok(records, "test")})
    crashed = [f"{f.id}: {f.detail[:160]}" for f in diagnose(facts, load_registry(plugins=False))
               if f.status is Status.ERROR and "bug in the check" in f.detail]
    assert not crashed, "\n".join(crashed)
