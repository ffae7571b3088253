"""The torch_arch_lists rows that cite a PyTorch build script are the generator's evaluation of that
script's lines (tools/snapshots/pytorch_build_arch_lists.txt), byte for byte."""

from __future__ import annotations

import copy

import pytest

from tools import _common, gen_torch_arch


def test_the_shipped_table_is_the_generators_output_byte_for_byte() -> None:
    with open(_common.COMPAT, encoding="utf-8") as fh:
        assert fh.read() == gen_torch_arch.generate(_common.read_compat()), "run: python tools/gen_torch_arch.py"


def _scripts() -> dict[str, gen_torch_arch.Lists]:
    with open(_common.snapshot(gen_torch_arch.SNAPSHOT), encoding="utf-8") as fh:
        return gen_torch_arch.read_snapshot(fh.read())


def test_the_script_lines_evaluate_as_pytorch_builds_them() -> None:
    scripts = _scripts()
    linux = scripts["pytorch_build_cuda_799d09f"]
    assert linux[("12.6", "linux_x86_64")] == (["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"], [])
    assert linux[("12.6", "linux_aarch64")] == (["8.0", "9.0"], [])  # remove_archs 5.0 6.0 7.0 7.5 8.6
    assert linux[("13.0", "linux_aarch64")] == (["8.0", "9.0", "10.0", "11.0", "12.0"], ["12.0"])  # + 11.0 on aarch64
    assert linux[("13.0", "linux_x86_64")] == (["7.5", "8.0", "8.6", "9.0", "10.0", "12.0"], ["12.0"])
    assert ("12.8", "linux_aarch64") not in scripts["pytorch_build_cuda_00c7a38"]  # no aarch64 filter in that version
    assert scripts["pytorch_win_cuda_config_534e6ef"][("13.2", "windows_x86_64")][1] == []  # no PTX on Windows
    # pytorch/builder's case labels are shell patterns, and its 1.7-era lines say $TORCH_CUDA_ARCH_LIST
    assert scripts["builder_build_sh_c286aad"][("10.2", "linux_x86_64")] == (["3.7", "5.0", "6.0", "7.0", "7.5"], [])
    assert scripts["builder_build_sh_0877fd1"][("11.1", "linux_x86_64")][0][-1] == "8.6"  # 11.[123])
    assert ("11.4", "linux_x86_64") not in scripts["builder_build_sh_0877fd1"]
    assert scripts["builder_build_cuda_e77e5d0"][("10.2", "linux_x86_64")] == (["3.7", "5.0", "6.0", "7.0"], [])


def test_a_row_that_drifted_from_its_script_is_rewritten_and_an_unhandled_cuda_is_an_error() -> None:
    table = copy.deepcopy(_common.read_compat())
    row = next(r for r in table["torch_arch_lists"]["rows"] if r["source"] == "pytorch_build_cuda_00c7a38"
               and r["variant"] == "cu128")
    row["sass"] = ["5.0"]
    fixed = gen_torch_arch.regenerate(table, _scripts())
    again = next(r for r in fixed["torch_arch_lists"]["rows"] if r["source"] == "pytorch_build_cuda_00c7a38"
                 and r["variant"] == "cu128")
    assert again["sass"] == ["7.0", "7.5", "8.0", "8.6", "9.0", "10.0", "12.0"]
    row["variant"] = "cu118"
    with pytest.raises(SystemExit, match="do not handle CUDA 11.8"):
        gen_torch_arch.regenerate(table, _scripts())
