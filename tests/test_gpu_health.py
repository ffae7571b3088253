"""Facts-level tests of the GPU-health checks: healthy GPUs, change one field, judge."""

from __future__ import annotations

from envdoctor.checks import gpu_health as h

from envdoctor.model import Reason, Status, missing

from .fakes.nvidia_facts import healthy_gpu, nv_facts
from .judging import judge_one

ALL = (h.gpu_ecc, h.gpu_row_remap, h.gpu_pcie_link, h.gpu_throttle, h.gpu_persistence, h.gpu_compute_mode,
       h.gpu_mig, h.gpu_xid, h.fabric_manager)


def one_bad(**changes):
    return nv_facts(gpus=[healthy_gpu(0), healthy_gpu(1, **changes)])


def test_healthy_gpus_pass_every_health_check():
    for spec in ALL:
        finding = judge_one(spec, nv_facts())
        assert finding.status is Status.OK, (spec.id, finding.to_dict())


def test_no_nvml_skips_with_the_reason():
    f = nv_facts(nvml__gpus=missing(Reason.ABSENT, "child:nvml_probe", "nvmlInit failed: NVML_ERROR_LIBRARY_NOT_FOUND"))
    for spec in ALL[:-2] + (h.fabric_manager,):
        finding = judge_one(spec, f)
        assert finding.status is Status.SKIP and "LIBRARY_NOT_FOUND" in finding.detail, spec.id


def test_nvml_timeout_makes_health_checks_errors():
    f = nv_facts(nvml__gpus=missing(Reason.TIMEOUT, "child:nvml_probe", "no answer within 10.0 s (stuck in nvmlInit)"))
    assert judge_one(h.gpu_ecc, f).status is Status.ERROR


def test_volatile_uncorrectable_ecc_fails_for_that_gpu():
    finding = judge_one(h.gpu_ecc, one_bad(ecc_uncorrected_volatile=2, ecc_uncorrected_aggregate=2))
    assert finding.status is Status.FAIL and finding.gpus == (1,) and "2 uncorrectable" in finding.detail
    assert "dcgmi diag -r 3 -i 1   # if DCGM is installed" in finding.remediation.commands
    assert "sudo nvidia-smi -r -i 1   # when idle; or reboot" in finding.remediation.commands


def test_historic_ecc_only_warns():
    finding = judge_one(h.gpu_ecc, one_bad(ecc_uncorrected_aggregate=5))
    assert finding.status is Status.WARN and "lifetime" in finding.detail


def test_pending_ecc_mode_change():
    assert judge_one(h.gpu_ecc, one_bad(ecc_mode={"current": 0, "pending": 1})).status is Status.WARN


def test_row_remap_failure_means_rma():
    finding = judge_one(h.gpu_row_remap, one_bad(remapped_rows={"correctable": 0, "uncorrectable": 512, "pending": 0,
                                                            "failure": 1}))
    assert finding.status is Status.FAIL and "RMA" in finding.remediation.text and finding.gpus == (1,)


def test_pending_remap_or_retirement_needs_a_reset():
    finding = judge_one(h.gpu_row_remap, one_bad(remapped_rows={"correctable": 0, "uncorrectable": 1, "pending": 1,
                                                            "failure": 0}))
    assert finding.status is Status.WARN and "sudo nvidia-smi -r -i 1   # needs no processes on the GPU" in \
        finding.remediation.commands
    volta = healthy_gpu(1, retired_pages_pending=1, missing={})
    del volta["remapped_rows"]
    assert judge_one(h.gpu_row_remap, nv_facts(gpus=[volta])).status is Status.WARN


def test_narrow_pcie_link_warns_but_idle_gen_drop_does_not():
    finding = judge_one(h.gpu_pcie_link, one_bad(pcie={"gen": 4, "max_gen": 4, "width": 4, "max_width": 16}))
    assert finding.status is Status.WARN and "x4 of x16" in finding.detail
    idle = one_bad(pcie={"gen": 1, "max_gen": 4, "width": 16, "max_width": 16})
    assert judge_one(h.gpu_pcie_link, idle).status is Status.OK
    busy = one_bad(pcie={"gen": 1, "max_gen": 4, "width": 16, "max_width": 16}, utilization={"gpu": 95, "memory": 40})
    assert judge_one(h.gpu_pcie_link, busy).status is Status.WARN


def test_thermal_slowdown_warns_and_power_cap_does_not():
    finding = judge_one(h.gpu_throttle, one_bad(clocks_event_reasons=0x40 | 0x4, temperature=91))
    assert finding.status is Status.WARN and "hardware thermal slowdown" in finding.detail and "91 °C" in finding.detail
    capped = judge_one(h.gpu_throttle, one_bad(clocks_event_reasons=0x4))
    assert capped.status is Status.OK and "Power-capped" in capped.detail


def test_persistence_off_on_datacenter_gpu_warns_on_a_host_only():
    finding = judge_one(h.gpu_persistence, one_bad(persistence_mode=0))
    assert finding.status is Status.WARN and "sudo systemctl enable --now nvidia-persistenced" in finding.remediation.commands
    in_container = nv_facts(gpus=[healthy_gpu(0, persistence_mode=0)], host__container="docker")
    assert judge_one(h.gpu_persistence, in_container).status is Status.OK
    geforce = nv_facts(gpus=[healthy_gpu(0, persistence_mode=0, brand=5)])
    assert judge_one(h.gpu_persistence, geforce).status is Status.OK


def test_exclusive_mode_taken_or_prohibited_fails():
    finding = judge_one(h.gpu_compute_mode, one_bad(compute_mode=3, compute_processes=1, compute_pids=[4242]))
    assert finding.status is Status.FAIL and "busy or unavailable" in finding.detail and "4242" in finding.detail
    assert judge_one(h.gpu_compute_mode, one_bad(compute_mode=2)).status is Status.FAIL
    assert judge_one(h.gpu_compute_mode, one_bad(compute_mode=3)).status is Status.OK


def test_mig_enabled_without_instances_fails():
    finding = judge_one(h.gpu_mig, one_bad(mig_mode={"current": 1, "pending": 1}, mig_devices=[]))
    assert finding.status is Status.FAIL and any("-cgi" in c for c in finding.remediation.commands)
    pending = judge_one(h.gpu_mig, one_bad(mig_mode={"current": 0, "pending": 1}))
    assert pending.status is Status.WARN
    many = one_bad(mig_mode={"current": 1, "pending": 1}, mig_devices=["MIG-a", "MIG-b"])
    assert judge_one(h.gpu_mig, many).status is Status.WARN


def test_xid_79_fails_and_app_faults_warn():
    events = [{"pci": "PCI:0000:18:00", "code": 79, "text": "GPU has fallen off the bus.",
               "line": "NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=python, GPU has fallen off the bus."}]
    finding = judge_one(h.gpu_xid, nv_facts(driver__xid_events=events))
    assert finding.status is Status.FAIL and "Xid 79" in finding.remediation.text
    app = [{"pci": "PCI:0000:18:00", "code": 31, "text": "MMU Fault", "line": "NVRM: Xid (PCI:0000:18:00): 31, MMU Fault"}]
    assert judge_one(h.gpu_xid, nv_facts(driver__xid_events=app)).status is Status.WARN


def test_unreadable_kernel_log_skips():
    f = nv_facts(driver__xid_events=missing(Reason.DENIED, "dmesg", "Operation not permitted"))
    assert judge_one(h.gpu_xid, f).status is Status.SKIP


def test_fabric_not_started_and_cuda_802():
    f = nv_facts(gpus=[healthy_gpu(0, fabric={"state": 1, "status": 0})])
    finding = judge_one(h.fabric_manager, f)
    # Exactly the driver's version: a bare branch package installs the branch's latest.
    assert finding.status is Status.FAIL and "sudo apt install 'nvidia-fabricmanager-570=570.124.06-*'   # exactly " \
        "the driver's version 570.124.06" in finding.remediation.commands
    in_progress = nv_facts(gpus=[healthy_gpu(0, fabric={"state": 2, "status": 0})])
    assert judge_one(h.fabric_manager, in_progress).status is Status.WARN
    f802 = nv_facts(cuda__init={"code": 802, "name": "CUDA_ERROR_SYSTEM_NOT_READY", "message": "system not yet initialized"})
    assert judge_one(h.fabric_manager, f802).status is Status.FAIL
    done = nv_facts(gpus=[healthy_gpu(0, fabric={"state": 3, "status": 0})])
    assert judge_one(h.fabric_manager, done).status is Status.OK


# -- remediations name the GPU the finding is about (no <gpu>/<bus id>/<uuid> placeholders) --------------
def _no_placeholder(finding):
    import re

    for command in finding.remediation.commands:
        assert not re.search(r"<[a-z][^<>]*>", command), command


def test_per_gpu_remedies_name_the_affected_gpu_index():
    cases = [
        (h.gpu_ecc, dict(ecc_mode={"current": 0, "pending": 1}), "sudo nvidia-smi -r -i 1"),
        (h.gpu_ecc, dict(ecc_uncorrected_aggregate=5), "nvidia-smi -q -d ECC,ROW_REMAPPER -i 1"),
        (h.gpu_row_remap, dict(remapped_rows={"correctable": 0, "uncorrectable": 9, "pending": 0, "failure": 1}),
         "nvidia-smi -q -d ROW_REMAPPER -i 1"),
        (h.gpu_pcie_link, dict(pcie={"gen": 4, "max_gen": 4, "width": 8, "max_width": 16}),
         "nvidia-smi -q -d PCIE -i 1"),
        (h.gpu_throttle, dict(clocks_event_reasons=0x40), "nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER -i 1"),
        (h.gpu_compute_mode, dict(compute_mode=2), "sudo nvidia-smi -i 1 -c DEFAULT"),
        (h.gpu_mig, dict(mig_mode={"current": 0, "pending": 1}), "sudo nvidia-smi -r -i 1"),
    ]
    for spec, change, command in cases:
        finding = judge_one(spec, one_bad(**change))
        assert finding.status in (Status.WARN, Status.FAIL) and finding.gpus == (1,), spec.id
        assert command in finding.remediation.commands, (spec.id, finding.remediation.commands)
        _no_placeholder(finding)


def test_narrow_pcie_link_gives_the_lspci_command_for_that_bus():
    finding = judge_one(h.gpu_pcie_link, one_bad(pcie={"gen": 4, "max_gen": 4, "width": 8, "max_width": 16}))
    # NVML's 8-digit domain (00000000:08:00.0) written the way lspci -s takes it.
    assert "sudo lspci -vv -s 0000:08:00.0 | grep -E 'LnkCap|LnkSta'" in finding.remediation.commands


def test_mig_without_instances_gives_runnable_create_commands():
    finding = judge_one(h.gpu_mig, one_bad(mig_mode={"current": 1, "pending": 1}, mig_devices=[]))
    assert finding.status is Status.FAIL and finding.gpus == (1,)
    assert any(c.startswith("sudo nvidia-smi mig -i 1 -cgi 0 -C") for c in finding.remediation.commands)
    _no_placeholder(finding)


def test_several_mig_instances_name_their_uuids_and_the_gpu():
    gpu = healthy_gpu(0, mig_mode={"current": 1, "pending": 1}, mig_devices=["MIG-aaaa-1111", "MIG-bbbb-2222"])
    finding = judge_one(h.gpu_mig, nv_facts(gpus=[gpu]))
    assert finding.status is Status.WARN and finding.gpus == (0,)
    assert any(c.startswith("CUDA_VISIBLE_DEVICES=MIG-bbbb-2222 /opt/venv/bin/python ")
               for c in finding.remediation.commands)
    _no_placeholder(finding)


def test_xid_findings_name_the_gpus_from_the_pci_address():
    xid = {"pci": "PCI:0000:08:00", "code": 79, "text": "GPU has fallen off the bus.",
           "line": "NVRM: Xid (PCI:0000:08:00): 79, pid=1, GPU has fallen off the bus."}
    finding = judge_one(h.gpu_xid, nv_facts(driver__xid_events=[xid]))
    assert finding.status is Status.FAIL and finding.gpus == (1,)
    assert "nvidia-smi -q -d ECC,ROW_REMAPPER,PERFORMANCE -i 1" in finding.remediation.commands
    app = dict(xid, code=13, pci="PCI:0000:07:00", line="NVRM: Xid (PCI:0000:07:00): 13, Graphics Exception")
    assert judge_one(h.gpu_xid, nv_facts(driver__xid_events=[app])).gpus == (0,)


def test_fabric_remedy_uses_the_kernel_module_branch_when_nvml_gave_no_version():
    f = nv_facts(gpus=[healthy_gpu(0, fabric={"state": 1, "status": 0})],
                 nvml__driver_version=missing(Reason.FAILED, "child:nvml_probe", "x"))
    finding = judge_one(h.fabric_manager, f)
    assert finding.status is Status.FAIL
    assert finding.remediation.commands[0].startswith("sudo apt install 'nvidia-fabricmanager-570=570.")
