"""Redaction's memos and fast paths (diagnose's throughput) never trade a secret for speed: a text found
clean is remembered by its exact text only, and a finding skips the walk only when nothing in it could
be capped or masked."""

from __future__ import annotations

from types import MappingProxyType

from envdoctor import redact
from envdoctor import report as report_module
from envdoctor.kit import EVIDENCE_ITEMS, fail, ok
from envdoctor.model import Facts, Remediation
from envdoctor.model import ok as reading
from envdoctor.redact import REDACTED, UnchangedMemo, json_blob, redact_tree
from envdoctor.report import MAX_TITLE, Report, to_json

SECRET = "hf_abcdefghijklmnopqrstuvwxyz"


def test_a_value_found_clean_is_not_remembered_for_another():
    # "token" is a hint, so the first value is walked, found clean and remembered.
    clean = MappingProxyType({"note": "loose tokens 12", "n": 1})
    assert redact_tree(clean) is clean
    assert json_blob(clean) in redact.UNCHANGED
    # The same shape with one character more, and the same words with a token beside them: walked again.
    dirty = MappingProxyType({"note": f"loose tokens 12 {SECRET}", "n": 1})
    out = redact_tree(dirty)
    assert SECRET not in str(dict(out)) and REDACTED in out["note"]
    assert redact_tree({"note": "loose tokens 12", "n": 1, "token": "x"}) is not None


def test_the_same_text_again_is_the_same_answer_whichever_came_first():
    dirty = {"url": "https://bob:hunter2@host/simple", "cc": "token count"}
    first = redact_tree(dirty)
    second = redact_tree(dict(dirty))
    assert first == second and "hunter2" not in str(first)
    assert json_blob(dirty) not in redact.UNCHANGED  # only unchanged texts are remembered


def test_an_object_that_prints_like_a_secret_shares_no_entry_with_the_string():
    class Spelled:
        def __str__(self) -> str:
            return SECRET

    # Not JSON: no text to key a memo by, so the walk decides (and leaves a non-string alone).
    assert json_blob({"v": Spelled()}) is None
    redact_tree({"v": Spelled()})
    assert SECRET not in str(redact_tree({"v": SECRET}))


def test_the_memo_is_bounded_and_keeps_only_short_texts():
    memo = UnchangedMemo(size=2, longest=10)
    memo.add("a" * 11)
    assert "a" * 11 not in memo
    memo.add("x")
    memo.add("y")
    memo.add("z")  # full: emptied, then this one kept
    assert "z" in memo and "x" not in memo
    # Bounded in characters held too: 8,192 entries of 64 KB each would be half a gigabyte.
    memo = UnchangedMemo(size=100, longest=10, budget=25)
    for word in ("a" * 10, "b" * 10, "c" * 10):
        memo.add(word)
    assert "c" * 10 in memo and "a" * 10 not in memo


def _report(*findings: object) -> Report:
    return Report(facts=Facts({"x": reading(1)}), findings=tuple(findings))  # type: ignore[arg-type]


def test_a_clean_short_finding_is_kept_as_the_same_object():
    f = ok("GPU visible", detail="one GPU", evidence={"nvml.gpus": 1}, id="gpu")
    assert _report(f).findings[0] is f


def test_a_finding_with_a_secret_anywhere_is_masked_after_a_clean_twin_was_remembered():
    clean = fail("token file missing", detail="token count", evidence={"api": "token"},
                 remedy=Remediation("set it", ("export X=1",)), id="t")
    assert _report(clean).findings[0] is clean  # walked (hints), found clean, remembered
    assert report_module._uncappable_blob(clean) in report_module._UNCHANGED_FINDINGS
    places = [
        fail(f"token file missing {SECRET}", detail="token count", evidence={"api": "token"}, id="t"),
        fail("token file missing", detail=f"token count {SECRET}", evidence={"api": "token"}, id="t"),
        fail("token file missing", detail="token count", evidence={"api": SECRET}, id="t"),
        fail("token file missing", detail="token count", evidence={"api": "token"},
             remedy=Remediation("set it", (f"export X={SECRET}",)), id="t"),
        fail("token file missing", detail="token count", evidence={"api": "token"},
             remedy=Remediation("", (), (), (Remediation("or", ("pip config set global.index-url "
                                                              "https://bob:hunter2@host/simple",)),)), id="t"),
    ]
    for f in places:
        text = to_json(_report(f))
        assert SECRET not in text and "hunter2" not in text, f


def test_a_finding_that_reaches_a_cap_is_still_capped():
    long_title = fail("x" * (MAX_TITLE + 10), id="t")
    assert len(_report(long_title).findings[0].title) < MAX_TITLE + 10 + 40
    assert _report(long_title).findings[0].title != long_title.title
    many = fail("many", evidence={"paths": [f"/p{i}" for i in range(EVIDENCE_ITEMS + 5)]}, id="t")
    assert len(_report(many).findings[0].evidence["paths"]) == EVIDENCE_ITEMS + 1
    long_value = fail("long", evidence={"v": "y" * (EVIDENCE_ITEMS * 64 + 5)}, id="t")
    assert len(_report(long_value).findings[0].evidence["v"]) < EVIDENCE_ITEMS * 64 + 5 + 60
    assert _report(long_value).findings[0].evidence["v"] != long_value.evidence["v"]


_PIECES = ("CUDA_", "NCCL_", "HF_", "PASSPHRASE", "PASSWORD", "PAſSWORD", "PAT", "_PAT", "GITHUB_PAT", "_PATH",
           "library_path", "TOKEN", "tokens", "KEY", "\u212aEY", "AUTH", "auth", "aut\u0131", "SESSION", "api",
           "access", "x", "7", "=", ":", " ", "\n", "\t", '"', "'", "-", "_", ".", "/", "@", "bob:hunter2@",
           "https://", "Bearer ", "hf_" + "a" * 20, "ghp_" + "b" * 20, "sk-" + "c" * 20, "AKIA" + "D" * 16,
           "xoxb-" + "e" * 10, "eyJ" + "f" * 10 + "." + "g" * 10 + "." + "h" * 10, "é", "İ")


def test_the_hints_are_a_superset_of_every_pattern():
    """Whatever redaction would change, the one-scan prefilter sees a hint in (fixed seed: a test
    that means the same every run)."""
    import random

    rng = random.Random(12)
    for _ in range(4000):
        key = "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 4)))
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 6)))
        value = {key: text, "n": [text, 1]}
        if redact.redact_value(value) != value:
            blob = json_blob(value)
            assert blob is not None and redact.may_hold_secret(blob), value
            assert redact_tree(value) == redact.redact_value(value)


def test_names_the_old_hints_missed_are_masked_in_a_saved_report():
    # PASSPHRASE holds no "passw"; "ſ" lower-cases to itself but matches "s" case-insensitively.
    for name, secret in (("CUDA_PASSPHRASE", "hunter2"), ("NCCL_PA\u017fSWORD", "s3cret"), ("CUDA_GITHUB_PAT", "abc123")):
        text = to_json(Report(facts=Facts({"env.vars": reading({name: secret, "CUDA_HOME": "/usr/local/cuda"})}),
                              findings=()))
        assert secret not in text, name
    assert not redact.may_hold_secret('{"libs.ld_library_path": [], "toolkit.nvcc_path": "/usr/bin/nvcc"}')
