"""Which interpreter is examined: ``--python`` (interpreter or venv folder), uv's discovery order,
and a usage error (exit 2, one line, nothing probed) for a target that is not a Python."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envdoctor.process.host import Host
from envdoctor.process.target import OWN_FALLBACK, OWN_WITH_TORCH, TargetError, discover, explicit
from tests.conftest import make_exe, test_env
from tests.faults import run_cli


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A real venv without torch (and without pip: nothing is installed into it)."""
    folder = tmp_path_factory.mktemp("torchless") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    return folder


def _target(out) -> dict:
    return json.loads(out.stdout)["facts"]["python.target"]["value"]


def test_a_venv_folder_given_to_python_is_examined_and_named(venv, tmp_path):
    out = run_cli(["check", "--no-micro", "--python", str(venv)], cwd=str(tmp_path), timeout=120)
    text = out.stdout.decode()
    assert out.rc in (0, 1), out.text
    assert f"python: {venv}/bin/python (--python)" in text.splitlines()[1]
    assert "torch: absent" in text.splitlines()[0]  # that venv's torch, not envdoctor's


@pytest.mark.parametrize("var", ["VIRTUAL_ENV", "CONDA_PREFIX"])
def test_an_active_environment_is_examined_without_python(venv, tmp_path, var):
    out = run_cli(["report", "--json", "--no-micro"], env={var: str(venv)}, cwd=str(tmp_path), timeout=120)
    assert out.rc in (0, 1), out.text
    assert _target(out) == {"path": f"{venv}/bin/python", "chosen_by": var}
    assert json.loads(out.stdout)["facts"]["torch.version"]["reason"] == "absent"


def test_virtual_env_wins_over_conda_prefix_and_a_dot_venv(venv, tmp_path):
    (tmp_path / "proj" / "sub").mkdir(parents=True)
    other = tmp_path / "proj" / ".venv" / "bin"
    other.mkdir(parents=True)
    (other / "python").symlink_to(sys.executable)
    out = run_cli(["report", "--json", "--no-micro"], env={"VIRTUAL_ENV": str(venv), "CONDA_PREFIX": "/nowhere"},
                  cwd=str(tmp_path / "proj" / "sub"), timeout=120)
    assert _target(out)["chosen_by"] == "VIRTUAL_ENV"


def test_a_dot_venv_in_a_parent_of_the_working_directory_is_found(venv, tmp_path):
    proj = tmp_path / "proj"
    (proj / "src" / "deep").mkdir(parents=True)
    os.symlink(venv, proj / ".venv")
    out = run_cli(["report", "--json", "--no-micro"], cwd=str(proj / "src" / "deep"), timeout=120)
    assert _target(out) == {"path": f"{proj}/.venv/bin/python", "chosen_by": f".venv in {proj}"}


def test_without_any_environment_envdoctors_own_interpreter_is_used_when_torch_is_beside_it(tmp_path):
    out = run_cli(["report", "--json", "--no-micro"], cwd=str(tmp_path), timeout=120)
    assert _target(out) == {"path": sys.executable, "chosen_by": OWN_WITH_TORCH}
    assert json.loads(out.stdout)["facts"]["torch.version"]["value"].endswith("+cpu")


def test_discovery_falls_back_to_python3_on_path_then_to_envdoctor(tmp_path):
    fake = make_exe(tmp_path / "bin", "python3", f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    host = Host(environ=test_env(PATH=str(tmp_path / "bin")))
    found = discover(host, str(tmp_path), torch_beside=False)
    assert (found.path, found.chosen_by) == (str(fake), "python3 on PATH")
    bare = discover(Host(environ=test_env(PATH=str(tmp_path / "empty"))), str(tmp_path), torch_beside=False)
    assert (bare.path, bare.chosen_by, bare.own) == (sys.executable, OWN_FALLBACK, True)


def test_a_folder_named_without_a_slash_is_a_folder(venv, monkeypatch):
    monkeypatch.chdir(venv.parent)
    assert explicit(Host(environ=test_env()), venv.name).path == f"{venv}/bin/python"
    with pytest.raises(TargetError, match="not on PATH"):
        explicit(Host(environ=test_env()), "no-such-python-anywhere")


@pytest.mark.parametrize("given, words", [
    ("/nope", "no such file"),
    ("/bin/true", "not a Python interpreter"),
    ("{script}", "not a Python interpreter (asked for its version, it exited 3)"),
    ("{py2}", "is Python 2.7.18; envdoctor examines Python 3.5 or newer"),
    ("{folder}", "not a venv or conda environment"),
])
def test_a_missing_or_non_python_target_is_a_usage_error_before_any_probing(tmp_path, given, words):
    script = make_exe(tmp_path, "pyish", "#!/bin/sh\necho 'python, honest'\nexit 3\n")
    py2 = make_exe(tmp_path, "python2", "#!/bin/sh\nprintf 'envdoctor-target 2.7.18'\n")
    (tmp_path / "folder").mkdir()
    given = given.format(script=script, py2=py2, folder=tmp_path / "folder")
    log = tmp_path / "started"
    # A stand-in ldconfig (the library probe runs it) records whether any probe ran.
    make_exe(tmp_path / "bin", "ldconfig", f"#!/bin/sh\ntouch {log}\nexit 9\n")
    out = run_cli(["check", "--python", given], env={"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"},
                  cwd=str(tmp_path), timeout=60)
    err = out.stderr.decode()
    assert out.rc == 2, out.text
    assert len(err.strip().splitlines()) == 1 and words in err and "--python" in err, err
    assert out.stdout == b"" and not log.exists()
    assert "driver" not in err and "Traceback" not in err


def test_a_stale_virtual_env_is_a_usage_error(tmp_path):
    out = run_cli(["check"], env={"VIRTUAL_ENV": str(tmp_path)}, cwd=str(tmp_path), timeout=60)
    err = out.stderr.decode()
    assert out.rc == 2 and len(err.strip().splitlines()) == 1 and "VIRTUAL_ENV" in err, out.text
