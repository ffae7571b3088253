"""The exact list of environment variables whose values a report shows (envdoctor.knowledge.envvars)
covers every variable a probe or a check reads by name: a check never judges a value the report hides."""

from __future__ import annotations

import re
from pathlib import Path

from envdoctor.knowledge.envvars import SHOWN
from envdoctor.redact import REDACTED, is_reported, select_env

ROOT = Path(__file__).resolve().parent.parent
_READ = re.compile(r"""(?:env|environ|env_vars)(?:\.get\(|\[)\s*["']([A-Z][A-Z0-9_]+)["']""")


def test_every_variable_the_checks_and_probes_read_is_shown():
    read: set[str] = set()
    for folder in ("checks", "envdoctor/probes", "envdoctor/knowledge"):
        for path in (ROOT / folder).rglob("*.py"):
            read.update(_READ.findall(path.read_text()))
    assert read, "the pattern found no variable read"
    missing = sorted(n for n in read if is_reported(n) and n not in SHOWN)
    assert not missing, missing


def test_shown_names_are_exact_names_never_prefixes_or_secret_looking():
    from envdoctor.redact import is_secret_name

    assert all(not n.endswith("_") and not is_secret_name(n) for n in SHOWN)
    assert select_env({n: "x" for n in SHOWN if is_reported(n)}) == {n: "x" for n in SHOWN if is_reported(n)}
    assert set(select_env({"NCCL_NEW_SWITCH": "x", "CUDA_SOMETHING": "y"}).values()) == {REDACTED}
