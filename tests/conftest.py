"""Shared test fixtures: build stand-in shared libraries with gcc, fake executables, facts.

Stand-in libraries are real ELF shared objects compiled from small C files; the code under test
loads them through pynvml/ctypes in a child process exactly as it would load NVIDIA's.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
FAKES = TESTS / "fakes"
BUILD_ROOT = TESTS / ".fakebuild"


_LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def local_headers(code: str, directory: Path) -> dict[str, str]:
    """The ``#include "name"`` headers of ``code`` found in ``directory`` (and theirs), name -> text."""
    found: dict[str, str] = {}
    pending = _LOCAL_INCLUDE.findall(code)
    while pending:
        name = pending.pop()
        path = directory / name
        if name in found or ".." in Path(name).parts or not path.is_file():
            continue
        found[name] = path.read_text()
        pending.extend(_LOCAL_INCLUDE.findall(found[name]))
    return found


def compile_shared(source: str | Path, out_dir: Path, filename: str, soname: str | None = None,
                   defines: dict[str, str] | None = None, extra: tuple[str, ...] = ()) -> Path:
    """Compile C ``source`` (a path or the code itself) into ``out_dir/filename``.

    Builds are cached by content hash under tests/.fakebuild, so each variant compiles once. The
    hash covers the headers a source file includes from its own folder (tests/fakes/fake_knobs.h),
    so changing a header rebuilds every stand-in that includes it.
    """
    code = Path(source).read_text() if isinstance(source, Path) else source
    headers = local_headers(code, Path(source).parent) if isinstance(source, Path) else {}
    flags = [f"-D{k}={v}" for k, v in sorted((defines or {}).items())] + list(extra)
    if soname:
        flags.append(f"-Wl,-soname,{soname}")
    deps = "".join(f"\0{name}\0{text}" for name, text in sorted(headers.items()))
    key = hashlib.sha256((code + "\0" + " ".join(flags) + filename + deps).encode()).hexdigest()[:16]
    cached = BUILD_ROOT / key / filename
    if not cached.exists():
        # Each build in a folder of its own, renamed into place whole: test processes running in
        # parallel (pytest -n) may build the same variant at once and must never read half a file.
        cached.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".build-", dir=cached.parent))
        try:
            src = work / "src.c"
            src.write_text(code)
            for name, text in headers.items():  # next to src.c, where #include "name" looks first
                header = work / name
                header.parent.mkdir(parents=True, exist_ok=True)
                header.write_text(text)
            tmp = work / filename
            cmd = ["gcc", "-shared", "-fPIC", "-O1", "-o", str(tmp), str(src), *flags, "-lpthread"]
            subprocess.run(cmd, check=True, capture_output=True, text=True)
            os.replace(tmp, cached)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / filename
    shutil.copy2(cached, target)
    return target


def make_exe(directory: Path, name: str, script: str) -> Path:
    """A fake executable (a shell or Python script) to put first on a test PATH."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(script if script.startswith("#!") else "#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def test_env(**extra: str) -> dict[str, str]:
    """A minimal, predictable environment for a Host under test."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp"),
           "LANG": "C.UTF-8"}
    env.update(extra)
    return env


test_env.__test__ = False  # a helper, not a test, despite its name


@pytest.fixture
def python_exe() -> str:
    return sys.executable



@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> Path:
    """A saved report (for the terminal and the Markdown renderers' tests) with one fail (a paste's
    RTX 5090 D on a cu126 wheel), one error (a fact whose probe hung) and one warn (Docker's 64 MiB
    /dev/shm), besides many ok and skip."""
    import json

    from tests.faults import run_cli

    paste = Path(__file__).resolve().parent / "corpus" / "pytorch-150733-rtx5090d-cu126.txt"
    out = run_cli(["diagnose", str(paste), "--json"], timeout=60)
    data = json.loads(out.stdout)
    data["facts"]["host.shm_size"] = {"value": 64 * 1024 * 1024}
    data["facts"]["host.container"] = {"value": "docker"}
    data["facts"]["libs.cudart_copies"] = {"value": None, "reason": "timeout", "detail": "no answer within 5.0 s"}
    path = tmp_path_factory.mktemp("mixed") / "mixed.json"
    path.write_text(json.dumps(data))
    return path


def cli_env(**extra: str) -> dict[str, str]:
    """The environment the end-to-end CLI tests run ``python -m envdoctor`` in."""
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):  # the tester's active env would become the target
        env.pop(var, None)
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def saved_report(tmp_path_factory) -> Path:
    """One real ``report --json --no-micro`` of this machine, as a user runs it (its own process,
    the target found the default way), read by every test that needs a live report: its torch
    child costs seconds of CPU, and the report is the same for all of them. Tests copy it before
    changing it."""
    out = tmp_path_factory.mktemp("report") / "report.json"
    proc = subprocess.run([sys.executable, "-m", "envdoctor", "report", "--json", "-o", str(out), "--no-micro"],
                          capture_output=True, env=cli_env(), timeout=120)
    assert proc.returncode in (0, 1), proc.stderr.decode()
    assert out.exists() and not list(out.parent.glob(".*.tmp"))
    out.chmod(0o444)  # read-only: no test may change what the others read
    return out


# -- bytecode, as an installed envdoctor has it ------------------------------------------------------
def pytest_configure(config: pytest.Config) -> None:
    """Bytecode for envdoctor's modules and the rewritten test modules, whatever PYTHONDONTWRITEBYTECODE says.

    With PYTHONDONTWRITEBYTECODE=1 (set in many shells and CI images) nothing is cached: every
    ``python -m envdoctor`` a test starts compiles each module it imports from source again (about
    0.2 s of CPU a run, hundreds of runs in the suite, more than half of a CLI run on a clean clone),
    and pytest rewrites and compiles every test module's asserts in each process (most of the
    collection's seconds, once per xdist worker). So the package's bytecode is written once here
    (in the controller, before any worker or child starts), as installing the wheel writes it, and
    this process writes the caches it reads. The children keep the variable: they read the
    bytecode and write nothing."""
    sys.dont_write_bytecode = False
    if hasattr(config, "workerinput"):  # an xdist worker: its controller wrote the package's bytecode
        return
    import compileall
    import time

    # test_bytecode holds the bytecode current for what was compiled here; a source edited after this (a developer
    # saving a file while the suite runs) is that developer's, not a stale cache.
    os.environ["ENVDOCTOR_TESTS_COMPILED_AT"] = repr(time.time())
    for folder in (TESTS.parent / "envdoctor", TESTS.parent / "checks"):
        compileall.compile_dir(str(folder), quiet=1)
        _recompile_resized(folder)


def _recompile_resized(folder: Path) -> None:
    """compileall keeps a .pyc whose recorded mtime matches the source's and never looks at the size
    it records, which Python's import does check: a source saved twice within one second (a
    developer's quick edit) kept bytecode that import rejects and test_bytecode calls stale."""
    import importlib.util
    import py_compile
    import struct

    for source in folder.rglob("*.py"):
        cached = Path(importlib.util.cache_from_source(str(source)))
        try:
            header = cached.read_bytes()[:16]
            size = source.stat().st_size
        except OSError:
            continue
        if len(header) == 16 and struct.unpack("<I", header[12:16])[0] != size & 0xFFFFFFFF:
            py_compile.compile(str(source), cfile=str(cached), quiet=1)


# -- the two tiers (tests/tiers.py) ---------------------------------------------------------------

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests tests/tiers.py lists ``slow`` (before ``-m`` deselects), and refuse a fast tier
    that lost an area: run on whole files, every one not slow-only keeps a fast test."""
    from tests.tiers import SLOW_ONLY_FILES, is_slow

    files: dict[str, int] = {}
    for item in items:
        file = item.path.name
        slow = is_slow(file, item.name)
        if slow:
            item.add_marker(pytest.mark.slow)
        files[file] = files.get(file, 0) + (not slow)
    if "not slow" in (config.option.markexpr or "") and not getattr(config.option, "keyword", ""):
        lost = sorted(f for f, fast in files.items() if not fast and f not in SLOW_ONLY_FILES)
        if lost:
            raise pytest.UsageError(f"the fast tier has no test of {', '.join(lost)}: keep one fast "
                                    "(tests/tiers.py) or list the file in SLOW_ONLY_FILES")
