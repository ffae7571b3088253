"""Issue 21: the message catalogue (envdoctor/data/messages.json and the code strings of errors.json), the loader
grammar over every soname of the cuda_libraries table, and every error line read.

Each catalogue row is printed the way its emitter prints it, with random arguments (a seeded generator), and
buried in prose: the paste must yield the row's cause. Each soname of the table, in each wording the loader and
the frameworks use, must yield its family and a remedy that fits what needed it.
"""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from envdoctor.knowledge import catalogue, compat, datafiles, remedies
from envdoctor.knowledge.factkeys import lookup
from envdoctor.model import Status
from envdoctor.parsers import ParseError, parse_text
from envdoctor.pipeline.diagnose import diagnose, sort_findings
from envdoctor.registry import load_registry

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = load_registry(plugins=False)
CHECK_IDS = {spec.id for spec in REGISTRY}
ROWS = catalogue.messages()
DATA = json.loads(datafiles.read_text("messages.json"))

PROSE_BEFORE = ("I was running my training script on the cluster this morning and it stopped with this:",
                "Steps to reproduce: start the container, run python train.py.")
PROSE_AFTER = ("Any idea what is going on? I already reinstalled everything twice.",
               "Thanks in advance for any help.")


def _arg(rng: random.Random, conversion: str) -> str:
    if conversion[-1] in "diuxX" or conversion.endswith(("zu", "ld", "lu")):
        return str(rng.randint(1, 99999))
    if conversion[-1] in "fg":
        return f"{rng.uniform(0, 100):.2f}"
    alphabet = string.ascii_letters + string.digits + "_./-"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(3, 14))).strip("./-") or "x1"


def _rendered(row: catalogue.Message, rng: random.Random) -> str:
    conversions = [m.group(0) for m in catalogue._PLACEHOLDER_RE.finditer(row.format)]
    return catalogue.render(row.format, [_arg(rng, c) for c in conversions])


def _buried(line: str, rng: random.Random) -> str:
    prefix = rng.choice(("", "    ", "2024-05-08 03:34:06.237713: E ", "[rank0]: ", "web-1  | "))
    return "\n".join((rng.choice(PROSE_BEFORE), "", f"{prefix}{line}", "", rng.choice(PROSE_AFTER))) + "\n"


# -- the data file --------------------------------------------------------------------------------------------------
def test_the_catalogue_matches_its_schema_and_every_reference_resolves() -> None:
    schema = json.loads(datafiles.read_text("messages.schema.json"))
    jsonschema.validate(DATA, schema)
    used = {row["source"] for row in DATA["messages"]}
    assert used <= set(DATA["sources"]), used - set(DATA["sources"])
    assert set(DATA["sources"]) <= used, f"sources nothing cites: {set(DATA['sources']) - used}"
    ids = [row.id for row in ROWS]
    assert len(ids) == len(set(ids)), "row ids are unique"
    for row in ROWS:
        assert row.cause in catalogue.causes(), (row.id, row.cause)
        assert row.judged_by is None or row.judged_by in CHECK_IDS, (row.id, row.judged_by)
        assert all(lookup(key) is not None for key in row.facts), (row.id, row.facts)
        assert row.anchor and row.anchor in " ".join(row.format.replace("%%", "%").split()).lower()
        if row.remedy is not None:
            assert remedies.message_remedy(row.remedy) is not None, (row.id, row.remedy)
        if row.judged_by is None and row.severity in ("fail", "warn"):
            said = remedies.message_remedy(row.remedy)
            assert said is not None and said[1], f"{row.id}: a finding of known-message says what to run"


def test_every_code_string_of_errors_json_is_a_generated_row() -> None:
    from envdoctor.knowledge import errors

    ids = {row.id for row in ROWS}
    assert {f"cuda-runtime-name-{c}" for c in errors.cuda_runtime()} <= ids
    # Every wording of every code is a row: a generated one, or the data file's own (which then gives its cause).
    formats = {row.format.lower() for row in ROWS}
    for code, info in errors.cuda_runtime().items():
        assert all(f"cuda error: {words}".lower() in formats for words in info.wordings), code
    worded = {str(raw["format"]).lower() for raw in DATA["messages"]}
    assert {f"cuda-runtime-{c}" for c, i in errors.cuda_runtime().items()
            if i.message and f"cuda error: {i.message}".lower() not in worded} <= ids
    assert {f"cuda-driver-{c}" for c in errors.cuda_driver()} <= ids
    assert {f"nvml-{c}" for c in errors.nvml()} <= ids
    # generated, not copied: the data file holds none of them
    assert not any(row["id"].startswith(("cuda-runtime", "cuda-driver", "nvml-")) for row in DATA["messages"])


@pytest.mark.parametrize(("fmt", "line", "groups"), [
    ("%s: error while loading shared libraries: %s: cannot open shared object file: %s",
     "./app: error while loading shared libraries: libcudart.so.9.0: cannot open shared object file: No such file",
     ("libcudart.so.9.0", "No such file")),
    ("Error while creating shared memory segment %s (size %zu)",
     "misc/shmutils.cc:113 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-Ubz (size 9637888)",
     ("/dev/shm/nccl-Ubz", "9637888")),
    ("PyTorch {} with CUDA {} (you have {})", "    PyTorch 2.1.0+cu121 with CUDA 1201 (you have 2.1.1+cu121)",
     ("2.1.0+cu121", "1201", "2.1.1+cu121")),
    ("%%1 is not a valid Win32 application", "OSError: [WinError 193] %1 is not a valid Win32 application", ()),
])
def test_a_format_string_becomes_a_pattern_over_its_fixed_words(fmt: str, line: str, groups: tuple[str, ...]) -> None:
    pattern, anchor = catalogue.pattern_of(fmt)
    m = pattern.search(line)
    assert m is not None and anchor in line.lower()
    assert m.groups() == groups


# -- every row, rendered with random arguments and buried in prose, yields its cause ---------------------------------
@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_every_row_rendered_with_random_arguments_yields_its_cause(row: catalogue.Message) -> None:
    rng = random.Random(f"issue-21:{row.id}")
    # A row generated from errors.json (one template, a code's own string) is rendered once; a data row, whose
    # format carries arguments, three times.
    for _ in range(1 if row.code is not None else 3):
        line = _rendered(row, rng)
        facts = parse_text(_buried(line, rng))
        said = facts.get("text.messages")
        assert said.ok, (row.id, line)
        assert row.cause in {m["cause"] for m in said.value}, (row.id, line, said.value)
        assert row.id in {m["id"] for m in said.value}, (row.id, line)
        # the row explains its line: it is never also an "unexplained error"
        unexplained = facts.get("text.error_lines")
        assert not unexplained.ok or line.strip() not in {e["line"].split("] ")[-1] for e in unexplained.value}
        if row.judged_by is None and row.severity in ("fail", "warn"):
            findings = [f for f in diagnose(facts, REGISTRY) if f.id == "known-message"]
            titles = {f.title for f in findings}
            assert catalogue.causes()[row.cause].title in titles, (row.id, line, titles)
            # a row whose wording was not read in its emitter's source can at most warn
            status = Status.FAIL if row.severity == "fail" and row.verified else Status.WARN
            assert any(f.status is status and f.remediation.command_lines() for f in findings), row.id


def test_a_cudnn_mismatch_from_jax_names_cudnn_with_no_torch_command() -> None:
    text = ("E0430 22:32:43.417007 2493694 cuda_dnn.cc:454] Loaded runtime CuDNN library: 9.1.0 but source was "
            "compiled with: 9.8.0. CuDNN library needs to have matching major version and equal or higher minor "
            "version.\njax.errors.JaxRuntimeError: FAILED_PRECONDITION: DNN library initialization failed.\n")
    top = sort_findings(diagnose(parse_text(text), REGISTRY))[0]
    assert top.status is Status.FAIL and "cuDNN" in top.title
    assert not any("torch" in c for c in top.remediation.command_lines())


# -- the loader grammar: every soname of the table, in every wording ---------------------------------------------------
def _sonames(lib: compat.CudaLibrary) -> list[str]:
    stem = lib.prefix.rstrip(".")
    linux = [f"{stem}.so.12", f"{stem}.so.11.8"] if lib.soname_major_is_cuda else [f"{stem}.so.1", f"{stem}.so.9.1"]
    win = [f"{n}.dll" for n in lib.windows_names] or [f"{stem[3:]}64_12.dll"]
    return linux + win


_LINUX_WORDINGS = (
    "ImportError: {0}: cannot open shared object file: No such file or directory",
    "OSError: {0}: cannot open shared object file: No such file or directory",
    "./bin/app: error while loading shared libraries: {0}: cannot open shared object file: No such file or directory",
    "W tensorflow/tsl/platform/default/dso_loader.cc:66] Could not load dynamic library '{0}'; dlerror: {0}: "
    "cannot open shared object file: No such file or directory",
)
_WINDOWS_WORDINGS = (
    'OSError: [WinError 126] The specified module could not be found. Error loading "C:\\app\\lib\\{0}" or one of '
    "its dependencies.",
    "Could not load library {0}. Error code 126",
)
_CASES = [(lib, name, wording) for lib in compat.cuda_libraries() for name in _sonames(lib)
          for wording in (_WINDOWS_WORDINGS if name.endswith(".dll") else _LINUX_WORDINGS)]


@pytest.mark.parametrize(("lib", "name", "wording"), _CASES,
                         ids=[f"{name}-{w.split(':')[0][:12]}" for _, name, w in _CASES])
def test_every_soname_in_every_wording_yields_its_family_and_a_remedy(lib: compat.CudaLibrary, name: str,
                                                                       wording: str) -> None:
    facts = parse_text(wording.format(name) + "\n")
    failures = facts.get("torch.loader_failures").value
    assert failures and failures[0]["family"] == lib.family and failures[0]["kind"] == "missing-library", failures
    fails = [f for f in sort_findings(diagnose(facts, REGISTRY)) if f.status is Status.FAIL]
    assert fails, (name, wording)
    top = fails[0]
    assert top.remediation.command_lines(), (name, top.id, top.title)
    if top.id == "loader-library":
        assert name in top.title and lib.title.lower() in top.title.lower()
        commands = " ".join(top.remediation.command_lines())
        if "./bin/app" in wording and lib.role == "toolkit":
            assert "torch" not in commands and "toolkit" in commands.lower() + top.remediation.text.lower()


def test_a_driver_library_missing_in_a_container_points_at_the_container_runtime() -> None:
    text = ("root@098b49afe624:/workspace# python -c 'import torch'\nTraceback (most recent call last):\n"
            '  File "/usr/local/lib/python3.10/dist-packages/torch/__init__.py", line 237, in <module>\n'
            "    from torch._C import *  # noqa: F403\n"
            "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory\n")
    top = sort_findings(diagnose(parse_text(text), REGISTRY))[0]
    assert top.id == "loader-library" and top.status is Status.FAIL and "libcuda.so.1" in top.title
    assert any("--gpus all" in c for c in top.remediation.command_lines())


def test_libnvidia_ml_missing_for_the_container_cli_is_the_drivers_library() -> None:
    text = ("docker: Error response from daemon: failed to create task for container: nvidia-container-cli: "
            "initialization error: load library failed: libnvidia-ml.so.1: cannot open shared object file: no such "
            "file or directory: unknown.\n")
    facts = parse_text(text)
    assert "container-driver-library" in {m["cause"] for m in facts.get("text.messages").value}
    assert "glibc-cannot-open" not in {m["id"] for m in facts.get("text.messages").value}  # quoted, not its own
    assert not facts.get("torch.loader_failures").ok  # no process in the container loaded anything
    found = sort_findings(diagnose(facts, REGISTRY))
    # the hook on the host failed before the container started: the container runtime's finding, said once
    assert found[0].id == "container-gpu" and found[0].status is Status.FAIL
    assert "host" in found[0].title and "libnvidia-ml.so.1" in found[0].detail
    assert not [f for f in found if f.id in ("known-message", "loader-library") and f.status is not Status.OK
                and f.status is not Status.SKIP]


def test_the_same_library_missing_inside_the_container_is_still_the_loader_s() -> None:
    # The twin: the process itself (torch) failing to dlopen libnvidia-ml is the loader's finding, not the hook's.
    facts = parse_text("OSError: libnvidia-ml.so.1: cannot open shared object file: No such file or directory\n")
    assert not facts.get("container.runtime_library_error").ok
    top = sort_findings(diagnose(facts, REGISTRY))[0]
    assert top.id == "loader-library" and top.status is Status.FAIL


def test_torch_s_own_missing_runtime_under_from_torch_c_is_torch_s_wheel() -> None:
    text = ('Traceback (most recent call last):\n  File "/venv/lib/python3.11/site-packages/torch/__init__.py", line '
            "367, in <module>\n    from torch._C import *  # noqa: F403\n"
            "ImportError: libcublas.so.12: cannot open shared object file: No such file or directory\n")
    failure = parse_text(text).get("torch.loader_failures").value[0]
    assert failure["needed_by"] == "torch" and failure["family"] == "cublas" and failure["cuda_major"] == 12
    top = sort_findings(diagnose(parse_text(text), REGISTRY))[0]
    assert top.id == "loader-library"
    assert any("torch" in c for c in top.remediation.command_lines())
    assert any("nvidia-cublas-cu12" in c for c in top.remediation.command_lines())


def test_a_torch_extension_missing_a_c10_symbol_is_rebuilt_for_the_installed_torch() -> None:
    text = ("ImportError: /venv/lib/python3.10/site-packages/xformers/_C.so: undefined symbol: "
            "_ZN3c104cuda9SetDeviceEi\n")
    top = sort_findings(diagnose(parse_text(text), REGISTRY))[0]
    assert top.id == "loader-library" and top.status is Status.FAIL and "xformers" in top.title
    assert any("--force-reinstall" in c and "xformers" in c for c in top.remediation.command_lines())


@pytest.mark.parametrize(("text", "kind", "library"), [
    ("ImportError: /lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.30' not found (required by "
     "/venv/lib/python3.10/site-packages/torch/lib/libtorch_python.so)", "version-not-found", "libstdc++.so.6"),
    ("OSError: /usr/lib/i386-linux-gnu/libcuda.so.1: wrong ELF class: ELFCLASS32", "wrong-elf-class", "libcuda.so.1"),
    ("OSError: [WinError 193] %1 is not a valid Win32 application. Error loading \"C:\\x\\torch\\lib\\c10.dll\" or "
     "one of its dependencies.", "wrong-architecture", "c10.dll"),
])
def test_the_other_loader_wordings_are_read_and_judged(text: str, kind: str, library: str) -> None:
    facts = parse_text(text + "\n")
    failure = facts.get("torch.loader_failures").value[0]
    assert failure["kind"] == kind and failure["library"] == library
    assert any(f.id == "loader-library" and f.status is Status.FAIL for f in diagnose(facts, REGISTRY))


# -- every error line is read -------------------------------------------------------------------------------------------
def test_an_unexplained_error_is_a_warning_quoting_the_line_and_the_last_frame_s_package() -> None:
    text = ('Traceback (most recent call last):\n  File "/home/u/train.py", line 3, in <module>\n'
            '  File "/venv/lib/python3.11/site-packages/flux_kernels/ops.py", line 88, in launch\n'
            "ValueError: grid of 0 blocks requested token=hf_abcdefghijklmnopqrstuvwxyz0123\n")
    found = [f for f in diagnose(parse_text(text), REGISTRY) if f.id == "unexplained-error"]
    assert len(found) == 1 and found[0].status is Status.WARN
    assert "flux_kernels" in found[0].detail and "grid of 0 blocks" in found[0].detail
    assert "hf_abcdefghijklmnopqrstuvwxyz0123" not in found[0].detail + found[0].title  # redacted like all output


def test_unexplained_errors_are_capped_and_worst_first_and_explained_lines_are_not_repeated() -> None:
    lines = [f"step {i}: data shard {i} failed to decode" for i in range(12)]
    lines += ["Segmentation fault (core dumped)", "RuntimeError: No CUDA GPUs are available"]
    found = [f for f in sort_findings(diagnose(parse_text("\n".join(lines) + "\n"), REGISTRY))
             if f.id == "unexplained-error"]
    assert len(found) == 5 and "Segmentation fault" in found[0].title
    assert not any("No CUDA GPUs" in f.title for f in found)  # the catalogue explains it: known-message says it
    assert "more unexplained error line" in found[-1].detail


def test_benign_lines_are_no_errors_and_text_without_evidence_is_still_refused() -> None:
    with pytest.raises(ParseError):
        parse_text("0 errors, 0 warnings\nthe run took longer than usual\n")


# -- through the CLI: the two examples --------------------------------------------------------------------------
def _cli(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "envdoctor", "diagnose", *args], input=stdin, capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


def test_cli_a_missing_cuda_runtime_on_stdin_is_a_fail_with_a_remedy() -> None:
    done = _cli(["-"], "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory\n")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "No problems found" not in done.stdout
    assert "The CUDA runtime (libcudart.so.12) cannot be found" in done.stdout
    assert "nvidia-cuda-runtime-cu12" in done.stdout


def test_cli_an_application_binary_missing_its_cuda_runtime_gets_the_toolkit_not_torch(tmp_path: Path) -> None:
    paste = tmp_path / "paste.txt"
    paste.write_text("./bin/app: error while loading shared libraries: libcudart.so.9.0: cannot open shared object "
                     "file: No such file or directory\n", encoding="utf-8")
    done = _cli([str(paste)])
    assert done.returncode == 1, done.stdout + done.stderr
    assert "libcudart.so.9.0" in done.stdout and "needed by ./bin/app" in done.stdout
    assert "CUDA 9.0 toolkit" in done.stdout
    remedy = done.stdout.split("What to do:", 1)[1].split("Summary:", 1)[0]
    assert "pip install" not in remedy and "torch" not in remedy


@pytest.mark.parametrize("line", ["cat: /proc/driver/nvidia/version: No such file or directory",
                                  "open /dev/nvidiactl: permission denied",
                                  "zsh: command not found: nvcc",
                                  "/bin/sh: 1: ninja: not found",
                                  "'nvcc' is not recognized as an internal or external command,",
                                  "OSError: [Errno 28] No space left on device"])
def test_a_system_call_failure_or_a_missing_command_is_an_error_line(line: str) -> None:
    # The C library's errno words and the shells' "not found" report a failure without saying "error".
    from envdoctor.parsers.errorlines import error_lines

    assert [e.line for e in error_lines([line])] == [line.strip()]


@pytest.mark.parametrize("line", ["Checking for nvcc: found /usr/local/cuda/bin/nvcc",
                                  "Permissions: rw-r--r--", "0 files not found in the cache, all good? yes"])
def test_ordinary_lines_are_no_error_lines(line: str) -> None:
    from envdoctor.parsers.errorlines import error_lines

    assert error_lines([line]) == []


@pytest.mark.parametrize("line", ["bash: nvidia-smi: command not found",
                                  "nvidia-container-cli: initialization error: nvml error: driver not loaded",
                                  "Failed to initialize NVML: Driver/library version mismatch"])
def test_a_line_a_format_parser_judges_is_not_also_unexplained(line: str) -> None:
    from envdoctor.parsers import parse_text

    facts = parse_text(line + "\n")
    assert not facts.get("text.error_lines").ok or all(e["line"] != line for e in facts.value("text.error_lines"))


def test_an_nvml_failure_nvidia_smi_names_no_reason_for_stays_unexplained() -> None:
    # "Failed to initialize NVML" with no reason after it: nothing judges it, so it is quoted.
    from envdoctor.parsers import parse_text

    facts = parse_text("$ kubectl logs -f pod/gputest\nFailed to initialize NVML\n")
    assert [e["line"] for e in facts.value("text.error_lines")] == ["Failed to initialize NVML"]


def test_an_nvml_code_errors_json_calls_unsupported_is_no_failure() -> None:
    # errors.json: an "unsupported" NVML code is a query this GPU does not answer, never a fail.
    from envdoctor.model import Status
    from envdoctor.parsers import parse_text

    found = [f for f in diagnose(parse_text("power: NVML_ERROR_NOT_SUPPORTED\n"), REGISTRY)
             if f.status in (Status.FAIL, Status.WARN)]
    assert not any(f.id == "known-message" for f in found), [(f.id, f.title) for f in found]


@pytest.mark.parametrize("line", [
    "Failed to start nvml with error:  could not load NVML library",  # the device plugin before 2019
    "Failed to initialize NVML: could not load NVML library.",
])
def test_the_device_plugin_without_nvml_is_the_node_s_container_runtime(line: str) -> None:
    top = sort_findings(diagnose(parse_text(f"loading NVML\n{line}\n"), REGISTRY))[0]
    assert top.id == "container-gpu" and top.status is Status.FAIL and "device plugin" in top.title
    assert any("runtime configure" in c for c in top.remediation.command_lines())


def test_an_nvml_that_loads_is_not_the_device_plugin_s_failure() -> None:
    found = diagnose(parse_text("loading NVML\nFailed to initialize NVML: Unknown Error\n"), REGISTRY)
    assert not [f for f in found if f.id == "container-gpu" and "device plugin" in f.title]


def test_nccl_out_of_shared_memory_is_dev_shm_s_finding() -> None:
    text = ("node1:2145:2178 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device\n"
            "node1:2145:2178 [1] include/shm.h:48 NCCL WARN Error while creating shared memory segment "
            "nccl-shm-recv-250a7cc850ba9298-0-1-3 (size 9637888)\n")
    found = sort_findings(diagnose(parse_text(text), REGISTRY))
    assert found[0].id == "host-shm-size" and found[0].status is Status.FAIL
    assert any("--shm-size" in c for c in found[0].remediation.command_lines())
    assert not [f for f in found if f.id == "known-message" and f.status is not Status.SKIP]  # said once


def test_a_large_dev_shm_with_no_nccl_failure_stays_ok() -> None:
    text = "$ df -h /dev/shm\nFilesystem      Size  Used Avail Use% Mounted on\nshm              16G     0   16G   0% /dev/shm\n"
    found = {f.id: f for f in diagnose(parse_text(text), REGISTRY)}
    assert found["host-shm-size"].status is Status.OK


def test_a_wrapper_s_argument_is_still_its_own_message_but_a_quoted_fixed_text_is_not() -> None:
    wrapped = ("RuntimeError: NCCL error in: /src/ProcessGroupNCCL.cpp:1191, unhandled cuda error (run with "
               "NCCL_DEBUG=INFO for details), NCCL version 2.14.3")
    assert {row.id for row, _ in catalogue.match_line(wrapped)} >= {"nccl-unhandled-cuda-error", "torch-nccl-error"}
    hook = ("nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared "
            "object file: no such file or directory: unknown.")
    assert {row.id for row, _ in catalogue.match_line(hook)} == {"container-cli-load-library"}


_SOX = ("    ImportError                               Traceback (most recent call last)\n"
        "    <ipython-input-1-4cf0a64f61c0> in <module>()\n"
        "    ----> 1 import torchaudio\n"
        "    ~/repo/audio/{pkg}/__init__.py in <module>()\n"
        "          4 import torch\n"
        "    ----> 5 import _torch_sox\n"
        "    ImportError: /usr/local/lib/python3.5/dist-packages/_torch_sox.cpython-35m-x86_64-linux-gnu.so: "
        "undefined symbol: _ZN2at19UndefinedTensorImpl10_singletonE\n")


def test_a_private_module_torchaudio_imports_missing_a_torch_symbol_is_torchaudio_s() -> None:
    found = sort_findings(diagnose(parse_text(_SOX.format(pkg="torchaudio")), REGISTRY))
    assert found[0].id == "torch-companions" and found[0].status is Status.FAIL and "torchaudio" in found[0].title
    assert any("torchaudio" in c for c in found[0].remediation.command_lines())
    assert [f.id for f in found if f.status is Status.FAIL] == ["torch-companions"]


def test_the_same_module_under_another_package_stays_the_loader_s_extension() -> None:
    top = sort_findings(diagnose(parse_text(_SOX.format(pkg="mytools")), REGISTRY))[0]
    assert top.id == "loader-library" and top.status is Status.FAIL
    assert "mytools" in " ".join(top.remediation.command_lines())


_NO_KERNEL = ("NotImplementedError: Could not run '{op}' with arguments from the 'CUDA' backend. This could be because "
              "the operator doesn't exist for this backend, or was omitted during the selective/custom build process (if "
              "using custom build).\n")


def test_a_torchvision_operator_without_a_cuda_kernel_is_torchvision_s_build() -> None:
    found = sort_findings(diagnose(parse_text(_NO_KERNEL.format(op="torchvision::nms")), REGISTRY))
    assert found[0].id == "torch-companions" and found[0].status is Status.FAIL and "torchvision" in found[0].title
    assert any("torchvision" in c for c in found[0].remediation.command_lines())
    assert not [f for f in found if f.id in ("known-message", "unexplained-error") and f.status is not Status.SKIP]


def test_another_operator_without_a_kernel_is_said_but_not_blamed_on_the_companions() -> None:
    found = sort_findings(diagnose(parse_text(_NO_KERNEL.format(op="xformers::efficient_attention_forward_cutlass")),
                                   REGISTRY))
    assert not [f for f in found if f.id == "torch-companions" and f.status is Status.FAIL]
    said = [f for f in found if f.id == "known-message"]
    assert said and said[0].status is Status.WARN  # known, with no command to give: a warning at most


def test_tensorflow_s_dlopen_sentence_is_matched_by_its_stable_first_sentence() -> None:
    for tail in (" Skipping registering GPU devices...", " Please make sure the missing libraries mentioned above are "
                 "installed"):
        line = f"W0000 00:00:1777802014.562474   11318 gpu_device.cc:2365] Cannot dlopen some GPU libraries.{tail}\n"
        assert "tf-cannot-dlopen-gpu" in {m["id"] for m in parse_text(line).get("text.messages").value}


_DMESG_GSP = ("kernel: NVRM: The NVIDIA GPU 0000:09:00.0 (PCI ID: 10de:1d01)\n"
              "             NVRM: installed in this system is not supported by {what}\n"
              "             NVRM: nvidia.ko because it does not include the required GPU\n"
              "             NVRM: System Processor (GSP).\n"
              "kernel: nvidia 0000:09:00.0: probe with driver nvidia failed with error -1\n"
              "kernel: NVRM: The NVIDIA probe routine failed for 1 device(s).\n")


def test_the_open_kernel_module_on_a_gpu_without_gsp_says_which_flavour_to_install() -> None:
    found = [f for f in sort_findings(diagnose(parse_text(_DMESG_GSP.format(what="open")), REGISTRY))
             if f.status is not Status.SKIP and f.status is not Status.OK]
    assert found[0].status is Status.FAIL and "GSP" in found[0].title
    assert "proprietary" in found[0].remediation.text
    assert len(found) == 1  # the probe failure it leads to is folded into it


def test_a_gpu_the_driver_release_does_not_support_is_not_the_open_module_s() -> None:
    text = _DMESG_GSP.format(what="the").replace("nvidia.ko because it does not include the required GPU",
                                                 "NVIDIA 470.256.02 driver release.")
    assert "nvrm-open-module-no-gsp" not in {m["id"] for m in parse_text(text).get("text.messages").value}


def test_a_torchvision_operator_torch_does_not_know_is_torchvision_s_extension_not_loaded() -> None:
    text = ("  /usr/local/lib/python3.6/dist-packages/torch/_ops.py in __getattr__(self, op_name)\n"
            "RuntimeError: No such operator torchvision::nms`\n")
    found = sort_findings(diagnose(parse_text(text), REGISTRY))
    assert found[0].id == "torch-companions" and found[0].status is Status.FAIL and "torchvision" in found[0].title
    # another namespace's operator is said, never blamed on the companions
    other = sort_findings(diagnose(parse_text("RuntimeError: No such operator mmcv::nms\n"), REGISTRY))
    assert not [f for f in other if f.id == "torch-companions" and f.status is Status.FAIL]
    assert [f for f in other if f.id == "known-message" and f.status is Status.WARN]


def test_torch_s_driver_too_old_is_read_from_its_stable_words_when_the_paste_cuts_its_start() -> None:
    text = "**error info:** NVIDIA driver on your system is too old (found version 6000)....\n"
    top = sort_findings(diagnose(parse_text(text), REGISTRY))[0]
    assert top.id == "driver-too-old" and top.status is Status.FAIL and "CUDA 6.0" in top.title
    assert "found version 6000" in top.detail


_DSO = ("I built a container using image `nvidia/cuda:11.7.1-cudnn8-runtime-ubuntu22.04` and got:\n"
        "kernel version 470.141.3 does not match DSO version 515.65.1 -- cannot find working devices in this "
        "configuration\n")


def test_a_newer_libcuda_than_the_kernel_module_inside_a_container_is_the_image_s_forward_compat() -> None:
    found = [f for f in sort_findings(diagnose(parse_text(_DSO), REGISTRY)) if f.status not in (Status.OK, Status.SKIP)]
    assert found[0].id == "cuda-forward-compat" and found[0].status is Status.FAIL and "515" in found[0].title
    assert len(found) == 1  # the mismatch message is its evidence, not a rival


def test_the_same_skew_on_a_host_is_the_driver_upgrade_without_reboot() -> None:
    host = _DSO.replace("I built a container using image `nvidia/cuda:11.7.1-cudnn8-runtime-ubuntu22.04` and got:\n", "")
    top = sort_findings(diagnose(parse_text(host), REGISTRY))[0]
    assert top.id == "driver-version-mismatch" and top.status is Status.FAIL


def test_jax_s_outdated_cudnn_is_cudnn_mismatch_and_another_library_stays_known_message() -> None:
    text = ("Outdated cuDNN installation found.\nVersion JAX was built against: 90100\nMinimum supported: 90100\n"
            "Installed version: 8907\n")
    top = sort_findings(diagnose(parse_text(text), REGISTRY))[0]
    assert top.id == "cudnn-mismatch" and top.status is Status.FAIL and "JAX" in top.title
    other = sort_findings(diagnose(parse_text("Outdated cuSPARSE installation found.\n"), REGISTRY))
    assert not [f for f in other if f.id == "cudnn-mismatch" and f.status is Status.FAIL]
    assert [f for f in other if f.id == "known-message" and f.status is not Status.SKIP]
    assert "JAX could not" in catalogue.explains_sentence([("JAX could not initialise", "x")])
    assert "cUDA" not in catalogue.explains_sentence([("CUDA sees no GPU", "x")])


def test_cudnn_itself_missing_is_the_loader_s_and_a_missing_sub_library_is_mixed_copies() -> None:
    main = sort_findings(diagnose(parse_text("OSError: libcudnn.so.8: cannot open shared object file: No such file or "
                                             "directory\n"), REGISTRY))[0]
    assert main.id == "loader-library" and main.status is Status.FAIL and "libcudnn.so.8" in main.title
    assert not any("torch" in c for c in main.remediation.command_lines())  # nothing in the text is torch's
    sub = sort_findings(diagnose(parse_text("Could not load library libcudnn_cnn_infer.so.8. Error: "
                                            "libcudnn_cnn_infer.so.8: cannot open shared object file: No such file or "
                                            "directory\n"), REGISTRY))[0]
    assert sub.id == "cudnn-mismatch" and sub.status is Status.FAIL
