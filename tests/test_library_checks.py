"""Facts-level tests of library-conflicts and cudart-resolution: a healthy pip-wheel node, change
one thing, judge."""

from __future__ import annotations

from typing import Any

from envdoctor.checks.libraries import cudart_resolution, library_conflicts, package_for

from envdoctor.model import Reason, Status, missing

from .builders import facts as base_facts
from .judging import judge_one

SITE = "/opt/venv/lib/python3.11/site-packages"
WHEEL_CUDART = f"{SITE}/nvidia/cuda_runtime/lib/libcudart.so.12"
WHEEL_CUDNN = f"{SITE}/nvidia/cudnn/lib/libcudnn.so.9"
STALE = "/usr/local/cuda-12.1/lib64"
STALE_CUDART = f"{STALE}/libcudart.so.12.1.105"


def copy(path: str, family: str, soname: str, version: str, origin: str, **extra: Any) -> dict[str, Any]:
    entry = {"path": path, "names": [path], "family": family, "soname": soname, "version": version,
             "api_version": None, "version_source": "ctypes", "origin": origin, "found_via": [],
             "ld_library_path_entry": None, "package": None, "package_version": None, "file_version": None,
             "load": "ok", "load_detail": ""}
    entry.update(extra)
    return entry


def wheel_cudart() -> dict[str, Any]:
    return copy(WHEEL_CUDART, "cudart", "libcudart.so.12", "12.6", "pip", api_version=12060,
                found_via=["site-packages/nvidia"], package="nvidia-cuda-runtime-cu12", package_version="12.6.77")


def stale_cudart(version: str = "12.1") -> dict[str, Any]:
    return copy(STALE_CUDART, "cudart", "libcudart.so.12", version, "toolkit", found_via=["LD_LIBRARY_PATH[0]"],
                ld_library_path_entry=STALE, file_version="12.1.105")


def torch_ldd(cudart: str = WHEEL_CUDART, not_found: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    resolved = {"libc10_cuda.so": f"{SITE}/torch/lib/libc10_cuda.so", "libc.so.6": "/lib/x86_64-linux-gnu/libc.so.6"}
    if cudart:
        resolved["libcudart.so.12"] = cudart
    return [{"file": f"{SITE}/torch/lib/libtorch_cuda.so", "role": "libtorch_cuda", "resolved": resolved,
             "not_found": list(not_found)},
            {"file": f"{SITE}/torch/_C.cpython-311-x86_64-linux-gnu.so", "role": "torch._C", "resolved": resolved,
             "not_found": list(not_found)}]


def facts(**changes: Any):
    """The builder's healthy H100 node plus the libs.* facts of its pip wheels."""
    libs: dict[str, Any] = {
        "libs__cudart_copies": [wheel_cudart()],
        "libs__cudnn_copies": [copy(WHEEL_CUDNN, "cudnn", "libcudnn.so.9", "9.5.1", "pip", api_version=90501,
                                    package="nvidia-cudnn-cu12", package_version="9.5.1.17")],
        "libs__nccl_copies": [],
        "libs__cublas_copies": [],
        "libs__loader_choice": {"libcudart.so.12": {"family": "cudart", "path": None, "file": None,
                                                    "error": "libcudart.so.12: cannot open shared object file: "
                                                             "No such file or directory",
                                                    "method": "dlopen", "predicted": None}},
        "libs__ldd": torch_ldd(),
        "libs__ld_library_path": [],
        "libs__wheel_dirs": [f"{SITE}/nvidia/cuda_runtime/lib", f"{SITE}/nvidia/cudnn/lib", f"{SITE}/torch/lib"],
        "libs__torch_requires": {"nvidia-cuda-runtime-cu12": "12.6.77", "nvidia-cudnn-cu12": "9.5.1.17"},
        "torch__loaded_libraries": {"cudart": [WHEEL_CUDART], "cudnn": [WHEEL_CUDNN]},
    }
    libs.update(changes)
    return base_facts(**libs)


def test_healthy_wheel_node_is_ok():
    f = facts()
    assert judge_one(library_conflicts, f).status is Status.OK
    finding = judge_one(cudart_resolution, f)
    assert finding.status is Status.OK and WHEEL_CUDART in finding.detail


# -- library-conflicts --------------------------------------------------------------------------

def test_family_mapped_from_two_folders_fails_and_names_the_ld_library_path_entry():
    f = facts(torch__loaded_libraries={"cudart": [STALE_CUDART, WHEEL_CUDART]},
              libs__cudart_copies=[stale_cudart(), wheel_cudart()],
              libs__ld_library_path=[STALE, "/home/me/lib"])
    finding = judge_one(library_conflicts, f)
    assert finding.status is Status.FAIL and "mapped from 2 folders" in finding.detail
    assert "export LD_LIBRARY_PATH=/home/me/lib" in finding.remediation.commands
    assert STALE in finding.remediation.text


def test_loaded_from_outside_the_wheel_with_a_different_version_fails():
    f = facts(torch__loaded_libraries={"cudart": [STALE_CUDART]}, libs__cudart_copies=[stale_cudart(), wheel_cudart()],
              libs__ld_library_path=[STALE])
    finding = judge_one(library_conflicts, f)
    assert finding.status is Status.FAIL and "a different version" in finding.detail
    assert "unset LD_LIBRARY_PATH" in finding.remediation.commands


def test_loaded_from_outside_the_wheel_with_the_same_version_warns():
    f = facts(torch__loaded_libraries={"cudart": [STALE_CUDART]},
              libs__cudart_copies=[stale_cudart("12.6"), wheel_cudart()], libs__ld_library_path=[STALE])
    finding = judge_one(library_conflicts, f)
    assert finding.status is Status.WARN and "a different version" not in finding.detail


def test_stale_ld_library_path_the_loader_picks_fails_even_without_a_memory_map():
    # CUDA could not initialise (or torch is not imported yet): the disk inventory alone shows it.
    choice = {"libcudart.so.12": {"family": "cudart", "file": STALE_CUDART, "via": "LD_LIBRARY_PATH[0]"}}
    f = facts(torch__loaded_libraries={}, libs__cudart_copies=[stale_cudart(), wheel_cudart()],
              libs__ld_library_path=[STALE, "/opt/tools/lib"], libs__loader_choice=choice)
    finding = judge_one(library_conflicts, f)
    assert finding.status is Status.FAIL
    assert f"LD_LIBRARY_PATH entry {STALE}" in finding.detail and "the loader picks it" in finding.detail
    assert finding.remediation.commands[0] == "export LD_LIBRARY_PATH=/opt/tools/lib"


def test_shadowing_copy_of_unknown_version_warns():
    f = facts(torch__loaded_libraries={}, libs__cudart_copies=[stale_cudart(None), wheel_cudart()],
              libs__ld_library_path=[STALE])
    assert judge_one(library_conflicts, f).status is Status.WARN


def test_other_major_on_ld_library_path_is_no_conflict():
    old = copy("/usr/local/cuda-11.8/lib64/libcudart.so.11.0", "cudart", "libcudart.so.11", "11.8", "toolkit",
               ld_library_path_entry="/usr/local/cuda-11.8/lib64")
    f = facts(libs__cudart_copies=[old, wheel_cudart()], libs__ld_library_path=["/usr/local/cuda-11.8/lib64"])
    assert judge_one(library_conflicts, f).status is Status.OK


def test_system_folder_from_the_loader_cache_gets_the_ld_so_conf_remedy():
    system = "/usr/lib/x86_64-linux-gnu/libcudnn.so.9.0.0"
    f = facts(torch__loaded_libraries={"cudnn": [system, WHEEL_CUDNN]})
    finding = judge_one(library_conflicts, f)
    assert finding.status is Status.FAIL
    assert "grep -rl /usr/lib/x86_64-linux-gnu /etc/ld.so.conf /etc/ld.so.conf.d/" in finding.remediation.commands
    assert "sudo ldconfig" in finding.remediation.commands


def test_libcuda_in_two_folders_is_not_judged_here():
    f = facts(torch__loaded_libraries={"libcuda": ["/usr/lib/x86_64-linux-gnu/libcuda.so.570.124.06",
                                                   "/usr/local/cuda/compat/libcuda.so.575.51.03"]})
    assert judge_one(library_conflicts, f).status is Status.OK


def test_nothing_collected_skips_and_a_timed_out_probe_is_an_error():
    f = facts(libs__cudart_copies=None, libs__cudnn_copies=None, libs__nccl_copies=None, libs__cublas_copies=None,
              torch__loaded_libraries=None)
    assert judge_one(library_conflicts, f).status is Status.SKIP
    hung = missing(Reason.TIMEOUT, "probe:libraries", "probe libraries did not finish within 6.5 s")
    finding = judge_one(library_conflicts, facts(libs__cudart_copies=hung))
    assert finding.status is Status.ERROR and "did not finish" in finding.detail


# -- cudart-resolution --------------------------------------------------------------------------

def test_not_found_after_a_failed_import_fails_with_the_pinned_wheel():
    f = facts(libs__ldd=torch_ldd(cudart="", not_found=("libcudart.so.12",)),
              torch__version=missing(Reason.FAILED, "child:torch_probe",
                                     "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory"))
    finding = judge_one(cudart_resolution, f)
    assert finding.status is Status.FAIL and finding.title == "torch cannot resolve libcudart.so.12"
    assert "/opt/venv/bin/python -m pip install nvidia-cuda-runtime-cu12==12.6.77" in finding.remediation.commands


def test_not_found_while_torch_imports_warns_and_offers_the_torch_reinstall():
    f = facts(libs__ldd=torch_ldd(not_found=("libcublas.so.12", "libcublasLt.so.12")),
              libs__torch_requires={"nvidia-cublas-cu12": "12.6.4.1"})
    finding = judge_one(cudart_resolution, f)
    assert finding.status is Status.WARN and "libcublas.so.12, libcublasLt.so.12" in finding.title
    assert "/opt/venv/bin/python -m pip install nvidia-cublas-cu12==12.6.4.1" in finding.remediation.commands
    assert ("/opt/venv/bin/python -m pip install --force-reinstall torch==2.6.0 --index-url https://download.pytorch.org/whl/cu126"
            in finding.remediation.commands)


def test_missing_driver_library_is_not_a_pip_package():
    f = facts(libs__ldd=torch_ldd(not_found=("libcuda.so.1",)),
              torch__version=missing(Reason.FAILED, "child:torch_probe", "ImportError: libcuda.so.1: cannot open"))
    finding = judge_one(cudart_resolution, f)
    assert finding.status is Status.FAIL and "NVIDIA driver" in finding.remediation.text
    assert not any("libcuda" in c or "pip install nvidia" in c for c in finding.remediation.commands)


def test_hung_ldd_is_an_error_with_the_command_to_run():
    ldd = torch_ldd()
    ldd[0] = {"file": ldd[0]["file"], "role": "libtorch_cuda", "reason": "timeout", "detail": "ldd gave no answer within 3 s"}
    finding = judge_one(cudart_resolution, facts(libs__ldd=ldd))
    assert finding.status is Status.ERROR and f"ldd {SITE}/torch/lib/libtorch_cuda.so" in finding.remediation.commands


def test_cpu_torch_with_a_toolkit_runtime_reports_the_runtime_path_and_version():
    real = "/usr/local/cuda-13.0/lib/libcudart.so.13"
    choice = {"libcudart.so.13": {"family": "cudart", "path": real, "file": real, "version": "13.0",
                                  "api_version": 13000, "via": "ldconfig", "method": "dlopen"}}
    cpu_c = [{"file": f"{SITE}/torch/_C.cpython-311-x86_64-linux-gnu.so", "role": "torch._C",
              "resolved": {"libtorch.so": f"{SITE}/torch/lib/libtorch.so"}, "not_found": []}]
    f = facts(torch__version="2.13.0+cpu", torch__cuda_version=None, libs__ldd=cpu_c, libs__loader_choice=choice,
              libs__cudart_copies=[copy(real, "cudart", "libcudart.so.13", "13.0", "toolkit", api_version=13000)])
    finding = judge_one(cudart_resolution, f)
    assert finding.status is Status.OK and finding.title == f"CUDA runtime 13.0 found: {real}"
    assert "via ldconfig" in finding.detail


def test_a_cudart_copy_that_crashes_on_load_warns():
    crashed = copy("/opt/broken/libcudart.so.12", "cudart", "libcudart.so.12", None, "system", load="crashed",
                   load_detail="python was killed by SIGSEGV during file:/opt/broken/libcudart.so.12")
    finding = judge_one(cudart_resolution, facts(libs__cudart_copies=[crashed, wheel_cudart()]))
    assert finding.status is Status.WARN and "SIGSEGV" in finding.detail
    assert finding.remediation.commands == ("dpkg -S /opt/broken/libcudart.so.12 || rpm -qf /opt/broken/libcudart.so.12",)
    on_path = dict(crashed, ld_library_path_entry="/opt/broken")
    finding = judge_one(cudart_resolution, facts(libs__cudart_copies=[on_path, wheel_cudart()],
                                             libs__ld_library_path=["/opt/broken", "/opt/ok"]))
    assert finding.remediation.commands == ("export LD_LIBRARY_PATH=/opt/ok",)
    broken_wheel = dict(wheel_cudart(), load="failed",
                        load_detail="OSError: libcudart.so.12: invalid ELF header")
    finding = judge_one(cudart_resolution, facts(libs__cudart_copies=[broken_wheel]))
    assert finding.status is Status.WARN and "invalid ELF header" in finding.detail
    assert finding.remediation.commands == (
        "/opt/venv/bin/python -m pip install --force-reinstall --no-deps nvidia-cuda-runtime-cu12==12.6.77",)


def test_nothing_to_resolve_skips():
    f = facts(libs__ldd=[], libs__loader_choice={}, libs__cudart_copies=[])
    assert judge_one(cudart_resolution, f).status is Status.SKIP


def test_package_names_follow_the_cuda_major():
    f12 = facts(libs__torch_requires={})
    assert package_for("libcudart.so.12", f12) == "nvidia-cuda-runtime-cu12"
    assert package_for("libcudnn_graph.so.9", f12) == "nvidia-cudnn-cu12"
    f13 = facts(libs__torch_requires={}, torch__cuda_version="13.0")
    assert package_for("libcublasLt.so.13", f13) == "nvidia-cublas"
    assert package_for("libnccl.so.2", f13) == "nvidia-nccl-cu13"
    assert package_for("libcudnn.so.9", f13) == "nvidia-cudnn-cu13"
    assert package_for("libfoo.so.1", f13) is None
    pinned = facts(libs__torch_requires={"nvidia-cuda-runtime": "13.0.96"}, torch__cuda_version="13.0")
    assert package_for("libcudart.so.13", pinned) == "nvidia-cuda-runtime==13.0.96"


def test_ld_library_path_falls_back_to_env_vars_for_pasted_reports():
    f = facts(libs__ld_library_path=None, env__vars={"LD_LIBRARY_PATH": f"{STALE}:/x"},
              libs__cudart_copies=[stale_cudart(), wheel_cudart()], torch__loaded_libraries={"cudart": [STALE_CUDART]})
    finding = judge_one(library_conflicts, f)
    assert "export LD_LIBRARY_PATH=/x" in finding.remediation.commands


def test_findings_round_trip_through_json():
    from envdoctor.model import Finding

    finding = judge_one(library_conflicts, facts(torch__loaded_libraries={"cudart": [STALE_CUDART, WHEEL_CUDART]},
                                             libs__cudart_copies=[stale_cudart(), wheel_cudart()],
                                             libs__ld_library_path=[STALE]))
    assert Finding.from_dict(finding.to_dict()) == finding


def test_ldd_binding_a_wheel_library_to_an_ld_library_path_copy_is_flagged():
    # pytorch/pytorch#111469: libcusparse from the wheel, libnvJitLink from an old toolkit on
    # LD_LIBRARY_PATH -> "undefined symbol: __nvJitLinkAddData_12_1" at import.
    ldd = torch_ldd()
    for e in ldd:
        e["resolved"]["libcusparse.so.12"] = f"{SITE}/nvidia/cusparse/lib/libcusparse.so.12"
        e["resolved"]["libnvJitLink.so.12"] = f"{STALE}/libnvJitLink.so.12"
    dirs = [f"{SITE}/nvidia/cuda_runtime/lib", f"{SITE}/nvidia/cusparse/lib", f"{SITE}/nvidia/nvjitlink/lib",
            f"{SITE}/torch/lib"]
    error_text = ("ImportError: .../libcusparse.so.12: undefined symbol: __nvJitLinkAddData_12_1, "
                  "version libnvJitLink.so.12")
    f = facts(libs__ldd=ldd, libs__wheel_dirs=dirs, libs__ld_library_path=[STALE, "/opt/x"],
              torch__version=missing(Reason.FAILED, "child:torch_probe", error_text), torch__loaded_libraries={})
    finding = judge_one(library_conflicts, f)
    assert finding.status is Status.FAIL and "libnvJitLink.so.12" in finding.detail
    assert "export LD_LIBRARY_PATH=/opt/x" in finding.remediation.commands
    # Without the wheel folder for it, the toolkit copy is the only one: no conflict.
    f = facts(libs__ldd=ldd, libs__wheel_dirs=dirs[:2] + dirs[3:], libs__ld_library_path=[STALE])
    assert judge_one(library_conflicts, f).status is Status.OK


def test_an_extension_built_for_another_cuda_warns_with_its_reinstall():
    tv = {"file": f"{SITE}/torchvision/_C.so", "role": "extension:torchvision",
          "resolved": {"libc10.so": f"{SITE}/torch/lib/libc10.so"}, "not_found": ["libcudart.so.11.0"]}
    finding = judge_one(cudart_resolution, facts(libs__ldd=[*torch_ldd(), tv]))
    assert finding.status is Status.WARN and finding.title.startswith("torchvision cannot resolve")
    assert "libcudart.so.11.0 => not found" in finding.detail
    assert finding.remediation.commands == (
        "/opt/venv/bin/python -m pip install --force-reinstall --no-deps torchvision "
        "--index-url https://download.pytorch.org/whl/cu126",)
