"""The one table of CUDA driver, CUDA runtime and NVML return-code meanings (envdoctor/data/errors.json):
it loads, cites its sources, and covers every code the hand-kept dicts it replaced knew, with the
same names, words and texts."""

from __future__ import annotations

import json
from pathlib import Path

from envdoctor.knowledge import errors
from envdoctor.probes import nvidia

DATA = Path(errors.__file__).resolve().parent.parent / "data" / "errors.json"

#: The tables as they stood before errors.json (messages.CUDA_RUNTIME_ERRORS, _RUNTIME_NAMES,
#: _ERROR_STRINGS, child/nvml_probe.CODES, parsers/nvidia_smi._NVML_WORDS): the data must hold each.
OLD_CUINIT = {35: "cudaErrorInsufficientDriver", 46: "CUDA_ERROR_DEVICE_UNAVAILABLE", 100: "CUDA_ERROR_NO_DEVICE",
              101: "CUDA_ERROR_INVALID_DEVICE", 304: "CUDA_ERROR_OPERATING_SYSTEM", 802: "CUDA_ERROR_SYSTEM_NOT_READY",
              803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", 804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
              999: "CUDA_ERROR_UNKNOWN"}
OLD_RUNTIME_NAMES = {"cudaErrorInsufficientDriver": 35, "cudaErrorNoDevice": 100,
                     "cudaErrorSystemNotReady": 802, "cudaErrorSystemDriverMismatch": 803,
                     "cudaErrorCompatNotSupportedOnDevice": 804,
                     "cudaErrorDevicesUnavailable": 46, "cudaErrorUnknown": 999}
OLD_ERROR_STRINGS = {("system not yet initialized", 802),
                     ("forward compatibility was attempted on non supported HW", 804),
                     ("system has unsupported display driver / cuda driver combination", 803),
                     ("no CUDA-capable device is detected", 100),
                     ("all CUDA-capable devices are busy or unavailable", 46),
                     ("CUDA driver version is insufficient for CUDA runtime version", 35)}
OLD_CUINIT_TITLED = (3, 34, 35, 46, 100, 101, 304, 800, 802, 803, 804, 999)
OLD_NVML = {
    1: ("NVML_ERROR_UNINITIALIZED", "failed"), 2: ("NVML_ERROR_INVALID_ARGUMENT", "failed"),
    3: ("NVML_ERROR_NOT_SUPPORTED", "unsupported"), 4: ("NVML_ERROR_NO_PERMISSION", "denied"),
    5: ("NVML_ERROR_ALREADY_INITIALIZED", "failed"), 6: ("NVML_ERROR_NOT_FOUND", "absent"),
    7: ("NVML_ERROR_INSUFFICIENT_SIZE", "failed"), 8: ("NVML_ERROR_INSUFFICIENT_POWER", "failed"),
    9: ("NVML_ERROR_DRIVER_NOT_LOADED", "absent"), 10: ("NVML_ERROR_TIMEOUT", "timeout"),
    11: ("NVML_ERROR_IRQ_ISSUE", "failed"), 12: ("NVML_ERROR_LIBRARY_NOT_FOUND", "absent"),
    13: ("NVML_ERROR_FUNCTION_NOT_FOUND", "unsupported"), 14: ("NVML_ERROR_CORRUPTED_INFOROM", "failed"),
    15: ("NVML_ERROR_GPU_IS_LOST", "failed"), 16: ("NVML_ERROR_RESET_REQUIRED", "failed"),
    17: ("NVML_ERROR_OPERATING_SYSTEM", "denied"), 18: ("NVML_ERROR_LIB_RM_VERSION_MISMATCH", "failed"),
    19: ("NVML_ERROR_IN_USE", "failed"), 20: ("NVML_ERROR_MEMORY", "failed"), 21: ("NVML_ERROR_NO_DATA", "unsupported"),
    22: ("NVML_ERROR_VGPU_ECC_NOT_SUPPORTED", "unsupported"), 23: ("NVML_ERROR_INSUFFICIENT_RESOURCES", "failed"),
    25: ("NVML_ERROR_ARGUMENT_VERSION_MISMATCH", "unsupported"), 26: ("NVML_ERROR_DEPRECATED", "unsupported"),
    27: ("NVML_ERROR_NOT_READY", "failed"), 28: ("NVML_ERROR_GPU_NOT_FOUND", "absent"),
    29: ("NVML_ERROR_INVALID_STATE", "failed"), 999: ("NVML_ERROR_UNKNOWN", "failed"),
}
OLD_NVML_WORDS = {("Driver/library version mismatch", 18), ("couldn't communicate with the NVIDIA driver", 9),
                  ("Driver Not Loaded", 9), ("Insufficient Permissions", 4),
                  ("GPU access blocked by the operating system", 17), ("GPU is lost", 15),
                  ("NVML Shared Library Not Found", 12), ("Function Not Found", 13), ("Unknown Error", 999)}
OLD_NVML_TITLED = (4, 9, 15, 17, 18, 999)


def test_every_table_loads_and_names_its_source() -> None:
    raw = json.loads(DATA.read_text(encoding="utf-8"))
    assert set(errors.sources()) == {"cuda_driver", "cuda_runtime", "nvml"}
    for name, url in errors.sources().items():
        assert url.startswith("https://docs.nvidia.com/"), name
        assert raw[name]["codes"], name
    for table, prefix in ((errors.cuda_driver(), "CUDA_ERROR_"), (errors.cuda_runtime(), "cudaError"),
                          (errors.nvml(), "NVML_ERROR_")):
        for code, info in table.items():
            assert info.code == code and info.name.startswith(prefix), info
            assert (info.title is None) == (info.meaning is None), f"{info.name}: a title needs its meaning"
    reasons = {info.reason for info in errors.nvml().values()}
    assert reasons <= {"absent", "denied", "unsupported", "timeout", "failed"}
    assert all(set(info.recognise) <= {"name", "message"} for info in errors.cuda_runtime().values())


def test_cuda_codes_cover_the_old_tables() -> None:
    assert errors.cuda_init_codes() == OLD_CUINIT
    assert errors.runtime_names() == OLD_RUNTIME_NAMES
    # The old tables' sentences, and CUDA 13.0's rewording of 46 (tools/snapshots/cuda_errors.tsv) beside them.
    assert set(errors.runtime_messages()) == OLD_ERROR_STRINGS | {("CUDA-capable device(s) is/are busy or unavailable", 46)}
    for code in OLD_CUINIT_TITLED:
        assert errors.cuda_init_text(code) is not None, code
    assert errors.cuda_init_text(2) is None
    # The runtime's words for a code that means the same as cuInit's agree with the driver's where both exist.
    driver = errors.cuda_driver()
    for code, info in errors.cuda_runtime().items():
        if info.as_cuinit and code in driver and driver[code].message and code != 46:  # 46: "all … devices" / "device(s) is/are"
            assert info.message == driver[code].message, code


def test_nvml_codes_cover_the_old_tables() -> None:
    assert {code: (info.name, info.reason) for code, info in errors.nvml().items()} == OLD_NVML
    assert {(words, code) for words, code, _ in errors.nvml_printed()} == OLD_NVML_WORDS
    assert all(name == errors.nvml()[code].name for _, code, name in errors.nvml_printed())
    for code in OLD_NVML_TITLED:
        assert errors.nvml()[code].title, code


def test_the_nvml_child_gets_the_table_in_its_arguments(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    seen: dict = {}

    class Recording:
        environ: dict = {}

        def run_child(self, script, args=None, **kw):  # type: ignore[no-untyped-def]
            seen.update(script=script, args=args)
            from envdoctor.process.host import ChildResult
            return ChildResult("absent", detail="not run")

    nvidia.probe_nvml(Recording(), nvidia.Options())  # type: ignore[arg-type]
    assert seen["script"] == "driver_probe"
    table = seen["args"]["nvml"]["codes"]
    assert json.loads(json.dumps(table)) == table
    assert {int(k): tuple(v) for k, v in table.items()} == OLD_NVML


def test_errors_json_holds_every_code_the_runtime_defines_with_its_own_words() -> None:
    """tools/gen_errors.py: every cudaError_t of CUDA 13.0 with cudaGetErrorName/cudaGetErrorString as the
    runtime answered them, every CUresult name of cuda.h; envdoctor's own readings kept; byte for byte."""
    import importlib.util

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("gen_errors", root / "tools" / "gen_errors.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.main(["--check"]) == 0, "run: python tools/gen_errors.py"
    header, tables = gen.read_snapshot()
    assert any("CUDA 13.0 runtime" in line for line in header) and any("https://" in line for line in header)
    runtime, driver = errors.cuda_runtime(), errors.cuda_driver()
    assert len(tables["cuda_runtime"]) > 120 and len(tables["cuda_driver"]) > 90
    for code, (name, message) in tables["cuda_runtime"].items():
        assert runtime[code].name == name and message in runtime[code].wordings, code
    assert all(driver[code].name == name for code, (name, _m) in tables["cuda_driver"].items())
    assert runtime[700].message == "an illegal memory access was encountered" and not runtime[700].judged
    assert 0 not in runtime and 0 not in driver  # success is no error


def test_a_cuda_error_envdoctor_only_names_is_said_as_a_warning_with_the_way_to_find_the_call() -> None:
    from envdoctor.model import Status
    from envdoctor.parsers import parse_text
    from envdoctor.pipeline.diagnose import diagnose, sort_findings
    from envdoctor.registry import load_registry

    text = ("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    loss.backward()\n"
            "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    found = [f for f in sort_findings(diagnose(parse_text(text), load_registry(plugins=False)))
             if f.status is not Status.SKIP]
    assert found[0].id == "known-message" and found[0].status is Status.WARN, found[0]
    assert "CUDA_LAUNCH_BLOCKING=1" in " ".join(found[0].remediation.command_lines())
    assert not any(f.id == "unexplained-error" for f in found)
