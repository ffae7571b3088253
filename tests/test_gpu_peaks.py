"""GPU datasheet peaks in the compatibility table: every figure has a source, every product's
variants resolve, and the lookup matches the names torch and NVML report."""

from __future__ import annotations

import pytest

from envdoctor.knowledge import compat
from envdoctor.knowledge.compat import Peaks, gpu_peaks

ROWS = [row for row in compat.data()["gpus"]["rows"] if row.get("peaks")]


@pytest.mark.parametrize(("name", "model", "bf16", "gbps"), [
    ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.4, 3350.0), ("NVIDIA H100 PCIe", "H100 PCIe", 756.0, 2000.0),
    ("NVIDIA H100 NVL", "H100 NVL", 835.5, 3900.0), ("NVIDIA H200", "H200 SXM", 989.4, 4800.0),
    ("NVIDIA H200 NVL", "H200 NVL", 835.5, 4800.0), ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM", 312.0, 2039.0),
    ("NVIDIA A100-SXM4-40GB", "A100 40GB", 312.0, 1555.0), ("NVIDIA A100-PCIE-40GB", "A100 40GB", 312.0, 1555.0),
    ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe", 312.0, 1935.0), ("NVIDIA L4", "L4", 121.0, 300.0),
    ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090", 165.2, 1008.0),
    ("NVIDIA GeForce RTX 5090", "GeForce RTX 5090", 209.5, 1792.0),
])
def test_peaks_match_torch_device_names(name: str, model: str, bf16: float, gbps: float) -> None:
    peaks = gpu_peaks(name)
    assert isinstance(peaks, Peaks) and peaks.model == model
    assert peaks.tflops["bf16"] == bf16 and peaks.memory_gbps == gbps
    assert peaks.tflops["bf16"] > peaks.tflops["fp32"] and peaks.url.startswith("https://")


@pytest.mark.parametrize("name", ["H100 SXM", "H100 PCIe", "A100 40GB", "A100 80GB PCIe", "GeForce RTX 4090", "L4"])
def test_a_model_name_the_peaks_carry_finds_the_same_peaks(name: str) -> None:
    """Old saved reports name the peak model ("H100 SXM"), not the device: it must find its own row."""
    peaks = gpu_peaks(name)
    assert peaks is not None and peaks.model == name


@pytest.mark.parametrize("name", ["NVIDIA L40S", "NVIDIA Imaginary X1", "cpu", "", None])
def test_gpus_without_peaks_have_none(name: str | None) -> None:
    assert gpu_peaks(name) is None


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["name"])
def test_every_product_with_peaks_has_one_fallback_variant_last_and_sources_that_exist(row: dict) -> None:
    variants = row["peaks"]
    assert [bool(v.get("match")) for v in variants] == [True] * (len(variants) - 1) + [False]
    for v in variants:
        assert v["source"] in compat.data()["sources"] and compat.source_url(v["source"]).startswith("https://")
        assert v["source"] in compat.data()["gpus"]["sources"]
        tf = v["peak_tflops"]
        assert set(tf) == {"fp32", "tf32", "bf16", "fp16"} and tf["fp16"] >= tf["tf32"] >= tf["fp32"] > 0
        assert v["memory_bandwidth_gbps"] > 0


def test_variants_are_chosen_within_their_products_row(monkeypatch: pytest.MonkeyPatch) -> None:
    table = {"sources": {}, "gpus": {"rows": [
        {"name": "X", "match": ["x1"], "cc": "9.0", "architecture": "A", "segment": "datacenter", "source": "s",
         "verified": True, "peaks": [
             {"model": "X1 fast", "match": "fast", "peak_tflops": {"bf16": 2.0}, "source": "s", "verified": False},
             {"model": "X1", "peak_tflops": {"bf16": 1.0}, "memory_bandwidth_gbps": 10, "source": "s", "verified": True}]},
        {"name": "Y", "match": ["y1"], "cc": "9.0", "architecture": "A", "segment": "datacenter", "source": "s",
         "verified": True},
    ]}}
    monkeypatch.setattr(compat, "data", lambda: table)
    monkeypatch.setattr(compat, "_gpu_patterns", compat._gpu_patterns.__wrapped__)
    fast = gpu_peaks("NVIDIA X1 Fast")
    assert fast is not None and fast.model == "X1 fast" and fast.memory_gbps is None and not fast.verified
    plain = gpu_peaks("NVIDIA X1")
    assert plain is not None and plain.model == "X1" and plain.tflops == {"bf16": 1.0} and plain.memory_gbps == 10.0
    assert gpu_peaks("NVIDIA Y1") is None
