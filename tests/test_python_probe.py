"""The torch child probe against real interpreters: the CPU torch installed for the tests, an
interpreter without torch, and a torch whose import raises."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

from envdoctor.model import Reason
from envdoctor.probes import Options
from envdoctor.probes.python_probe import PROBE, probe_python
from envdoctor.process.host import Host

from .conftest import test_env


def test_real_cpu_torch():
    # README's test command installs torch==2.13.0 (CPU): never skipped. Its version is read from
    # the installed distribution, not by importing torch into the test process (~3 s of CPU).
    installed = importlib.metadata.version("torch")

    facts = probe_python(Host(environ=test_env()), Options(timeout=10))
    assert facts["torch.version"].value == installed
    assert facts["torch.cuda_version"].ok and facts["torch.cuda_version"].value is None
    assert facts["torch.cuda_available"].value is False
    assert facts["torch.device_count"].value == 0
    # The CPU wheel has no cuDNN: "compiled against" is null, read (not failed).
    assert facts["torch.cudnn_build_version"].ok and facts["torch.cudnn_build_version"].value is None
    assert facts["python.version"].value.startswith(f"{sys.version_info[0]}.{sys.version_info[1]}")
    assert facts["python.packages"].value["torch"] == installed
    assert set(PROBE.keys) <= set(facts)
    assert facts["torch.import_error"].ok and facts["torch.import_error"].value is None
    assert facts["torch.cudnn_error"].ok and facts["torch.cudnn_error"].value is None


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """A fresh venv: the same CPython, no torch, no envdoctor."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return str(venv / "bin" / "python")


def test_interpreter_without_torch(bare_python):
    facts = probe_python(Host(environ=test_env()), Options(timeout=10, python=bare_python))
    assert facts["torch.version"].reason is Reason.ABSENT
    assert bare_python in facts["torch.version"].detail or "venv" in facts["torch.version"].detail
    assert facts["torch.cuda_version"].reason is Reason.SKIPPED
    assert facts["python.executable"].ok


def test_torch_whose_import_raises(bare_python, tmp_path):
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "raise OSError('libcudart.so.12: cannot open shared object file: No such file or directory')\n")
    host = Host(environ=test_env(PYTHONPATH=str(tmp_path)))
    facts = probe_python(host, Options(timeout=10, python=bare_python))
    reading = facts["torch.version"]
    assert reading.reason is Reason.FAILED
    assert "libcudart.so.12: cannot open shared object file" in reading.detail
    # The text is a fact of its own, so checks read a value, not a reading's detail.
    assert "libcudart.so.12: cannot open shared object file" in facts["torch.import_error"].value
    from envdoctor.checks._common import library_errors

    from envdoctor.model import Facts

    assert [e["library"] for e in library_errors(Facts(facts))] == ["libcudart.so.12"]


def test_torch_import_that_hangs_is_a_timeout(bare_python, tmp_path):
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("import time\ntime.sleep(60)\n")
    host = Host(environ=test_env(PYTHONPATH=str(tmp_path)))
    # Deadline 0.5 * 6 = 3 s: time for the child to start and report Python before it hangs.
    facts = probe_python(host, Options(timeout=0.5, python=bare_python))
    reading = facts["torch.version"]
    assert reading.reason is Reason.TIMEOUT and "import torch" in reading.detail
    assert facts["python.version"].ok  # what the child said before hanging is kept


def test_missing_interpreter_is_absent(tmp_path):
    facts = probe_python(Host(environ=test_env()), Options(python=str(tmp_path / "nope")))
    assert facts["torch.version"].reason is Reason.ABSENT


def test_reports_saved_before_the_error_facts_existed_are_still_read():
    """A report of envdoctor 0.1.0 carries torch's failure texts only as readings' details."""
    from envdoctor import views
    from envdoctor.model import Facts, missing

    old = Facts({"torch.version": missing(Reason.FAILED, "child:torch_probe", "libnccl.so.2: cannot open shared object file"),
                 "torch.cudnn_version": missing(Reason.FAILED, "child:torch_probe", "cuDNN version incompatibility")})
    assert views.torch_import_error(old) == "libnccl.so.2: cannot open shared object file"
    assert views.cudnn_error(old) == "cuDNN version incompatibility"
    new = old.merged({"torch.import_error": missing(Reason.SKIPPED), "torch.cudnn_error": missing(Reason.SKIPPED)})
    assert views.torch_import_error(new) is None and views.cudnn_error(new) is None


@pytest.mark.parametrize(("raw", "text"), [
    ("(2, 21, 5)", "2.21.5"), ("2708", "2.7.8"), ("22105", "2.21.5"), ("(2, 27, 3, 'a0')", "2.27.3.a0"),
    ("None", None),
])
def test_the_child_reports_nccls_version_raw_and_the_parent_decodes_it(bare_python, tmp_path, raw, text):
    """``torch.cuda.nccl.version()`` is a tuple in current torch and an int in old torch; the child
    (stdlib only, old interpreters) passes it on as it is, the parent decodes it once."""
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "from types import SimpleNamespace as N\n"
        "__version__ = '1.8.0+cu111'\n"
        "version = N(cuda='11.1', hip=None, debug=False, git_version='x')\n"
        f"cuda = N(get_arch_list=lambda: ['sm_80'], is_available=lambda: False, nccl=N(version=lambda: {raw}))\n"
        "backends = N(cudnn=N(is_available=lambda: False))\n")
    host = Host(environ=test_env(PYTHONPATH=str(tmp_path)))
    facts = probe_python(host, Options(timeout=10, python=bare_python))
    assert facts["torch.version"].value == "1.8.0+cu111"
    assert facts["torch.nccl_version"].ok and facts["torch.nccl_version"].value == text


def test_a_live_import_error_is_read_as_a_pasted_one_is() -> None:
    """One loader reading for a live run and a paste: the library torch's own import could not load was
    needed by torch, as a pasted traceback's ``from torch._C import *`` frame says."""
    from envdoctor.model import Reason, missing, ok
    from envdoctor.parsers import signatures
    from envdoctor.probes import python_probe

    error = "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory"
    live = python_probe._loader_failures({"torch.import_error": ok(error, "probe:torch"),
                                          "torch.version": missing(Reason.FAILED, "probe:torch", error)}).value
    pasted = signatures.loader_failures([error], {error: "torch"})
    assert [dict(f) for f in live] == pasted and live[0]["needed_by"] == "torch"
