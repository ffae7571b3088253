"""Every paste of tests/corpus/ as pasted, parsed and judged by the built-in checks once per test process.

Several tests read the whole corpus's findings (no check crashes, every fail says what to run, every printed
command is typed, every pinned torch exists); each judged all 350 pastes again. Facts and findings are
immutable, so one judgement serves them all.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parent / "corpus"


@functools.lru_cache(maxsize=1)
def judged() -> tuple[tuple[str, Any, tuple[Any, ...]], ...]:
    """``(file name, facts, findings)`` per paste, in file-name order; a paste the parser refuses has facts
    None and no findings."""
    from envdoctor.parsers import ParseError, parse_text
    from envdoctor.pipeline.diagnose import diagnose
    from envdoctor.registry import load_registry

    registry = load_registry(plugins=False)
    out: list[tuple[str, Any, tuple[Any, ...]]] = []
    for path in sorted(CORPUS.glob("*.txt")):
        try:
            facts = parse_text(path.read_text(encoding="utf-8", errors="replace"))
        except ParseError:
            out.append((path.name, None, ()))
            continue
        out.append((path.name, facts, tuple(diagnose(facts, registry))))
    return tuple(out)
