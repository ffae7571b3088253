"""The GPU catalogue (compat.json ``gpu_products``): generated from its snapshots byte for byte, every row
cited and dated, agreeing with pci.ids on every device id, and found however people and tools write names."""

from __future__ import annotations

import json
import re
from importlib import resources

import jsonschema
import pytest

from envdoctor.knowledge import compat
from tools import _common, gen_gpus

ROWS = compat.gpu_products()


def test_the_shipped_table_is_the_generators_output_byte_for_byte() -> None:
    text, _ = gen_gpus.generate(_common.read_compat())
    with open(gen_gpus.GPUS, encoding="utf-8") as fh:
        assert fh.read() == text, "run: python tools/gen_gpus.py"


def test_validates_against_its_schema() -> None:
    schema = json.loads(resources.files("envdoctor").joinpath("data/gpus.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(compat.gpu_data()))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]


def test_the_catalogue_holds_at_least_600_gpus_each_cited_and_dated() -> None:
    assert len(ROWS) >= 600
    sources = compat.gpu_data()["sources"]
    assert set(sources) == set(compat._GPU_SOURCE_IDS) and not set(sources) & set(compat.data()["sources"])
    for sid in sources:
        assert compat.source_url(sid).startswith("https://") and compat.said(sid).startswith("from ")
    for row in ROWS:
        assert row["source"] and set(row["source"]) <= set(sources), row["name"]
        assert "pci_ids_2026_08_22" in row["source"] and re.fullmatch(r"\d{4}-\d{2}-\d{2}", row["as_of"])
    assert {r["architecture"] for r in ROWS} >= {"Kepler", "Maxwell", "Pascal", "Volta", "Turing", "Ampere",
                                                  "Ada Lovelace", "Hopper", "Blackwell"}


def test_each_rows_keys_are_the_words_of_its_names() -> None:
    for row in ROWS:
        assert row["keys"] == sorted({" ".join(compat.gpu_name_tokens(t)) for t in (row["name"], *row["aliases"])} - {""})


def _pci_devices(text: str) -> dict[str, str]:
    """device id -> chip code, from pci.ids text (NVIDIA block)."""
    _, devices = gen_gpus.read_pci(text)
    return {dev: chip for dev, chip, _ in devices}


def _agrees(devices: dict[str, str]) -> list[str]:
    families = gen_gpus.json.load(open(_common.snapshot(gen_gpus.FAMILIES), encoding="utf-8"))["families"]
    bad = []
    for row in ROWS:
        for dev in row["pci_ids"]:
            chip = devices.get(dev)
            if chip is None:
                continue
            fam = gen_gpus.chip_family(chip, families)
            if fam is None:  # older pci.ids name some laptop parts by board code ("GN20-P0-R-K2"), no chip
                continue
            if str(fam["cc"]) != row["cc"] or fam["architecture"] != row["architecture"]:
                bad.append(f"{dev} {row['name']}: pci.ids chip {chip}, row CC {row['cc']}")
    return bad


def test_every_device_id_agrees_with_the_pci_ids_snapshot() -> None:
    with open(_common.snapshot(gen_gpus.PCI_SNAPSHOT), encoding="utf-8") as fh:
        devices = _pci_devices(fh.read())
    ids = [d for r in ROWS for d in r["pci_ids"]]
    assert len(ids) == len(set(ids)), "a device id is in two rows"
    assert all(d in devices for d in ids)
    families = gen_gpus.json.load(open(_common.snapshot(gen_gpus.FAMILIES), encoding="utf-8"))["families"]
    assert all(gen_gpus.chip_family(devices[d], families) for d in ids)
    assert not _agrees(devices)


@pytest.mark.parametrize(("name", "cc"), [
    ("GTX 1080 Ti", (6, 1)), ("GeForce GTX 1080Ti", (6, 1)), ("NVIDIA GeForce RTX 5090 D", (12, 0)),
    ("Tesla K80", (3, 7)), ("A100-SXM4-80GB", (8, 0)), ("H100 80GB HBM3", (9, 0)), ("Quadro P5000", (6, 1)),
    ("NVIDIA TITAN Xp", (6, 1)), ("cuda:0 NVIDIA GeForce RTX 4090 : cudaMallocAsync", (8, 9)),
    ("NVIDIA GeForce RTX 4060 Laptop GPU", (8, 9)), ("GeForce RTX 2080 with Max-Q Design", (7, 5)),
    ("NVIDIA GeForce GTX 1650 Ti with Max-Q design", (7, 5)), ("Quadro K2200M", (5, 0)), ("NVIDIA GeForce MX450", (7, 5)),
    ("GeForce 8800 GT", (1, 1)), ("NVIDIA GeForce RTX 3050 A Laptop GPU", (8, 9)), ("NVIDIA CMP 100-210", (7, 0)),
    ("GRID K520", (3, 0)), ("NVIDIA RTX A2000 Embedded GPU", (8, 6)), ("Tesla V100-SXM2-16GB", (7, 0)),
    ("NVIDIA RTX 6000 Ada Generation", (8, 9)), ("NVIDIA GeForce RTX 5070 Ti Laptop GPU", (12, 0)),
])
def test_names_match_however_people_and_tools_write_them(name: str, cc: tuple[int, int]) -> None:
    assert compat.cc_for_gpu(name) == cc


def test_a_name_two_chips_share_is_no_answer_but_each_pci_id_is() -> None:
    # pci.ids: "GK208B [GeForce GT 730]" (Kepler 3.5) and "GF108 [GeForce GT 730]" (Fermi 2.1).
    assert compat.gpu_by_name("NVIDIA GeForce GT 730") is None
    kepler, fermi = compat.gpu_by_pci_id("10de:1287"), compat.gpu_by_pci_id("0x0F02")
    assert kepler is not None and kepler.cc == (3, 5) and kepler.chip.startswith("GK208")
    assert fermi is not None and fermi.cc == (2, 1)


@pytest.mark.parametrize("text", ["10de:1b06", "10DE:1B06", "1b06", "0x1b06", "0x1B06"])
def test_pci_ids_as_lspci_dmesg_and_sysfs_write_them(text: str) -> None:
    info = compat.gpu_by_pci_id(text)
    assert info is not None and info.cc == (6, 1) and info.name == "GeForce GTX 1080 Ti" and info.chip == "GP102"
    assert info.last_driver_branch == 580 and info.pci_ids == ("1b06",)


@pytest.mark.parametrize("text", ["", "10de:ffff", "1002:744c", "zzzz", "10de:1b06:00", "1b0"])
def test_an_id_the_catalogue_does_not_hold_is_none(text: str) -> None:
    assert compat.gpu_by_pci_id(text) is None


def test_memory_and_legacy_branches_come_from_the_sources() -> None:
    a100 = compat.gpu_by_pci_id("20b2")
    assert a100 is not None and a100.memory_gb == 80 and a100.last_driver_branch is None
    k80 = compat.gpu_by_pci_id("102d")  # supported-gpus.json: legacybranch 470.xx
    assert k80 is not None and k80.last_driver_branch == 470
    g92 = compat.gpu_by_pci_id("0611")  # GeForce 8800 GT: 340.xx
    assert g92 is not None and g92.last_driver_branch == 340 and g92.cc == (1, 1)
    assert compat.gpu_by_pci_id("2b85") is not None and compat.gpu_by_pci_id("2b85").cc == (12, 0)  # type: ignore[union-attr]


def test_hand_kept_rows_keep_their_name_source_and_peaks() -> None:
    h100 = compat.gpu_by_name("NVIDIA H100 PCIe")
    assert h100 is not None and h100.source == "nv_cuda_gpus" and h100.verified
    assert compat.gpu_peaks("NVIDIA H100 PCIe") is not None


@pytest.mark.parametrize(("text", "cc"), [
    ("NVIDIA Corporation GP102 [GeForce GTX 1080 Ti] [10de:1b06] (rev a1)", (6, 1)),
    ("GeForce GT 730 [10de:1287]", (3, 5)),  # the id settles what the shared name cannot
    ("GPU 10DE:2B85", (12, 0)),
])
def test_a_name_that_carries_its_pci_id_is_decided_by_the_id(text: str, cc: tuple[int, int]) -> None:
    assert compat.cc_for_gpu(text) == cc


def test_a_name_two_chips_of_one_capability_share_keeps_the_capability_and_no_chips_fields() -> None:
    # The RTX 3060 Laptop GPU is a GA106M and a GA107M (pci.ids): 8.6 either way; its ids belong to neither alone.
    info = compat.gpu_by_name("NVIDIA GeForce RTX 3060 Laptop GPU")
    assert info is not None and info.cc == (8, 6) and info.chip == "" and info.pci_ids == ()
    one = compat.gpu_by_name("NVIDIA GeForce GTX 1080 Ti")
    assert one is not None and one.chip == "GP102" and "1b06" in one.pci_ids
