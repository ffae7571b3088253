"""Typed views of the facts checks read most (envdoctor/views.py): they read what the probes and
parsers write, and give empty views, never exceptions, for missing or odd values."""

from __future__ import annotations

from pathlib import Path

import pytest

from envdoctor import views
from envdoctor.model import Facts, Reason, missing, ok
from envdoctor.parsers import ParseError, parse_text
from envdoctor.views import Gpu, TorchBuild, TorchDevice, VisibleDevices

from .builders import facts as core_facts
from .fakes.nvidia_facts import healthy_gpu, nv_facts

CORPUS = Path(__file__).resolve().parent / "corpus"
ODD = [missing(Reason.TIMEOUT), ok(None), ok("garbage"), ok(42), ok(["x", 3, None]), ok({"devices": "nope"})]


def test_gpus_read_every_nvml_entry_with_typed_fields():
    facts = nv_facts(gpus=[healthy_gpu(0), {"index": 1, "error": {"code": 15, "name": "NVML_ERROR_GPU_IS_LOST"}}])
    g0, g1 = views.gpus(facts)
    assert (g0.index, g0.name, g0.compute_capability, g0.memory_total) == (0, "NVIDIA A100-SXM4-80GB", (8, 0),
                                                                           85899345920)
    assert g0.pcie_max() == (4, 16) and g0.error is None and not g0.lost
    assert g0.get("ecc_mode")["current"] == 1 and g0.missing("retired_pages_pending")["reason"] == "unsupported"
    assert g0.missing("temperature") is None
    assert g1.error is not None and g1.name is None and g1.pcie_max() == (None, None)


def test_find_gpu_matches_torch_uuids_without_the_prefix():
    found = views.gpus(nv_facts())
    assert views.find_gpu(found, uuid="00000001-1111-2222-3333-444444444444").index == 1
    assert views.find_gpu(found, uuid="GPU-00000000-1111-2222-3333-444444444444").index == 0
    assert views.find_gpu(found, index=1).index == 1 and views.find_gpu(found, uuid="GPU-nope") is None
    assert views.find_gpu(found[:1], uuid="GPU-nope") is found[0]  # the only GPU is the one


@pytest.mark.parametrize("reading", ODD)
def test_views_tolerate_missing_and_odd_values(reading):
    facts = Facts({"nvml.gpus": reading, "torch.devices": reading, "visibility.cuda_visible_devices": reading,
                   "visibility.cuda_devices": reading, "torch.version": reading, "torch.cuda_version": reading})
    assert views.gpus(facts) == [] and views.torch_devices(facts) == []
    cvd = VisibleDevices.from_facts(facts)
    assert cvd.devices == () and cvd.nvml_indices == [] and cvd.order_certain
    assert TorchBuild.from_facts(facts) is None or TorchBuild.from_facts(facts).version == "42"
    assert Gpu.from_nvml({"index": "0", "compute_capability": "x.y", "pcie": "fast"}).pcie_max() == (None, None)
    assert TorchDevice.from_torch({"capability": [8]}).capability is None


def test_visible_devices_reads_the_parsed_variable_and_the_mapping():
    facts = nv_facts(visibility__cuda_visible_devices={
        "raw": "1,gpu0", "set": True, "kind": "index", "entries": ["1"], "ignored": ["gpu0"], "stopped_at": "gpu0",
        "stop_reason": "invalid", "hides_all": False, "loose_tokens": []})
    cvd = VisibleDevices.from_facts(facts)
    assert cvd.is_set and cvd.kind == "index" and cvd.entries == ("1",) and cvd.ignored == ("gpu0",)
    assert cvd.stopped_at == "gpu0" and cvd.stop_reason == "invalid" and cvd.mapped
    assert [d.cuda for d in cvd.devices] == [0, 1] and cvd.nvml_indices == [0, 1] and cvd.order == "FASTEST_FIRST"
    assert not VisibleDevices.from_facts(core_facts()).mapped


def test_torch_devices_and_build():
    facts = core_facts(torch__devices=[{"index": 0, "name": "NVIDIA H100", "capability": [9, 0],
                                        "total_memory": 80 << 30, "uuid": "abc"}])
    [dev] = views.torch_devices(facts)
    assert (dev.index, dev.capability, dev.uuid, dev.error) == (0, (9, 0), "abc", None)
    build = TorchBuild.from_facts(core_facts(torch__version="2.6.0+cu126", torch__cuda_version="12.6"))
    assert build is not None and (build.public, build.variant, build.cuda) == ("2.6.0", "cu126", "12.6")


def test_the_compat_checks_read_torch_s_build_through_the_view():
    """One TorchBuild: the compatibility checks ask the view, and it reads every corpus paste that
    names a torch version."""
    from envdoctor.checks import _torch

    seen = 0
    for path in sorted(CORPUS.glob("*.txt")):
        try:
            facts = parse_text(path.read_text(encoding="utf-8", errors="replace"))
        except ParseError:
            continue
        build = _torch.torch_build(facts)
        assert build == TorchBuild.from_facts(facts), path.name
        if build:
            seen += 1
            assert build.version.split("+", 1)[0] == build.public, path.name
            assert build.cuda is None or build.cuda[0].isdigit(), path.name
    assert seen > 40
