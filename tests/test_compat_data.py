"""The shipped compatibility table: schema, parseable versions, non-overlapping ranges, sources."""

from __future__ import annotations

import datetime
import json
from importlib import resources
from typing import Any

import jsonschema
import pytest
from packaging.version import Version

from envdoctor.knowledge import compat, versions

DATA = compat.data()
TABLES = [k for k, v in DATA.items() if isinstance(v, dict) and "rows" in v]


def _rows(table: str) -> list[dict[str, Any]]:
    rows = DATA[table]["rows"]
    return list(rows.values()) if isinstance(rows, dict) else list(rows)


def test_validates_against_its_schema() -> None:
    schema = json.loads(resources.files("envdoctor").joinpath("data/compat.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(DATA), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]


def test_as_of_is_a_date() -> None:
    assert datetime.date.fromisoformat(DATA["as_of"]) <= datetime.date.today()


@pytest.mark.parametrize("table", TABLES)
def test_every_table_and_row_names_known_sources(table: str) -> None:
    known = set(DATA["sources"])
    listed = set(DATA[table]["sources"])
    assert listed, f"{table}: its 'sources' list is empty"
    assert listed <= known, f"{table}: 'sources' names {sorted(listed - known)}, not in the top-level 'sources'"
    for row in _rows(table):
        sources = row["source"] if isinstance(row["source"], list) else [row["source"]]
        assert set(sources) <= known, (f"{table} row {row.get('name') or row}: source {sorted(set(sources) - known)} "
                                       "is not in the top-level 'sources' section")
        assert set(sources) <= listed, (f"{table} row {row.get('name') or row}: source {sorted(set(sources) - listed)} "
                                        f"is not in {table}'s own 'sources' list")
        assert isinstance(row["verified"], bool)


def test_every_source_is_used_and_linkable() -> None:
    text = json.dumps({k: v for k, v in DATA.items() if k != "sources"})
    for sid in DATA["sources"]:
        assert f'"{sid}"' in text, f"source {sid} is not cited by any row"
        assert compat.source_url(sid).startswith("https://"), sid


def test_versions_parse_with_packaging() -> None:
    for row in _rows("driver_floors") + _rows("toolkit_drivers") + _rows("cudnn_cuda") + _rows("gpu_driver_requirements"):
        for key in ("linux", "windows"):
            if row.get(key):
                Version(row[key])
    for minor, row in DATA["torch_releases"]["rows"].items():
        Version(minor)
        for patch in row["patches"]:
            assert versions.minor_of(patch) == minor, (minor, patch)
        for py in row["python"]:
            Version(py)
    for row in _rows("torch_bundled_libs"):
        Version(row["torch"])
        for key in ("cudnn", "nccl"):
            if row[key]:
                Version(row[key])
    for row in _rows("companions"):
        Version(row["torchvision"])
        if row["torchaudio"]:
            Version(row["torchaudio"])


def test_toolkit_minimum_drivers_never_go_down() -> None:
    for os_key in ("linux", "windows"):
        rows = [r for r in _rows("toolkit_drivers") if r[os_key]]
        rows.sort(key=lambda r: (Version(r["cuda"]), r["update"]))
        keys = [(r["cuda"], r["update"]) for r in rows]
        assert len(keys) == len(set(keys)), "duplicate toolkit rows"
        drivers = [Version(r[os_key]) for r in rows]
        assert drivers == sorted(drivers), os_key


def test_driver_branches_and_floors_do_not_overlap() -> None:
    branches = _rows("driver_branches")
    assert [b["branch"] for b in branches] == sorted({b["branch"] for b in branches})
    cudas = [Version(b["native_cuda"]) for b in branches]
    assert cudas == sorted(cudas) and len(set(cudas)) == len(cudas)
    majors = [r["cuda_major"] for r in _rows("driver_floors")]
    assert len(majors) == len(set(majors))
    floors = [Version(r["linux"]) for r in sorted(_rows("driver_floors"), key=lambda r: r["cuda_major"])]
    assert floors == sorted(floors)


def test_cc_ranges_do_not_overlap() -> None:
    seen: dict[str, str] = {}
    for row in _rows("architectures"):
        for cc in row["ccs"]:
            assert cc not in seen, (cc, seen.get(cc), row["name"])
            seen[cc] = row["name"]
    spans = sorted((versions.parse_cc(r["cc_min"]), versions.parse_cc(r["cc_max"])) for r in _rows("gpu_driver_requirements"))
    for (_, hi), (lo, _) in zip(spans, spans[1:], strict=False):
        assert hi < lo
    for row in _rows("toolkit_targets"):
        assert versions.parse_cc(row["min_cc"]) <= versions.parse_cc(row["max_cc"])


def test_arch_rows_are_unique_and_fit_their_toolkit() -> None:
    keys = [(r["torch"], r["platform"], r["variant"]) for r in _rows("torch_arch_lists")]
    assert len(keys) == len(set(keys))
    # A release compat.json's torch_releases lacks (1.7-1.11: PyPI's cu102 wheels) is one the wheel matrix read on PyPI.
    on_pypi = {compat.minor_of(r["torch"]) for r in compat.wheel_rows() if r["index"] == "pypi"}
    for row in _rows("torch_arch_lists"):
        assert row["torch"] in DATA["torch_releases"]["rows"] or row["torch"] in on_pypi, row
        rng = compat.toolkit_range(versions.variant_cuda(row["variant"]) or "")
        if rng is None:
            continue
        for cc in row["sass"] + row["ptx"]:
            parsed = versions.parse_cc(cc)
            assert parsed is not None and rng[0] <= parsed <= rng[1], (row["torch"], row["variant"], cc)


def test_release_variants_have_index_names() -> None:
    for row in DATA["torch_releases"]["rows"].values():
        for variants in row["variants"].values():
            assert variants[0] == "cpu"
            assert all(v == "cpu" or versions.variant_cuda(v) for v in variants)


def test_every_gpu_row_resolves_to_itself() -> None:
    for row in _rows("gpus"):
        if "series" in row["name"]:
            continue  # a family row; its members are checked below
        info = compat.gpu_by_name(row["name"].split(" / ")[0])
        assert info is not None and info.cc == versions.parse_cc(row["cc"]), (row["name"], info)


@pytest.mark.parametrize(("name", "cc"), [
    # Names as NVML / torch.cuda.get_device_name() print them.
    ("NVIDIA GeForce RTX 5090", (12, 0)), ("NVIDIA GeForce RTX 2080 Ti", (7, 5)), ("NVIDIA GeForce RTX 3090", (8, 6)),
    ("NVIDIA GeForce RTX 3060 Laptop GPU", (8, 6)), ("NVIDIA GeForce GTX 1660 SUPER", (7, 5)),
    ("Tesla V100-SXM2-16GB", (7, 0)), ("NVIDIA A100-SXM4-80GB", (8, 0)), ("NVIDIA H100 80GB HBM3", (9, 0)),
    ("NVIDIA TITAN X (Pascal)", (6, 1)), ("NVIDIA GeForce GTX TITAN X", (5, 2)), ("NVIDIA RTX 6000 Ada Generation", (8, 9)),
    ("Quadro RTX 6000", (7, 5)), ("NVIDIA A10G", (8, 6)), ("NVIDIA A10", (8, 6)), ("Tesla T4", (7, 5)),
    ("NVIDIA GH200 480GB", (9, 0)), ("NVIDIA B200", (10, 0)), ("Orin (nvgpu)", (8, 7)),
])
def test_real_device_names(name: str, cc: tuple[int, int]) -> None:
    assert compat.cc_for_gpu(name) == cc


def test_unknown_device_name_is_none() -> None:
    assert compat.cc_for_gpu("NVIDIA Future GPU 9000") is None
    assert compat.cc_for_gpu("") is None


def test_companion_rows_are_one_per_release() -> None:
    torches = [r["torch"] for r in _rows("companions")]
    assert len(torches) == len(set(torches))
    vision = [Version(r["torchvision"]) for r in sorted(_rows("companions"), key=lambda r: Version(r["torch"]))]
    assert vision == sorted(vision)


def test_the_table_stays_small() -> None:
    # Every command reads it at start: its size is the deterministic half of its load time (the time
    # itself is a benchmark's figure, bench/speed.py, never a timed test).
    text = resources.files("envdoctor").joinpath("data/compat.json").read_text(encoding="utf-8")
    assert len(text.encode()) < 1_000_000
    assert isinstance(json.loads(text), dict)


@pytest.mark.parametrize(("cuda", "linux", "windows"), [
    ("8.0", "367.48", "369.30"), ("9.0", "384.81", "385.54"), ("9.1", "390.46", "391.29"),
    ("9.2", "396.26", "397.44"), ("10.0", "410.48", "411.31"), ("10.1", "418.39", "418.96"),
    ("10.1.243", "418.39", "418.96"), ("10.2", "440.33", "441.22"), ("11.0", "450.51.05", "451.48"),
])
def test_pre_cuda_11_toolkits_have_minimum_drivers(cuda: str, linux: str, windows: str) -> None:
    need = compat.min_driver(cuda)
    assert need.minimum == linux and compat.min_driver(cuda, "Windows").minimum == windows
    if Version(cuda).release[0] < 11:
        assert need.floor is None  # no minor-version compatibility before CUDA 11
        assert not need.verified  # NVIDIA's table was read only through copies


@pytest.mark.parametrize(("driver", "os_name", "cuda"), [
    ("410.104", "Linux", "10.0"), ("410.48", "Linux", "10.0"), ("418.67", "Linux", "10.1"),
    ("440.33.01", "Linux", "10.2"), ("396.37", "Linux", "9.2"), ("411.31", "Windows", "10.0"),
])
def test_old_driver_branches_map_to_their_cuda(driver: str, os_name: str, cuda: str) -> None:
    assert compat.highest_cuda_for_driver(driver, os_name).value == cuda


def test_driver_older_than_the_table_is_a_note() -> None:
    ans = compat.highest_cuda_for_driver("342.01", "Windows")
    assert ans.value is None and "not in envdoctor's compatibility table as of" in ans.note


def test_minor_version_compatibility_starts_with_cuda_11_and_is_verified() -> None:
    mvc = DATA["driver_floors"]["minor_version_compatibility"]
    assert mvc["from_major"] == compat.mvc_from_major() == 11 and mvc["verified"]
    assert compat.verified_minimum("10.2") is None
    assert compat.verified_minimum("12.1") == ("525.60.13", "cudnn_support_matrix_9_17_0")


@pytest.mark.parametrize(("name", "cc", "arch"), [
    ("GeForce 210", (1, 2), "Tesla"), ("NVIDIA GeForce GTX 580", (2, 0), "Fermi"),
    ("GeForce GTX 480", (2, 0), "Fermi"), ("GeForce GTX 560 Ti", (2, 1), "Fermi"), ("Tesla C2075", (2, 0), "Fermi"),
])
def test_pre_kepler_gpus(name: str, cc: tuple[int, int], arch: str) -> None:
    info = compat.gpu_by_name(name)
    assert info is not None and info.cc == cc and info.architecture == arch and not info.verified
    row = compat.architecture(cc)
    assert row is not None and row["name"] == arch
    assert compat.supported_by_newest(cc) is False and compat.last_release_for(cc) is None


def test_torch_1_12_arch_lists_come_from_its_release_branch() -> None:
    arch = compat.arch_list("1.12.1", "cu102")
    assert arch is not None and arch.verified and arch.span() == "sm_37…sm_70"


@pytest.mark.parametrize(("name", "cc"), [
    # Older drivers (R450/R460 era) and collect_env pastes print names without the "NVIDIA " prefix.
    ("A100-SXM4-40GB", (8, 0)), ("A100-PCIE-40GB", (8, 0)), ("A100-SXM4-80GB", (8, 0)), ("A100 80GB PCIe", (8, 0)),
    ("Tesla V100-SXM2-16GB", (7, 0)), ("V100-SXM2-32GB", (7, 0)), ("Tesla V100-PCIE-32GB", (7, 0)),
    ("GeForce RTX 2080 Ti", (7, 5)), ("GeForce RTX 3090", (8, 6)), ("GeForce GTX 1080 Ti", (6, 1)),
    ("Tesla T4", (7, 5)), ("Tesla P100-PCIE-16GB", (6, 0)), ("Tesla K80", (3, 7)), ("A10", (8, 6)), ("A30", (8, 0)),
    ("H100 PCIe", (9, 0)), ("L4", (8, 9)), ("L40S", (8, 9)),
])
def test_names_without_the_nvidia_prefix(name: str, cc: tuple[int, int]) -> None:
    assert compat.cc_for_gpu(name) == cc
    assert compat.cc_for_gpu(f"NVIDIA {name}") == cc


@pytest.mark.parametrize(("name", "row"), [
    ("A10", "NVIDIA A10"), ("NVIDIA A10G", "NVIDIA A10G (AWS G5)"), ("A100-SXM4-40GB", "NVIDIA A100 (SXM4/PCIe 40GB/80GB)"),
    ("L4", "NVIDIA L4"), ("NVIDIA L40", "NVIDIA L40"), ("NVIDIA L40S", "NVIDIA L40S"),
    ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"), ("Tesla T4", "NVIDIA T4"),
])
def test_similar_names_do_not_match_each_other(name: str, row: str) -> None:
    info = compat.gpu_by_name(name)
    assert info is not None and info.name == row


def test_a_suffixed_model_does_not_borrow_a_shorter_models_row_by_accident() -> None:
    # "RTX 4090 D" is the China-market 4090: the same AD102, CC 8.9. "A100X" is not in the table:
    # it must not be read as an A100 only because the text starts alike.
    assert compat.cc_for_gpu("NVIDIA GeForce RTX 4090 D") == (8, 9)
    # The catalogue knows the A100X by its own name (pci.ids 20b8 "GA100 [A100X]"), never as an A100's prefix.
    a100x = compat.gpu_by_name("NVIDIA A100X")
    assert a100x is not None and a100x.cc == (8, 0) and a100x.pci_ids == ("20b8",)
    assert compat.cc_for_gpu("NVIDIA A1000") is None


@pytest.mark.parametrize(("cuda", "lo", "hi"), [
    ("8.0", (2, 0), (6, 2)), ("9.0", (3, 0), (7, 0)), ("9.2", (3, 0), (7, 2)), ("10.0", (3, 0), (7, 5)),
    ("10.1", (3, 0), (7, 5)), ("10.2", (3, 0), (7, 5)), ("10.2.89", (3, 0), (7, 5)), ("11.0", (3, 5), (8, 0)),
    ("11.1", (3, 5), (8, 6)), ("11.3", (3, 5), (8, 6)), ("11.4", (3, 5), (8, 7)), ("11.7", (3, 5), (8, 7)),
    ("11.8", (3, 5), (9, 0)),
])
def test_toolkit_targets_before_11_8(cuda: str, lo: tuple[int, int], hi: tuple[int, int]) -> None:
    assert compat.toolkit_range(cuda) == (lo, hi)


def test_pre_11_8_toolkit_rows_are_sourced_and_honestly_unverified() -> None:
    for cuda in ("8.0", "9.0", "9.1", "9.2", "10.0", "10.1", "10.2", "11.0", "11.1", "11.2", "11.7"):
        row = compat.toolkit_row(cuda)
        assert row is not None and row["source"] == "llvm_clang_cuda_arch_versions" and row["verified"] is False
    assert compat.toolkit_row("11.8")["verified"] is True  # type: ignore[index]
    assert compat.toolkit_range("7.5") is None  # not in the table: no claim


def test_toolkit_ceilings_only_rise() -> None:
    rows = sorted(_rows("toolkit_targets"), key=lambda r: Version(r["cuda"]))
    highs = [versions.parse_cc(r["max_cc"]) for r in rows if Version(r["cuda"]) < Version("13.0")]
    assert highs == sorted(highs)  # type: ignore[type-var]


def test_torch_1_10_arch_lists_from_the_builder_script() -> None:
    cu102 = compat.arch_list("1.10.2", "cu102")
    cu113 = compat.arch_list("1.10.0", "cu113")
    assert cu102 is not None and not cu102.verified and cu102.span() == "sm_37…sm_70"
    assert cu113 is not None and cu113.span() == "sm_37…sm_86"
    assert not compat.runs_on(cu102, (8, 0)).runs and compat.runs_on(cu113, (8, 0)).runs
    assert compat.runs_on(cu113, (8, 6)).runs and not compat.runs_on(cu113, (9, 0)).runs


def test_stable_abi_rows_name_known_sources_and_parse() -> None:
    rows = DATA["companions"].get("stable_abi") or []
    assert rows, "torchaudio 2.11's stable ABI is recorded"
    for row in rows:
        assert row["source"] in DATA["sources"] and row["source"] in DATA["companions"]["sources"]
        assert isinstance(row["verified"], bool) and Version(row["from"])


def test_wheels_carry_sass_for_their_toolkits_newest_major() -> None:
    # compat.reach_of() stands in the wheel's highest SASS for its CUDA's reach when the CUDA version
    # is unknown (a pasted warning): that holds for every CUDA row of the table.
    for row in DATA["torch_arch_lists"]["rows"]:
        cuda = versions.variant_cuda(row["variant"])
        rng = compat.toolkit_range(cuda) if cuda else None
        if not rng or not row["sass"]:
            continue
        highest = max(versions.parse_cc(c) for c in row["sass"])
        assert highest[0] == rng[1][0], (row["torch"], row["variant"], row["platform"], highest, rng)
