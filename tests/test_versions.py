"""The version codecs: every encoding NVIDIA and PyTorch use, both ways."""

from __future__ import annotations

import pytest

from envdoctor.knowledge import versions as v


@pytest.mark.parametrize(("code", "text"), [(12080, "12.8"), (11040, "11.4"), (13000, "13.0"), (10010, "10.1")])
def test_cuda_int_round_trip(code: int, text: str) -> None:
    assert v.cuda_from_int(code) == text
    assert v.cuda_to_int(text) == code
    assert v.cuda_to_int(text + ".1") == code


def test_cuda_int_text_refuses_non_versions() -> None:
    assert v.cuda_int_text(0) is None
    assert v.cuda_int_text(True) is None
    assert v.cuda_int_text("12080") is None
    assert v.cuda_int_text(12040) == "12.4"


@pytest.mark.parametrize(("code", "parts"), [(8902, (8, 9, 2)), (7605, (7, 6, 5)), (90100, (9, 1, 0)),
                                             (91002, (9, 10, 2))])
def test_cudnn_both_encodings(code: int, parts: tuple[int, int, int]) -> None:
    assert v.cudnn_tuple(code) == parts
    assert v.cudnn_to_int(parts) == code
    assert v.cudnn_to_int(".".join(map(str, parts))) == code
    assert v.cudnn_text(code) == ".".join(map(str, parts))


def test_cudnn_strings_and_junk() -> None:
    assert v.cudnn_tuple("9.10.2.21") == (9, 10, 2)
    assert v.cudnn_tuple(True) is None
    assert v.cudnn_tuple(None) is None
    assert v.cudnn_to_int("n/a") is None


@pytest.mark.parametrize(("code", "text"), [(2708, "2.7.8"), (22105, "2.21.5"), (20903, "2.9.3")])
def test_nccl_both_encodings(code: int, text: str) -> None:
    assert v.nccl_text(code) == text
    assert v.nccl_text((2, 21, 5)) == "2.21.5"


@pytest.mark.parametrize(("given", "cc"), [("9.0", (9, 0)), ([12, 0], (12, 0)), ("sm_120", (12, 0)),
                                           ("compute_90", (9, 0)), ("sm_90a", (9, 0)), ("86", (8, 6))])
def test_compute_capability(given: object, cc: tuple[int, int]) -> None:
    assert v.parse_cc(given) == cc
    assert v.sm(cc) == f"sm_{cc[0]}{cc[1]}"
    assert v.cc_text(cc) == f"{cc[0]}.{cc[1]}"


def test_variants_and_tags() -> None:
    assert v.variant_cuda("cu128") == "12.8"
    assert v.variant_cuda("cu92") == "9.2"
    assert v.variant_cuda("cpu") is None
    assert v.variant_for_cuda("12.8") == "cu128"
    assert v.local_tag("2.6.0+cu126") == "cu126"
    assert v.local_tag("2.6.0") is None
    assert v.without_local("2.6.0+cu126") == "2.6.0"


def test_lenient_parse() -> None:
    assert str(v.parse("570.124.06")) == "570.124.6"
    assert str(v.parse("12.4 (build 2)")) == "12.4"
    assert v.parse("none") is None
    assert v.minor_of("2.6.0+cu126") == "2.6"
    assert v.triple("9.1") == (9, 1, 0)
