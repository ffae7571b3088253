"""Unknown is never a finding either way (issue 21, round 2): a warn or fail never names a fact the text did not
show ("torch (version not read) …", "nvcc None …", "Unexplained error: None"). A check whose deciding facts are
unknown skips; one whose deciding facts were read words its title without the unread ones.

For every registered check, on the bases and the unknown-making mutations of ``tests/test_unknown_never_ok.py``
(each fact it needs or reads absent, ``not_collected``, ``not_in_report``, null, its records' fields gone), and over
every case of ``tests/corpus/``: no warn/fail title says "not read", "unknown …version", "(unknown)" or "None".
"""

from __future__ import annotations

import re

import pytest

from envdoctor.model import Finding, Status
from envdoctor.registry import CheckSpec

from .test_unknown_never_ok import bases, corpus, registry
from .unknown import mutations, run

#: The words of an unread value standing in a title (an error's own name, "NVML: Unknown Error", is a reading).
UNREAD = re.compile(r"not read|\(unknown\)|\bNone\b|version unknown|unknown version", re.IGNORECASE)


def _unread_words(f: Finding) -> bool:
    return f.status in (Status.WARN, Status.FAIL) and bool(UNREAD.search(f.title))


@pytest.mark.parametrize("spec", registry(), ids=lambda s: s.id)
def test_no_warning_or_failure_is_worded_from_an_unread_fact(spec: CheckSpec) -> None:
    found = []
    for base_name, base in bases(spec):
        shown = run(spec, base)
        for key in dict.fromkeys([*spec.needs, *shown.keys]):
            for what, changed in mutations(base, key, shown.fields.get(key, ())):
                found += [f"{f.status.value} {f.title!r} on {base_name} with {what}"
                          for f in run(spec, changed).findings if _unread_words(f)]
    assert not found, "\n".join(found[:20])


def test_no_corpus_case_gets_a_finding_worded_from_an_unread_fact() -> None:
    found = [f"{name}: {spec.id} {f.status.value} {f.title!r}" for name, _shape, readings in corpus()
             for spec in registry() for f in run(spec, readings).findings if _unread_words(f)]
    assert not found, "\n".join(found[:20])


def test_a_check_that_words_a_missing_fact_fails_this_test() -> None:
    from envdoctor.kit import warn

    assert _unread_words(warn("torch (version not read) has no kernels for X"))
    assert not _unread_words(warn("NVML: Unknown Error"))
