"""System-tool listings in pasted text (envdoctor/parsers/listings.py): ldd, ldconfig -p, LD_LIBRARY_PATH,
lsmod and driver package listings become the facts the live probes write, and the checks judge them."""

from __future__ import annotations

import pytest

from envdoctor.model import Status
from envdoctor.parsers import ParseError, parse_text
from envdoctor.pipeline.diagnose import diagnose, sort_findings
from envdoctor.registry import load_registry


def _findings(text: str):  # type: ignore[no-untyped-def]
    return sort_findings(diagnose(parse_text(text), load_registry(plugins=False)))


def _top(text: str):  # type: ignore[no-untyped-def]
    fails = [f for f in _findings(text) if f.status is Status.FAIL]
    return fails[0] if fails else None


def test_ldd_rows_become_libs_ldd_entries_with_the_probe_roles() -> None:
    facts = parse_text("$ ldd /opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so\n"
                       "\tlibcudart.so.12 => /usr/local/cuda/lib64/libcudart.so.12 (0x00007f00)\n"
                       "\tlibcublas.so.12 => not found\n"
                       "/opt/venv/lib/python3.11/site-packages/nvidia/cusparse/lib/libcusparse.so.12:\n"
                       "\tlibnvJitLink.so.12 => not found\n")
    entries = facts.value("libs.ldd")
    assert [e["role"] for e in entries] == ["libtorch_cuda", "nvidia-wheel"]
    assert entries[0]["resolved"]["libcudart.so.12"] == "/usr/local/cuda/lib64/libcudart.so.12"
    assert list(entries[0]["not_found"]) == ["libcublas.so.12"] and list(entries[1]["not_found"]) == ["libnvJitLink.so.12"]


def test_libtorch_cuda_with_a_library_not_found_fails_cudart_resolution() -> None:
    top = _top("ldd libtorch_cuda.so\n\tlibcudnn.so.9 => not found\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x1)\n")
    assert top is not None and top.id == "cudart-resolution" and "libcudnn.so.9" in top.title


def test_a_wheel_library_bound_to_a_system_cuda_on_ld_library_path_is_a_conflict() -> None:
    text = ("ldd /venv/lib/python3.12/site-packages/nvidia/cusparse/lib/libcusparse.so.12\n"
            "\tlibnvJitLink.so.12 => /usr/local/cuda-12.2/lib64/libnvJitLink.so.12 (0x00007f)\n"
            "$ echo $LD_LIBRARY_PATH\n/usr/local/cuda-12.2/lib64:/opt/other/lib\n")
    top = _top(text)
    assert top is not None and top.id == "library-conflicts"
    assert "export LD_LIBRARY_PATH=/opt/other/lib" in top.remediation.commands


def test_a_wheel_library_resolving_inside_the_wheels_is_no_conflict() -> None:
    text = ("ldd /venv/lib/python3.12/site-packages/nvidia/cusparse/lib/libcusparse.so.12\n"
            "\tlibnvJitLink.so.12 => /venv/lib/python3.12/site-packages/nvidia/cusparse/lib/../../nvjitlink/lib/"
            "libnvJitLink.so.12 (0x00007f)\n"
            "$ echo $LD_LIBRARY_PATH\n/usr/local/cuda-12.2/lib64\n")
    assert _top(text) is None


@pytest.mark.parametrize("line", ["LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib", "export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib",
                                  'declare -x LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/lib"'])
def test_ld_library_path_lines_of_env_and_export(line: str) -> None:
    facts = parse_text(f"{line}\nDriver Version: 550.54.15\n")
    assert list(facts.value("libs.ld_library_path")) == ["/usr/local/cuda/lib64", "/usr/lib"]


def test_a_command_prefix_or_a_bare_path_is_no_ld_library_path() -> None:
    facts = parse_text("LD_LIBRARY_PATH=/x/lib:$LD_LIBRARY_PATH ldd a.so\nDriver Version: 550.54.15\n/usr/lib/x:/y\n")
    assert not facts.get("libs.ld_library_path").ok
    with pytest.raises(ParseError):
        parse_text("see /usr/local/cuda/lib64 and /opt/x\n")


def test_lsmod_grep_that_printed_nothing_means_not_loaded_and_packages_installed_fail_driver_installed() -> None:
    text = "$ lsmod | grep nvidia\n$ dpkg -l | grep nvidia-utils\nii  nvidia-utils-550  550.54.15-0ubuntu1  amd64  NVIDIA driver support binaries\n"
    facts = parse_text(text)
    assert facts.value("driver.modules")["nvidia"] is False and "nouveau" not in facts.value("driver.modules")
    top = _top(text)
    assert top is not None and top.id == "driver-installed" and "not loaded" in top.title


def test_lsmod_with_nouveau_and_no_nvidia_fails_driver_nouveau() -> None:
    text = ("$ lsmod | grep -E 'nvidia|nouveau'\nnouveau              2351104  3\n"
            "drm_ttm_helper         16384  1 nouveau\n")
    facts = parse_text(text)
    assert facts.value("driver.modules") == {"nvidia": False, "nvidia_uvm": False, "nvidia_modeset": False,
                                             "nvidia_drm": False, "nvidia_peermem": False, "nouveau": True}
    top = _top(text)
    assert top is not None and top.id == "driver-nouveau"


def test_lsmod_with_the_nvidia_modules_loaded_is_fine() -> None:
    text = ("# lsmod | grep nvidia\nnvidia_uvm           1536000  0\nnvidia_drm             86016  2\n"
            "nvidia              40706048  84 nvidia_uvm,nvidia_modeset\n")
    assert parse_text(text).value("driver.modules")["nvidia"] is True
    assert _top(text) is None


@pytest.mark.parametrize("row, name, driver", [
    ("ii  libnvidia-compute-535:amd64  535.183.01-0ubuntu0.22.04.1  amd64  NVIDIA libcompute package", "libnvidia-compute-535", "535.183.01"),
    ("libnvidia-ml-575.64.03-1.el9.x86_64", "libnvidia-ml", "575.64.03"),
    ("kmod-nvidia-5.14.0-570.el9_6-575.64-1.el9.x86_64", "kmod-nvidia-5.14.0-570.el9_6", "575.64"),
    ("cuda-drivers.x86_64          384.81-1          @cuda-9-0-local", "cuda-drivers", "384.81"),
    ("nvidia-driver-550/jammy-updates,now 550.107.02-0ubuntu0.22.04.1 amd64 [installed]", "nvidia-driver-550", "550.107.02"),
])
def test_driver_package_rows_of_each_manager(row: str, name: str, driver: str) -> None:
    packages = parse_text(row + "\n").value("driver.packages")
    assert [(p["name"], p["driver"]) for p in packages] == [(name, driver)]


@pytest.mark.parametrize("row", ["ii  nvidia-container-toolkit  1.4.0-1  amd64  NVIDIA container runtime hook",
                                 "ii  cuda-nvtx-11-4  11.4.120-1  amd64  NVIDIA Tools Extension",
                                 "ii  nvidia-settings  510.47.03-0ubuntu1  amd64  Tool for configuring the NVIDIA driver"])
def test_packages_that_are_not_the_driver_are_not_driver_packages(row: str) -> None:
    facts = parse_text(row + "\nDriver Version: 550.54.15\n")
    assert not facts.get("driver.packages").ok


def test_driver_packages_of_two_releases_fail_and_removed_ones_do_not_count() -> None:
    mixed = ("ii  libnvidia-compute-550  550.54.15-0ubuntu1  amd64  NVIDIA libcompute package\n"
             "ii  nvidia-utils-550  550.67-0ubuntu1  amd64  NVIDIA driver support binaries\n"
             "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n")
    top = _top(mixed)
    assert top is not None and top.id == "driver-version-mismatch" and "different releases" in top.title
    removed = ("rc  nvidia-utils-535  535.161.07-0ubuntu1  amd64  NVIDIA driver support binaries\n"
               "ii  nvidia-utils-550  550.54.15-0ubuntu1  amd64  NVIDIA driver support binaries\n"
               "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n")
    assert _top(removed) is None
    skew = removed.replace("Module  550.54.15", "Module  545.29.06")
    top = _top(skew)
    assert top is not None and top.id == "driver-version-mismatch" and "550.54.15" in top.detail


def test_ldconfig_rows_keep_cuda_libraries_only() -> None:
    facts = parse_text("\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/wsl/lib/libcuda.so.1\n"
                       "\tlibicudata.so.70 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libicudata.so.70\n")
    assert dict(facts.value("libs.ldconfig")) == {"libcuda.so.1": ("/usr/lib/wsl/lib/libcuda.so.1",)}
    assert _top("\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/wsl/lib/libcuda.so.1\n") is None
