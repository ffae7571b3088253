"""The distribution's metadata: a build backend that reads it, the licence it declares shipped as a
file, classifiers, and only dependencies the code imports."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]

#: Distribution name -> the module the code imports from it.
IMPORT_NAME = {"nvidia-ml-py": "pynvml"}


def test_build_backend_reads_an_spdx_license_expression() -> None:
    # setuptools before 77 rejects `license = "<SPDX expression>"` (PEP 639) with a build error.
    reqs = [Requirement(r) for r in PYPROJECT["build-system"]["requires"]]
    setuptools = next(r for r in reqs if r.name == "setuptools")
    assert not setuptools.specifier.contains("76.9"), setuptools
    assert setuptools.specifier.contains("77.0")
    assert min(Version(s.version) for s in setuptools.specifier if s.operator == ">=") >= Version("77")


def test_license_file_matches_the_declared_license() -> None:
    assert PROJECT["license"] == "Apache-2.0"
    assert PROJECT["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    # PEP 639: a license expression replaces the License :: classifiers; both is an error on upload.
    assert not [c for c in PROJECT["classifiers"] if c.startswith("License ::")]


def test_classifiers_name_the_audience_platforms_and_pythons() -> None:
    classifiers = set(PROJECT["classifiers"])
    assert "Environment :: GPU :: NVIDIA CUDA" in classifiers
    assert "Typing :: Typed" in classifiers  # envdoctor ships py.typed
    floor = Version(PROJECT["requires-python"].removeprefix(">="))
    pythons = {Version(c.rsplit(" ", 1)[1]) for c in classifiers
               if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)}
    assert pythons and min(pythons) == floor


def _imported_modules() -> set[str]:
    found: set[str] = set()
    for path in [*(ROOT / "envdoctor").rglob("*.py"), *(ROOT / "checks").rglob("*.py")]:
        for m in re.finditer(r"^\s*(?:import|from)\s+([A-Za-z_][A-Za-z0-9_]*)", path.read_text(encoding="utf-8"),
                             re.MULTILINE):
            found.add(m.group(1))
    return found


def test_every_dependency_is_imported_by_the_code() -> None:
    imported = _imported_modules()
    unused = [r for r in PROJECT["dependencies"]
              if IMPORT_NAME.get(Requirement(r).name, Requirement(r).name.replace("-", "_")) not in imported]
    assert not unused, f"declared but never imported: {unused}"
    assert "torch" not in {Requirement(r).name for r in PROJECT["dependencies"]}


def test_python_m_envdoctor_runs_from_the_repository_root_without_an_install() -> None:
    # From a checkout's root `python -m envdoctor` imports the checkout's package, which has no
    # envdoctor/checks: envdoctor/__init__.py maps the top-level checks/ in, as envdoctor.checks only.
    # The editable install's own finder is taken out first, so this is a plain source tree.
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    plain = ("import sys\n"
             "sys.meta_path[:] = [f for f in sys.meta_path if '__editable__' not in getattr(f, '__module__', '')]\n"
             "sys.path.insert(0, '')\n")
    env = {**os.environ, "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}
    where = plain + ("import envdoctor.checks.driver, envdoctor\n"
                     "print(repr((envdoctor.__file__, envdoctor.checks.__file__, 'checks' in sys.modules)))\n")
    proc = subprocess.run([sys.executable, "-c", where], cwd=root, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert eval(proc.stdout) == (str(root / "envdoctor" / "__init__.py"), str(root / "checks" / "__init__.py"), False)
    listing = plain + "sys.argv = ['envdoctor', 'list']\nimport runpy\nrunpy.run_module('envdoctor', run_name='__main__')\n"
    proc = subprocess.run([sys.executable, "-c", listing], cwd=root, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "torch-import" in proc.stdout and "expect-gpus" in proc.stdout
