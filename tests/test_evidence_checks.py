"""The evidence a ticket's lines carry (DataLoader shm, NCCL bootstrap, Xid 79, launch lines,
extension builds, Windows DLLs) becomes facts, and checks/evidence.py judges them with an exact remedy."""

from __future__ import annotations

import pytest

from envdoctor.model import Status
from envdoctor.parsers import parse_text
from envdoctor.pipeline.diagnose import diagnose, sort_findings
from envdoctor.registry import load_registry


def _top(text: str):  # type: ignore[no-untyped-def]
    findings = sort_findings(diagnose(parse_text(text), load_registry(plugins=False)))
    fails = [f for f in findings if f.status is Status.FAIL]
    return fails[0] if fails else None


def test_a_dataloader_bus_error_in_a_kubernetes_pod_gets_a_memory_emptydir() -> None:
    text = ("$ kubectl logs trainer-0\nRuntimeError: DataLoader worker (pid 4211) is killed by signal: Bus error. "
            "It is possible that dataloader's workers are out of shared memory.\n")
    top = _top(text)
    assert top is not None and top.id == "dataloader-shm"
    assert "medium: Memory" in top.remediation.commands[0]


def test_unable_to_write_a_torch_shm_file_in_docker_gets_shm_size() -> None:
    text = "root@0123456789ab:/ws# python train.py\nRuntimeError: unable to write to file </torch_81_2279834148_0>\n"
    top = _top(text)
    assert top is not None and top.id == "dataloader-shm"
    assert top.remediation.commands == ("docker run --shm-size=16g …", "docker run --ipc=host …")


def test_nccl_without_a_socket_interface_names_the_forced_ifname() -> None:
    text = ("host:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ib0\n"
            "host:1:1 [0] bootstrap.cc:37 NCCL WARN Bootstrap : no socket interface found\n")
    top = _top(text)
    assert top is not None and top.id == "nccl-socket-interface"
    assert any(c.startswith("unset NCCL_SOCKET_IFNAME") and "'ib0'" in c for c in top.remediation.commands)


@pytest.mark.parametrize("line, pci", [
    ("[ 12.3] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "0000:3b:00"),
    ("Jun 02 kernel: NVRM: GPU at PCI:0000:c1:00: has fallen off the bus.", None),
])
def test_xid_79_and_fallen_off_the_bus_are_the_kernel_log_probes_facts(line: str, pci: str | None) -> None:
    top = _top(line + "\n")
    assert top is not None and top.id == "gpu-xid"
    assert "Xid 79" in top.remediation.text
    if pci:
        assert pci in top.detail


def test_an_application_xid_is_a_warning_not_a_fallen_gpu() -> None:
    facts = parse_text("[ 5.1] NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception\n")
    found = [f for f in diagnose(facts, load_registry(plugins=False)) if f.id == "gpu-xid"]
    assert found and found[0].status is Status.WARN


def test_more_ranks_than_visible_gpus_rewrites_the_launch_line() -> None:
    top = _top("CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node=4 train.py --cfg a.yaml\n")
    assert top is not None and top.id == "launch-ranks"
    assert top.remediation.commands == ("CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node=2 train.py --cfg a.yaml",)


def test_as_many_ranks_as_gpus_is_fine_and_no_count_skips() -> None:
    registry = load_registry(plugins=False)
    fine = [f for f in diagnose(parse_text("CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node=2 t.py\n"), registry)
            if f.id == "launch-ranks"]
    assert fine[0].status is Status.OK
    unknown = [f for f in diagnose(parse_text("torchrun --nproc_per_node=8 t.py\n"), registry) if f.id == "launch-ranks"]
    assert unknown[0].status is Status.SKIP


def test_cuda_home_missing_installs_torchs_own_cuda() -> None:
    text = ("torch: 2.3.1+cu121\nOSError: CUDA_HOME environment variable is not set. "
            "Please set it to your CUDA install root.\n")
    top = _top(text)
    assert top is not None and top.id == "cuda-toolkit-missing"
    assert top.remediation.commands[0].startswith("conda install -c nvidia/label/cuda-12.1.0 cuda-toolkit")


def test_a_missing_cudnn_8_dll_on_windows() -> None:
    top = _top("Could not locate cudnn_ops_infer64_8.dll. Please make sure it is in your library path!\n")
    assert top is not None and top.id == "cudnn-dll-missing"
    assert top.remediation.commands[0].startswith("pip install nvidia-cudnn-cu12==8.9.7.29")


def test_torchs_own_cudnn_dll_means_reinstalling_torch() -> None:
    text = ('OSError: [WinError 126] The specified module could not be found. Error loading '
            '"C:\\venv\\lib\\site-packages\\torch\\lib\\cudnn_adv_infer64_8.dll" or one of its dependencies.\n')
    top = _top(text)
    assert top is not None and top.id == "cudnn-dll-missing"
    assert "--force-reinstall torch" in top.remediation.commands[0]


def test_a_sentence_wrapped_onto_two_lines_is_read_once_joined() -> None:
    text = "RuntimeError: DataLoader worker (pid 9) is killed by signal: Bus\nerror. It is possible that ...\n"
    top = _top(text)
    assert top is not None and top.id == "dataloader-shm"


def test_a_long_log_is_not_joined_pairwise_beyond_short_lines() -> None:
    # Only short adjacent lines are joined, so a long payload line cannot create a match across lines.
    text = "x" * 400 + " DataLoader worker (pid 9) is killed by signal: Bus\nerror.\n"
    from envdoctor.parsers import ParseError

    with pytest.raises(ParseError):
        parse_text(text)


def test_a_long_log_is_read_at_its_head_and_its_tail() -> None:
    from envdoctor.parsers import HEAD_LINES, TAIL_LINES

    filler = "".join(f"step {i} loss 0.{i}\n" for i in range(HEAD_LINES + TAIL_LINES + 5_000))
    text = "torch==2.3.1\n" + filler + "RuntimeError: unable to write to file </torch_1_2_3>\n"
    facts = parse_text(text)
    assert facts.get("torch.version").value == "2.3.1"
    assert facts.get("torch.shm_errors").ok


@pytest.mark.parametrize("text, state", [
    ("● nvidia-fabricmanager.service - NVIDIA fabric manager service\n"
     "     Loaded: loaded (/lib/systemd/system/nvidia-fabricmanager.service; enabled)\n"
     "     Active: failed (Result: exit-code) since Mon 2024-01-01 10:00:00 UTC\n", "failed"),
    ("Unit nvidia-fabricmanager.service could not be found.\n", "not-found"),
])
def test_a_stopped_fabric_manager_service_is_the_fabric_managers_fault(text: str, state: str) -> None:
    top = _top(text)
    assert top is not None and top.id == "fabric-manager" and state in top.title
    assert "sudo systemctl enable --now nvidia-fabricmanager" in top.remediation.commands


def test_a_running_fabric_manager_is_no_fault() -> None:
    text = "● nvidia-fabricmanager.service - NVIDIA fabric manager service\n     Active: active (running) since Mon\n"
    assert _top(text) is None


def test_a_wsl1_kernel_anywhere_means_converting_to_wsl2() -> None:
    top = _top("$ uname -r\n4.4.0-19041-Microsoft\ntorch: 2.1.0+cu121\n")
    assert top is not None and top.id == "wsl-version"
    assert any(c.startswith("wsl --set-version") for c in top.remediation.commands)


def test_a_wsl2_kernel_is_fine() -> None:
    facts = parse_text("- Platform: Linux-5.15.153.1-microsoft-standard-WSL2-x86_64-with-glibc2.35\n"
                       "- PyTorch version (GPU?): 2.3.1+cu121 (True)\n")
    found = [f for f in diagnose(facts, load_registry(plugins=False)) if f.id == "wsl-version"]
    assert found and found[0].status is Status.OK
    assert facts.get("host.kernel").value == "5.15.153.1-microsoft-standard-WSL2"


def test_acs_on_a_pcie_bridge_is_the_p2p_cause() -> None:
    top = _top("$ sudo lspci -vvv | grep ACSCtl\n    ACSCtl: SrcValid+ TransBlk- ReqRedir- CmpltRedir-\n")
    assert top is not None and top.id == "nccl-p2p-acs"
    assert "ECAP_ACS+0x6.w=0000" in top.remediation.commands[0]


def test_acs_off_everywhere_is_no_evidence_of_a_fault() -> None:
    from envdoctor.parsers import ParseError

    with pytest.raises(ParseError):
        parse_text("    ACSCtl: SrcValid- TransBlk- ReqRedir- CmpltRedir-\n")


def test_torch_saying_it_is_not_compiled_with_cuda_is_a_cpu_build() -> None:
    text = ('    raise AssertionError("Torch not compiled with CUDA enabled")\n'
            "AssertionError: Torch not compiled with CUDA enabled\n")
    top = _top(text)
    assert top is not None and top.id == "torch-cpu-build"
    assert any("download.pytorch.org/whl/cu" in c for c in top.remediation.commands)


def test_on_macos_not_compiled_with_cuda_is_no_cuda_reinstall() -> None:
    text = "OS: Darwin\nAssertionError: Torch not compiled with CUDA enabled\n"
    top = _top(text)
    assert top is None or top.id != "torch-cpu-build"


@pytest.mark.parametrize("line, key, value", [
    ("Cuda compilation tools, release 11.0, V11.0.221", "toolkit.nvcc_version", "11.0.221"),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024",
     "driver.kernel_module_version", "550.90.07"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release Build  (dvs-builder@U16)",
     "driver.kernel_module_version", "570.124.06"),
    ("shm              64M     0   64M   0% /dev/shm", "host.shm_size", 64 << 20),
])
def test_system_tool_output_is_its_fact(line: str, key: str, value: object) -> None:
    assert parse_text(line + "\n").get(key).value == value


def test_a_small_dev_shm_shown_next_to_a_bus_error_is_in_the_finding() -> None:
    text = ("$ df -h /dev/shm\nshm   64M  0  64M  0% /dev/shm\n"
            "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n")
    top = _top(text)
    assert top is not None and top.id == "dataloader-shm"
    assert top.evidence["host.shm_size"] == 64 << 20


def test_a_windows_traceback_gets_a_windows_toolkit_remedy() -> None:
    text = ('  File "C:\\Users\\u\\venv\\Lib\\site-packages\\torch\\utils\\cpp_extension.py", line 1, in x\n'
            "OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA install root.\n"
            "torch: 2.3.1+cu121\n")
    facts = parse_text(text)
    assert facts.get("host.os").value == "Windows"
    top = _top(text)
    assert top is not None and top.id == "cuda-toolkit-missing"
    assert any(c.startswith("setx CUDA_HOME") and "v12.1" in c for c in top.remediation.commands)


def test_invalid_device_ordinal_alone_is_a_rank_asking_for_a_missing_gpu() -> None:
    top = _top("RuntimeError: CUDA error: invalid device ordinal\n")
    assert top is not None and top.id == "launch-ranks"
    assert top.remediation.commands[0] == "torchrun --nproc_per_node=gpu …"
