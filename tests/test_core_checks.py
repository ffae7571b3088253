"""Facts-level tests of the core checks: healthy facts, change one thing, judge."""

from __future__ import annotations

from envdoctor.checks import host as host_checks
from envdoctor.checks import torch_build

from envdoctor.model import Reason, Status, missing, ok

from .builders import facts
from .judging import judge_one


def test_healthy_node_is_ok_everywhere():
    f = facts()
    for spec in (host_checks.shm_size, host_checks.container, host_checks.resources, host_checks.env_vars,
                 torch_build.torch_import, torch_build.torch_cpu_build, torch_build.torch_cuda_available):
        assert judge_one(spec, f).status is Status.OK, spec.id


def test_docker_default_shm_warns_with_the_docker_remedy():
    finding = judge_one(host_checks.shm_size, facts(host__shm_size=64 << 20, host__container="docker"))
    assert finding.status is Status.WARN and "64 MiB" in finding.title
    assert "Docker's default" in finding.detail and "bus error" in finding.detail
    assert "docker run --shm-size=16g …" in finding.remediation.commands


def test_kubernetes_small_shm_gets_an_emptydir_remedy():
    finding = judge_one(host_checks.shm_size, facts(host__shm_size=64 << 20, host__container="kubernetes"))
    assert finding.status is Status.WARN and "emptyDir" in finding.remediation.commands[0]


def test_cpu_quota_below_cpu_count_warns_with_thread_count():
    finding = judge_one(host_checks.resources, facts(host__cgroup_cpu_limit=4.0))
    assert finding.status is Status.WARN and "export OMP_NUM_THREADS=4" in finding.remediation.commands


def test_env_vars_left_over_from_debugging():
    finding = judge_one(host_checks.env_vars, facts(env__vars={"CUDA_LAUNCH_BLOCKING": "1", "NCCL_P2P_DISABLE": "1"}))
    assert finding.status is Status.WARN
    assert {"unset CUDA_LAUNCH_BLOCKING", "unset NCCL_P2P_DISABLE"} <= set(finding.remediation.commands)


def test_torch_missing_is_a_warning_with_an_install_command():
    finding = judge_one(torch_build.torch_import,
                    facts(torch__version=missing(Reason.ABSENT, detail="no torch"), python__packages={}))
    assert finding.status is Status.WARN
    [command] = finding.remediation.commands
    # A pinned release whose wheel carries sm_90 and whose CUDA the 570 driver (CUDA 12.8) runs.
    assert command.startswith("/opt/venv/bin/python -m pip install torch==2.")
    assert command.endswith(("whl/cu126", "whl/cu128"))


def test_torch_import_error_shows_the_text_and_a_remedy():
    from envdoctor.probes.python_probe import _loader_failures

    text = "OSError: libcudart.so.12: cannot open shared object file: No such file or directory"
    failed = {"torch.version": missing(Reason.FAILED, detail=text)}
    # the python probe reads the loader failures out of torch's import error, beside the failed version
    f = facts(torch__version=failed["torch.version"]).merged({"torch.loader_failures": _loader_failures(failed)})
    finding = judge_one(torch_build.torch_import, f)
    assert finding.status is Status.FAIL and finding.detail == text
    assert "LD_LIBRARY_PATH" in finding.remediation.text
    assert "--index-url https://download.pytorch.org/whl/cu126" in finding.remediation.commands[0]


def test_torch_probe_timeout_is_an_error_not_a_failure():
    finding = judge_one(torch_build.torch_import, facts(torch__version=missing(Reason.TIMEOUT, detail="stuck")))
    assert finding.status is Status.ERROR


def test_cpu_build_with_a_gpu_present_fails_with_the_exact_reinstall():
    f = facts(torch__version="2.6.0+cpu").merged({"torch.cuda_version": ok(None)})
    finding = judge_one(torch_build.torch_cpu_build, f)
    assert finding.status is Status.FAIL and "NVML sees 1 GPU" in finding.detail
    # torch 2.6 is offered for cu118/cu124/cu126 only; cu126 is the newest the 570 driver runs.
    assert any(c.endswith("pip install torch==2.6.0 --index-url https://download.pytorch.org/whl/cu126")
               for c in finding.remediation.commands)


def test_cpu_build_without_any_gpu_only_warns():
    f = facts(torch__version="2.13.0+cpu", nvml__device_count=0, nvml__gpus=[], driver__pci_gpus=[],
              torch__devices=[]).merged({"torch.cuda_version": ok(None)})
    finding = judge_one(torch_build.torch_cpu_build, f)
    assert finding.status is Status.WARN


def test_cuda_not_available_quotes_torchs_own_message():
    msg = ("CUDA initialization: The NVIDIA driver on your system is too old (found version 11040). "
           "Please update your GPU driver")
    finding = judge_one(torch_build.torch_cuda_available,
                    facts(torch__cuda_available=False, torch__cuda_available_messages=[msg], torch__device_count=0))
    assert finding.status is Status.FAIL and msg in finding.detail


def test_host_checks_skip_what_a_paste_does_not_contain():
    gone = missing(Reason.NOT_IN_REPORT, "collect_env", "the pasted report does not include it")
    f = facts(host__shm_size=gone, host__cgroup_cpu_limit=gone, host__cgroup_memory_limit=gone, env__vars=gone)
    for spec in (host_checks.shm_size, host_checks.resources, host_checks.env_vars):
        assert judge_one(spec, f).status is Status.SKIP, spec.id


def test_cuda_build_tag_decides_when_torch_version_cuda_is_not_in_the_report():
    gone = missing(Reason.NOT_IN_REPORT, "collect_env", "the pasted report does not include it")
    # A GPU is present; torch.version.cuda is merely absent from the paste: +cu126 says CUDA build.
    assert judge_one(torch_build.torch_cpu_build, facts(torch__cuda_version=gone)).status is Status.OK
    # No tag at all: nothing to judge, never "CPU-only build".
    untagged = judge_one(torch_build.torch_cpu_build, facts(torch__version="2.6.0", torch__cuda_version=gone))
    assert untagged.status is Status.SKIP and "not_in_report" in untagged.detail
    # +cpu still judges the CPU build.
    cpu = judge_one(torch_build.torch_cpu_build, facts(torch__version="2.6.0+cpu", torch__cuda_version=gone))
    assert cpu.status is Status.FAIL


def test_cuda_available_not_in_report_skips_instead_of_failing():
    gone = missing(Reason.NOT_IN_REPORT, "collect_env", "the pasted report does not include it")
    finding = judge_one(torch_build.torch_cuda_available, facts(torch__cuda_available=gone))
    assert finding.status is Status.SKIP and "not_in_report" in finding.detail


def test_cuda_unavailable_remedies_use_the_target_python():
    finding = judge_one(torch_build.torch_cuda_available,
                    facts(torch__cuda_available=False, torch__cuda_available_messages=["no"], torch__device_count=0))
    assert finding.remediation.commands == (
        "/opt/venv/bin/python -c \"import torch; print(torch.cuda.is_available(), torch.cuda.device_count())\"",)


def test_cuda_build_on_a_machine_without_gpu_warns_with_a_cpu_wheel_remedy():
    f = facts(torch__cuda_available=False, torch__device_count=0, torch__devices=[], nvml__device_count=0,
              nvml__gpus=[], driver__pci_gpus=[])
    finding = judge_one(torch_build.torch_cuda_available, f)
    assert finding.status is Status.WARN
    assert ("/opt/venv/bin/python -m pip install --force-reinstall torch==2.6.0 "
            "--index-url https://download.pytorch.org/whl/cpu") in finding.remediation.commands


def test_rocm_build_remedy_installs_into_the_target_python():
    f = facts(torch__version="2.6.0+rocm6.2", torch__hip_version="6.2").merged({"torch.cuda_version": ok(None)})
    finding = judge_one(torch_build.torch_cpu_build, f)
    assert finding.status is Status.WARN
    [command] = finding.remediation.commands
    assert command.startswith("/opt/venv/bin/python -m pip install --force-reinstall torch==")
    assert "--index-url https://download.pytorch.org/whl/cu" in command


def test_torch_probe_timeout_remedy_names_the_interpreter():
    finding = judge_one(torch_build.torch_import, facts(torch__version=missing(Reason.TIMEOUT, detail="stuck")))
    assert finding.remediation.commands[0].startswith("/opt/venv/bin/python -X faulthandler -c ")
