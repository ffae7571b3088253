"""Issue 26 items 3 and 9: OS errors before anything is probed (a working directory deleted or
unreadable, a target inside a folder that cannot be read, `exec -- ''`) are one line, never a
traceback; and `exec`'s command gets exactly the environment envdoctor was given."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from envdoctor.commands.execute import given_environment
from envdoctor.process import target
from envdoctor.process.host import Host

from .faults import cli_env


class _Locked(Host):
    """A host on which one folder cannot be read (root reads mode-000 folders, so it is simulated)."""

    def __init__(self, locked: str) -> None:
        super().__init__()
        self.locked = locked

    def path(self, path):
        real = super().path(path)
        locked = self.locked

        class P(type(real)):  # type: ignore[misc, valid-type]
            def is_file(self) -> bool:
                if str(self).startswith(locked):
                    raise PermissionError(13, "Permission denied")
                return super().is_file()

            def is_dir(self) -> bool:
                if str(self).startswith(locked) and str(self) != locked:
                    raise PermissionError(13, "Permission denied")
                return super().is_dir()

        return P(real)


def test_a_python_inside_an_unreadable_folder_is_one_line(tmp_path):
    with pytest.raises(target.TargetError) as err:
        target.explicit(_Locked(str(tmp_path)), str(tmp_path / "venv" / "bin" / "python"))
    assert "Permission denied" in str(err.value)


def test_a_virtual_env_inside_an_unreadable_folder_is_one_line(tmp_path, monkeypatch):
    host = _Locked(str(tmp_path))
    host.environ = {"VIRTUAL_ENV": str(tmp_path / "venv")}
    with pytest.raises(target.TargetError) as err:
        target.discover(host, str(tmp_path))
    assert "VIRTUAL_ENV" in str(err.value) and "Permission denied" in str(err.value)


def test_no_working_directory_searches_no_venv_and_refuses_relative_paths(monkeypatch):
    monkeypatch.setattr(target, "working_dir", lambda: None)
    found = target.discover(Host(environ={"PATH": os.environ.get("PATH", "")}), None, torch_beside=True)
    assert found.own
    with pytest.raises(target.TargetError, match="working directory"):
        target.explicit(Host(), "./bin/python" if os.path.exists("./bin/python") else os.path.relpath(sys.executable))


def test_exec_gets_the_given_environment_not_pythons_locale_coercion(monkeypatch):
    monkeypatch.setenv("LC_CTYPE", "C.UTF-8")
    assert "LC_CTYPE" not in given_environment(b"PATH=/bin\0HOME=/root\0")
    assert given_environment(b"LC_CTYPE=C\0")["LC_CTYPE"] == "C"
    monkeypatch.setenv("LC_CTYPE", "en_US.UTF-8")  # not coercion's: kept as given
    assert given_environment(b"")["LC_CTYPE"] == "en_US.UTF-8"


def _envdoctor(args: list[str], cwd: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "envdoctor", *args], cwd=cwd, env=env or cli_env(), capture_output=True,
                          text=True, timeout=120)


def test_a_deleted_working_directory_is_no_traceback(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    script = (f"import os, subprocess, sys; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); "
              "r = subprocess.run([sys.executable, '-m', 'envdoctor'] + sys.argv[1:], capture_output=True, text=True); "
              "sys.stdout.write(r.stdout + r.stderr); sys.exit(r.returncode)")
    check = subprocess.run([sys.executable, "-c", script, "check", "--no-micro"], capture_output=True, text=True,
                           timeout=120, env=cli_env())
    assert check.returncode in (0, 1) and "Traceback" not in check.stdout, check.stdout[-2000:]
    gone.mkdir()
    report = subprocess.run([sys.executable, "-c", script, "report", "--no-micro", "-o", "r.json"], capture_output=True,
                            text=True, timeout=120, env=cli_env())
    assert report.returncode == 2 and report.stdout.strip().splitlines() == [
        "envdoctor: error: cannot write r.json: the working directory no longer exists"], report.stdout


def test_exec_of_an_empty_command_is_127(tmp_path):
    out = _envdoctor(["exec", "--", ""])
    assert out.returncode == 127 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1] == "envdoctor exec: '': command not found"


def test_exec_env_is_exactly_the_given_environment():
    given = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1",
             "MARKER": "x"}
    out = subprocess.run(["env", "-i", *(f"{k}={v}" for k, v in given.items()), sys.executable, "-m", "envdoctor",
                          "exec", "--", "env"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert dict(line.split("=", 1) for line in out.stdout.splitlines()) == given
