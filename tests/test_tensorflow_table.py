"""TensorFlow's tested GPU builds (envdoctor/data/tensorflow.json): the generator's output byte for byte, its schema,
a source on every row, the lookups, and the remedies that name the CUDA and cuDNN a release was built with."""

from __future__ import annotations

import functools
import json
from importlib import resources

import jsonschema
import pytest

from envdoctor.knowledge import compat, remedies
from envdoctor.parsers import parse_text
from envdoctor.pipeline.diagnose import diagnose, sort_findings
from envdoctor.registry import load_registry
from tools import gen_tensorflow


@functools.cache
def _table() -> dict:
    return json.loads(resources.files("envdoctor").joinpath("data/tensorflow.json").read_text())


def test_the_shipped_table_is_the_generators_output_byte_for_byte() -> None:
    with open(gen_tensorflow.OUTPUT, encoding="utf-8") as fh:
        assert fh.read() == gen_tensorflow.generate(), "run: python tools/gen_tensorflow.py"


def test_the_table_validates_against_its_schema() -> None:
    schema = json.loads(resources.files("envdoctor").joinpath("data/tensorflow.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(_table()))
    assert not errors, [f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:5]]


def test_every_row_cites_a_source_at_a_commit() -> None:
    for row in _table()["rows"]:
        url = compat.source_url(row["source"])
        assert url.startswith("https://github.com/tensorflow/docs/blob/") and "/site/en/install/source" in url, row
        assert compat.said(row["source"]).startswith("from TensorFlow's tested build configurations")


def test_the_snapshot_rows_are_read_as_tensorflow_wrote_them() -> None:
    rows = {(r["release"], r["platform"]): r for r in _table()["rows"]}
    assert (rows["2.10.0", "linux"]["cuda"], rows["2.10.0", "linux"]["cudnn"]) == ("11.2", "8.1")
    assert (rows["2.16.1", "linux"]["cuda"], rows["2.16.1", "linux"]["cudnn"]) == ("12.3", "8.9")
    assert (rows["2.4.0", "linux"]["cuda"], rows["2.4.0", "linux"]["cudnn"]) == ("11.0", "8.0")
    assert rows["1.15.0", "linux"]["package"] == "tensorflow_gpu"
    assert rows["2.10.0", "windows"]["package"] == "tensorflow_gpu"
    # native Windows has GPU builds up to 2.10 only (source_windows.md's table ends there)
    assert max((r for r in _table()["rows"] if r["platform"] == "windows"),
               key=lambda r: tuple(map(int, r["release"].split("."))))["release"] == "2.10.0"


@pytest.mark.parametrize(("bad", "why"), [
    ("== source tf_tested_builds_mac\n", "unknown source block"),
    ("<tr><td>tensorflow-2.1.0</td><td>3.7</td></tr>\n", "a line before"),
])
def test_the_generator_refuses_a_snapshot_it_cannot_read(bad: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        gen_tensorflow.read_snapshot(bad)


def test_a_changed_table_layout_is_refused_not_misread() -> None:
    text = ("== source tf_tested_builds_linux\n<tr><th>Version</th><th>Python version</th><th>CUDA</th>"
            "<th>cuDNN</th></tr>\n")
    with pytest.raises(ValueError, match="no longer cuDNN, CUDA"):
        gen_tensorflow.read_snapshot(text)


def test_lookups_by_minor_and_platform() -> None:
    assert compat.tensorflow_build("2.10.1", "Windows")["cuda"] == "11.2"  # type: ignore[index]
    assert compat.tensorflow_build("2.15", "Linux")["cudnn"] == "8.9"  # type: ignore[index]
    assert compat.tensorflow_build("2.11.0", "Windows") is None  # CPU only on native Windows
    assert compat.tensorflow_build("2.15.0", "Darwin") is None
    assert compat.tensorflow_build("not a version") is None
    newest = _table()["newest_tensorflow"]
    assert compat.tensorflow_not_in_table(newest) is None and compat.tensorflow_not_in_table("2.9.0") is None
    assert compat.tensorflow_not_in_table("9.1.0") == f"TensorFlow 9.1.0 is not in the TensorFlow table (as of " \
                                                       f"{_table()['as_of']})"
    assert compat.tensorflow_build("9.1.0") is None  # newer than the table: no guess


def test_remedies_name_the_build_or_fall_back_to_the_generic_one() -> None:
    text, commands, _ = remedies.tensorflow_gpu(None, False, "2.15.0")
    assert "CUDA 12.2 and cuDNN 8.9" in text
    assert [str(c) for c in commands] == ["pip install 'tensorflow[and-cuda]==2.15.*'"]
    text, commands, links = remedies.tensorflow_gpu(None, False, "2.4.1")
    assert "CUDA 11.0 and cuDNN 8.0" in text and remedies.CUDNN_ARCHIVE in links
    assert str(commands[0]) == "pip install 'tensorflow[and-cuda]'   # alternative: a TensorFlow from 2.14 on"
    text, _, _ = remedies.tensorflow_gpu(None, True, "2.9.0")
    assert "CUDA 11.2 and cuDNN 8.1" in text and "PATH" in text
    generic, commands, _ = remedies.tensorflow_gpu(None, False, None)
    assert "was built with" not in generic and [str(c) for c in commands] == ["pip install 'tensorflow[and-cuda]'"]
    unknown, _, _ = remedies.tensorflow_gpu(None, False, "9.1.0")
    assert "was built with" not in unknown  # a release newer than the table gets no guessed CUDA
    assert unknown.startswith("TensorFlow 9.1.0 is not in the TensorFlow table (as of ")


def _top(text: str):  # type: ignore[no-untyped-def]
    findings = sort_findings(diagnose(parse_text(text), load_registry(plugins=False)))
    return next(f for f in findings if f.status.value == "fail")


def test_a_tensorflow_dll_failure_names_the_cuda_and_cudnn_that_release_was_built_with() -> None:
    top = _top("tensorflow version: 2.10.0\n"
               "2022-11-08 10:14:31.123456: W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not "
               "load dynamic library 'cudart64_110.dll'; dlerror: cudart64_110.dll not found\n")
    assert top.id == "loader-library"
    assert "CUDA 11.2 and cuDNN 8.1" in top.remediation.text
    assert any("source_windows.md" in link for link in top.remediation.links)


def test_without_a_tensorflow_version_the_remedy_names_no_build() -> None:
    top = _top("2022-11-08 10:14:31.123456: W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not "
               "load dynamic library 'libcudnn.so.8'; dlerror: libcudnn.so.8: cannot open shared object file: No such "
               "file or directory\n")
    assert top.id == "loader-library" and "was built with" not in top.remediation.text
