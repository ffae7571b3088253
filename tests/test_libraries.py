"""The libraries probe on real code paths: stand-in libcudart/libcudnn/libnccl compiled from C and
laid out like real installs (versioned file + soname symlink, pip wheels, a toolkit folder), fake
``ldconfig``/``ldd``/``nvcc`` on PATH, and the real CUDA 13.0 toolkit of this machine and CI."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from envdoctor.model import Reason, thaw
from envdoctor.probes import Options
from envdoctor.probes.libraries import (
    KEYS,
    PROBE,
    dotted,
    file_version,
    parse_header,
    parse_ldconfig,
    parse_ldd,
    parse_nvcc,
    probe_libraries,
    soname_guess,
    torch_pins,
)
from envdoctor.process.host import Host

from .conftest import BUILD_ROOT, FAKES, compile_shared, make_exe, test_env
from .judging import judge_one

SOURCES = {"cudart": FAKES / "fake_cudart.c", "cudnn": FAKES / "fake_cudnn.c", "nccl": FAKES / "fake_nccl.c"}
VERSION_MACRO = {"cudart": "CUDART_VERSION", "cudnn": "CUDNN_VERSION", "nccl": "NCCL_VERSION_CODE"}


def install(family: str, directory: Path, soname: str, version: int, filename: str | None = None,
            links: tuple[str, ...] = (), **flags: str) -> Path:
    """Compile a stand-in into ``directory/filename`` (default: the soname) with symlinks to it,
    the way toolkits ship ``libcudart.so.12 -> libcudart.so.12.4.127``."""
    defines = {VERSION_MACRO[family]: str(version), **flags}
    target = compile_shared(SOURCES[family], directory, filename or soname, soname=soname, defines=defines)
    for link in links:
        (directory / link).symlink_to(target.name)
    return target


def value(facts, key: str):
    """A fact's value as plain JSON (lists, dicts), the way a report carries it."""
    return thaw(facts[key].value)


def copies(facts, family: str, under: Path) -> list[dict]:
    """The copies of ``family`` inside ``under`` (the real machine's own copies are left out)."""
    return [c for c in value(facts, f"libs.{family}_copies") if c["path"].startswith(str(under))]


def run(host: Host, timeout: float = 5.0) -> dict:
    return probe_libraries(host, Options(timeout=timeout))


def host_for(**env: str) -> Host:
    return Host(environ=test_env(**env))


# -- the real machine ---------------------------------------------------------------------------

REAL_CUDART = Path("/usr/local/cuda/lib64/libcudart.so.13")


def test_real_cuda_13_toolkit_is_found_with_its_version():
    # This machine and CI carry the CUDA 13.0 toolkit at /usr/local/cuda and no driver: the runtime
    # answers cudaRuntimeGetVersion without a driver.
    assert REAL_CUDART.exists(), "the test machine is expected to carry the CUDA 13.0 toolkit"
    start = time.monotonic()
    facts = run(Host(environ=test_env()))
    seconds = time.monotonic() - start
    real = os.path.realpath(REAL_CUDART)
    [copy] = [c for c in value(facts, "libs.cudart_copies") if c["path"] == real]
    assert copy["api_version"] == 13000 and copy["version"] == "13.0" and copy["version_source"] == "ctypes"
    assert copy["soname"] == "libcudart.so.13" and copy["origin"] == "toolkit" and copy["load"] == "ok"
    assert "/usr/local/cuda*" in copy["found_via"]
    choice = value(facts, "libs.loader_choice")["libcudart.so.13"]
    assert choice["method"] == "dlopen" and choice["file"] == real and choice["api_version"] == 13000
    assert value(facts, "toolkit.nvcc_version").startswith("13.0")
    assert any(e["role"] == "libcudart" and e["file"] == real and e["not_found"] == []
               for e in value(facts, "libs.ldd"))
    assert set(KEYS) <= set(facts)
    assert seconds < PROBE.deadline(Options(timeout=5.0))


# -- stand-ins on LD_LIBRARY_PATH ---------------------------------------------------------------

def test_copies_in_ld_library_path_order_with_versions_and_loader_choice(tmp_path):
    first, second = tmp_path / "cuda-12.4" / "lib64", tmp_path / "old" / "lib"
    install("cudart", first, "libcudart.so.12", 12040, "libcudart.so.12.4.127", links=("libcudart.so.12", "libcudart.so"))
    install("cudart", second, "libcudart.so.12", 12010)
    install("cudnn", first, "libcudnn.so.9", 90100, "libcudnn.so.9.1.0", links=("libcudnn.so.9",))
    install("nccl", second, "libnccl.so.2", 22105, "libnccl.so.2.21.5", links=("libnccl.so.2",))
    facts = run(host_for(LD_LIBRARY_PATH=f"{first}:{second}"))

    found = copies(facts, "cudart", tmp_path)
    assert [c["path"] for c in found] == [str(first / "libcudart.so.12.4.127"), str(second / "libcudart.so.12")]
    new, old = found
    assert new["api_version"] == 12040 and new["version"] == "12.4" and new["version_source"] == "ctypes"
    assert new["file_version"] == "12.4.127" and new["soname"] == "libcudart.so.12"
    assert set(new["names"]) >= {str(first / "libcudart.so.12"), str(first / "libcudart.so")}
    assert new["found_via"] == ["LD_LIBRARY_PATH[0]"] and new["ld_library_path_entry"] == str(first)
    assert old["version"] == "12.1" and old["found_via"] == ["LD_LIBRARY_PATH[1]"]

    [cudnn] = copies(facts, "cudnn", tmp_path)
    assert cudnn["version"] == "9.1.0" and cudnn["api_version"] == 90100
    [nccl] = copies(facts, "nccl", tmp_path)
    assert nccl["version"] == "2.21.5" and nccl["api_version"] == 22105

    # The loader takes the first LD_LIBRARY_PATH entry that has the soname.
    choice = value(facts, "libs.loader_choice")
    assert choice["libcudart.so.12"]["file"] == new["path"] and choice["libcudart.so.12"]["via"] == "LD_LIBRARY_PATH[0]"
    assert choice["libcudart.so.12"]["predicted"] == str(first / "libcudart.so.12")
    assert choice["libnccl.so.2"]["version"] == "2.21.5"
    assert value(facts, "libs.ld_library_path") == [str(first), str(second)]


def test_a_library_that_segfaults_on_load_loses_no_other_result(tmp_path):
    libs = tmp_path / "lib"
    install("cudart", libs, "libcudart.so.12", 12060)
    install("cudnn", libs, "libcudnn.so.9", 90100, CRASH_ON_LOAD="1")
    install("nccl", libs, "libnccl.so.2", 22304)
    facts = run(host_for(LD_LIBRARY_PATH=str(libs)))

    [cudnn] = copies(facts, "cudnn", tmp_path)
    assert cudnn["load"] == "crashed" and "SIGSEGV" in cudnn["load_detail"]
    assert cudnn["version"] == "9" and cudnn["version_source"] == "soname"  # the file name still speaks
    [cudart] = copies(facts, "cudart", tmp_path)
    [nccl] = copies(facts, "nccl", tmp_path)
    assert cudart["version"] == "12.6" and cudart["load"] == "ok"
    assert nccl["version"] == "2.23.4" and nccl["load"] == "ok"
    choice = value(facts, "libs.loader_choice")
    assert choice["libcudnn.so.9"]["reason"] == "crashed" and "SIGSEGV" in choice["libcudnn.so.9"]["detail"]
    assert choice["libcudart.so.12"]["version"] == "12.6"
    assert choice["libnccl.so.2"]["version"] == "2.23.4"


def test_a_library_that_hangs_on_load_is_a_timeout_within_the_deadline(tmp_path):
    libs = tmp_path / "lib"
    install("cudart", libs, "libcudart.so.12", 12080)
    install("nccl", libs, "libnccl.so.2", 22105, HANG_ON_LOAD="1")
    start = time.monotonic()
    # The deadline leaves the child time to load cudart on a loaded machine (at 3 s and load 18 it had not,
    # and cudart's version fell back to its soname); the hang still ends at the deadline, not after it.
    facts = run(host_for(LD_LIBRARY_PATH=str(libs)), timeout=8.0)
    assert time.monotonic() - start < 8.0 + 4.0  # the load hangs for ever
    [nccl] = copies(facts, "nccl", tmp_path)
    assert nccl["load"] in ("timeout", "skipped")
    assert value(facts, "libs.loader_choice")["libnccl.so.2"]["reason"] == "timeout"
    [cudart] = copies(facts, "cudart", tmp_path)
    assert cudart["version"] == "12.8"


def test_unloadable_file_falls_back_to_the_header_next_to_it(tmp_path):
    # A toolkit-style folder: lib64/ beside include/ with cudnn_version.h. The "library" is not an
    # ELF file, so dlopen fails and the version comes from the header.
    home = tmp_path / "cudnn-8.9"
    (home / "lib64").mkdir(parents=True)
    (home / "lib64" / "libcudnn.so.8").write_bytes(b"this is not an ELF shared object at all, " * 40)
    (home / "include").mkdir()
    (home / "include" / "cudnn_version.h").write_text(
        "#define CUDNN_MAJOR 8\n#define CUDNN_MINOR 9\n#define CUDNN_PATCHLEVEL 2\n")
    facts = run(host_for(CUDA_HOME=str(home)))
    [cudnn] = copies(facts, "cudnn", tmp_path)
    assert cudnn["load"] == "failed" and "invalid ELF header" in cudnn["load_detail"]
    assert cudnn["version"] == "8.9.2" and cudnn["version_source"] == "header"
    assert cudnn["found_via"] == ["$CUDA_HOME"] and cudnn["origin"] == "toolkit"


# -- pip wheels and torch -----------------------------------------------------------------------

STUBS = BUILD_ROOT / "linkstubs"
TORCH_CUDA_C = "extern int cudaRuntimeGetVersion(int *); int torch_cuda_fake(void) { int v; return cudaRuntimeGetVersion(&v); }\n"
TORCH_C_C = "extern int torch_cuda_fake(void); int PyInit__C(void) { return torch_cuda_fake(); }\n"


def fake_site(tmp_path: Path, cudart: bool = True) -> Path:
    """A site-packages with the CUDA 12 wheels torch depends on and a torch whose libtorch_cuda.so
    needs libcudart.so.12 through a RUNPATH into the wheel (as official wheels do)."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    wheel = site / "nvidia"
    if cudart:
        install("cudart", wheel / "cuda_runtime" / "lib", "libcudart.so.12", 12060)
    install("cudnn", wheel / "cudnn" / "lib", "libcudnn.so.9", 90501)
    install("nccl", wheel / "nccl" / "lib", "libnccl.so.2", 22105)
    for dist in ("nvidia_cuda_runtime_cu12-12.6.77", "nvidia_cudnn_cu12-9.5.1.17", "nvidia_nccl_cu12-2.21.5"):
        (site / f"{dist}.dist-info").mkdir(parents=True)
    torch = site / "torch"
    (torch / "lib").mkdir(parents=True)
    (torch / "__init__.py").write_text("raise RuntimeError('the probe must not import torch')\n")
    meta = site / "torch-2.6.0+cu126.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.6.0+cu126\n"
        "Requires-Dist: filelock\n"
        'Requires-Dist: nvidia-cuda-runtime-cu12==12.6.77; platform_system == "Linux" and platform_machine == "x86_64"\n'
        'Requires-Dist: nvidia-cudnn-cu12==9.5.1.17; platform_system == "Linux" and platform_machine == "x86_64"\n'
        "Requires-Dist: triton==3.2.0\n")
    # Link-time stand-ins live in a fixed folder so the compile cache keys stay stable.
    install("cudart", STUBS, "libcudart.so.12", 12060)
    compile_shared(TORCH_CUDA_C, STUBS, "libtorch_cuda.so", soname="libtorch_cuda.so",
                   extra=(f"-L{STUBS}", "-l:libcudart.so.12"))
    compile_shared(TORCH_CUDA_C, torch / "lib", "libtorch_cuda.so", soname="libtorch_cuda.so",
                   extra=(f"-L{STUBS}", "-l:libcudart.so.12",
                          "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../../nvidia/cuda_runtime/lib"))
    compile_shared(TORCH_C_C, torch, "_C.cpython-311-x86_64-linux-gnu.so",
                   extra=(f"-L{STUBS}", "-l:libtorch_cuda.so", "-Wl,--enable-new-dtags,-rpath,$ORIGIN/lib"))
    return site


def test_pip_wheels_are_found_with_package_versions_and_ldd_resolves_through_runpath(tmp_path):
    site = fake_site(tmp_path)
    facts = run(host_for(PYTHONPATH=str(site)))

    [cudart] = copies(facts, "cudart", tmp_path)
    assert cudart["origin"] == "pip" and cudart["found_via"] == ["site-packages/nvidia"]
    assert cudart["package"] == "nvidia-cuda-runtime-cu12" and cudart["package_version"] == "12.6.77"
    assert cudart["version"] == "12.6" and cudart["version_source"] == "ctypes"
    [cudnn] = copies(facts, "cudnn", tmp_path)
    assert cudnn["package"] == "nvidia-cudnn-cu12" and cudnn["version"] == "9.5.1"
    [nccl] = copies(facts, "nccl", tmp_path)
    assert nccl["package"] == "nvidia-nccl-cu12" and nccl["package_version"] == "2.21.5"

    wheel_dirs = value(facts, "libs.wheel_dirs")
    assert str(site / "nvidia" / "cuda_runtime" / "lib") in wheel_dirs and str(site / "torch" / "lib") in wheel_dirs
    assert value(facts, "libs.torch_requires") == {"nvidia-cuda-runtime-cu12": "12.6.77",
                                                  "nvidia-cudnn-cu12": "9.5.1.17", "triton": "3.2.0"}
    ldd = {e["role"]: e for e in value(facts, "libs.ldd") if e["file"].startswith(str(tmp_path))}
    assert ldd["libtorch_cuda"]["resolved"]["libcudart.so.12"] == str(site / "nvidia/cuda_runtime/lib/libcudart.so.12")
    assert ldd["torch._C"]["resolved"]["libtorch_cuda.so"] == str(site / "torch/lib/libtorch_cuda.so")
    assert ldd["torch._C"]["not_found"] == []


def test_stale_ld_library_path_shadows_the_wheel_and_the_check_names_it(tmp_path):
    from envdoctor.checks.libraries import library_conflicts

    from envdoctor.model import Status

    site = fake_site(tmp_path)
    stale = tmp_path / "cuda-12.1" / "lib64"
    install("cudart", stale, "libcudart.so.12", 12010, "libcudart.so.12.1.105", links=("libcudart.so.12",))
    keep = tmp_path / "mine"
    keep.mkdir()
    facts = run(host_for(PYTHONPATH=str(site), LD_LIBRARY_PATH=f"{stale}:{keep}"))
    choice = value(facts, "libs.loader_choice")["libcudart.so.12"]
    assert choice["file"] == str(stale / "libcudart.so.12.1.105") and choice["via"] == "LD_LIBRARY_PATH[0]"
    # LD_LIBRARY_PATH beats libtorch_cuda.so's RUNPATH: ldd shows the shadowing.
    [torch_cuda] = [e for e in value(facts, "libs.ldd") if e["role"] == "libtorch_cuda"]
    assert torch_cuda["resolved"]["libcudart.so.12"] == str(stale / "libcudart.so.12")

    finding = judge_one(library_conflicts, facts)
    assert finding.status is Status.FAIL and str(stale) in finding.detail
    assert f"export LD_LIBRARY_PATH={keep}" in finding.remediation.commands


def test_missing_wheel_library_is_not_found_and_the_check_names_the_package(tmp_path):
    from envdoctor.checks.libraries import cudart_resolution

    from envdoctor.model import Status

    site = fake_site(tmp_path, cudart=False)
    # The real toolkit's libcudart.so.13 is in the loader cache; torch needs .12, which nothing has.
    facts = run(host_for(PYTHONPATH=str(site)))
    [torch_cuda] = [e for e in value(facts, "libs.ldd") if e["role"] == "libtorch_cuda"]
    assert torch_cuda["not_found"] == ["libcudart.so.12"]
    [c] = [e for e in value(facts, "libs.ldd") if e["role"] == "torch._C"]
    assert "libcudart.so.12" in c["not_found"]

    finding = judge_one(cudart_resolution, facts)
    assert finding.status is Status.FAIL and "libcudart.so.12" in finding.title
    assert any("pip install nvidia-cuda-runtime-cu12==12.6.77" in cmd for cmd in finding.remediation.commands)


def test_torch_bundled_hashed_copy_is_found_in_torch_lib(tmp_path):
    # Older download.pytorch.org wheels bundled auditwheel-renamed CUDA libraries in torch/lib.
    site = tmp_path / "site-packages"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("")
    install("cudart", site / "torch" / "lib", "libcudart-a7b20f20.so.11.0", 11080)
    facts = run(host_for(PYTHONPATH=str(site)))
    [cudart] = copies(facts, "cudart", tmp_path)
    assert cudart["origin"] == "torch" and cudart["found_via"] == ["torch/lib"]
    assert cudart["version"] == "11.8" and cudart["soname"] == "libcudart-a7b20f20.so.11.0"
    assert "libcudart-a7b20f20.so.11.0" not in value(facts, "libs.loader_choice")
    assert str(site / "torch" / "lib") in value(facts, "libs.wheel_dirs")


# -- commands: ldconfig, ldd, nvcc --------------------------------------------------------------

def test_loader_cache_entries_are_copies_and_the_predicted_choice(tmp_path):
    libs = tmp_path / "cached"
    lib = install("cudart", libs, "libcudart.so.12", 12020)
    bin_dir = tmp_path / "bin"
    make_exe(bin_dir, "ldconfig", f"printf '3 libs found in cache\\n\\tlibcudart.so.12 (libc6,x86-64) => {lib}\\n'\n")
    facts = run(host_for(PATH=f"{bin_dir}:{os.environ['PATH']}"))
    assert value(facts, "libs.ldconfig") == {"libcudart.so.12": [str(lib)]}
    [cudart] = copies(facts, "cudart", tmp_path)
    assert cudart["found_via"] == ["ldconfig"] and cudart["version"] == "12.2" and cudart["origin"] == "system"
    choice = value(facts, "libs.loader_choice")["libcudart.so.12"]
    # The fake cache is not the loader's real one: dlopen says what it says; the search order
    # computed from the cache names the file.
    assert choice["predicted"] == str(lib) and choice["predicted_via"] == "ldconfig"


def _run_with_hanging(tmp_path: Path, tool: str) -> dict:
    """Probe with ``tool`` on PATH hanging: the probe keeps its deadline, and the other ways of
    finding libraries still find the cudart copy."""
    libs = tmp_path / "lib"
    install("cudart", libs, "libcudart.so.12", 12040)
    bin_dir = tmp_path / "bin"
    make_exe(bin_dir, tool, "exec sleep 60\n")
    start = time.monotonic()
    facts = run(host_for(PATH=f"{bin_dir}:{os.environ['PATH']}", LD_LIBRARY_PATH=str(libs)), timeout=2.0)
    assert time.monotonic() - start < 2.0 + 2.5  # the tool sleeps 60 s
    [cudart] = copies(facts, "cudart", tmp_path)
    assert cudart["version"] == "12.4"
    return facts


def test_hanging_ldconfig_is_a_timeout_within_the_deadline(tmp_path):
    facts = _run_with_hanging(tmp_path, "ldconfig")
    assert facts["libs.ldconfig"].reason is Reason.TIMEOUT


def test_hanging_ldd_is_a_timeout_within_the_deadline(tmp_path):
    facts = _run_with_hanging(tmp_path, "ldd")
    mine = [e for e in value(facts, "libs.ldd") if e["file"].startswith(str(tmp_path))]
    assert mine and all(e["reason"] == "timeout" for e in mine)


def test_nvcc_from_cuda_home_is_the_toolkit(tmp_path):
    home = tmp_path / "cuda-12.4"
    make_exe(home / "bin", "nvcc", "cat <<'EOF'\nnvcc: NVIDIA (R) Cuda compiler driver\n"
             "Copyright (c) 2005-2024 NVIDIA Corporation\nBuilt on Thu_Mar_28_02:18:24_PDT_2024\n"
             "Cuda compilation tools, release 12.4, V12.4.131\nBuild cuda_12.4.r12.4/compiler.34097967_0\nEOF\n")
    facts = run(host_for(CUDA_HOME=str(home)))
    assert value(facts, "toolkit.cuda_home") == str(home) and facts["toolkit.cuda_home"].detail == "$CUDA_HOME"
    assert value(facts, "toolkit.nvcc_path") == str(home / "bin" / "nvcc")
    assert value(facts, "toolkit.nvcc_version") == "12.4.131"


def test_no_nvcc_is_absent_with_a_reason(tmp_path):
    empty = tmp_path / "no-toolkit"
    empty.mkdir()
    facts = run(host_for(CUDA_HOME=str(empty), PATH="/usr/bin:/bin"))
    assert facts["toolkit.nvcc_path"].reason is Reason.ABSENT
    assert facts["toolkit.nvcc_version"].reason is Reason.ABSENT
    assert "only needed to build CUDA extensions" in facts["toolkit.nvcc_version"].detail


def test_an_interpreter_that_does_not_exist_still_gives_the_disk_inventory(tmp_path):
    libs = tmp_path / "lib"
    install("cudart", libs, "libcudart.so.12", 12040, "libcudart.so.12.4.127", links=("libcudart.so.12",))
    facts = probe_libraries(Host(environ=test_env(LD_LIBRARY_PATH=str(libs))),
                            Options(timeout=3.0, python=str(tmp_path / "missing-python")))
    [cudart] = copies(facts, "cudart", tmp_path)
    assert cudart["version"] == "12.4.127" and cudart["version_source"] == "filename"
    assert cudart["load"] == "skipped" and "not found" in cudart["load_detail"]
    assert value(facts, "libs.loader_choice")["libcudart.so.12"]["method"] == "search-order"
    assert facts["libs.torch_requires"].reason is Reason.FAILED


# -- parsers and helpers ------------------------------------------------------------------------

# Recorded from `ldd libtorch_cuda.so` in a torch 2.1 venv with a missing nvidia-cublas-cu12
# (the shape of pytorch/pytorch#111469's report).
LDD_OUTPUT = """\
\tlinux-vdso.so.1 (0x00007ffd4b1f5000)
\tlibc10_cuda.so => /venv/lib/python3.10/site-packages/torch/lib/libc10_cuda.so (0x00007f2c1c000000)
\tlibcudart.so.12 => /venv/lib/python3.10/site-packages/torch/lib/../../nvidia/cuda_runtime/lib/libcudart.so.12 (0x00007f2c1bc00000)
\tlibcublas.so.12 => not found
\tlibcublasLt.so.12 => not found
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f2c1b800000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f2c4f5e9000)
"""


def test_parse_ldd():
    resolved, not_found, notes = parse_ldd(LDD_OUTPUT)
    assert not_found == ["libcublas.so.12", "libcublasLt.so.12"]
    assert resolved["libcudart.so.12"].endswith("nvidia/cuda_runtime/lib/libcudart.so.12")
    assert "linux-vdso.so.1" not in resolved and notes == []
    assert parse_ldd("\tnot a dynamic executable\n")[2] == ["not a dynamic executable"]


def test_parse_ldconfig_keeps_cache_order():
    text = ("2 libs found in cache `/etc/ld.so.cache'\n"
            "\tlibcudart.so.12 (libc6,x86-64) => /usr/local/cuda-12.4/lib64/libcudart.so.12\n"
            "\tlibcudart.so.12 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcudart.so.12\n")
    assert parse_ldconfig(text) == {"libcudart.so.12": ["/usr/local/cuda-12.4/lib64/libcudart.so.12",
                                                        "/usr/lib/x86_64-linux-gnu/libcudart.so.12"]}


def test_parse_nvcc_and_headers():
    assert parse_nvcc("Cuda compilation tools, release 13.0, V13.0.88\n") == "13.0.88"
    assert parse_nvcc("Cuda compilation tools, release 11.8\n") == "11.8"
    assert parse_nvcc("garbage") is None
    assert parse_header("#define NCCL_MAJOR 2\n#define NCCL_MINOR 21\n#define NCCL_PATCH 5\n",
                        ("NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH"), "nccl") == "2.21.5"
    assert parse_header("#define CUDART_VERSION  12040\n", ("CUDART_VERSION",), "cudart") == "12.4"


@pytest.mark.parametrize("family, api, text", [
    ("cudart", 12040, "12.4"), ("cudart", 13000, "13.0"), ("cudart", 11080, "11.8"),
    ("cudnn", 90100, "9.1.0"), ("cudnn", 8902, "8.9.2"), ("nccl", 22105, "2.21.5"), ("nccl", 2708, "2.7.8"),
    ("cudart", None, None), ("cudart", 0, None),
])
def test_dotted_versions(family, api, text):
    assert dotted(family, api) == text


def test_names_and_pins():
    assert file_version("libcudart.so.12.4.127") == "12.4.127" and file_version("libcudart.so") is None
    assert soname_guess("libcudnn.so.9.1.0") == "libcudnn.so.9"
    assert soname_guess("libcudart-a7b20f20.so.11.0") == "libcudart.so.11"
    assert torch_pins(['nvidia-cudnn-cu12==9.5.1.17; platform_system == "Linux"', "sympy>=1.13",
                       "Nvidia_Nccl_Cu12 == 2.21.5"]) == {"nvidia-cudnn-cu12": "9.5.1.17", "nvidia-nccl-cu12": "2.21.5"}


def test_ldd_also_covers_known_extensions(tmp_path):
    """A site-packages with a torchvision extension whose CUDA runtime is missing: the probe runs
    ldd on it (a fake ldd that prints what a real one would), and records the role and the miss."""
    from envdoctor.probes import Options
    from envdoctor.probes.libraries import probe_libraries

    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"  # the probe looks at *site-packages
    (site / "torchvision").mkdir(parents=True)
    ext = site / "torchvision" / "_C.so"
    ext.write_bytes(b"\x7fELF")
    bindir = tmp_path / "bin"
    make_exe(bindir, "ldd", "echo '\\tlibcudart.so.11.0 => not found'\necho '\\tlibc.so.6 => /lib/libc.so.6 (0x1)'\n")
    host = Host(environ=test_env(PATH=f"{bindir}:/usr/bin:/bin", PYTHONPATH=str(site)))
    facts = probe_libraries(host, Options(timeout=5))
    entries = [e for e in facts["libs.ldd"].value if e.get("role") == "extension:torchvision"]
    assert entries and list(entries[0]["not_found"]) == ["libcudart.so.11.0"]


def test_identical_copies_get_one_ldd_each_says_which_file_it_shares(tmp_path):
    # The same library copied into many LD_LIBRARY_PATH folders (a common result of scripted
    # environment setup): ldd runs once per distinct file, and every copy still gets its entry.
    dirs = [tmp_path / f"d{i}" for i in range(3)]
    first = install("cudart", dirs[0], "libcudart.so.12", 12040)
    for d in dirs[1:]:
        d.mkdir()
        (d / "libcudart.so.12").write_bytes(first.read_bytes())
    other = install("cudart", tmp_path / "other", "libcudart.so.12", 12060)  # a different file
    facts = run(host_for(LD_LIBRARY_PATH=os.pathsep.join(map(str, [*dirs, other.parent]))))
    ldd = {e["file"]: e for e in value(facts, "libs.ldd") if e["file"].startswith(str(tmp_path))}
    files = [str(d / "libcudart.so.12") for d in dirs]
    assert set(ldd) == {*files, str(other)}
    shared = [ldd[f].get("same_file_as") for f in files]
    assert shared.count(None) == 1 and len({s for s in shared if s}) == 1, shared
    assert "same_file_as" not in ldd[str(other)]
    assert all(ldd[f]["resolved"] == ldd[files[0]]["resolved"] for f in files)
