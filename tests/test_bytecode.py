"""tests/conftest.py writes envdoctor's bytecode before the tests start (PYTHONDONTWRITEBYTECODE=1 would
otherwise make every CLI run a test starts compile the package from source again)."""

from __future__ import annotations

import importlib.util
import os
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_module_of_the_package_has_current_bytecode() -> None:
    compiled_at = float(os.environ.get("ENVDOCTOR_TESTS_COMPILED_AT", "inf"))
    stale = []
    for base in (ROOT / "envdoctor", ROOT / "checks"):
        for source in base.rglob("*.py"):
            if source.stat().st_mtime > compiled_at:
                continue  # saved after conftest compiled the package, while the suite ran
            cached = Path(importlib.util.cache_from_source(str(source)))
            try:
                header = cached.read_bytes()[:16]
            except OSError:
                stale.append(str(source.relative_to(ROOT)))
                continue
            # PEP 552 header: magic, flags (0: validated by the source's mtime and size), mtime, size.
            flags, mtime, size = struct.unpack("<III", header[4:16])
            st = source.stat()
            if header[:4] != importlib.util.MAGIC_NUMBER or flags != 0 or mtime != int(st.st_mtime) & 0xFFFFFFFF \
                    or size != st.st_size & 0xFFFFFFFF:
                stale.append(str(source.relative_to(ROOT)))
    assert not stale, stale


def test_this_process_writes_the_caches_it_reads() -> None:
    assert sys.dont_write_bytecode is False
