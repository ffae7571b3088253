"""compat.json's cuda_libraries table (file name -> family -> pip wheel) answers every question the
hand-kept tables it replaced answered (messages._FAMILY_BY_NAME/_FAMILY_BY_SYMBOL, checks/libraries
_PACKAGES/_ALWAYS_SUFFIXED/_WHEEL_DIR/_WHEEL_OF, probes/libraries FAMILIES/WHEEL_DIST), the same way,
and names only wheels that exist."""

from __future__ import annotations

import subprocess
import sys

import pytest
from envdoctor.checks import libraries as lib_checks

from envdoctor.knowledge import compat, messages, versions
from envdoctor.probes import libraries as lib_probe

from .builders import facts

OLD_PACKAGES = (
    ("libcudart", "nvidia-cuda-runtime"), ("libcublasLt", "nvidia-cublas"), ("libcublas", "nvidia-cublas"),
    ("libcudnn", "nvidia-cudnn"), ("libnccl", "nvidia-nccl"), ("libnvJitLink", "nvidia-nvjitlink"),
    ("libcusparseLt", "nvidia-cusparselt"), ("libcusparse", "nvidia-cusparse"), ("libcufft", "nvidia-cufft"),
    ("libcurand", "nvidia-curand"), ("libcusolver", "nvidia-cusolver"), ("libnvrtc", "nvidia-cuda-nvrtc"),
    ("libcupti", "nvidia-cuda-cupti"), ("libcufile", "nvidia-cufile"), ("libnvshmem_host", "nvidia-nvshmem"),
    ("libnvToolsExt", "nvidia-nvtx"),
)
OLD_ALWAYS_SUFFIXED = {"nvidia-cudnn", "nvidia-nccl", "nvidia-cusparselt", "nvidia-nvshmem"}
OLD_WHEEL_DIR = (
    ("libcudart", "cuda_runtime"), ("libcublasLt", "cublas"), ("libcublas", "cublas"), ("libcudnn", "cudnn"),
    ("libnccl", "nccl"), ("libnvJitLink", "nvjitlink"), ("libcusparseLt", "cusparselt"), ("libcusparse", "cusparse"),
    ("libcufft", "cufft"), ("libcurand", "curand"), ("libcusolver", "cusolver"), ("libnvrtc", "cuda_nvrtc"),
    ("libcupti", "cuda_cupti"), ("libcufile", "cufile"), ("libnvshmem", "nvshmem"),
)
OLD_WHEEL_OF = {"nvJitLink": "nvidia-nvjitlink", "cublas": "nvidia-cublas", "cusparse": "nvidia-cusparse",
                "cudart": "nvidia-cuda-runtime", "cufft": "nvidia-cufft", "cusolver": "nvidia-cusolver",
                "curand": "nvidia-curand", "nvrtc": "nvidia-cuda-nvrtc", "cupti": "nvidia-cuda-cupti"}
OLD_FAMILY_BY_NAME = (("libcudnn", "cudnn"), ("libnccl", "nccl"), ("libnvJitLink", "nvJitLink"),
                      ("libcusparse", "cusparse"), ("libcublas", "cublas"), ("libcudart", "cudart"),
                      ("libcufft", "cufft"), ("libcusolver", "cusolver"), ("libcurand", "curand"),
                      ("libnvrtc", "nvrtc"), ("libcupti", "cupti"), ("libnvToolsExt", "nvtx"), ("libcuda.", "cuda"),
                      ("libtorch", "torch"), ("libc10", "torch"))
OLD_FAMILY_BY_SYMBOL = (("__nvJitLink", "nvJitLink"), ("nvJitLink", "nvJitLink"), ("nccl", "nccl"),
                        ("cudnn", "cudnn"), ("_ZN5cudnn", "cudnn"), ("cublas", "cublas"), ("cusparse", "cusparse"),
                        ("cufft", "cufft"), ("cusolver", "cusolver"), ("nvrtc", "nvrtc"))
OLD_WHEEL_DIST = {"cudart": "cuda_runtime", "cudnn": "cudnn", "nccl": "nccl", "cublas": "cublas"}


def test_the_table_has_a_source_and_pypi_pages_for_every_wheel() -> None:
    table = compat.data()["cuda_libraries"]
    assert table["sources"] and compat.source_url(table["sources"][0]).startswith("https://pypi.org/project/nvidia-")
    for row in table["rows"]:
        if row["wheel"]:
            assert row["pages"] and all(p.startswith(f"https://pypi.org/project/{row['wheel']}") for p in row["pages"])
        else:
            assert row["wheel_dir"] is None and "pages" not in row


@pytest.mark.parametrize(("stem", "wheel"), OLD_PACKAGES)
def test_every_old_package_row_names_the_same_wheel(stem: str, wheel: str) -> None:
    found = compat.cuda_library(f"{stem}.so.12")
    assert found is not None and found.wheel == wheel
    assert found.always_suffixed is (wheel in OLD_ALWAYS_SUFFIXED)


@pytest.mark.parametrize(("stem", "folder"), OLD_WHEEL_DIR)
def test_every_old_wheel_folder_is_the_same(stem: str, folder: str) -> None:
    found = compat.cuda_library(f"/x/{stem}.so.12")
    assert found is not None and found.wheel_dir == folder
    assert lib_checks._wheel_ships(f"{stem}.so.12", [f"/venv/site-packages/nvidia/{folder}/lib"])
    assert lib_checks._wheel_ships(f"{stem}.so.13", ["/venv/site-packages/nvidia/cu13/lib"])
    assert not lib_checks._wheel_ships(f"{stem}.so.12", ["/usr/local/cuda/lib64"])


def test_families_and_symbols_are_named_as_before() -> None:
    for family, wheel in OLD_WHEEL_OF.items():
        assert compat.family_wheel(family) == wheel
    for prefix, family in OLD_FAMILY_BY_NAME:
        assert messages.family_of(f"/some/dir/{prefix}so.1") == family, prefix
    for prefix, family in OLD_FAMILY_BY_SYMBOL:
        assert messages.family_of(f"{prefix}Something_12_4") == family, prefix
    assert messages.family_of("libcudadebugger.so.1") is None  # the dot keeps the driver's libcuda. apart
    assert messages.family_of("libfoo.so") is None and messages.family_of(None) is None


def test_the_libraries_probe_tables_are_the_same() -> None:
    assert dict(lib_probe.WHEEL_DIST) == OLD_WHEEL_DIST
    assert list(lib_probe.FAMILIES) == list(OLD_WHEEL_DIST)
    for family, rx in lib_probe.FAMILIES.items():
        assert rx.match(f"lib{family}.so.12") and rx.match(f"lib{family}-a7b20f20.so.11.0")
    assert not lib_probe.FAMILIES["cublas"].match("libcublasLt.so.12")
    assert not lib_probe.FAMILIES["cudnn"].match("libcudnn_ops.so.9")


@pytest.mark.parametrize(("wheel", "major", "name"), [
    ("nvidia-cuda-runtime", 12, "nvidia-cuda-runtime-cu12"), ("nvidia-cuda-runtime", 11, "nvidia-cuda-runtime-cu11"),
    ("nvidia-cuda-runtime", 13, "nvidia-cuda-runtime"), ("nvidia-cublas", "13", "nvidia-cublas"),
    ("nvidia-cudnn", 13, "nvidia-cudnn-cu13"), ("nvidia-nccl", 13, "nvidia-nccl-cu13"),
    ("nvidia-cusparselt", 13, "nvidia-cusparselt-cu13"), ("nvidia-nvshmem", 13, "nvidia-nvshmem-cu13"),
])
def test_wheel_names_follow_nvidias_suffix_rule(wheel: str, major: int | str, name: str) -> None:
    assert compat.wheel_name(wheel, major) == name


def test_package_for_answers_as_before() -> None:
    f = facts(torch__cuda_version="12.6", libs__torch_requires={"nvidia-cudnn-cu12": "9.5.1.17"})
    assert lib_checks.package_for("libcudnn_ops.so.9", f) == "nvidia-cudnn-cu12==9.5.1.17"
    assert lib_checks.package_for("libcublasLt.so.12", f) == "nvidia-cublas-cu12"
    assert lib_checks.package_for("libnvshmem_host.so.3", f) == "nvidia-nvshmem-cu12"
    assert lib_checks.package_for("libcuda.so.1", f) is None and lib_checks.package_for("libfoo.so.1", f) is None
    # auditwheel's renamed copy in torch/lib is torch's, not a wheel to install; its family is still cudart.
    assert lib_checks.package_for("libcudart-a7b20f20.so.11.0", f) is None
    assert not lib_checks._wheel_ships("libcudart-a7b20f20.so.11.0", ["/v/nvidia/cuda_runtime/lib"])
    assert messages.family_of("libcudart-a7b20f20.so.11.0") == "cudart"
    cu13 = facts(torch__cuda_version="13.0", libs__torch_requires={})
    assert lib_checks.package_for("libcudart.so.13", cu13) == "nvidia-cuda-runtime"
    assert lib_checks.package_for("libnccl.so.2", cu13) == "nvidia-nccl-cu13"
    # Without torch's CUDA, a toolkit library's soname major is the CUDA major.
    bare = facts(libs__torch_requires={}, torch__cuda_version=None)
    assert lib_checks.package_for("libcudart.so.12", bare) == "nvidia-cuda-runtime-cu12"
    assert lib_checks.package_for("libnccl.so.2", bare) is None


def test_libraries_that_ship_in_a_wheel_under_another_name_find_it() -> None:
    # What the longest-prefix table knows and the old exact-stem tables did not: read from the
    # wheels' file lists (nvidia-cuda-nvrtc ships libnvrtc-builtins, nvidia-cufft libcufftw, …).
    assert compat.cuda_library("libnvrtc-builtins.so.12.8").wheel == "nvidia-cuda-nvrtc"
    assert compat.cuda_library("libcufftw.so.11").wheel == "nvidia-cufft"
    assert compat.cuda_library("libcusolverMg.so.11").wheel == "nvidia-cusolver"
    # cuSPARSELt is a wheel of its own, not cuSPARSE's.
    assert messages.family_of("libcusparseLt.so.0") == "cusparseLt"
    assert compat.family_wheel("cusparseLt") == "nvidia-cusparselt"


def test_importing_the_checks_and_probes_does_not_load_the_table() -> None:
    code = ("from envdoctor.registry import load_registry; from envdoctor.probes import builtin_probes; "
            "load_registry(plugins=False); builtin_probes(); from envdoctor.knowledge import compat; "
            "print(compat.data.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "0"


@pytest.mark.parametrize(("family", "major", "folder"), [
    ("cudart", 12, "cuda_runtime"), ("cudart", 13, "cu13"), ("cublas", 13, "cu13"),
    ("cudnn", 13, "cudnn"),  # nvidia-cudnn-cu13 keeps its own folder (always suffixed)
])
def test_the_wheel_folder_of_a_family_comes_from_the_table(family: str, major: int, folder: str) -> None:
    lib = compat.family_library(family)
    assert lib is not None and compat.wheel_lib_dir(lib, major) == folder


def test_a_soname_names_its_cuda_release_to_the_minor_only_when_it_has_one() -> None:
    assert [versions.soname_cuda(n) for n in ("libcudart.so.9.0", "/x/libcudart.so.11.8.89", "libcudart.so.12",
                                              "cudart64_110.dll", None)] == ["9.0", "11.8", None, None, None]
