"""Host-level tests of the NVIDIA probes: the real children load C stand-ins for libnvidia-ml
and libcuda through pynvml/ctypes; /proc, /sys and /dev are fake trees; dmesg is a fake on PATH."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from envdoctor.checks import driver as driver_checks
from envdoctor.checks import gpu_health

from envdoctor.model import Reason, Status, thaw
from envdoctor.probes import Options, nvidia, run_probes
from envdoctor.process.host import Host

from .conftest import make_exe, test_env
from .fakes.nvidia_fakes import fake_cuda, fake_nvml, host_with
from .judging import judge, judge_one

FAST = Options(timeout=2.0)


# -- NVML through pynvml --------------------------------------------------------------------------------
def test_nvml_reads_driver_and_every_gpu_field(tmp_path):
    env = fake_nvml(tmp_path, {"count": 2, "driver_version": "570.124.06", "cuda_version": 12080, "gpu1.cc": "9.0",
                               "gpu1.name": "NVIDIA H100 80GB HBM3", "gpu1.pcie_width": 8, "gpu1.remap_pending": 1,
                               "gpu1.procs": 3, "gpu1.mig": 1, "gpu1.mig_devices": 2, "gpu1.fabric_state": 3},
                    filename="libnvidia-ml.so.570.124.06")
    r = nvidia.probe_nvml(host_with(env), FAST)
    assert r["nvml.init"].value["code"] == 0
    assert r["nvml.driver_version"].value == "570.124.06"
    assert r["nvml.cuda_driver_version"].value == 12080 and r["nvml.device_count"].value == 2
    # The file the loader really mapped, with the userspace driver version in its name.
    assert r["nvml.library_path"].value.endswith("/nvml/libnvidia-ml.so.570.124.06")
    g0, g1 = r["nvml.gpus"].value
    assert g0["compute_capability"] == "8.0" and g1["compute_capability"] == "9.0"
    assert g1["name"] == "NVIDIA H100 80GB HBM3" and g1["pci_bus_id"] == "00000000:08:00.0"
    assert g1["uuid"].startswith("GPU-00000001")
    assert g1["pcie"] == {"gen": 4, "max_gen": 4, "width": 8, "max_width": 16}
    assert g1["remapped_rows"]["pending"] == 1 and g1["compute_processes"] == 3
    assert g1["mig_mode"] == {"current": 1, "pending": 1} and len(g1["mig_devices"]) == 2
    assert g1["fabric"] == {"state": 3, "status": 0}
    assert g0["ecc_mode"] == {"current": 1, "pending": 1} and g0["ecc_uncorrected_volatile"] == 0
    assert g0["memory_total"] == 85899345920 and g0["utilization"] == {"gpu": 0, "memory": 0}
    # CUDA ordinals map onto NVML GPUs.
    devices = r["visibility.cuda_devices"].value["devices"]
    assert [d["nvml_index"] for d in devices] == [0, 1]


@pytest.mark.parametrize("code,name,title,command", [
    (9, "NVML_ERROR_DRIVER_NOT_LOADED", "NVML: driver not loaded", "sudo modprobe nvidia"),
    (18, "NVML_ERROR_LIB_RM_VERSION_MISMATCH", "NVML: Driver/library version mismatch", "sudo reboot   # simplest and always works"),
    (4, "NVML_ERROR_NO_PERMISSION", "NVML: insufficient permissions", "ls -l /dev/nvidia*"),
    (15, "NVML_ERROR_GPU_IS_LOST", "NVML: GPU is lost", "sudo dmesg | grep -i xid"),
    (999, "NVML_ERROR_UNKNOWN", "NVML: Unknown Error", "sudo dmesg | grep -iE 'xid|nvrm' | tail"),
])
def test_each_nvml_init_error_gets_its_own_finding(tmp_path, code, name, title, command):
    r = nvidia.probe_nvml(host_with(fake_nvml(tmp_path, {"init": code})), FAST)
    init = r["nvml.init"].value
    assert init["code"] == code and init["name"] == name
    assert not r["nvml.driver_version"].ok and name in r["nvml.driver_version"].detail
    finding = judge_one(driver_checks.nvml_init, r)
    assert finding.status is Status.FAIL and finding.title == title
    assert command in finding.remediation.commands


def test_version_mismatch_message_is_the_one_nvidia_smi_prints(tmp_path):
    r = nvidia.probe_nvml(host_with(fake_nvml(tmp_path, {"init": 18})), FAST)
    assert r["nvml.init"].value["message"] == "Driver/library version mismatch"
    readings = dict(r, **{"driver.kernel_module_version": nvidia.ok("570.124.06")})
    finding = judge_one(driver_checks.driver_version_mismatch, readings)
    assert finding.status is Status.FAIL and "Failed to initialize NVML: Driver/library version mismatch" in finding.detail
    assert any("apt-mark hold" in c for c in finding.remediation.commands)


def test_missing_library_is_absent_not_an_error():
    r = nvidia.probe_nvml(Host(environ=test_env(LD_LIBRARY_PATH="/nonexistent")), FAST)
    assert r["nvml.init"].value["name"] == "NVML_ERROR_LIBRARY_NOT_FOUND"
    assert r["nvml.library_path"].reason is Reason.ABSENT
    assert r["nvml.gpus"].reason is Reason.ABSENT


def test_unsupported_field_is_recorded_and_the_rest_is_read(tmp_path):
    env = fake_nvml(tmp_path, {"count": 1, "gpu0.rc.nvmlDeviceGetEccMode": 3, "gpu0.rc.nvmlDeviceGetPowerUsage": 4})
    gpu = nvidia.probe_nvml(host_with(env), FAST)["nvml.gpus"].value[0]
    assert gpu["missing"]["ecc_mode"]["reason"] == "unsupported"
    assert gpu["missing"]["power_usage_mw"]["reason"] == "denied"
    assert "ecc_mode" not in gpu and gpu["temperature"] == 35 and gpu["pcie"]["width"] == 16


def test_function_missing_from_an_older_driver_degrades(tmp_path):
    env = fake_nvml(tmp_path, {"count": 1, "gpu0.clocks_reasons": 0x40},
                    omit=("nvmlDeviceGetRemappedRows", "nvmlDeviceGetCurrentClocksEventReasons",
                          "nvmlSystemGetCudaDriverVersion_v2", "nvmlDeviceGetGpuFabricInfoV"))
    r = nvidia.probe_nvml(host_with(env), FAST)
    gpu = r["nvml.gpus"].value[0]
    assert gpu["missing"]["remapped_rows"]["reason"] == "unsupported"
    assert "not exported by this driver" in gpu["missing"]["remapped_rows"]["detail"]
    # Older names are used instead of failing.
    assert gpu["clocks_event_reasons"] == 0x40
    assert r["nvml.cuda_driver_version"].value == 12080
    assert gpu["fabric"] == {"state": 0, "status": 0}


def test_lost_gpu_stops_reading_that_gpu_only(tmp_path):
    env = fake_nvml(tmp_path, {"count": 2, "gpu0.rc.nvmlDeviceGetMemoryInfo": 15,
                               "gpu1.rc.nvmlDeviceGetHandleByIndex_v2": 999})
    g0, g1 = nvidia.probe_nvml(host_with(env), FAST)["nvml.gpus"].value
    assert g0["lost"] is True and g0["name"] == "NVIDIA A100-SXM4-80GB"
    assert g0["missing"]["temperature"]["name"] == "NVML_ERROR_GPU_IS_LOST"
    assert g1["error"]["name"] == "NVML_ERROR_UNKNOWN"


def test_hanging_nvml_init_times_out_within_the_deadline_and_is_an_error(tmp_path):
    host = host_with(fake_nvml(tmp_path, {"init_hang": 1}))
    # The NVML child gets 2 x 1.0 s: room to start Python and import pynvml on a loaded machine
    # before it reaches nvmlInit (the stage the detail must name).
    options = Options(timeout=1.0)
    start = time.monotonic()
    facts, runs = run_probes(host, options, [nvidia.NVML_PROBE])
    elapsed = time.monotonic() - start
    assert elapsed < 2.0 + 3.0
    reading = facts["nvml.init"]
    assert reading.reason is Reason.TIMEOUT and "nvmlInit" in reading.detail
    assert runs[0].status == "timeout"
    finding = judge_one(driver_checks.nvml_init, dict(facts))
    assert finding.status is Status.ERROR and "hung" in finding.title


def test_crashing_nvml_init_is_reported_as_crashed(tmp_path):
    r = nvidia.probe_nvml(host_with(fake_nvml(tmp_path, {"init_crash": 1})), FAST)
    reading = r["nvml.init"]
    assert reading.reason is Reason.CRASHED and "SIGSEGV" in reading.detail and "nvmlInit" in reading.detail
    assert judge_one(driver_checks.nvml_init, r).status is Status.ERROR


# -- CUDA driver API through ctypes -------------------------------------------------------------------------
@pytest.mark.parametrize("code,name,title_part,command_part", [
    (100, "CUDA_ERROR_NO_DEVICE", "No CUDA-capable device", "nvidia-smi -L"),
    (802, "CUDA_ERROR_SYSTEM_NOT_READY", "fabric manager", "sudo systemctl enable --now nvidia-fabricmanager"),
    (999, "CUDA_ERROR_UNKNOWN", "unknown error", "sudo modprobe -r nvidia_uvm && sudo modprobe nvidia_uvm"),
    (34, "CUDA_ERROR_STUB_LIBRARY", "stub library", "grep stubs"),
    (46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "busy or unavailable", "--query-compute-apps"),
])
def test_each_cuinit_error_gets_its_own_finding(tmp_path, code, name, title_part, command_part):
    r = nvidia.probe_cuda(host_with(fake_cuda(tmp_path, {"init": code, "driver_version": 12040})), FAST)
    init = r["cuda.init"].value
    assert init["code"] == code and init["name"] == name and init["message"]
    # cuDriverGetVersion answers even when cuInit fails.
    assert r["cuda.driver_version"].value == 12040
    assert not r["cuda.device_count"].ok
    finding = judge_one(driver_checks.cuda_init, r)
    if code == 802:
        # The cause has its own check; cuda-init points at it instead of failing twice.
        assert finding.status is Status.SKIP and "fabric-manager" in finding.title
        finding = judge_one(gpu_health.fabric_manager, r)
    if code == 46:
        # busy or unavailable is the compute mode's question: gpu-compute-mode owns it (issue 21, round 2)
        assert finding.status is Status.SKIP and "gpu-compute-mode" in finding.title
        finding = judge_one(gpu_health.gpu_compute_mode, r)
    assert finding.status is Status.FAIL and title_part in finding.title
    assert any(command_part in c for c in finding.remediation.commands)
    assert init["message"] in finding.detail


def test_cuinit_success_reports_devices_and_library(tmp_path):
    r = nvidia.probe_cuda(host_with(fake_cuda(tmp_path, {"count": 4})), FAST)
    assert r["cuda.init"].value["name"] == "CUDA_SUCCESS" and r["cuda.device_count"].value == 4
    assert r["cuda.library_path"].value.endswith("/cuda/libcuda.so.1")
    assert judge_one(driver_checks.cuda_init, r).status is Status.OK


def test_forward_compat_libcuda_is_flagged_and_804_explained(tmp_path):
    compat = tmp_path / "usr" / "local" / "cuda-12.8" / "compat"
    r = nvidia.probe_cuda(host_with(fake_cuda(tmp_path, {"init": 804}, lib_dir=compat)), FAST)
    assert "/compat/" in r["cuda.library_path"].value
    finding = judge_one(driver_checks.cuda_forward_compat, r)
    assert finding.status is Status.FAIL and "804" in finding.title
    assert str(compat) in finding.detail
    assert any("compat" in c for c in finding.remediation.commands)


def test_hanging_cuinit_times_out_within_the_deadline(tmp_path):
    host = host_with(fake_cuda(tmp_path, {"init_hang": 1}))
    start = time.monotonic()
    facts, _ = run_probes(host, Options(timeout=0.8), [nvidia.CUDA_PROBE])  # 3 x 0.8 s
    assert time.monotonic() - start < 2.4 + 3.0
    assert facts["cuda.init"].reason is Reason.TIMEOUT and "cuInit" in facts["cuda.init"].detail
    # What it read before hanging survives.
    assert facts["cuda.driver_version"].value == 12080
    assert judge_one(driver_checks.cuda_init, dict(facts)).status is Status.ERROR


def test_crashing_cuinit_is_reported_as_crashed(tmp_path):
    r = nvidia.probe_cuda(host_with(fake_cuda(tmp_path, {"init_crash": 1})), FAST)
    assert r["cuda.init"].reason is Reason.CRASHED and "cuInit" in r["cuda.init"].detail
    assert judge_one(driver_checks.cuda_init, r).status is Status.ERROR


def test_no_libcuda_is_absent():
    r = nvidia.probe_cuda(Host(environ=test_env(LD_LIBRARY_PATH="/nonexistent")), FAST)
    assert r["cuda.init"].reason is Reason.ABSENT and "libcuda.so.1" in r["cuda.init"].detail


# -- files: /proc, /sys, /dev ----------------------------------------------------------------------------------
def _write(root: Path, path: str, text: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def _pci(root: Path, address: str, vendor: str, cls: str, driver: str | None, device: str = "0x2330") -> None:
    base = f"/sys/bus/pci/devices/{address}"
    _write(root, f"{base}/vendor", vendor + "\n")
    _write(root, f"{base}/class", cls + "\n")
    _write(root, f"{base}/device", device + "\n")
    if driver:
        target = root / "sys/bus/pci/drivers" / driver
        target.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / base.lstrip("/") / "driver")


def test_driver_files_on_a_working_node(tmp_path):
    _write(tmp_path, "/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
           "570.124.06  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Feb 18 2025\nGCC version:  gcc 12\n")
    _write(tmp_path, "/proc/modules", "nvidia_uvm 4927488 0 - Live 0x0\nnvidia 11534336 2 nvidia_uvm, Live 0x0\n")
    for node in ("nvidiactl", "nvidia0", "nvidia-uvm", "nvidia-uvm-tools"):
        _write(tmp_path, f"/dev/{node}", "")
    _pci(tmp_path, "0000:18:00.0", "0x10de", "0x030200", "nvidia")
    _pci(tmp_path, "0000:18:00.1", "0x10de", "0x040300", "snd_hda_intel")  # the GPU's HDMI audio: not a GPU
    _pci(tmp_path, "0000:00:00.0", "0x8086", "0x060000", None)
    r = nvidia.probe_driver(Host(environ=test_env(), root=tmp_path), FAST)
    assert r["driver.kernel_module_version"].value == "570.124.06"
    assert r["driver.modules"].value["nvidia_uvm"] is True and r["driver.modules"].value["nouveau"] is False
    assert r["driver.device_nodes"].value == {"/dev/nvidia-uvm": "ok", "/dev/nvidia-uvm-tools": "ok",
                                              "/dev/nvidia0": "ok", "/dev/nvidiactl": "ok"}
    assert thaw(r["driver.pci_gpus"].value) == [{"address": "0000:18:00.0", "vendor": "0x10de", "device": "0x2330",
                                           "class": "0x030200", "driver": "nvidia"}]
    assert r["driver.pci_scanned"].value == 3
    assert judge_one(driver_checks.device_nodes, r).status is Status.OK


def test_proprietary_module_text_and_sys_module_fallback(tmp_path):
    _write(tmp_path, "/proc/driver/nvidia/version",
           "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n")
    assert nvidia.read_kernel_module(Host(root=tmp_path)).value == "535.183.01"
    other = tmp_path / "other"
    _write(other, "/sys/module/nvidia/version", "550.90.07\n")
    assert nvidia.read_kernel_module(Host(root=other)).value == "550.90.07"


def test_gpu_on_pci_without_driver_is_named(tmp_path):
    _pci(tmp_path, "0000:01:00.0", "0x10de", "0x030000", None)
    r = nvidia.probe_driver(Host(environ=test_env(), root=tmp_path), FAST)
    assert r["driver.kernel_module_version"].reason is Reason.ABSENT
    readings = dict(r, **{"nvml.init": nvidia.ok({"code": 12, "name": "NVML_ERROR_LIBRARY_NOT_FOUND",
                                                  "message": "NVML Shared Library Not Found"}),
                          "host.container": nvidia.ok(None)})
    finding = judge_one(driver_checks.driver_installed, readings)
    assert finding.status is Status.FAIL
    assert "An NVIDIA GPU is on the PCI bus but no driver is loaded" in finding.detail
    assert "0000:01:00.0" in finding.detail
    assert any("dkms" in c for c in finding.remediation.commands)


def test_nouveau_bound_gpu_is_found(tmp_path):
    _write(tmp_path, "/proc/modules", "nouveau 2281472 1 - Live 0x0\n")
    _pci(tmp_path, "0000:01:00.0", "0x10de", "0x030000", "nouveau")
    r = nvidia.probe_driver(Host(environ=test_env(), root=tmp_path), FAST)
    assert r["driver.pci_gpus"].value[0]["driver"] == "nouveau" and r["driver.modules"].value["nouveau"] is True
    finding = judge_one(driver_checks.driver_nouveau, r)
    assert finding.status is Status.FAIL and "blacklist-nouveau.conf" in finding.remediation.commands[0]


def test_no_pci_view_is_a_reason_not_an_empty_list(tmp_path):
    r = nvidia.probe_driver(Host(environ=test_env(), root=tmp_path), FAST)
    assert r["driver.pci_gpus"].reason is Reason.ABSENT and "/sys/bus/pci/devices" in r["driver.pci_gpus"].detail
    assert r["driver.modules"].reason is Reason.ABSENT


# -- kernel log --------------------------------------------------------------------------------------------------
XID_LOG = """[    5.123456] nvidia: loading out-of-tree module taints kernel.
[ 8123.000001] NVRM: Xid (PCI:0000:18:00): 79, pid=2211, name=python, GPU has fallen off the bus.
[ 8125.100000] NVRM: Xid (PCI:0000:3b:00): 31, pid=2300, name=python, Ch 00000008, intr 10000000. MMU Fault
"""


def test_xid_events_from_dmesg(tmp_path):
    make_exe(tmp_path / "bin", "dmesg", "cat <<'EOF'\n" + XID_LOG + "EOF\n")
    host = Host(environ=test_env(PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}"))
    events = nvidia.probe_xid(host, FAST)["driver.xid_events"].value
    assert [(e["pci"], e["code"]) for e in events] == [("PCI:0000:18:00", 79), ("PCI:0000:3b:00", 31)]
    assert events[0]["text"].endswith("GPU has fallen off the bus.")


def test_dmesg_denied_is_a_reason(tmp_path):
    make_exe(tmp_path / "bin", "dmesg", "echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2\nexit 1\n")
    host = Host(environ=test_env(PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}"))
    reading = nvidia.probe_xid(host, FAST)["driver.xid_events"]
    assert reading.reason is Reason.DENIED and "dmesg_restrict" in reading.detail


def test_hanging_dmesg_times_out(tmp_path):
    make_exe(tmp_path / "bin", "dmesg", "exec sleep 60\n")
    host = Host(environ=test_env(PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}"))
    start = time.monotonic()
    reading = nvidia.probe_xid(host, Options(timeout=0.5))["driver.xid_events"]
    assert time.monotonic() - start < 4.0  # 0.5 s + reaping; the sleep lasts 60 s
    assert reading.reason is Reason.TIMEOUT


# -- visibility variables -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("raw,entries,stopped,why,hides", [
    ("0,2", [0, 2], None, None, False),
    ("", [], None, None, True),
    ("-1", [], "-1", "negative", True),
    ("0,x,2", [0], "x", "invalid", False),
    ("1,1", [], "1", "duplicate", True),
    ("1gpu,2", [1, 2], None, None, False),
    ("GPU-aaaa,GPU-bbbb,0", ["GPU-aaaa", "GPU-bbbb"], "0", "invalid", False),
    ("MIG-1234", ["MIG-1234"], None, None, False),
])
def test_cuda_visible_devices_parsing_follows_cuda(raw, entries, stopped, why, hides):
    parsed = nvidia.parse_cuda_visible_devices(raw)
    assert parsed["entries"] == entries and parsed["stopped_at"] == stopped
    assert parsed["stop_reason"] == why and parsed["hides_all"] is hides


def test_cuda_ordinals_map_to_nvml_gpus_and_stop_at_unknowns():
    gpus = [{"index": i, "name": "NVIDIA A100", "uuid": f"GPU-{i}abc", "pci_bus_id": f"0:{i}"} for i in range(3)]
    by_index = nvidia.map_cuda_devices(nvidia.parse_cuda_visible_devices("2,0,7,1"), gpus, None)
    assert [d["nvml_index"] for d in by_index["devices"]] == [2, 0] and by_index["unmatched"] == "7"
    by_uuid = nvidia.map_cuda_devices(nvidia.parse_cuda_visible_devices("GPU-1a,GPU-9"), gpus, None)
    assert [d["nvml_index"] for d in by_uuid["devices"]] == [1] and by_uuid["unmatched"] == "GPU-9"
    mixed = gpus + [{"index": 3, "name": "NVIDIA T4", "uuid": "GPU-3", "pci_bus_id": "0:3"}]
    assert nvidia.map_cuda_devices(nvidia.parse_cuda_visible_devices(None), mixed, None)["order_certain"] is False
    assert nvidia.map_cuda_devices(nvidia.parse_cuda_visible_devices(None), mixed, "PCI_BUS_ID")["order_certain"] is True


def test_container_variables():
    r = nvidia.probe_visibility(Host(environ=test_env(NVIDIA_VISIBLE_DEVICES="void",
                                                      NVIDIA_DRIVER_CAPABILITIES="utility")), FAST)
    assert r["visibility.nvidia_visible_devices"].value["mode"] == "void"
    assert list(r["visibility.nvidia_driver_capabilities"].value["missing"]) == ["compute"]
    assert r["visibility.cuda_device_order"].value is None


# -- this machine ----------------------------------------------------------------------------------------------------
def _real_nvidia_on_pci() -> bool:
    base = Path("/sys/bus/pci/devices")
    return any((d / "vendor").read_text().strip() == "0x10de" for d in base.iterdir()) if base.is_dir() else False


def test_this_machine_end_to_end_through_the_real_probes():
    """On the development/CI machine (no NVIDIA GPU, no driver): every probe says why, and
    driver-installed says it is sure. On a GPU machine: the driver is found. Nothing is error."""
    from envdoctor.registry import load_registry

    host = Host()
    start = time.monotonic()
    from envdoctor.probes import host_probe

    facts, runs = run_probes(host, Options(timeout=5.0), [*host_probe.PROBES, *nvidia.PROBES])
    assert time.monotonic() - start < 10
    specs = [s for s in load_registry(plugins=False) if s.id in _OUR_IDS]
    findings = [f for s in specs for f in judge(s, facts)]
    assert not [f for f in findings if f.status is Status.ERROR], [f.to_dict() for f in findings if f.status is Status.ERROR]
    installed = next(f for f in findings if f.id == "driver-installed")
    if Path("/proc/driver/nvidia/version").exists():
        assert installed.status is Status.OK
        return
    assert facts["driver.kernel_module_version"].reason is Reason.ABSENT
    assert facts["nvml.init"].value["name"] in ("NVML_ERROR_LIBRARY_NOT_FOUND", "NVML_ERROR_DRIVER_NOT_LOADED")
    assert facts["cuda.init"].reason is Reason.ABSENT or facts["cuda.init"].value["code"] != 0
    if not _real_nvidia_on_pci() and facts["driver.pci_gpus"].ok:
        # No NVIDIA device on the bus: a CPU-only machine, a valid setup (skipped, not warned about).
        assert installed.status is Status.SKIP and installed.title.startswith("No NVIDIA GPU on this machine")
        assert "0x10de" in installed.detail and "kernel module is not loaded" in installed.detail


_OUR_IDS = {"driver-installed", "driver-nouveau", "driver-version-mismatch", "device-nodes", "container-gpu",
            "nvml-init", "cuda-init", "cuda-visible-devices", "cuda-forward-compat", "gpu-ecc", "gpu-row-remap",
            "gpu-pcie-link", "gpu-throttle", "gpu-persistence", "gpu-compute-mode", "gpu-mig", "gpu-xid",
            "fabric-manager"}


def test_cli_exits_3_when_nvml_init_hangs(tmp_path):
    """Process level: a wedged driver makes `envdoctor check` report an error and exit 3, promptly."""
    import subprocess
    import sys

    env = fake_nvml(tmp_path, {"init_hang": 1})
    child_env = dict(os.environ, FAKE_NVML_CONFIG=env["FAKE_NVML_CONFIG"], LD_LIBRARY_PATH=env["_LIB_DIRS"],
                     ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD="1")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "envdoctor", "check", "--no-micro", "--timeout", "1",
                           "--only", "nvml-init"], capture_output=True, text=True, env=child_env, timeout=60)
    assert time.monotonic() - start < 30
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "nvmlInit" in proc.stdout


# -- NVML and cuInit in one driver child -------------------------------------------------------------------
def _driver_api(tmp_path: Path, nvml: dict[str, object], cuda: dict[str, object],
                timeout: float = 10.0) -> tuple[dict, list, float]:
    host = host_with(fake_nvml(tmp_path, nvml), fake_cuda(tmp_path, cuda))
    began = time.monotonic()
    facts, runs = run_probes(host, Options(timeout=timeout), [nvidia.DRIVER_API_PROBE])
    return dict(facts), runs, time.monotonic() - began


def test_one_driver_child_reads_nvml_and_cuinit_and_reports_two_runs(tmp_path, monkeypatch):
    started = []
    real = Host.run_child

    def counting(self, script, *args, **kw):  # type: ignore[no-untyped-def]
        started.append((script, tuple(kw.get("command") or ())[1:2]))
        return real(self, script, *args, **kw)

    monkeypatch.setattr(Host, "run_child", counting)
    facts, runs, _ = _driver_api(tmp_path, {"count": 2}, {"count": 2})
    assert started == [("driver_probe", ("-S",))]  # one child, without site: pynvml's folder is passed
    assert [(r.name, r.status.value) for r in runs] == [("nvml", "ok"), ("cuda-driver", "ok")]
    assert facts["nvml.init"].value["code"] == 0 and len(facts["nvml.gpus"].value) == 2
    assert facts["nvml.library_path"].value.endswith("libnvidia-ml.so.1")
    # The two probes' records do not overwrite each other: each has its own init and library.
    assert facts["cuda.init"].value["name"] == "CUDA_SUCCESS" and facts["cuda.device_count"].value == 2
    assert facts["cuda.library_path"].value.endswith("/cuda/libcuda.so.1")


def test_a_hung_nvml_init_leaves_cuinit_reported_and_is_named_at_its_own_deadline(tmp_path):
    facts, runs, seconds = _driver_api(tmp_path, {"init_hang": 1}, {"count": 1}, timeout=1.0)
    assert seconds < 2.0 + 1.5  # NVML's deadline (2 x 1.0 s), not cuInit's (3 x 1.0 s)
    assert facts["nvml.init"].reason is Reason.TIMEOUT and "nvmlInit" in facts["nvml.init"].detail
    assert facts["cuda.init"].value["name"] == "CUDA_SUCCESS" and facts["cuda.device_count"].value == 1
    assert {r.name: r.status.value for r in runs} == {"nvml": "timeout", "cuda-driver": "ok"}


def test_a_hung_cuinit_leaves_nvml_reported(tmp_path):
    facts, runs, _ = _driver_api(tmp_path, {"count": 2}, {"init_hang": 1}, timeout=1.0)
    assert facts["cuda.init"].reason is Reason.TIMEOUT and "cuInit" in facts["cuda.init"].detail
    assert facts["cuda.driver_version"].value == 12080  # read before the hang
    assert facts["nvml.gpus"].ok and len(facts["nvml.gpus"].value) == 2
    assert {r.name: r.status.value for r in runs} == {"nvml": "ok", "cuda-driver": "timeout"}


@pytest.mark.parametrize("crashing", ["nvml", "cuda"])
def test_a_crash_in_one_driver_call_is_that_probes_and_the_other_still_reports(tmp_path, crashing):
    facts, runs, _ = _driver_api(tmp_path, {"count": 2, "init_crash": int(crashing == "nvml")},
                                 {"count": 2, "init_crash": int(crashing == "cuda")})
    crashed, fine = ("nvml.init", "cuda.init") if crashing == "nvml" else ("cuda.init", "nvml.init")
    assert facts[crashed].reason is Reason.CRASHED and "SIGSEGV" in facts[crashed].detail
    assert ("nvmlInit" if crashing == "nvml" else "cuInit") in facts[crashed].detail
    assert facts[fine].ok
    assert (facts["nvml.gpus"] if crashing == "cuda" else facts["cuda.device_count"]).ok


def test_a_hang_in_nvml_shutdown_in_the_driver_child_is_reported_with_everything_read(tmp_path):
    facts, runs, seconds = _driver_api(tmp_path, {"count": 2, "shutdown_hang": 1}, {"count": 2}, timeout=5.0)
    assert seconds < 2.0 + 4.0  # the cleanup grace, not the 10 s deadline
    assert facts["nvml.gpus"].ok and len(facts["nvml.gpus"].value) == 2
    shutdown = facts["nvml.init"].value["shutdown"]
    assert shutdown["status"] == "timeout" and shutdown["call"] == "nvmlShutdown"
    assert facts["cuda.init"].ok


def test_without_site_the_driver_child_still_finds_pynvml(tmp_path):
    import sys

    from envdoctor.process.host import CHILD_DIR

    # -S and no folder passed (or a wrong one): the child sets site up itself and imports pynvml.
    host = host_with(fake_nvml(tmp_path, {"count": 1}))
    args = {"nvml": {"codes": {}}, "deadlines": {"nvml": 10.0}}
    command = [sys.executable, "-S", str(CHILD_DIR / "driver_probe.py"), "-", str(tmp_path / "nowhere")]
    result = host.run_child("driver_probe", args, timeout=15.0, command=command)
    assert result.ok and result.data["nvml.init"]["code"] == 0, result


def test_a_target_interpreter_other_than_envdoctors_gets_cuinit_in_its_own_child(tmp_path, monkeypatch):
    # NVML needs nvidia-ml-py (envdoctor's interpreter); cuInit runs in the target's.
    import sys

    target = tmp_path / "python3"
    target.symlink_to(sys.executable)
    seen = []
    real = Host.run_child

    def recording(self, script, args=None, **kw):  # type: ignore[no-untyped-def]
        seen.append((kw.get("python"), sorted(k for k in ("nvml", "cuda") if k in args)))
        return real(self, script, args, **kw)

    monkeypatch.setattr(Host, "run_child", recording)
    host = host_with(fake_nvml(tmp_path, {"count": 1}), fake_cuda(tmp_path, {"count": 1}))
    r = nvidia.probe_driver_api(host, Options(timeout=10.0, python=str(target)))
    assert sorted(seen) == sorted([(sys.executable, ["nvml"]), (str(target), ["cuda"])])
    assert r["nvml.device_count"].value == 1 and r["cuda.device_count"].value == 1


def test_a_venvs_python_and_python3_are_one_interpreter_for_the_driver_child(tmp_path):
    import sys

    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python3").symlink_to(sys.executable)
    (bin_dir / "python").symlink_to("python3")
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    (elsewhere / "python3").symlink_to(sys.executable)
    assert nvidia.same_interpreter(str(bin_dir / "python"), str(bin_dir / "python3"))
    # One binary from another folder can be another environment (a venv is found from the path's folder).
    assert not nvidia.same_interpreter(str(bin_dir / "python3"), str(elsewhere / "python3"))
    assert not nvidia.same_interpreter(str(bin_dir / "python3"), "/nonexistent/python3")
