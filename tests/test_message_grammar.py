"""Issue 21 (grammar): rows that write the facts their format strings carry, causes before symptoms, the loader
grammar in every wording (TensorFlow's dso_loader, GNU ld, cuDNN's own loader, ctypes, onnxruntime), and the
kernel's and the frameworks' messages that name a cause of their own.

Every text here is written for the test from the emitter's format string (never a ticket's text).
"""

from __future__ import annotations

import pytest

from envdoctor.knowledge import catalogue, compat
from envdoctor.model import Finding, Status
from envdoctor.parsers import parse_text
from envdoctor.pipeline.diagnose import diagnose, is_symptom, sort_findings

from .test_message_catalogue import REGISTRY, _sonames


def _top(text: str) -> Finding:
    found = [f for f in sort_findings(diagnose(parse_text(text), REGISTRY)) if f.status in (Status.FAIL, Status.WARN)]
    assert found, text
    return found[0]


def _problems(text: str) -> list[Finding]:
    return [f for f in sort_findings(diagnose(parse_text(text), REGISTRY)) if f.status in (Status.FAIL, Status.WARN)]


def _commands(finding: Finding) -> str:
    return " ".join(finding.remediation.command_lines())


# -- the data: roles and writes ------------------------------------------------------------------------------------
def test_every_role_is_a_cause_or_a_symptom_and_the_named_symptoms_are_symptoms() -> None:
    assert {c.role for c in catalogue.causes().values()} <= {"cause", "symptom"}
    for symptom in ("jax-cuda-backend", "no-visible-gpu", "nccl-cuda-error", "dataloader-worker-killed"):
        assert catalogue.role_of(symptom) == "symptom"
    for cause in ("cudnn-mismatch", "nccl-shm-exhausted", "loader-library-missing", "torch-cpu-build"):
        assert catalogue.role_of(cause) == "cause"
    assert all(row.role in ("cause", "symptom") for row in catalogue.messages())


def test_a_row_s_writes_name_a_matched_argument_and_a_known_fact_key() -> None:
    from envdoctor.knowledge.factkeys import lookup

    for row in catalogue.messages():
        for key, group in row.writes:
            assert lookup(key) is not None, (row.id, key)
            # signatures.py writes them as the pasted text's source: the registry must name that producer
            assert "parser:collect_env" in lookup(key).producers, (row.id, key)  # type: ignore[union-attr]
            assert 1 <= group <= row.pattern.groups, (row.id, key, group)
    with pytest.raises(ValueError):
        catalogue._argument_group("%s: cannot open shared object file", 1)  # a leading argument is never matched


# -- causes before symptoms ----------------------------------------------------------------------------------------
def test_sort_findings_puts_a_cause_before_a_symptom_of_the_same_status() -> None:
    symptom = Finding("a-check", Status.FAIL, "CUDA is not available", evidence={"role": "symptom"})
    cause = Finding("b-check", Status.FAIL, "The driver is too old")
    warning = Finding("c-check", Status.WARN, "something else")
    assert [f.title for f in sort_findings([warning, symptom, cause])] == [
        "The driver is too old", "CUDA is not available", "something else"]
    assert is_symptom(symptom) and not is_symptom(cause)


_CUDNN = ("E0101 00:00:00.000000 1 cuda_dnn.cc:454] Loaded runtime CuDNN library: 8.6.0 but source was compiled "
          "with: 8.9.4.  CuDNN library needs to have matching major version and equal or higher minor version.")
_JAX_BACKEND = "RuntimeError: Unable to initialize backend 'cuda': FAILED_PRECONDITION: DNN library initialization failed."


@pytest.mark.parametrize("lines", [(_CUDNN, _JAX_BACKEND), (_JAX_BACKEND, _CUDNN)])
def test_jax_s_backend_failure_is_the_evidence_of_the_cudnn_mismatch_whatever_the_order(lines: tuple[str, str]) -> None:
    found = _problems("\n".join(lines) + "\n")
    top = found[0]
    assert top.status is Status.FAIL and "cuDNN" in top.title
    assert list(top.evidence["symptoms"]) == ["jax-backend-init"] and "backend" in top.detail
    assert not any("JAX could not initialise" in f.title for f in found)  # said once, in the cause's finding
    assert not any("torch" in c for c in top.remediation.command_lines())


def test_a_symptom_alone_is_still_said() -> None:
    top = _top(_JAX_BACKEND + "\n")
    assert top.id == "known-message" and "JAX could not initialise" in top.title and top.evidence["role"] == "symptom"


@pytest.mark.parametrize("words", ["no kernel image is available for execution on the device", "named symbol not found"])
def test_nccl_s_cuda_failure_naming_an_architecture_error_is_the_cause_not_the_cuda_failure(words: str) -> None:
    text = (f"node7:2187:2300 [0] enqueue.cc:42 NCCL WARN Cuda failure '{words}'\n"
            "RuntimeError: NCCL error in: /opt/src/ProcessGroupNCCL.cpp:1270, unhandled cuda error (run with "
            "NCCL_DEBUG=INFO for details), NCCL version 2.18.1\n")
    found = _problems(text)
    assert found[0].title == catalogue.causes()["nccl-gpu-arch"].title and found[0].status is Status.FAIL
    assert "compute_cap" in _commands(found[0])
    assert not any(f.title == catalogue.causes()["nccl-cuda-error"].title for f in found)


# -- rows that write facts -----------------------------------------------------------------------------------------
_XFORMERS = ("WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:\n"
             "    PyTorch 2.3.0+cu121 with CUDA 1201 (you have {torch})\n    Python  3.11.9 (you have 3.11.9)\n")


def test_xformers_naming_a_cpu_torch_makes_the_cpu_torch_the_first_failure() -> None:
    facts = parse_text(_XFORMERS.format(torch="2.3.1+cpu"))
    assert facts.value("torch.version") == "2.3.1+cpu"
    top = _top(_XFORMERS.format(torch="2.3.1+cpu"))
    assert top.id == "torch-cpu-build" and top.status is Status.FAIL
    assert "download.pytorch.org/whl/cu" in _commands(top)


def test_xformers_naming_a_cuda_torch_is_an_xformers_mismatch_and_no_cpu_build() -> None:
    found = _problems(_XFORMERS.format(torch="2.3.1+cu121"))
    assert found[0].title == catalogue.causes()["xformers-torch-mismatch"].title
    assert not any(f.id == "torch-cpu-build" for f in found)


def test_xla_s_kernel_and_dso_versions_are_the_driver_facts_the_mismatch_check_judges() -> None:
    text = ("2024-01-01 00:00:00.000001: E external/local_xla/xla/stream_executor/cuda/cuda_diagnostics.cc:262] kernel "
            "version 535.104.5 does not match DSO version 545.23.8 -- cannot find working devices in this "
            "configuration\n")
    facts = parse_text(text)
    assert facts.value("driver.kernel_module_version") == "535.104.5"
    assert facts.value("driver.userspace_version") == "545.23.8"
    top = _top(text)
    assert top.id == "driver-version-mismatch" and top.status is Status.FAIL


def test_a_version_argument_that_is_no_version_writes_no_fact() -> None:
    text = ("E cuda_diagnostics.cc:262] kernel version NOT_FOUND: no /proc/driver/nvidia/version does not match DSO "
            "version 545.23.8 -- cannot find working devices in this configuration\n")
    assert not parse_text(text).get("driver.kernel_module_version").ok


def test_xla_s_driver_older_than_ptxas_writes_the_driver_s_cuda_and_warns() -> None:
    text = ("W0101 external/xla/xla/service/gpu/nvptx_compiler.cc:760] The NVIDIA driver's CUDA version is 12.2 which "
            "is older than the ptxas CUDA version (12.6.77). Because the driver is older than the ptxas version, XLA "
            "is disabling parallel compilation, which may slow down compilation.\n")
    assert parse_text(text).value("cuda.driver_version") == 12020
    top = _top(text)
    assert top.status is Status.WARN and top.title == catalogue.causes()["driver-older-than-ptxas"].title
    assert "nvidia-smi" in _commands(top)


# -- the kernel ----------------------------------------------------------------------------------------------------
def test_nvrm_lines_naming_nouveau_say_nouveau_holds_the_gpu_and_how_to_blacklist_it() -> None:
    text = ("[    4.101] NVRM: The NVIDIA probe routine was not called for 1 device(s).\n"
            "[    4.102] NVRM: This can occur when a driver such as: \n"
            "            NVRM: nouveau, rivafb, nvidiafb or rivatv \n"
            "            NVRM: was loaded and obtained ownership of the NVIDIA device(s).\n")
    top = _top(text)
    assert top.status is Status.FAIL and top.title == catalogue.causes()["nvrm-other-driver"].title
    assert "blacklist nouveau" in _commands(top)


# -- the loader grammar in every wording -----------------------------------------------------------------------------
def test_tensorflow_missing_a_windows_dll_gets_wsl2_or_tensorflow_2_10_never_torch() -> None:
    text = ("2024-01-01 10:00:00.000001: W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not "
            "load dynamic library 'cudnn64_8.dll'; dlerror: cudnn64_8.dll not found\n")
    failure = parse_text(text).value("torch.loader_failures")[0]
    assert failure["family"] == "cudnn" and failure["needed_by"] == "framework" and failure["package"] == "tensorflow"
    top = [f for f in _problems(text) if f.id == "loader-library"][0]
    assert "wsl --install" in _commands(top) and "tensorflow<2.11" in _commands(top)
    assert "tensorflow.org/install/pip#windows-native" in " ".join(top.remediation.links)
    assert "torch" not in _commands(top).replace("tensorflow", "")


def test_tensorflow_missing_a_linux_library_gets_tensorflow_s_cuda_extra_never_torch() -> None:
    text = ("W tensorflow/tsl/platform/default/dso_loader.cc:66] Could not load dynamic library 'libcublas.so.12'; "
            "dlerror: libcublas.so.12: cannot open shared object file: No such file or directory\n")
    top = _top(text)
    assert top.id == "loader-library" and "tensorflow[and-cuda]" in _commands(top)
    assert "torch" not in _commands(top)


def test_onnxruntime_s_cuda_provider_missing_a_library_gets_onnxruntime_s_remedy() -> None:
    text = ("2024-01-01 10:00:00.1 [E:onnxruntime:Default, provider_bridge_ort.cc:1548 TryGetProviderInfo_CUDA] "
            "/onnxruntime_src/onnxruntime/core/session/provider_bridge_ort.cc:1209 onnxruntime::Provider& "
            "onnxruntime::ProviderLibrary::Get() [ONNXRuntimeError] : 1 : FAIL : Failed to load library "
            "libonnxruntime_providers_cuda.so with error: libcufft.so.11: cannot open shared object file: No such "
            "file or directory\n")
    failure = parse_text(text).value("torch.loader_failures")[0]
    assert failure["library"] == "libcufft.so.11" and failure["package"] == "onnxruntime"
    top = _top(text)
    assert top.id == "loader-library" and "onnxruntime" in _commands(top)
    assert "torch" not in _commands(top)


def test_cudnn_s_own_loader_names_the_library_that_is_really_missing() -> None:
    text = ("Could not load library libcudnn_cnn_infer.so.8. Error: libcuda.so: cannot open shared object file: No "
            "such file or directory\n")
    failure = parse_text(text).value("torch.loader_failures")[0]
    assert failure["library"] == "libcuda.so" and failure["family"] == "cuda"
    top = _top(text)
    assert top.id == "loader-library" and "driver" in top.remediation.text.lower()


def test_ctypes_could_not_find_a_cuda_dll_is_read_as_that_library() -> None:
    text = ("FileNotFoundError: Could not find module 'C:\\venv\\Lib\\site-packages\\cupy\\nvrtc64_120_0.dll' (or "
            "one of its dependencies). Try using the full path with constructor syntax.\n")
    failure = parse_text(text).value("torch.loader_failures")[0]
    assert failure["library"] == "nvrtc64_120_0.dll" and failure["family"] == "nvrtc"
    assert _top(text).id == "loader-library"


@pytest.mark.parametrize(("line", "library", "stubs"), [
    ("/usr/bin/ld: warning: libcudart.so.12, needed by build/libkernels.so, not found (try using -rpath or "
     "-rpath-link)", "libcudart.so.12", False),
    ("/usr/bin/ld: cannot find -lcudart: No such file or directory", "libcudart.so", False),
    ("/usr/bin/ld: cannot find -lcuda", "libcuda.so", True),
])
def test_gnu_ld_missing_a_library_at_link_time_gets_the_linker_s_search_path(line: str, library: str,
                                                                              stubs: bool) -> None:
    text = line + "\ncollect2: error: ld returned 1 exit status\n"
    facts = parse_text(text)
    failure = facts.value("torch.loader_failures")[0]
    assert failure["library"] == library and failure["stage"] == "link"
    found = _problems(text)
    top = found[0]
    assert top.id == "loader-library" and "linker" in top.title.lower()
    assert "LIBRARY_PATH=" in _commands(top) and ("lib64/stubs" in _commands(top)) is stubs
    assert "torch" not in _commands(top)
    # collect2's own line is what the linker's lines explain: no finding of its own
    assert not any(f.id == "unexplained-error" for f in found)


_NEW_LINUX = (
    "Could not load library libcudnn_ops_infer.so.8. Error: {0}: cannot open shared object file: No such file or "
    "directory",
    "Failed to load library libonnxruntime_providers_cuda.so with error: {0}: cannot open shared object file: No "
    "such file or directory",
)
_NEW_WINDOWS = (
    "W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load dynamic library '{0}'; dlerror: "
    "{0} not found",
    "FileNotFoundError: Could not find module 'C:\\env\\Library\\bin\\{0}' (or one of its dependencies). Try using "
    "the full path with constructor syntax.",
)
_CASES = [(lib, name, wording) for lib in compat.cuda_libraries() for name in _sonames(lib)
          for wording in (_NEW_WINDOWS if name.endswith(".dll") else _NEW_LINUX)]


@pytest.mark.parametrize(("lib", "name", "wording"), _CASES,
                         ids=[f"{name}-{w.split(' ')[0][:10]}-{i}" for i, (_, name, w) in enumerate(_CASES)])
def test_every_soname_in_the_new_wordings_yields_its_family_and_a_remedy(lib: compat.CudaLibrary, name: str,
                                                                          wording: str) -> None:
    facts = parse_text(wording.format(name) + "\n")
    failures = facts.get("torch.loader_failures").value
    assert failures and failures[0]["family"] == lib.family and failures[0]["kind"] == "missing-library", failures
    fails = [f for f in sort_findings(diagnose(facts, REGISTRY)) if f.status is Status.FAIL]
    assert fails and fails[0].remediation.command_lines(), (name, wording)
    if fails[0].id == "loader-library":
        assert name in fails[0].title
        if failures[0]["needed_by"] == "framework" and lib.role != "driver":
            assert "torch" not in _commands(fails[0]).replace("tensorflow", ""), (name, _commands(fails[0]))


_LINK_CASES = [(lib, name) for lib in compat.cuda_libraries() for name in _sonames(lib) if ".so" in name]


@pytest.mark.parametrize(("lib", "name"), _LINK_CASES, ids=[n for _, n in _LINK_CASES])
def test_every_soname_at_link_time_yields_its_family_and_the_linker_s_path(lib: compat.CudaLibrary, name: str) -> None:
    stem = name.split(".so")[0]
    for line in (f"/usr/bin/ld: warning: {name}, needed by ./libapp.so, not found (try using -rpath or -rpath-link)",
                 f"/usr/bin/ld: cannot find -l{stem[3:]}"):
        facts = parse_text(line + "\n")
        failure = facts.value("torch.loader_failures")[0]
        assert failure["family"] == lib.family and failure["stage"] == "link", (line, failure)
        top = [f for f in sort_findings(diagnose(facts, REGISTRY)) if f.status is Status.FAIL][0]
        if top.id == "loader-library":
            assert "LIBRARY_PATH=" in _commands(top), line


def test_onnxruntime_s_windows_wording_names_the_dll_that_is_missing_not_the_provider() -> None:
    text = ('onnxruntime::ProviderLibrary::Get [ONNXRuntimeError] : 1 : FAIL : Error loading "C:\\env\\Lib\\site-'
            'packages\\onnxruntime\\capi\\onnxruntime_providers_cuda.dll" which depends on "cublasLt64_12.dll" which '
            "is missing.\n"
            "Failed to create CUDAExecutionProvider. Require cuDNN 9.* and CUDA 12.*, and the latest MSVC runtime.\n")
    failure = parse_text(text).value("torch.loader_failures")[0]
    assert failure["library"] == "cublasLt64_12.dll" and failure["family"] == "cublas"
    assert failure["package"] == "onnxruntime"
    found = _problems(text)
    assert found[0].id == "loader-library" and "cublasLt64_12.dll" in found[0].title
    assert "torch" not in _commands(found[0])


def test_onnxruntime_s_provider_warning_alone_says_what_onnxruntime_gpu_needs() -> None:
    text = ("[W:onnxruntime:Default, onnxruntime_pybind_state.cc:993 CreateExecutionProviderInstance] Failed to create "
            "CUDAExecutionProvider. Require cuDNN 9.* and CUDA 12.*. Please install all dependencies as mentioned in "
            "the GPU requirements page, make sure they're in the PATH, and that your GPU is supported.\n")
    top = _top(text)
    assert top.status is Status.WARN and top.title == catalogue.causes()["ort-cuda-dependencies"].title
    assert "onnxruntime" in _commands(top) and "torch" not in _commands(top)


def test_deepspeed_s_cuda_mismatch_writes_the_toolkit_s_and_torch_s_cuda() -> None:
    text = ("deepspeed.ops.op_builder.builder.CUDAMismatchException: >- DeepSpeed Op Builder: Installed CUDA version "
            "12.4 does not match the version torch was compiled with 11.8, unable to compile cuda/cpp extensions "
            "without a matching cuda version.\n")
    facts = parse_text(text)
    assert facts.value("toolkit.nvcc_version") == "12.4" and facts.value("torch.cuda_version") == "11.8"
    top = _top(text)
    # the check users look for judges the versions the message wrote (issue 21, round 2), not known-message
    assert top.id == "toolkit-mismatch" and top.status is Status.FAIL and "12.4" in top.title and "11.8" in top.title
    assert "nvidia-cuda-nvcc-cu11==11.8" in _commands(top)


def test_the_windows_paging_file_error_loading_a_cuda_dll_is_virtual_memory_not_a_missing_library() -> None:
    text = ('OSError: [WinError 1455] The paging file is too small for this operation to complete. Error loading '
            '"C:\\env\\lib\\site-packages\\torch\\lib\\cudnn_cnn_infer64_8.dll" or one of its dependencies.\n')
    facts = parse_text(text)
    assert not facts.get("torch.loader_failures").ok or not facts.value("torch.loader_failures")
    top = _top(text)
    # Microsoft's documented text, not a source read (verified: false): a warning at most
    assert top.status is Status.WARN and top.title == catalogue.causes()["windows-paging-file"].title
    assert "SystemPropertiesPerformance.exe" in _commands(top)


def test_nvrm_s_rm_init_adapter_minor_number_line_is_a_failed_gpu_init() -> None:
    text = ("[   13.7] NVRM: GPU 0000:0b:00.0: RmInitAdapter failed! (0x26:0x56:1474)\n"
            "[   13.8] NVRM: GPU 0000:0b:00.0: rm_init_adapter failed, device minor number 0\n")
    found = _problems(text)
    assert found[0].title == catalogue.causes()["nvrm-init-failed"].title and found[0].status is Status.FAIL
    assert len([f for f in found if f.id == "known-message"]) == 1  # one cause, said once


def test_tensorflow_s_cannot_dlopen_on_windows_gets_wsl2_or_tensorflow_2_10() -> None:
    text = ("W tensorflow/core/common_runtime/gpu/gpu_device.cc:1850] Cannot dlopen some GPU libraries. Please make "
            "sure the missing libraries mentioned above are installed properly if you would like to use GPU.\n")
    linux = _top(text)
    assert "tensorflow[and-cuda]" in _commands(linux)
    windows = _top("W tensorflow/tsl/platform/default/dso_loader.cc:64] Could not load dynamic library 'cudart64_110.dll'; "
                   "dlerror: cudart64_110.dll not found\n" + text)
    assert "tensorflow<2.11" in _commands(windows)
    found = _problems("W tensorflow/tsl/platform/default/dso_loader.cc:64] Could not load dynamic library "
                      "'cudart64_110.dll'; dlerror: cudart64_110.dll not found\n" + text)
    # TensorFlow's "Cannot dlopen some GPU libraries" is the symptom of the library the loader check names: folded
    # into that finding (said once), never a rival known-message finding beside it
    assert not [f for f in found if f.id == "known-message"]
    assert found[0].id == "loader-library" and found[0].evidence.get("symptoms")


def test_nvcc_s_unknown_architecture_with_its_version_line_names_the_toolkit_that_knows_it() -> None:
    text = ("$ nvcc --version\nCuda compilation tools, release 11.7, V11.7.99\n$ python setup.py install\n"
            "nvcc fatal   : Unsupported gpu architecture 'compute_90'\n")
    top = [f for f in _problems(text) if f.id == "known-message"][0]
    assert top.title == catalogue.causes()["nvcc-unknown-arch"].title
    assert "nvcc 11.7.99" in top.remediation.text and "CUDA 11.8 or newer" in top.remediation.text
    assert "nvcc --list-gpu-arch" in _commands(top)


def test_an_architecture_newer_toolkits_dropped_names_the_last_toolkit_for_it() -> None:
    text = ("Cuda compilation tools, release 12.4, V12.4.131\n"
            "nvcc fatal   : Unsupported gpu architecture 'compute_35'\n")
    top = [f for f in _problems(text) if f.id == "known-message"][0]
    assert "was last compiled for by CUDA 11.8" in top.remediation.text


def test_nccl_s_cuda_failure_string_is_the_cause_its_unhandled_cuda_error_follows() -> None:
    text = ("node3:11:12 [1] NCCL WARN Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'\n"
            "RuntimeError: NCCL error in: /src/ProcessGroupNCCL.cpp:1191, unhandled cuda error (run with "
            "NCCL_DEBUG=INFO for details), NCCL version 2.14.3\n")
    found = _problems(text)
    assert found[0].id == "driver-too-old" and found[0].status is Status.FAIL
    assert all(f.status is Status.WARN for f in found[1:])  # NCCL's own words follow their cause


def test_a_line_two_symptom_rows_read_is_said_once_by_the_more_specific_row() -> None:
    text = ("RuntimeError: NCCL error in: /src/ProcessGroupNCCL.cpp:1191, unhandled cuda error (run with "
            "NCCL_DEBUG=INFO for details), NCCL version 2.14.3\n")
    said = [f for f in _problems(text) if f.id == "known-message"]
    assert [f.title for f in said] == [catalogue.causes()["nccl-cuda-error"].title]


_JAX_FOUND = ("CUDA backend failed to initialize: Found {lib} version {have}, but JAX was built against version {built}, "
              "which is newer. The copy of {lib} that is installed must be at least as new as the version against which "
              "JAX was built. (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)\n")


def test_jax_s_older_cudnn_is_a_cudnn_mismatch_with_jax_s_remedy_and_its_backend_failure_the_evidence() -> None:
    found = _problems(_JAX_FOUND.format(lib="cuDNN", have="8600", built="8907"))
    top = found[0]
    # the cudnn-mismatch check judges the two versions JAX's message wrote; the backend failure is its evidence
    assert top.id == "cudnn-mismatch" and top.status is Status.FAIL
    assert "cuDNN 8.6.0" in top.title and "8.9.7" in top.title and "JAX" in top.title
    assert list(top.evidence["symptoms"]) == ["jax-backend-failed-to-initialize"]
    assert "jax[cuda12]" in _commands(top) and "torch" not in _commands(top)
    assert not [f for f in found if f.id == "known-message"]  # said once


def test_jax_s_other_older_cuda_library_is_jax_s_outdated_library() -> None:
    top = _top(_JAX_FOUND.format(lib="cuSOLVER", have="11400", built="11500"))
    assert top.title == catalogue.causes()["jax-cuda-outdated"].title and top.status is Status.FAIL


def test_jax_without_a_cuda_jaxlib_says_so() -> None:
    top = _top("WARNING:jax._src.xla_bridge:An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is "
               "not installed. Falling back to cpu.\n")
    assert top.title == catalogue.causes()["jax-cpu-build"].title and "jax[cuda12]" in _commands(top)


def test_cudnn_s_handle_and_tensorflow_s_convolution_algorithm_are_one_cudnn_init_finding() -> None:
    text = ("E0101 cuda_dnn.cc:329] Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR\n"
            "tensorflow.python.framework.errors_impl.UnknownError: Failed to get convolution algorithm. This is "
            "probably because cuDNN failed to initialize, so try looking to see if a warning log message was printed "
            "above.\n")
    said = [f for f in _problems(text) if f.id == "known-message"]
    assert [f.title for f in said] == [catalogue.causes()["cudnn-init-failed"].title]
    assert "TF_FORCE_GPU_ALLOW_GROWTH=true" in _commands(said[0])


def test_onnxruntime_without_the_cuda_provider_is_the_cpu_package_and_fails() -> None:
    text = ("/venv/lib/python3.10/site-packages/onnxruntime/capi/onnxruntime_inference_collection.py:69: UserWarning: "
            "Specified provider 'CUDAExecutionProvider' is not in available provider names.Available providers: "
            "'AzureExecutionProvider, CPUExecutionProvider'\n")
    said = [f for f in _problems(text) if f.id == "known-message"]
    assert [f.title for f in said] == [catalogue.causes()["ort-cpu-package"].title]
    assert said[0].status is Status.FAIL and "onnxruntime-gpu" in _commands(said[0])


def test_nvrm_s_invalid_pci_region_is_the_cause_its_failed_probe_follows() -> None:
    text = ("[   13.377538] NVRM: This PCI I/O region assigned to your NVIDIA device is invalid:\n"
            "[   13.377539] NVRM: BAR1 is 0M @ 0x0 (PCI:0000:02:00.0)\n"
            "[   13.377626] nvidia: probe of 0000:02:00.0 failed with error -1\n"
            "[   13.377638] NVRM: The NVIDIA probe routine failed for 1 device(s).\n"
            "[   13.377640] NVRM: None of the NVIDIA devices were initialized.\n")
    said = [f for f in _problems(text) if f.id == "known-message"]
    assert said[0].title == catalogue.causes()["nvrm-pci-bar"].title
    assert "pci=realloc" in said[0].remediation.text + _commands(said[0])
    assert len(said) == 1 and list(said[0].evidence["symptoms"])  # the failed probe is its evidence, not a rival
    assert not any(f.id == "unexplained-error" for f in _problems(text))  # the driver core's probe line is explained


def test_no_cuda_gpus_next_to_a_cpu_torch_puts_the_cpu_build_first() -> None:
    text = (">>> import torch\n>>> torch.__version__\n'2.4.0+cpu'\n>>> torch.zeros(1).cuda()\n"
            "RuntimeError: No CUDA GPUs are available\n")
    found = _problems(text)
    assert found[0].id == "torch-cpu-build" and found[0].status is Status.FAIL
    # "No CUDA GPUs are available" is what the CPU build leads to: folded into its finding, said once
    assert not [f for f in found if f.id == "known-message"] and found[0].evidence.get("symptoms")
    assert "No CUDA GPUs are available" in found[0].detail


def test_a_windows_dll_outside_the_table_gets_windows_commands_not_apt() -> None:
    top = _top("Could not locate zlibwapi.dll. Please make sure it is in your library path!\n")
    assert top.id == "loader-library" and "zlibwapi.dll" in top.title
    assert "where.exe" in _commands(top) and "apt" not in _commands(top)
