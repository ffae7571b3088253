"""Stand-ins for the `envdoctor fix` tests: small local wheels and seeded broken venvs, no network.

Wheels are written by hand (a zip with a dist-info: METADATA, WHEEL, RECORD), so building the index
costs milliseconds. The ``torch`` stand-in reports what real torch does where envdoctor reads it
(``__version__`` like ``2.5.1+cu121``, ``version.cuda``, ``cuda.get_arch_list()``,
``cuda.is_available()``): a CUDA build sees the stand-in GPU when ``FAKE_NVML_CONFIG`` names one
(tests/fakes/nvidia_fakes.py), with the compute capability of ``ENVDOCTOR_STANDIN_CC``.

A venv is made ``--without-pip`` (milliseconds); pip reaches it through a ``.pth`` naming one shared
folder holding only pip, so ``venv/bin/python -m pip`` (the target's own installer) works and
``pip freeze --all`` lists it like any other distribution.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

TORCH_SOURCE = '''
import os as _os
__version__ = {version!r}
class _NS:
    pass
version = _NS(); version.cuda = {cuda!r}; version.hip = None; version.debug = False; version.git_version = "standin"
class _Props:
    def __init__(self, cc):
        self.name = "Stand-in GPU"; self.major, self.minor = cc; self.total_memory = 16 << 30
        self.multi_processor_count = 80; self.uuid = "GPU-standin"
def _cc():
    text = _os.environ.get("ENVDOCTOR_STANDIN_CC", "8.0")
    a, b = text.split(".")
    return int(a), int(b)
class cuda:
    @staticmethod
    def is_available():
        return bool(version.cuda) and bool(_os.environ.get("FAKE_NVML_CONFIG"))
    @staticmethod
    def get_arch_list():
        return list({arch!r}) if version.cuda else []
    @staticmethod
    def device_count():
        return 1 if cuda.is_available() else 0
    @staticmethod
    def get_device_properties(i):
        return _Props(_cc())
    @staticmethod
    def synchronize():
        pass
    class nccl:
        @staticmethod
        def version():
            return (2, 21, 5)
def zeros(*a, **k):
    return 0
class backends:
    class cudnn:
        @staticmethod
        def is_available():
            return False
        @staticmethod
        def version():
            return None
'''

MODULE_SOURCE = '__version__ = {version!r}\n'


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def write_wheel(folder: Path, name: str, version: str, files: dict[str, str | bytes],
                requires: tuple[str, ...] = ()) -> Path:
    """A pure wheel ``name-version-py3-none-any.whl`` holding ``files`` (path -> text or bytes)."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires)
    entries: dict[str, bytes] = {k: v.encode() if isinstance(v, str) else v for k, v in files.items()}
    entries[f"{info}/METADATA"] = meta.encode()
    entries[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: envdoctor-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = [_record_line(k, v) for k, v in entries.items()] + [f"{info}/RECORD,,"]
    entries[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for k, v in entries.items():
            zf.writestr(k, v)
    return path


def torch_wheel(folder: Path, version: str, arch: tuple[str, ...] = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80",
                                                                    "sm_86", "sm_90"),
                payload: int = 0) -> Path:
    """The torch stand-in ``version`` (``2.5.1+cu121``; ``+cpu`` is the CPU build)."""
    local = version.partition("+")[2]
    cuda = f"{local[2:-1]}.{local[-1]}" if local.startswith("cu") else None
    files: dict[str, str | bytes] = {"torch/__init__.py": TORCH_SOURCE.format(version=version, cuda=cuda, arch=arch)}
    if payload:
        files["torch/lib/payload.bin"] = os.urandom(payload)
    return write_wheel(folder, "torch", version, files)


def module_wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    module = name.replace("-", "_")
    return write_wheel(folder, name, version, {f"{module}/__init__.py": MODULE_SOURCE.format(version=version)},
                       requires)


def pip_folder(root: Path) -> Path:
    """One folder holding only pip (a copy of the running interpreter's), shared by every venv."""
    folder = root / "pip-only"
    if folder.exists():
        return folder
    import pip

    src = Path(pip.__file__).parent
    tmp = root / "pip-only.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp / "pip")
    for info in src.parent.glob("pip-*.dist-info"):
        shutil.copytree(info, tmp / info.name)
    os.replace(tmp, folder)
    return folder


def make_venv(path: Path, pip_dir: Path, *, uv: bool = False, conda: bool = False) -> Path:
    """A venv without pip of its own, pip reachable through a .pth; returns its interpreter."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(path)], check=True, capture_output=True)
    purelib = site_packages(path)
    (purelib / "_envdoctor_tests_pip.pth").write_text(str(pip_dir) + "\n")
    return mark_venv(path, uv=uv, conda=conda)


def mark_venv(path: Path, *, uv: bool = False, conda: bool = False) -> Path:
    """Make the venv at ``path`` a uv-managed one (``uv =`` in pyvenv.cfg) or a conda-style prefix
    (conda-meta/); returns its interpreter."""
    python = path / "bin" / "python"
    if uv:
        cfg = path / "pyvenv.cfg"
        cfg.write_text(cfg.read_text() + "uv = 0.5.0\n")
    if conda:
        (path / "conda-meta").mkdir()
        (path / "conda-meta" / "history").write_text("")
    return python


def site_packages(venv: Path) -> Path:
    rel = Path(sysconfig.get_path("purelib", vars={"base": "X", "platbase": "X"})).relative_to("X")
    return venv / rel


def pip_install(python: Path, index: Path, *requirements: str, no_deps: bool = True, system: bool = False) -> None:
    """Seed ``python`` (the test's own seeding of a stand-in system prefix may break PEP 668; fix never does)."""
    args = [str(python), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(index),
            "--disable-pip-version-check", "--no-warn-conflicts", *(["--break-system-packages"] if system else [])]
    subprocess.run(args + (["--no-deps"] if no_deps else []) + list(requirements), check=True,
                   capture_output=True, env={**os.environ, "PIP_NO_INPUT": "1"})


def freeze(python: Path) -> bytes:
    return subprocess.run([str(python), "-m", "pip", "freeze", "--all", "--disable-pip-version-check"],
                          check=True, capture_output=True).stdout


def make_system_prefix(path: Path, pip_dir: Path) -> Path:
    """An interpreter that is no venv (its own prefix, the stdlib linked in) whose stdlib folder holds
    PEP 668's EXTERNALLY-MANAGED: what a distribution's /usr/bin/python3 is."""
    real = Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    stdlib = Path(sysconfig.get_path("stdlib"))
    (path / "bin").mkdir(parents=True)
    lib = path / "lib" / version
    lib.mkdir(parents=True)
    shutil.copy2(real, path / "bin" / "python3")
    for entry in stdlib.iterdir():
        if entry.name not in ("site-packages", "EXTERNALLY-MANAGED"):
            (lib / entry.name).symlink_to(entry)
    (lib / "site-packages").mkdir()
    (lib / "site-packages" / "_envdoctor_tests_pip.pth").write_text(str(pip_dir) + "\n")
    (lib / "EXTERNALLY-MANAGED").write_text("[externally-managed]\nError=use a venv\n")
    return path / "bin" / "python3"
