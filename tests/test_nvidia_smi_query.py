"""`nvidia-smi -q` / `-a` pasted (envdoctor/parsers/nvidia_smi.py): each `GPU 00000000:…` block becomes an
nvml.gpus entry in the NVML probe's shape, so the GPU health checks judge a pasted query like a live one."""

from __future__ import annotations

from pathlib import Path

from envdoctor.model import Status
from envdoctor.parsers import parse_text
from envdoctor.pipeline.diagnose import diagnose
from envdoctor.registry import load_registry

A100 = (Path(__file__).parent / "fixtures" / "nvidia_smi_q_a100_synthetic.txt").read_text()

OLD_FORMAT = """==============NVSMI LOG==============
Driver Version                      : 410.78
CUDA Version                        : 10.0
Attached GPUs                       : 1
GPU 00000000:04:00.0
    Product Name                    : Tesla K40m
    Persistence Mode                : Disabled
    Clocks Throttle Reasons
        Idle                        : Not Active
        HW Slowdown                 : Not Active
        SW Thermal Slowdown         : Active
    Compute Mode                    : Prohibited
    Ecc Mode
        Current                     : Enabled
        Pending                     : Enabled
    ECC Errors
        Volatile
            Single Bit
                Device Memory       : 3
                Total               : 3
            Double Bit
                Device Memory       : 0
                Total               : 0
        Aggregate
            Single Bit
                Total               : 12
            Double Bit
                Total               : 1
    Retired Pages
        Single Bit ECC              : 0
        Double Bit ECC              : 1
        Pending Page Blacklist      : Yes
"""


def _statuses(text: str) -> dict[str, Status]:
    return {f.id: f.status for f in diagnose(parse_text(text), load_registry(plugins=False))}


def test_a_query_block_becomes_a_gpu_in_the_probe_shape() -> None:
    gpu = dict(parse_text(A100).value("nvml.gpus")[0])
    assert gpu["name"] == "NVIDIA A100-SXM4-80GB" and gpu["pci_bus_id"] == "00000000:07:00.0"
    assert gpu["pcie"] == {"gen": 4, "max_gen": 4, "width": 16, "max_width": 16}
    assert gpu["clocks_event_reasons"] == 0x8 | 0x80 and gpu["compute_mode"] == 0 and gpu["persistence_mode"] == 1
    assert gpu["remapped_rows"] == {"correctable": 0, "uncorrectable": 4, "pending": True, "failure": False}
    assert gpu["ecc_uncorrected_volatile"] == 2 and gpu["fabric"] == {"state": 3}


def test_the_health_checks_judge_a_pasted_query() -> None:
    status = _statuses(A100)
    assert status["gpu-ecc"] is Status.FAIL and status["gpu-row-remap"] is Status.WARN
    assert status["gpu-throttle"] is Status.WARN and status["gpu-pcie-link"] is Status.OK


def test_the_older_query_format() -> None:
    gpu = dict(parse_text(OLD_FORMAT).value("nvml.gpus")[0])
    assert gpu["ecc_uncorrected_volatile"] == 0 and gpu["ecc_uncorrected_aggregate"] == 1
    assert gpu["retired_pages_pending"] == 1 and gpu["compute_mode"] == 2 and gpu["clocks_event_reasons"] == 0x20
    status = _statuses(OLD_FORMAT)
    assert status["gpu-compute-mode"] is Status.FAIL and status["gpu-row-remap"] is Status.WARN


def test_not_available_fields_are_left_out_and_mig_on_is_not_judged_without_its_instances() -> None:
    text = A100.replace("DRAM Uncorrectable            : 2", "DRAM Uncorrectable            : N/A").replace(
        "Current                           : Disabled", "Current                           : Enabled", 1)
    gpu = dict(parse_text(text).value("nvml.gpus")[0])
    assert gpu["mig_mode"]["current"] == 1 and "mig_devices" in gpu["missing"]
    assert gpu["ecc_uncorrected_volatile"] == 0
    assert _statuses(text)["gpu-mig"] is not Status.FAIL
