"""The C stand-ins' shared knobs (tests/fakes/fake_knobs.h) and how they are built."""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import FAKES, compile_shared, local_headers

STAND_INS = sorted(FAKES.glob("fake_*.c"))
LOAD = "import ctypes, sys; ctypes.CDLL(sys.argv[1]); print('loaded')"


def test_every_stand_in_takes_its_knobs_from_the_shared_header() -> None:
    assert {p.name for p in STAND_INS} >= {"fake_nvml.c", "fake_cuda.c", "fake_cudart.c", "fake_cudnn.c",
                                           "fake_nccl.c"}
    for source in STAND_INS:
        code = source.read_text()
        assert "fake_knobs.h" in local_headers(code, FAKES), source.name
        # No stand-in hangs, crashes or reads its config by itself any more.
        for own in ("pause()", "raise(SIG", "getenv(", "fopen("):
            assert own not in code, (source.name, own)


def test_a_changed_header_rebuilds_the_library(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "lib.c").write_text('#include "answer.h"\nint answer(void) { return ANSWER; }\n')
    answers = []
    for value in (41, 42):
        (src / "answer.h").write_text(f"#define ANSWER {value}\n")
        lib = compile_shared(src / "lib.c", tmp_path / f"out{value}", "libanswer.so")
        answers.append(ctypes.CDLL(str(lib)).answer())
    assert answers == [41, 42]


@pytest.mark.parametrize("source", STAND_INS, ids=lambda p: p.stem)
def test_crash_on_load_kills_the_loader_with_sigsegv(tmp_path: Path, source: Path) -> None:
    lib = compile_shared(source, tmp_path, "lib.so", defines={"CRASH_ON_LOAD": "1"})
    proc = subprocess.run([sys.executable, "-c", LOAD, str(lib)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGSEGV and "loaded" not in proc.stdout


@pytest.mark.parametrize("source", STAND_INS, ids=lambda p: p.stem)
def test_hang_on_load_never_returns_and_a_plain_build_loads(tmp_path: Path, source: Path) -> None:
    plain = compile_shared(source, tmp_path / "plain", "lib.so")
    proc = subprocess.run([sys.executable, "-c", LOAD, str(plain)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "loaded" in proc.stdout, proc.stderr
    hung = compile_shared(source, tmp_path / "hung", "lib.so", defines={"HANG_ON_LOAD": "1"})
    # The child says when it calls the loader; from then on a plain build answers within a
    # millisecond, so 0.5 s more without "loaded" (and the child still there) is a hang, however
    # slowly the interpreter itself started on a busy machine.
    proc = subprocess.Popen([sys.executable, "-c", "print('loading', flush=True); " + LOAD, str(hung)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "loading\n"
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=0.5)
    finally:
        proc.kill()
        out, _ = proc.communicate()
    assert "loaded" not in out
