"""Test helpers: build the stand-in libnvidia-ml / libcuda from C and a Host that loads them."""

from __future__ import annotations

import os
from pathlib import Path

from envdoctor.process.host import Host

FAKES = Path(__file__).resolve().parent


def write_config(path: Path, values: dict[str, object]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return path


def fake_nvml(tmp: Path, config: dict[str, object], omit: tuple[str, ...] = (),
              filename: str = "libnvidia-ml.so.1") -> dict[str, str]:
    """Compile the NVML stand-in into ``tmp/nvml`` (named ``filename``, with a ``libnvidia-ml.so.1``
    link when the name is versioned) and return the environment that makes a child load it."""
    from ..conftest import compile_shared

    lib_dir = tmp / "nvml"
    compile_shared(FAKES / "fake_nvml.c", lib_dir, filename, soname="libnvidia-ml.so.1",
                   defines={f"OMIT_{name}": "1" for name in omit})
    if filename != "libnvidia-ml.so.1":
        link = lib_dir / "libnvidia-ml.so.1"
        if not link.exists():
            link.symlink_to(filename)
    cfg = write_config(tmp / "nvml.cfg", config)
    return {"FAKE_NVML_CONFIG": str(cfg), "_LIB_DIRS": str(lib_dir)}


def fake_cuda(tmp: Path, config: dict[str, object], lib_dir: Path | None = None) -> dict[str, str]:
    from ..conftest import compile_shared

    lib_dir = lib_dir or tmp / "cuda"
    compile_shared(FAKES / "fake_cuda.c", lib_dir, "libcuda.so.1", soname="libcuda.so.1")
    cfg = write_config(tmp / "cuda.cfg", config)
    return {"FAKE_CUDA_CONFIG": str(cfg), "_LIB_DIRS": str(lib_dir)}


def host_with(*parts: dict[str, str], root: Path | None = None, **extra: str) -> Host:
    """A Host whose children find the given stand-ins first on LD_LIBRARY_PATH."""
    from ..conftest import test_env

    env = test_env(**extra)
    dirs: list[str] = []
    for part in parts:
        for key, value in part.items():
            if key == "_LIB_DIRS":
                dirs.append(value)
            else:
                env[key] = value
    if dirs:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(dirs)
    return Host(environ=env, root=root)
