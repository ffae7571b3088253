"""The CUDA table (envdoctor/data/cuda.json): the generator's output byte for byte, its schema, a source on
every row, agreement with compat.json and NVIDIA's own page where they speak, and the lookups."""

from __future__ import annotations

import functools
import json
from importlib import resources

import jsonschema

from envdoctor.knowledge import compat
from tools import _common, gen_cuda


@functools.cache
def _table() -> dict:
    return json.loads(resources.files("envdoctor").joinpath("data/cuda.json").read_text())


def test_the_shipped_table_is_the_generators_output_byte_for_byte() -> None:
    with open(gen_cuda.OUTPUT, encoding="utf-8") as fh:
        assert fh.read() == gen_cuda.generate(), "run: python tools/gen_cuda.py"


def test_the_table_validates_against_its_schema() -> None:
    schema = json.loads(resources.files("envdoctor").joinpath("data/cuda.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(_table()))
    assert not errors, [f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:5]]


def test_every_row_cites_sources_that_resolve() -> None:
    for row in _table()["rows"]:
        for sid in row["sources"] + [c["source"] for c in row["cudnn"]]:
            assert compat.source_url(sid).startswith("https://"), (row["cuda"], sid)
        assert row["sources"][0].startswith("meson_cuda_")


def test_every_cuda_minor_from_10_0_to_13_x_that_nvidia_shipped_has_rows() -> None:
    minors = {r["minor"] for r in _table()["rows"]}
    want = {"10.0", "10.1", "10.2", *(f"11.{i}" for i in range(9)), *(f"12.{i}" for i in (0, 1, 2, 3, 4, 5, 6, 8, 9)),
            "13.0", "13.1", "13.2", "13.3"}
    assert want <= minors, sorted(want - minors)
    updates = [r["cuda"] for r in _table()["rows"] if r["minor"] == "12.6"]
    assert updates == ["12.6.0", "12.6.1", "12.6.2", "12.6.3"]


def test_the_snapshot_lines_are_read_as_the_upstream_table_means_them() -> None:
    rows = {r["cuda"]: r for r in _table()["rows"]}
    assert (rows["12.8.1"]["linux"], rows["12.8.1"]["windows"]) == ("570.124.06", "572.61")
    assert rows["13.0.0"]["windows"] is None  # the copy says 'unknown': NVIDIA's 13.x table has no Windows column
    assert [r["mvc_floor_branch"] for r in (rows["11.8.0"], rows["12.4.0"], rows["13.1.0"])] == [450, 525, 580]
    assert rows["10.2.89"]["mvc"] is False and rows["10.2.89"]["verified"] is True  # NVIDIA's Table 2 confirms it
    assert "12.0" in rows["12.8.0"]["archs_added"] and "6.1" in rows["13.0.0"]["archs_dropped"]
    assert "6.1" in rows["12.9.0"]["archs"] and "6.1" not in rows["13.0.0"]["archs"]
    assert rows["13.0.0"]["archs_added"] and "11.0" in rows["13.0.0"]["archs_added"]
    assert rows["12.8.0"]["torch_cudnn"] == ["9.10.2.21"]  # torch 2.7/2.8's cu128 PyPI wheels pin it


#: Where compat.json's toolkit_drivers (other copies of NVIDIA's table) hold a driver no row of the same
#: minor in Meson's copy holds: known and listed, so a new disagreement fails here (NVIDIA's own release notes
#: table could not be read for these rows; the lead decides which copy to trust).
KNOWN_DRIVER_DISAGREEMENTS = {("11.7", "linux", "515.65.01"), ("11.8", "windows", "520.06"),
                              ("12.0", "linux", "525.85.12")}
#: Where Meson's architecture ranges (from Wikipedia) and compat.json's toolkit_targets (from LLVM) disagree.
KNOWN_RANGE_DISAGREEMENTS = {"9.1", "9.2", "11.4"}


def test_the_driver_minimums_agree_with_compat_json_but_for_the_listed_rows() -> None:
    differ = set()
    for t in compat.data()["toolkit_drivers"]["rows"]:
        ours = [r for r in _table()["rows"] if r["minor"] == t["cuda"]]
        for key in ("linux", "windows"):
            if ours and t[key] and t[key] not in {r[key] for r in ours}:
                differ.add((t["cuda"], key, t[key]))
    assert differ == KNOWN_DRIVER_DISAGREEMENTS, sorted(differ ^ KNOWN_DRIVER_DISAGREEMENTS)


def test_the_architecture_ranges_agree_with_compat_json_but_for_the_listed_minors() -> None:
    def key(cc: str) -> tuple[int, ...]:
        return tuple(int(p) for p in cc.split("."))

    differ = set()
    for r in _table()["rows"]:
        plain = [a for a in r["archs"] if a[-1].isdigit()]
        t = compat.toolkit_row(r["minor"])
        if r["first_of_minor"] and t and plain and (min(plain, key=key), max(plain, key=key)) != (t["min_cc"], t["max_cc"]):
            differ.add(r["minor"])
    assert differ <= KNOWN_RANGE_DISAGREEMENTS, sorted(differ - KNOWN_RANGE_DISAGREEMENTS)


def test_the_floors_agree_with_compat_json_driver_floors() -> None:
    for f in compat.data()["driver_floors"]["rows"]:
        rows = [r for r in _table()["rows"] if r["minor"].startswith(f"{f['cuda_major']}.")]
        assert rows and all(int(f["linux"].split(".")[0]) == r["mvc_floor_branch"] for r in rows), f


def test_the_lookups() -> None:
    assert compat.cuda_release("12.8")["cuda"] == "12.8.0"
    assert compat.cuda_release("12.8.1")["linux"] == "570.124.06"
    assert compat.cuda_release("12.7") is None  # NVIDIA shipped no CUDA 12.7
    need = compat.min_driver("7.5")  # compat.json's toolkit_drivers start at 8.0: the CUDA table answers
    assert need.minimum == "352.31" and not need.verified and compat.source_url(need.source).startswith("https://")
    assert compat.min_driver("12.8").minimum == "570.26"  # compat.json's verified row, as before
    note = compat.cuda_not_in_table("13.9")
    assert note is not None and _table()["as_of"] in note and "not in the CUDA table" in note
    assert compat.cuda_not_in_table(_table()["newest_cuda"]) is None and compat.cuda_not_in_table("11.8") is None


def test_the_snapshot_names_its_sources_with_repo_path_and_commit_or_url() -> None:
    with open(_common.snapshot(gen_cuda.SNAPSHOT), encoding="utf-8") as fh:
        blocks = gen_cuda.read_snapshot(fh.read())
    meson = next(b for sid, b in blocks.items() if sid.startswith("meson_cuda_"))
    assert meson["repo"]["repo"] == "mesonbuild/meson" and len(meson["repo"]["commit"]) == 40
    assert blocks["nv_cuda_mvc_page"]["url"].startswith("https://docs.nvidia.com/")
