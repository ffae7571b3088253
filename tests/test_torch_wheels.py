"""The torch wheel matrix (envdoctor/data/torch_wheels.json): the generator's output byte for byte, its
schema, a source and a date on every row, agreement with PyTorch's build scripts and with compat.json,
and the lookups that read it."""

from __future__ import annotations

import functools
import json
from importlib import resources

import jsonschema
import pytest
from packaging.version import Version

from envdoctor.knowledge import compat
from tools import _common, gen_torch_arch, gen_torch_wheels


@functools.cache
def _matrix() -> dict:
    return json.loads(resources.files("envdoctor").joinpath("data/torch_wheels.json").read_text())


def test_the_shipped_matrix_is_the_generators_output_byte_for_byte() -> None:
    with open(gen_torch_wheels.OUTPUT, encoding="utf-8") as fh:
        assert fh.read() == gen_torch_wheels.generate(), "run: python tools/gen_torch_wheels.py"


def test_the_matrix_validates_against_its_schema() -> None:
    schema = json.loads(resources.files("envdoctor").joinpath("data/torch_wheels.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(_matrix()))
    assert not errors, [f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:5]]


def test_every_row_cites_sources_that_resolve_and_carries_its_date() -> None:
    table = _matrix()
    for row in table["rows"]:
        assert row["sources"] and row["released"], row
        for sid in row["sources"] + ([row["arch_source"]] if row["arch_source"] else []):
            assert sid in table["sources"] or sid in compat.data()["sources"], (row["torch"], sid)
            assert compat.source_url(sid).startswith("https://"), sid
        assert row["sources"][0] == f"pypi_torch_{row['torch']}"
        assert table["sources"][row["sources"][0]]["date"] == row["released"]


def test_every_torch_release_from_1_7_on_pypi_has_its_pypi_rows() -> None:
    snap = gen_torch_wheels.read_snapshot()
    rows = _matrix()["rows"]
    releases = sorted(snap["torch"], key=gen_torch_wheels._vkey)
    assert releases[0] == "1.7.0" and len(releases) >= 42
    for version in releases:
        pypi = {r["platform"] for r in rows if r["torch"] == version and r["index"] == "pypi"}
        assert {"linux_x86_64", "windows_x86_64"} <= pypi, (version, pypi)


def test_the_pypi_linux_wheel_says_its_own_cuda_and_its_pins_agree() -> None:
    rows = {(r["torch"], r["platform"], r["index"]): r for r in _matrix()["rows"]}
    assert rows[("1.7.0", "linux_x86_64", "pypi")]["variant"] == "cu102"  # torch/version.py: cuda = '10.2'
    r28 = rows[("2.8.0", "linux_x86_64", "pypi")]
    assert (r28["variant"], r28["cudnn"], r28["nccl"]) == ("cu128", "9.10.2.21", "2.27.3")
    assert r28["pins"]["nvidia-cuda-runtime-cu12"].startswith("12.8.")
    assert rows[("2.8.0", "windows_x86_64", "pypi")]["variant"] == "cpu"
    assert rows[("2.8.0", "windows_x86_64", "pypi")]["pins"] == {}  # the Linux-only markers do not hold there
    for r in _matrix()["rows"]:
        runtime = next((v for k, v in r["pins"].items() if k.startswith("nvidia-cuda-runtime")), None)
        runtime = runtime or r["pins"].get("cuda-toolkit")
        if r["index"] == "pypi" and runtime:
            assert r["cuda"] and runtime.startswith(r["cuda"] + "."), (r["torch"], r["platform"], runtime)


def _script_lists() -> dict[str, gen_torch_arch.Lists]:
    with open(_common.snapshot(gen_torch_arch.SNAPSHOT), encoding="utf-8") as fh:
        return gen_torch_arch.read_snapshot(fh.read())


@functools.cache
def _last_six() -> list[str]:
    minors = sorted({gen_torch_wheels._minor(r["torch"]) for r in _matrix()["rows"]}, key=gen_torch_wheels._vkey)
    return minors[-6:]


def test_the_arch_lists_of_the_last_six_releases_are_what_the_build_scripts_set() -> None:
    """No torch.cuda.get_arch_list() recordings exist in tests/; the build scripts' TORCH_CUDA_ARCH_LIST
    at the release (tools/snapshots/pytorch_build_arch_lists.txt) and the arch flags read from the PyPI
    wheels (compat.json's pypi_torch_wheels rows) are the sources."""
    scripts = _script_lists()
    checked = 0
    for r in _matrix()["rows"]:
        if gen_torch_wheels._minor(r["torch"]) not in _last_six() or not r["cuda"] or r["sass"] is None:
            continue
        lists = scripts.get(r["arch_source"])
        if lists is not None and (r["cuda"], r["platform"]) in lists:
            assert (r["sass"], r["ptx"]) == tuple(lists[(r["cuda"], r["platform"])]), (r["torch"], r["variant"])
            checked += 1
        else:
            assert r["arch_source"] in compat.data()["sources"], r
    assert checked >= 20


def test_every_linux_cuda_wheel_of_the_last_six_releases_has_an_arch_list() -> None:
    missing = [(r["torch"], r["variant"]) for r in _matrix()["rows"]
               if gen_torch_wheels._minor(r["torch"]) in _last_six() and r["cuda"]
               and r["platform"] == "linux_x86_64" and r["sass"] is None]
    assert not missing, missing


def test_the_matrix_agrees_with_compat_json_where_both_speak() -> None:
    rows = _matrix()["rows"]
    for b in compat.data()["torch_bundled_libs"]["rows"]:
        if b["channel"] != "pypi" or b["torch"].count(".") != 2:
            continue
        hit = [r for r in rows if r["torch"] == b["torch"] and r["variant"] == b["variant"] and r["index"] == "pypi"]
        assert hit, b
        assert hit[0]["cudnn"] == b["cudnn"], b
        assert hit[0]["nccl"] in (b["nccl"], None), b  # None: that wheel bundles NCCL instead of pinning it
    for rel in compat.releases().values():
        if rel.get("pypi_default"):
            for patch in rel["patches"]:
                assert compat.pypi_variant(patch) == rel["pypi_default"], (patch, rel["pypi_default"])
    for c in compat.data()["companions"]["rows"]:
        for patch in (compat.releases().get(c["torch"]) or {}).get("patches", []):
            got = compat.wheel_companions(patch)
            assert got is not None or compat.minor_of(patch) not in {"1.7", "2.8"}, patch
            for package in ("torchvision", "torchaudio") if got else ():
                if c[package] is None:  # a stable-ABI release serves it (compat.json's stable_abi)
                    abi = compat.stable_abi_from(package)
                    assert abi and Version(got[package] or "0") >= Version(abi), (patch, package, got)
                elif got[package] is not None:
                    assert compat.minor_of(got[package]) == c[package], (patch, package, got, c)


@pytest.mark.parametrize(("lines", "want"), [
    (["__version__ = '1.7.0'", "cuda = '10.2'", "hip = None"], ("1.7.0", "10.2", None)),
    (["__version__ = '2.8.0+cu128'", "cuda: Optional[str] = '12.8'", "hip: Optional[str] = None"],
     ("2.8.0+cu128", "12.8", None)),
    (["__version__ = '2.8.0+cpu'", "cuda: Optional[str] = None"], ("2.8.0+cpu", None, None)),
])
def test_torch_version_py_lines_are_read(lines: list[str], want: tuple) -> None:
    got = gen_torch_wheels.version_py(lines)
    assert (got["__version__"], got["cuda"], got["hip"]) == want


def test_pins_hold_only_where_their_marker_does() -> None:
    pins = ['nvidia-cudnn-cu12==9.10.2.21; platform_system == "Linux" and platform_machine == "x86_64"',
            'cuda-toolkit[cublas,cudart]==13.2.2; platform_system == "Linux"', "triton==3.4.0"]
    assert gen_torch_wheels._pin_fields(pins, "linux_x86_64", "3.12")[0] == {
        "cuda-toolkit": "13.2.2", "nvidia-cudnn-cu12": "9.10.2.21", "triton": "3.4.0"}
    assert gen_torch_wheels._pin_fields(pins, "linux_aarch64", "3.12")[0] == {"cuda-toolkit": "13.2.2",
                                                                               "triton": "3.4.0"}
    assert gen_torch_wheels._pin_fields(pins, "windows_x86_64", "3.12")[0] == {"triton": "3.4.0"}


def test_a_companion_is_the_newest_release_whose_torch_requirement_admits_the_torch() -> None:
    snap = {"torch": {"2.8.0": {}, "2.14.0": {}, "2.15.0": {}},
            "torchvision": {"0.23.0": {"torch": ["torch==2.8.0"]}, "0.29.1": {"torch": ["torch (>=2.14.0)"]},
                            "0.29.2": {"torch": ["torch>=2.14.0"]}},
            "torchaudio": {"2.8.0": {"torch": ["torch (==2.8.0)"]}}}
    got = gen_torch_wheels._companions(snap)
    assert got["2.8.0"] == {"torchvision": "0.23.0", "torchaudio": "2.8.0"}
    assert got["2.15.0"] == {"torchvision": "0.29.2"} and got["2.14.0"] == {"torchvision": "0.29.2"}


def test_the_lookups_read_the_matrix_where_compat_json_is_silent() -> None:
    assert compat.release_default_variant("1.12") == "cu102"  # compat.json: not read; PyPI's wheel: cuda 10.2
    assert compat.release_default_variant("2.8") == "cu128"  # compat.json's own answer stays
    row = compat.companions("2.15.0")
    assert row is not None and row["torchvision"] == "0.29" and compat.source_url(row["source"]).startswith("https://")
    assert row["torchaudio"] is None  # torchaudio 2.11 is a stable-ABI release: it serves 2.15 (stable_abi)
    assert compat.companions("2.8.1") is not None  # compat.json's row, as before
    wheel = compat.wheel_row("2.8.0+cu128", "cu128")
    assert wheel is not None and wheel["cudnn"] == "9.10.2.21" and "3.13" in wheel["python"]
    assert compat.wheel_row("2.8", "cu128") == compat.wheel_row("2.8.0", "cu128")
    assert compat.pypi_variant("2.8.0", "windows_x86_64") == "cpu"
    assert compat.wheel_row("2.99.0", "cu128") is None
    newest = _matrix()["newest_torch"]
    assert compat.wheel_not_in_table(newest) is None
    note = compat.wheel_not_in_table("9.0.0")
    assert note is not None and _matrix()["as_of"] in note and "not in the wheel table" in note


def test_the_matrix_gives_the_arch_lists_real_wheels_printed() -> None:
    """tests/fixtures/recorded_arch_lists.json: torch.cuda.get_arch_list() of real wheels, each with its
    thread and date; the matrix row of that wheel lists the same SASS and PTX."""
    with open("tests/fixtures/recorded_arch_lists.json", encoding="utf-8") as fh:
        records = json.load(fh)["records"]
    assert records
    for rec in records:
        public, _, variant = rec["torch"].partition("+")
        row = compat.wheel_row(public, variant, rec["platform"])
        assert row is not None and row["sass"] is not None, rec
        got = compat.parse_arch_list(rec["arch_list"])
        assert sorted(compat.cc_text(c) for c in got.sass) == sorted(row["sass"]), (rec, row["sass"])
        assert sorted(compat.cc_text(c) for c in got.ptx) == sorted(row["ptx"]), (rec, row["ptx"])
