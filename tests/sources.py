"""envdoctor's own sources parsed once per test process: the structure tests (tests/test_pipeline.py,
tests/test_import_cycles.py) each walk every module's syntax tree, and parsing a hundred modules is
most of a second of CPU each time. A tree is parsed again when its file changes (size, mtime); the
trees are shared, so a test reads them and never changes them."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.cache
def _parse(path: str, size: int, mtime_ns: int) -> ast.Module:
    return ast.parse(Path(path).read_text(encoding="utf-8"))


def parsed(path: Path) -> ast.Module:
    """The syntax tree of the Python file ``path`` (read only: shared by every caller)."""
    st = path.stat()
    return _parse(str(path), st.st_size, st.st_mtime_ns)
