"""Shared by the table generators in ``tools/``: where the snapshots and the shipped table live, and
the one way ``compat.json`` is written (``json.dumps(indent=1, ensure_ascii=False)``, the format the
file is kept in by hand), so a generator that rewrites one table leaves every other byte alone."""

from __future__ import annotations

import json
import os
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SNAPSHOTS = os.path.join(ROOT, "tools", "snapshots")
COMPAT = os.path.join(ROOT, "envdoctor", "data", "compat.json")


def snapshot(name: str) -> str:
    return os.path.join(SNAPSHOTS, name)


def read_compat(path: str = COMPAT) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def dump_compat(table: dict[str, Any]) -> str:
    """The text of ``compat.json`` for ``table``, byte for byte as the file is kept."""
    return json.dumps(table, indent=1, ensure_ascii=False) + "\n"


def write_or_check(text: str, path: str = COMPAT, check: bool = False) -> int:
    """Write ``text`` to ``path`` (or, with ``check``, compare): 0 when the file now holds it, 1 when
    ``check`` found a difference."""
    try:
        with open(path, encoding="utf-8") as fh:
            old = fh.read()
    except FileNotFoundError:
        old = ""
    if old == text:
        return 0
    if check:
        print(f"{os.path.relpath(path, ROOT)} differs from the generator's output; run the generator")
        return 1
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return 0
