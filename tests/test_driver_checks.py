"""Facts-level tests of the driver, NVML, CUDA-init, visibility and container checks: healthy
NVIDIA facts, change one thing, judge."""

from __future__ import annotations

import pytest
from envdoctor.checks import driver as d

from envdoctor.model import Reason, Status, missing
from envdoctor.probes.nvidia import map_cuda_devices, parse_cuda_visible_devices

from .fakes.nvidia_facts import healthy_gpu, nv_facts
from .judging import judge, judge_one

ALL = (d.driver_installed, d.driver_nouveau, d.driver_version_mismatch, d.device_nodes, d.container_gpu,
       d.nvml_bindings, d.nvml_init, d.cuda_init, d.cuda_visible_devices, d.cuda_forward_compat)


def no_driver(**changes):
    absent = missing(Reason.ABSENT, "x", "the nvidia kernel module is not loaded")
    base = dict(driver__kernel_module_version=absent,
                nvml__init={"code": 12, "name": "NVML_ERROR_LIBRARY_NOT_FOUND", "message": "NVML Shared Library Not Found"},
                nvml__driver_version=missing(Reason.ABSENT), nvml__device_count=missing(Reason.ABSENT),
                nvml__gpus=missing(Reason.ABSENT), nvml__library_path=missing(Reason.ABSENT),
                cuda__init=missing(Reason.ABSENT, "x", "libcuda.so.1 cannot be loaded"),
                cuda__library_path=missing(Reason.ABSENT), driver__device_nodes={"/dev/nvidiactl": "absent",
                                                                                 "/dev/nvidia-uvm": "absent"},
                visibility__cuda_devices=missing(Reason.ABSENT))
    base.update(changes)
    return nv_facts(**base)


def test_healthy_node_passes_every_driver_check():
    for spec in ALL:
        finding = judge_one(spec, nv_facts())
        assert finding.status in (Status.OK, Status.SKIP), (spec.id, finding.to_dict())
    assert judge_one(d.driver_installed, nv_facts()).title == "NVIDIA driver 570.124.06 is loaded"


def test_no_gpu_no_driver_says_why_it_is_sure():
    finding = judge_one(d.driver_installed, no_driver(driver__pci_gpus=[], driver__pci_scanned=12))
    assert finding.status is Status.WARN and finding.title == "No NVIDIA GPU and no NVIDIA driver on this machine"
    assert "none of the 12 PCI devices" in finding.detail and "0x10de" in finding.detail
    for spec in (d.nvml_init, d.cuda_init, d.device_nodes, d.cuda_forward_compat):
        assert judge_one(spec, no_driver(driver__pci_gpus=[])).status is Status.SKIP, spec.id


def test_no_driver_without_pci_view_is_not_claimed_certain():
    finding = judge_one(d.driver_installed, no_driver(driver__pci_gpus=missing(Reason.ABSENT, "x", "no /sys/bus/pci")))
    assert finding.status is Status.WARN and "unknown" in finding.detail


def test_driver_visible_only_through_nvml_counts_as_loaded():
    # Sandboxes and some containers hide /proc/driver/nvidia while NVML works.
    f = nv_facts(driver__kernel_module_version=missing(Reason.ABSENT))
    assert judge_one(d.driver_installed, f).status is Status.OK


def test_container_without_gpu_gets_the_runtime_remedy():
    f = no_driver(host__container="docker", driver__pci_gpus=[{"address": "0000:18:00.0", "vendor": "0x10de",
                                                               "device": "0x2330", "class": "0x030200",
                                                               "driver": "nvidia"}])
    finding = judge_one(d.container_gpu, f)
    assert finding.status is Status.FAIL and finding.title == "The container has no GPU attached"
    assert "docker run --gpus all …   # or CDI: --device nvidia.com/gpu=all" in finding.remediation.commands
    assert any("nvidia-ctk runtime configure" in c for c in finding.remediation.commands)


def test_container_unknown_error_with_nodes_is_lost_cgroup_access():
    f = nv_facts(host__container="docker", nvml__init={"code": 999, "name": "NVML_ERROR_UNKNOWN", "message": "Unknown Error"})
    finding = judge_one(d.container_gpu, f)
    assert finding.status is Status.FAIL and "lost access" in finding.title
    assert "sudo nvidia-ctk system create-dev-char-symlinks --create-all   # on the host" in finding.remediation.commands


def test_container_without_compute_capability():
    f = nv_facts(host__container="docker", visibility__nvidia_driver_capabilities={
        "raw": "utility", "capabilities": ["utility"], "default": False, "missing": ["compute"]})
    finding = judge_one(d.container_gpu, f)
    assert finding.status is Status.FAIL and "compute" in finding.title


def test_not_in_container_skips_container_gpu():
    assert judge_one(d.container_gpu, nv_facts()).status is Status.SKIP


def test_kernel_module_userspace_skew_without_nvml_error():
    f = nv_facts(nvml__library_path="/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.133.20",
                 nvml__driver_version="570.133.20")
    finding = judge_one(d.driver_version_mismatch, f)
    assert finding.status is Status.FAIL and "570.133.20" in finding.detail and "570.124.06" in finding.detail
    assert any("apt-mark hold" in c for c in finding.remediation.commands)


def test_forward_compat_libcuda_is_not_called_a_mismatch():
    f = nv_facts(cuda__library_path="/usr/local/cuda-12.8/compat/libcuda.so.570.86.10")
    assert judge_one(d.driver_version_mismatch, f).status is Status.OK
    compat = judge_one(d.cuda_forward_compat, f)
    assert compat.status is Status.OK and "forward-compatibility" in compat.title


def test_cuda_803_is_a_driver_mismatch():
    f = nv_facts(cuda__init={"code": 803, "name": "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
                             "message": "system has unsupported display driver / cuda driver combination"})
    assert judge_one(d.driver_version_mismatch, f).status is Status.FAIL
    assert judge_one(d.cuda_init, f).title == "CUDA: driver mismatch (803)"


def test_nouveau_loaded_without_nvidia():
    f = nv_facts(driver__modules={"nvidia": False, "nvidia_uvm": False, "nouveau": True},
                 driver__kernel_module_version=missing(Reason.ABSENT))
    assert judge_one(d.driver_nouveau, f).status is Status.FAIL
    ok_f = nv_facts(driver__modules={"nvidia": True, "nvidia_uvm": True, "nouveau": True})
    assert judge_one(d.driver_nouveau, ok_f).status is Status.OK


def test_device_nodes_missing_uvm_and_denied():
    f = nv_facts(driver__device_nodes={"/dev/nvidiactl": "ok", "/dev/nvidia0": "denied", "/dev/nvidia-uvm": "absent"})
    finding = judge_one(d.device_nodes, f)
    assert finding.status is Status.FAIL
    assert "/dev/nvidia-uvm" in finding.detail and "cannot open /dev/nvidia0" in finding.detail
    assert "sudo nvidia-modprobe -u -c 0   # loads nvidia_uvm and creates /dev/nvidia-uvm" in finding.remediation.commands


def test_deprecated_pynvml_distribution_warns_with_the_swap():
    f = nv_facts(python__packages={"torch": "2.6.0+cu126", "pynvml": "12.0.0", "nvidia-ml-py": "12.570.86"})
    finding = judge_one(d.nvml_bindings, f)
    assert finding.status is Status.WARN and "pynvml 12.0.0" in finding.detail
    assert finding.remediation.commands == ("/opt/venv/bin/python -m pip uninstall -y pynvml nvidia-ml-py",
                                            "/opt/venv/bin/python -m pip install -U nvidia-ml-py")


def test_nvml_library_missing_while_kernel_module_loaded():
    f = nv_facts(nvml__init={"code": 12, "name": "NVML_ERROR_LIBRARY_NOT_FOUND", "message": "x"},
                 nvml__driver_version=missing(Reason.ABSENT))
    finding = judge_one(d.nvml_init, f)
    assert finding.status is Status.FAIL and "sudo apt install libnvidia-compute-570" in finding.remediation.commands


def test_nvml_timeout_is_an_error_even_without_running_the_child():
    f = nv_facts(nvml__init=missing(Reason.TIMEOUT, "child:nvml_probe", "no answer within 10.0 s (stuck in nvmlInit)"))
    finding = judge_one(d.nvml_init, f)
    assert finding.status is Status.ERROR and "stuck in nvmlInit" in finding.detail


def test_nvml_handle_error_for_one_gpu_warns():
    gpus = [healthy_gpu(0), {"index": 1, "error": {"code": 15, "name": "NVML_ERROR_GPU_IS_LOST", "message": "GPU is lost"},
                             "missing": {}}]
    finding = judge_one(d.nvml_init, nv_facts(gpus=gpus))
    assert finding.status is Status.WARN and finding.gpus == (1,)


def test_cuda_35_runtime_code_is_explained():
    f = nv_facts(cuda__init={"code": 35, "name": "cudaErrorInsufficientDriver",
                             "message": "CUDA driver version is insufficient for CUDA runtime version"})
    # cuda-init names the check that owns it; driver-too-old fails with the explanation.
    assert judge_one(d.cuda_init, f).status is Status.SKIP and "driver-too-old" in judge_one(d.cuda_init, f).title
    from envdoctor.checks import compat as c
    found = [x for x in judge(c.driver_too_old, f) if x.status is Status.FAIL]
    assert found and "error 35" in found[0].title


def test_libcuda_missing_with_driver_loaded_fails():
    f = nv_facts(cuda__init=missing(Reason.ABSENT, "x", "libcuda.so.1 cannot be loaded"))
    assert judge_one(d.cuda_init, f).status is Status.FAIL


def _cvd(raw, gpus=None, order=None):
    gpus = gpus or [healthy_gpu(0), healthy_gpu(1)]
    parsed = parse_cuda_visible_devices(raw)
    return nv_facts(gpus=gpus, visibility__cuda_visible_devices=parsed, visibility__cuda_device_order=order,
                    visibility__cuda_devices=map_cuda_devices(parsed, gpus, order))


def test_cuda_visible_devices_hiding_everything_fails():
    for raw in ("", "-1", "0,0"):
        finding = judge_one(d.cuda_visible_devices, _cvd(raw))
        assert finding.status is Status.FAIL and "hides every GPU" in finding.title, raw
        assert "unset CUDA_VISIBLE_DEVICES" in finding.remediation.commands


def test_cuda_visible_devices_truncation_and_out_of_range():
    finding = judge_one(d.cuda_visible_devices, _cvd("1,x,0"))
    assert finding.status is Status.WARN and "'x'" in finding.detail and "'0'" in finding.detail
    finding = judge_one(d.cuda_visible_devices, _cvd("0,5,1"))
    assert finding.status is Status.WARN and "'5' matches no GPU" in finding.detail


def test_cuda_visible_devices_ok_names_the_mapping():
    finding = judge_one(d.cuda_visible_devices, _cvd("1"))
    assert finding.status is Status.OK and "cuda:0 = GPU 1" in finding.detail and finding.gpus == (1,)


def test_heterogeneous_gpus_without_device_order_warn():
    gpus = [healthy_gpu(0, name="NVIDIA GeForce RTX 3060"), healthy_gpu(1, name="NVIDIA GeForce RTX 4090")]
    finding = judge_one(d.cuda_visible_devices, _cvd(None, gpus))
    assert finding.status is Status.WARN and "export CUDA_DEVICE_ORDER=PCI_BUS_ID" in finding.remediation.commands
    assert judge_one(d.cuda_visible_devices, _cvd(None, gpus, "PCI_BUS_ID")).status is Status.OK


def test_findings_round_trip_through_json():
    from envdoctor.model import Facts, Finding

    f = no_driver(driver__pci_gpus=[])
    again = Facts.from_dict(f.to_dict())
    for spec in ALL:
        a, b = judge_one(spec, f), judge_one(spec, again)
        assert a.to_dict() == b.to_dict() == Finding.from_dict(a.to_dict()).to_dict()



def _paste_like(**changes):
    """What an nvidia-smi paste gives: NVML's answer and nothing about /proc, /sys or /dev."""
    gone = missing(Reason.NOT_IN_REPORT, "nvidia-smi", "the pasted report does not include it")
    base = dict.fromkeys(("driver__kernel_module_version", "driver__pci_gpus", "driver__device_nodes",
                          "nvml__driver_version", "nvml__gpus", "nvml__device_count", "host__container",
                          "cuda__init", "cuda__library_path"), gone)
    return nv_facts(**{**base, **changes})


def test_driver_not_loaded_from_nvml_alone_is_a_failed_install():
    f = _paste_like(nvml__init={"code": 9, "name": "NVML_ERROR_DRIVER_NOT_LOADED", "reason": "absent",
                                "message": "couldn't communicate with the NVIDIA driver"})
    finding = judge_one(d.driver_installed, f)
    assert finding.status is Status.FAIL and "kernel module is not loaded" in finding.title
    assert any("dkms autoinstall" in c for c in finding.remediation.commands)


def test_unknown_error_in_a_container_is_lost_cgroup_access_even_without_node_facts():
    f = _paste_like(nvml__init={"code": 999, "name": "NVML_ERROR_UNKNOWN", "reason": "failed",
                                "message": "Unknown Error"}, host__container="docker")
    finding = judge_one(d.container_gpu, f)
    assert finding.status is Status.FAIL and "lost access" in finding.title
    assert "docker restart <container>   # immediate fix" in finding.remediation.commands


# -- remediations are copy-pasteable: concrete values from the facts, no <placeholders> ----------------
def _no_placeholder(finding):
    import re

    for command in finding.remediation.commands:
        assert not re.search(r"<[a-z][^<>]*>", command), command


def test_gpu_on_the_bus_without_driver_names_the_driver_torch_needs():
    f = no_driver(driver__pci_gpus=[{"address": "0000:07:00.0", "vendor": "0x10de", "device": "0x20b2",
                                     "class": "0x030200", "driver": None}])
    finding = judge_one(d.driver_installed, f)
    assert finding.status is Status.FAIL
    # torch 2.6.0+cu126 -> CUDA 12.6 -> the 12.6 GA driver.
    assert "(CUDA 12.6) needs driver 560." in finding.remediation.text
    _no_placeholder(finding)


def test_nvml_hang_remedy_resets_the_gpus_the_facts_name():
    f = nv_facts(nvml__init=missing(Reason.TIMEOUT, "child:nvml_probe", "stuck in nvmlInit"))
    finding = judge_one(d.nvml_init, f)
    assert finding.status is Status.ERROR
    assert "sudo nvidia-smi -r -i 1   # when nothing runs on it; otherwise: sudo reboot" in finding.remediation.commands
    _no_placeholder(finding)
    # No NVML list (it hung before listing): the PCI address, which nvidia-smi -i also takes.
    f = nv_facts(nvml__gpus=missing(Reason.TIMEOUT), cuda__init=missing(Reason.TIMEOUT, "child:cuda_probe", "cuInit"))
    finding = judge_one(d.cuda_init, f)
    assert any(c.startswith("sudo nvidia-smi -r -i 0000:07:00.0") for c in finding.remediation.commands)


def test_crash_remedies_use_the_target_python_and_a_runnable_branch():
    f = nv_facts(cuda__init=missing(Reason.CRASHED, "child:cuda_probe", "SIGSEGV in cuInit"),
                 driver__kernel_module_version=missing(Reason.DENIED), nvml__driver_version=missing(Reason.FAILED))
    finding = judge_one(d.cuda_init, f)
    assert finding.status is Status.ERROR
    assert any(c.startswith("/opt/venv/bin/python -X faulthandler -c ") for c in finding.remediation.commands)
    assert "sudo apt install --reinstall libnvidia-compute-$(modinfo -F version nvidia | cut -d. -f1)" in \
        finding.remediation.commands
    _no_placeholder(finding)


def test_missing_nvml_bindings_in_envdoctor_skip_rather_than_warn():
    f = nv_facts(nvml__init=missing(Reason.ABSENT, "child:nvml_probe", "No module named 'pynvml'"))
    finding = judge_one(d.nvml_init, f)
    assert finding.status is Status.SKIP and "nvidia-ml-py" in finding.detail


def test_unknown_init_codes_get_a_specific_remedy_and_the_code_list():
    f = nv_facts(nvml__init={"code": 3, "name": "NVML_ERROR_NOT_SUPPORTED", "message": "Not Supported"})
    finding = judge_one(d.nvml_init, f)
    assert finding.status is Status.FAIL and "NVML_ERROR_NOT_SUPPORTED" in finding.remediation.text
    assert d.NVML_RETURN_CODES in finding.remediation.links
    f = nv_facts(cuda__init={"code": 200, "name": "CUDA_ERROR_INVALID_IMAGE", "message": "device kernel image is invalid"})
    finding = judge_one(d.cuda_init, f)
    assert finding.status is Status.FAIL and "CUDA_ERROR_INVALID_IMAGE" in finding.remediation.text
    assert d.CUDA_RESULT_CODES in finding.remediation.links


def test_malformed_cuda_visible_devices_suggests_the_value_it_meant():
    finding = judge_one(d.cuda_visible_devices, _cvd("0,5,1"))
    assert finding.status is Status.WARN and finding.gpus == (0,)
    assert any(c.startswith("export CUDA_VISIBLE_DEVICES=0,1 ") for c in finding.remediation.commands)
    finding = judge_one(d.cuda_visible_devices, _cvd("1, x,0"))
    assert any(c.startswith("export CUDA_VISIBLE_DEVICES=1,0 ") for c in finding.remediation.commands)


def _judge_paste(text: str) -> dict:
    from envdoctor.model import Status
    from envdoctor.parsers import parse_text
    from envdoctor.pipeline.diagnose import diagnose
    from envdoctor.registry import load_registry

    findings = {f.id: f for f in diagnose(parse_text(text), load_registry(plugins=False))}
    return {"fails": [i for i, f in findings.items() if f.status is Status.FAIL], "by_id": findings}


@pytest.mark.parametrize("line", ["bash: nvidia-smi: command not found", "/bin/sh: 1: nvidia-smi: not found",
                                  "'nvidia-smi' is not recognized as an internal or external command,"])
def test_a_shell_that_cannot_find_nvidia_smi_is_no_driver_there(line: str) -> None:
    judged = _judge_paste(f"$ nvidia-smi\n{line}\n")
    assert judged["fails"] == ["driver-installed"], judged["fails"]
    finding = judged["by_id"]["driver-installed"]
    assert "nvidia-smi is not found" in finding.title and line.strip(",") in finding.detail
    assert any("ubuntu-drivers" in c for c in finding.remediation.commands)


def test_nvidia_smi_missing_beside_a_working_driver_is_a_container_without_its_gpus() -> None:
    text = ("> NVIDIA-SMI 450.51.05    Driver Version: 450.51.05    CUDA Version: 11.0\n"
            '"/bin/bash: nvidia-smi: command not found"\n')
    judged = _judge_paste(text)
    assert judged["fails"] == ["container-gpu"], judged["fails"]
    assert any("--gpus all" in c for c in judged["by_id"]["container-gpu"].remediation.commands)


def test_an_nvidia_smi_that_ran_writes_no_not_found_fact() -> None:
    from envdoctor.parsers import parse_text

    facts = parse_text("| NVIDIA-SMI 570.86.10              Driver Version: 570.86.10      CUDA Version: 12.8     |\n")
    assert "nvml.smi_not_found" not in facts or not facts["nvml.smi_not_found"].ok
