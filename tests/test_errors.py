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
    assert set(errors.runtime_messages()) == OLD_ERROR_STRINGS
    for code in OLD_CUINIT_TITLED:
        assert errors.cuda_init_text(code) is not None, code
    assert errors.cuda_init_text(2) is None
    # The runtime's words for a code that means the same as cuInit's agree with the driver's where both exist.
    driver = errors.cuda_driver()
    for code, info in errors.cuda_runtime().items():
        if code in driver and code != 46:  # 46: the runtime says "all … devices", the driver "device(s) is/are"
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
