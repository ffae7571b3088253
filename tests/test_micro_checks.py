"""Facts-level tests of the microcheck judgement: a healthy two-GPU result, one thing changed,
the finding that follows. Also how the probe turns a child's (partial) output into facts.

The healthy results are synthetic (shaped like the child's records, figures in the range an
H100 SXM node gives), not a recording of a real machine.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from envdoctor.checks import micro as checks

from envdoctor.knowledge import compat
from envdoctor.model import Facts, Reading, Reason, Status, missing, ok
from envdoctor.probes.micro import KEYS, readings_from_child
from envdoctor.process.host import ChildResult

from .judging import judge_one

ARGS: dict[str, Any] = {"devices": [], "compile": True}
H100 = "NVIDIA H100 80GB HBM3"


def _matmul(tflops: dict[str, float], n: int = 8192) -> dict[str, Any]:
    tol = {"fp32": 1e-4, "tf32": 5e-3, "bf16": 1e-2, "fp16": 1e-2}
    err = {"fp32": 1.1e-6, "tf32": 3.2e-4, "bf16": 1.7e-3, "fp16": 2.1e-4}
    return {"n": n, "ok": True, "dtypes": {
        k: {"n": n, "ok": True, "finite": True, "rel_err": err[k], "row_rel_err": err[k], "freivalds_rel_err": err[k],
            "tolerance": tol[k], "seconds": 2 * n ** 3 / (v * 1e12), "repeats": 10, "tflops": v}
        for k, v in tflops.items()}}


def healthy_child() -> dict[str, Any]:
    """What the child prints on a healthy 2 x H100 SXM node (merged records)."""
    data: dict[str, Any] = {
        "torch_version": "2.7.1+cu126",
        "plan": {"devices": ["cuda:0", "cuda:1"], "checks": list(checks_order()), "unusable": {},
                 "multi_gpu_skipped": None},
        "cuda_init_seconds": 1.9, "seconds": 14.2, "checks_seconds": 11.8,
    }
    for i in (0, 1):
        dev = f"cuda:{i}"
        data[f"device@{dev}"] = {"device": dev, "name": H100, "capability": [9, 0], "total_memory": 85 << 30,
                                 "uuid": f"5a1c0d3e-0000-4000-8000-00000000000{i}", "roundtrip_equal": True,
                                 "kernel_ok": True, "ok": True}
        data[f"matmul@{dev}"] = _matmul({"fp32": 51.0, "tf32": 370.0, "bf16": 720.0, "fp16": 700.0})
        data[f"transformer@{dev}"] = {
            "fp32": {"loss": 1.38, "loss_finite": True, "grads_finite": True, "params_finite": True,
                     "tokens_per_s": 2.1e5},
            "amp": {"dtype": "bf16", "loss": 1.38, "loss_finite": True, "grads_finite": True, "grad_rel_err": 7e-3,
                    "grad_tolerance": 0.1, "grads_close": True, "grad_scaler": False, "tokens_per_s": 1.1e6},
            "sdpa": {"flash": {"usable": True}, "mem_efficient": {"usable": True}, "cudnn": {"usable": True},
                     "math": {"usable": True}},
            "ok": True}
        data[f"copy@{dev}"] = {"h2d": {"gbps": 53.0}, "d2h": {"gbps": 52.0}, "d2d": {"gbps": 2900.0, "equal": True},
                               "roundtrip_equal": True, "ok": True}
        data[f"compile@{dev}"] = {"compile_seconds": 31.0, "loss_rel_err": 1e-7, "grad_rel_err": 2e-7,
                                  "tolerance": 1e-3, "ok": True}
    data["dataloader@cuda:0"] = {"workers": 4, "batch_bytes": 64 << 20, "batches": 8, "pin_memory": True, "ok": True,
                                 "wrong_batches": [], "mbps": 2400.0, "worker_stderr": []}
    data["multi_gpu@all"] = {"devices": ["cuda:0", "cuda:1"], "peer_access": [[True, True], [True, True]],
                             "nccl": {"status": "ok", "seconds": 2.3, "nccl_warnings": []}, "ok": True}
    return data


def checks_order() -> tuple[str, ...]:
    return ("device", "matmul", "transformer", "copy", "compile", "dataloader", "multi_gpu")


def facts_from(data: dict[str, Any], status: str = "ok", stage: str = "", detail: str = "",
               extra: dict[str, Reading] | None = None) -> Facts:
    result = ChildResult(status, copy.deepcopy(data), stage, seconds=12.0, detail=detail)  # type: ignore[arg-type]
    facts = Facts(readings_from_child(result, ARGS, 120.0))
    return facts.merged(extra or {})


ALL = (checks.micro_device, checks.micro_matmul, checks.micro_transformer, checks.micro_copy,
       checks.micro_dataloader, checks.micro_multi_gpu, checks.micro_compile)


# -- healthy ------------------------------------------------------------------------------------

def test_healthy_two_gpu_node_passes_every_microcheck() -> None:
    facts = facts_from(healthy_child())
    assert set(KEYS) <= set(facts)
    for spec in ALL:
        finding = judge_one(spec, facts)
        assert finding.status is Status.OK, (spec.id, finding.title, finding.detail)


def test_facts_carry_the_measurement_and_the_finding_the_ratio_to_the_datasheet_peak() -> None:
    facts = facts_from(healthy_child())
    matmul = facts.value("micro.matmul")["cuda:0"]
    assert matmul["name"] == H100 and matmul["dtypes"]["bf16"]["tflops"] == 720.0
    for gone in ("peak_model", "peak_source"):
        assert gone not in matmul and gone not in facts.value("micro.copy")["cuda:0"]
    assert not {"peak_tflops", "ratio"} & set(matmul["dtypes"]["bf16"])
    assert not {"peak_gbps", "ratio"} & set(facts.value("micro.copy")["cuda:0"]["d2d"])
    detail = judge_one(checks.micro_matmul, facts).detail
    assert f"bf16: rel err 0.0017 (tol 0.01), 720 TFLOP/s = {720.0 / 989.4:.0%} of the H100 SXM dense peak (989)" in detail
    assert "D->D is 87% of 3,350 GB/s (H100 SXM)" in judge_one(checks.micro_copy, facts).detail


def test_facts_round_trip_through_json_and_judge_the_same() -> None:
    facts = facts_from(healthy_child())
    again = Facts.from_dict(facts.to_dict())
    for spec in ALL:
        assert judge_one(spec, again).to_dict() == judge_one(spec, facts).to_dict()


def test_unknown_gpus_and_the_cpu_have_no_peak_and_no_ratio() -> None:
    assert compat.gpu_peaks("NVIDIA L40S") is None
    data = healthy_child()
    for i in (0, 1):
        data[f"device@cuda:{i}"]["name"] = "NVIDIA Imaginary X1"
    facts = facts_from(data)
    finding = judge_one(checks.micro_matmul, facts)
    assert finding.status is Status.OK and "of peak" not in finding.title and "dense peak" not in finding.detail


def test_the_ratio_is_computed_at_judge_time_from_todays_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """A saved report re-judged after the table changed gets the new peaks, not the old ones."""
    facts = Facts.from_dict(facts_from(healthy_child()).to_dict())
    assert judge_one(checks.micro_matmul, facts).status is Status.OK
    better = compat.Peaks("H100 SXM (revised)", {"fp32": 67.0, "tf32": 494.7, "bf16": 4000.0, "fp16": 989.4}, 12000.0,
                          "nv_h100_datasheet", True)
    monkeypatch.setattr(compat, "gpu_peaks", lambda name: better if name else None)
    matmul = judge_one(checks.micro_matmul, facts)
    assert matmul.status is Status.WARN and "bf16 matmul on cuda:0 runs at 18% of peak" in matmul.title
    assert "of the H100 SXM (revised) dense peak (4,000)" in matmul.detail
    copy_ = judge_one(checks.micro_copy, facts)
    assert copy_.status is Status.WARN and "D->D is 24% of 12,000 GB/s (H100 SXM (revised))" in copy_.detail


H100_PEAKS = {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}


def _old_format(facts: Facts, bf16_tflops: float = 720.0, peaks: dict[str, float] = H100_PEAKS, gbps: float = 2900.0,
                peak_gbps: float = 3350.0, model: str = "H100 SXM") -> Facts:
    """The report as envdoctor wrote it before the probe stopped writing ratios: peaks and
    ratios in the facts, no GPU name on the results."""
    d = facts.to_dict()
    for dev in ("cuda:0", "cuda:1"):
        m = d["micro.matmul"]["value"][dev]
        del m["name"]
        m.update(peak_model=model, peak_source="https://www.nvidia.com/en-us/data-center/h100/")
        m["dtypes"]["bf16"]["tflops"] = bf16_tflops
        for label, r in m["dtypes"].items():
            r.update(peak_tflops=peaks[label], ratio=round(r["tflops"] / peaks[label], 4))
        c = d["micro.copy"]["value"][dev]
        del c["name"]
        c["peak_model"] = model
        c["d2d"].update(gbps=gbps, peak_gbps=peak_gbps, ratio=round(gbps / peak_gbps, 4))
    return Facts.from_dict(d)


def test_an_old_format_report_is_judged_as_before() -> None:
    fresh = facts_from(healthy_child())
    old = _old_format(fresh)
    assert "name" not in old.value("micro.matmul")["cuda:0"]
    for spec in ALL:
        was, now = judge_one(spec, old).to_dict(), judge_one(spec, fresh).to_dict()
        was.pop("evidence"), now.pop("evidence")  # the facts themselves differ; the judgement does not
        assert was == now, spec.id


def test_an_old_format_report_for_a_gpu_the_table_lacks_uses_the_peaks_it_carries() -> None:
    data = healthy_child()
    for i in (0, 1):
        data[f"device@cuda:{i}"]["name"] = "NVIDIA Imaginary X1"
    old = _old_format(facts_from(data), bf16_tflops=140.0, peaks={"fp32": 60.0, "tf32": 400.0, "bf16": 1000.0,
                                                                  "fp16": 800.0}, gbps=500.0, peak_gbps=4000.0,
                      model="Imaginary X1")
    matmul = judge_one(checks.micro_matmul, old)
    assert matmul.status is Status.WARN and "runs at 14% of peak" in matmul.title
    assert "of the Imaginary X1 dense peak (1,000)" in matmul.detail
    copy_ = judge_one(checks.micro_copy, old)
    assert copy_.status is Status.WARN and "D->D is 12% of 4,000 GB/s (Imaginary X1)" in copy_.detail


def test_an_old_format_report_with_only_a_stored_ratio_still_warns() -> None:
    data = healthy_child()
    for i in (0, 1):
        data[f"device@cuda:{i}"]["name"] = "NVIDIA Imaginary X1"
    d = facts_from(data).to_dict()
    for dev in ("cuda:0", "cuda:1"):
        m = d["micro.matmul"]["value"][dev]
        del m["name"]
        m["dtypes"]["bf16"]["ratio"] = 0.1
    finding = judge_one(checks.micro_matmul, Facts.from_dict(d))
    assert finding.status is Status.WARN and "runs at 10% of peak" in finding.title


# -- matmul ---------------------------------------------------------------------------------------

def test_wrong_matmul_result_fails_naming_device_and_dtype() -> None:
    data = healthy_child()
    r = data["matmul@cuda:1"]["dtypes"]["tf32"]
    r.update(ok=False, rel_err=0.12)
    finding = judge_one(checks.micro_matmul, facts_from(data))
    assert finding.status is Status.FAIL
    assert "tf32" in finding.title and "cuda:1" in finding.title and finding.gpus == (1,)
    assert "Xid" in finding.remediation.text


def test_nan_matmul_fails() -> None:
    data = healthy_child()
    data["matmul@cuda:0"]["dtypes"]["fp16"].update(ok=False, finite=False, rel_err=None)
    finding = judge_one(checks.micro_matmul, facts_from(data))
    assert finding.status is Status.FAIL and "NaN" in finding.title


def test_matmul_far_below_peak_warns_with_throttle_clock_and_mig_hints() -> None:
    data = healthy_child()
    data["matmul@cuda:0"]["dtypes"]["bf16"]["tflops"] = 140.0  # 14% of 989
    finding = judge_one(checks.micro_matmul, facts_from(data))
    assert finding.status is Status.WARN
    assert "14%" in finding.title and finding.gpus == (0,)
    for hint in ("throttled", "clocks", "MIG"):
        assert hint in finding.remediation.text


def test_cublas_error_in_one_dtype_fails() -> None:
    data = healthy_child()
    data["matmul@cuda:0"]["dtypes"]["bf16"] = {"ok": False, "error": "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED"}
    finding = judge_one(checks.micro_matmul, facts_from(data))
    assert finding.status is Status.FAIL and "CUBLAS_STATUS_EXECUTION_FAILED" in finding.detail


# -- hangs and crashes ---------------------------------------------------------------------------

def partial(upto: str) -> dict[str, Any]:
    """The healthy output cut where the child stopped: every check before ``upto`` finished."""
    data = healthy_child()
    order = checks_order()
    cut = order.index(upto)
    for key in [k for k in data if "@" in k]:
        if order.index(key.split("@")[0]) >= cut:
            del data[key]
    del data["seconds"], data["checks_seconds"]
    return data


def test_hang_is_an_error_on_the_check_it_hung_in_and_later_ones_are_not_reached() -> None:
    facts = facts_from(partial("transformer"), status="timeout", stage="transformer@cuda:0: autocast bf16 step")
    assert facts["micro.transformer"].reason is Reason.TIMEOUT
    assert facts["micro.matmul"].ok and facts["micro.device"].ok
    finding = judge_one(checks.micro_transformer, facts)
    assert finding.status is Status.ERROR and "hung" in finding.title
    assert "autocast bf16 step" in finding.detail
    assert "nvidia-smi" in finding.remediation.commands
    for spec in (checks.micro_copy, checks.micro_dataloader, checks.micro_multi_gpu, checks.micro_compile):
        later = judge_one(spec, facts)
        assert later.status is Status.SKIP and "not reached" in later.detail
    assert judge_one(checks.micro_matmul, facts).status is Status.OK


def test_hang_on_the_second_gpu_keeps_the_first_gpus_results_in_the_fact() -> None:
    data = partial("matmul")
    data["matmul@cuda:0"] = healthy_child()["matmul@cuda:0"]
    facts = facts_from(data, status="timeout", stage="matmul@cuda:1: bf16 compute")
    reading = facts["micro.matmul"]
    assert reading.reason is Reason.TIMEOUT and "cuda:0" in reading.value
    assert Facts.from_dict(facts.to_dict())["micro.matmul"].value["cuda:0"]["n"] == 8192


def test_hang_before_any_check_blames_the_device_touch() -> None:
    facts = facts_from({}, status="timeout", stage="cuda init")
    assert facts["micro.device"].reason is Reason.TIMEOUT
    assert judge_one(checks.micro_device, facts).status is Status.ERROR


def test_crash_is_an_error_with_the_signal() -> None:
    facts = facts_from(partial("matmul"), status="crashed", stage="matmul@cuda:0: fp16 compute",
                       detail="python was killed by SIGSEGV")
    finding = judge_one(checks.micro_matmul, facts)
    assert finding.status is Status.ERROR and "crashed" in finding.title
    assert "SIGSEGV" in finding.detail and "fp16 compute" in finding.detail


# -- device touch -------------------------------------------------------------------------------

def test_roundtrip_mismatch_fails_the_device_touch() -> None:
    data = healthy_child()
    data["device@cuda:1"].update(ok=False, roundtrip_equal=False)
    finding = judge_one(checks.micro_device, facts_from(data))
    assert finding.status is Status.FAIL and "corrupts" in finding.title and finding.gpus == (1,)


def test_cuda_error_in_device_touch_fails_and_later_checks_say_why_they_did_not_run() -> None:
    data = healthy_child()
    data["device@cuda:1"] = {"ok": False, "error": "RuntimeError: CUDA error: an illegal memory access was encountered"}
    data["matmul@cuda:1"] = {"ok": False, "not_run": "an earlier check broke cuda:1"}
    facts = facts_from(data)
    assert judge_one(checks.micro_device, facts).status is Status.FAIL
    matmul = judge_one(checks.micro_matmul, facts)
    assert matmul.status is Status.FAIL and "earlier check broke" in matmul.detail


# -- transformer --------------------------------------------------------------------------------

def test_autocast_gradients_far_from_fp32_fail() -> None:
    data = healthy_child()
    data["transformer@cuda:0"]["amp"].update(grad_rel_err=0.8, grads_close=False)
    finding = judge_one(checks.micro_transformer, facts_from(data))
    assert finding.status is Status.FAIL and "differ from fp32" in finding.detail


def test_non_finite_loss_fails() -> None:
    data = healthy_child()
    data["transformer@cuda:1"]["fp32"]["loss_finite"] = False
    assert judge_one(checks.micro_transformer, facts_from(data)).status is Status.FAIL


def test_only_math_attention_on_a_gpu_warns() -> None:
    data = healthy_child()
    for name in ("flash", "mem_efficient", "cudnn"):
        data["transformer@cuda:0"]["sdpa"][name] = {"usable": False, "why": "No available kernel"}
    finding = judge_one(checks.micro_transformer, facts_from(data))
    assert finding.status is Status.WARN and "math" in finding.title


# -- copies -------------------------------------------------------------------------------------

def _nvml(gen: int, width: int) -> dict[str, Reading]:
    gpus = [{"index": i, "uuid": f"GPU-5a1c0d3e-0000-4000-8000-00000000000{i}",
             "pcie": {"gen": 1, "max_gen": gen, "width": width, "max_width": width}} for i in (0, 1)]
    return {"nvml.gpus": ok(gpus, "nvml")}


def test_copies_at_pcie_speed_pass() -> None:
    finding = judge_one(checks.micro_copy, facts_from(healthy_child(), extra=_nvml(5, 16)))
    assert finding.status is Status.OK and "gen5 x16" in finding.detail


def test_host_copies_far_below_the_link_warn() -> None:
    data = healthy_child()
    data["copy@cuda:1"]["h2d"]["gbps"] = 6.0  # a gen5 x16 link carries ~63 GB/s
    finding = judge_one(checks.micro_copy, facts_from(data, extra=_nvml(5, 16)))
    assert finding.status is Status.WARN and finding.gpus == (1,)
    assert "nvidia-smi -q -d PCIE" in finding.remediation.commands


def test_device_copies_far_below_memory_bandwidth_warn() -> None:
    data = healthy_child()
    data["copy@cuda:0"]["d2d"]["gbps"] = 500.0
    finding = judge_one(checks.micro_copy, facts_from(data))
    assert finding.status is Status.WARN and "memory bandwidth" in finding.detail


def test_copy_that_changes_data_fails() -> None:
    data = healthy_child()
    data["copy@cuda:0"]["roundtrip_equal"] = False
    assert judge_one(checks.micro_copy, facts_from(data)).status is Status.FAIL


# -- DataLoader ---------------------------------------------------------------------------------

SIGBUS = {"workers": 4, "ok": False, "bus_error": True, "killed": True,
          "error": "RuntimeError: DataLoader worker (pid 812) is killed by signal: Bus error. It is possible that "
                   "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
          "worker_stderr": ["ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient "
                            "shared memory (shm)."]}


def test_sigbus_worker_in_docker_fails_with_shm_size_and_ipc_host() -> None:
    data = healthy_child()
    data["dataloader@cuda:0"] = dict(SIGBUS)
    facts = facts_from(data, extra={"host.container": ok("docker"), "host.shm_size": ok(64 << 20)})
    finding = judge_one(checks.micro_dataloader, facts)
    assert finding.status is Status.FAIL and "/dev/shm" in finding.title
    assert "docker run --shm-size=16g …" in finding.remediation.commands
    assert "docker run --ipc=host …" in finding.remediation.commands
    assert finding.evidence["host.shm_size"] == 64 << 20
    assert "Unexpected bus error" in finding.detail


def test_sigbus_worker_in_kubernetes_gets_the_emptydir_remedy() -> None:
    data = healthy_child()
    data["dataloader@cuda:0"] = dict(SIGBUS)
    finding = judge_one(checks.micro_dataloader, facts_from(data, extra={"host.container": ok("kubernetes")}))
    assert finding.status is Status.FAIL and "medium: Memory" in finding.remediation.commands[0]


def test_worker_killed_otherwise_fails_with_the_oom_hint() -> None:
    data = healthy_child()
    data["dataloader@cuda:0"] = {"ok": False, "killed": True, "bus_error": False,
                                 "error": "RuntimeError: DataLoader worker (pid(s) 99) exited unexpectedly"}
    finding = judge_one(checks.micro_dataloader, facts_from(data))
    assert finding.status is Status.FAIL and "oom" in finding.remediation.text.lower()


# -- multi-GPU ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("status", "words"), [("hung", "hangs"), ("wrong", "wrong"), ("error", "fails")])
def test_nccl_hung_wrong_and_error_are_told_apart(status: str, words: str) -> None:
    data = healthy_child()
    data["multi_gpu@all"]["nccl"] = {"status": status, "detail": "x", "nccl_warnings": ["NCCL WARN Cuda failure 'peer access'"]}
    finding = judge_one(checks.micro_multi_gpu, facts_from(data))
    assert finding.status is Status.FAIL and words in finding.title and finding.gpus == (0, 1)
    assert "NCCL WARN" in finding.detail
    assert any("NCCL_P2P_DISABLE=1" in c for c in finding.remediation.commands)


def test_single_gpu_skips_multi_gpu_with_the_reason() -> None:
    data = healthy_child()
    data["plan"]["checks"].remove("multi_gpu")
    data["plan"]["multi_gpu_skipped"] = "1 CUDA device(s)"
    del data["multi_gpu@all"]
    finding = judge_one(checks.micro_multi_gpu, facts_from(data))
    assert finding.status is Status.SKIP and "2 visible GPUs" in finding.detail


# -- compile ------------------------------------------------------------------------------------

def test_compile_error_fails_with_triton_and_compiler_hints() -> None:
    data = healthy_child()
    data["compile@cuda:0"] = {"ok": False, "error": "torch._inductor.exc.InductorError: RuntimeError: Cannot find a working triton installation"}
    finding = judge_one(checks.micro_compile, facts_from(data))
    assert finding.status is Status.FAIL and "triton" in finding.detail
    assert "Triton" in finding.remediation.text


def test_compile_not_requested_is_skipped() -> None:
    data = healthy_child()
    data["plan"]["checks"].remove("compile")
    for i in (0, 1):
        del data[f"compile@cuda:{i}"]
    facts = Facts(readings_from_child(ChildResult("ok", data), {"devices": [], "compile": False}, 120.0))
    finding = judge_one(checks.micro_compile, facts)
    assert finding.status is Status.SKIP and "--compile" in finding.detail


# -- skipped runs ---------------------------------------------------------------------------------

def test_no_usable_gpu_skips_with_torchs_reason() -> None:
    data = {"torch_version": "2.7.1+cu126", "plan": {"devices": [], "checks": [], "why": "torch.cuda.is_available() is False"}}
    facts = facts_from(data)
    for spec in ALL:
        finding = judge_one(spec, facts)
        assert finding.status is Status.SKIP and "is_available" in finding.detail


def test_no_micro_reading_is_a_skip_for_every_check() -> None:
    facts = Facts({k: missing(Reason.SKIPPED, "child:micro", "--no-micro") for k in KEYS})
    assert {judge_one(spec, facts).status for spec in ALL} == {Status.SKIP}


def test_a_report_without_micro_facts_skips_instead_of_crashing() -> None:
    facts = Facts({})
    assert {judge_one(spec, facts).status for spec in ALL} == {Status.SKIP}


# -- remediations name the hung GPU and the target interpreter; every fail says what to do ---------------

def test_hang_remedy_resets_the_gpu_it_hung_on() -> None:
    data = partial("matmul")
    data["matmul@cuda:0"] = healthy_child()["matmul@cuda:0"]
    facts = facts_from(data, status="timeout", stage="matmul@cuda:1: bf16 compute")
    finding = judge_one(checks.micro_matmul, facts)
    assert finding.status is Status.ERROR
    assert "sudo nvidia-smi -r -i 1   # nothing may run on it; otherwise: sudo reboot" in finding.remediation.commands
    assert not any("<" in c for c in finding.remediation.commands)
    assert facts.value("micro.run") is None and list(facts["micro.run"].value["stage_devices"]) == ["cuda:1"]


def test_hang_remedy_of_a_report_saved_before_stage_devices_reads_the_stage() -> None:
    data = partial("matmul")
    data["matmul@cuda:0"] = healthy_child()["matmul@cuda:0"]
    d = facts_from(data, status="timeout", stage="cuda init cuda:1").to_dict()
    del d["micro.run"]["value"]["stage_devices"]
    d["micro.matmul"]["detail"] = "no answer within 120.0 s"  # the detail prose is not read
    finding = judge_one(checks.micro_matmul, Facts.from_dict(d))
    assert "sudo nvidia-smi -r -i 1   # nothing may run on it; otherwise: sudo reboot" in finding.remediation.commands


def test_transformer_and_compile_remedies_run_the_target_python() -> None:
    data = healthy_child()
    data["transformer@cuda:0"]["fp32"]["loss_finite"] = False
    data["compile@cuda:0"] = {"error": "BackendCompilerFailed: no C compiler", "ok": False}
    facts = facts_from(data, extra={"python.executable": ok("/opt/venv/bin/python")})
    for spec in (checks.micro_transformer, checks.micro_compile):
        finding = judge_one(spec, facts)
        assert finding.status is Status.FAIL, spec.id
        assert finding.remediation.commands[0].startswith("/opt/venv/bin/python -c "), spec.id


def test_a_dataloader_failure_without_a_known_cause_still_says_what_to_do() -> None:
    data = healthy_child()
    data["dataloader@cuda:0"] = {"ok": False, "error": "RuntimeError: DataLoader worker (pid 7) exited unexpectedly",
                                 "bus_error": False, "killed": False, "wrong_batches": [], "worker_stderr": []}
    finding = judge_one(checks.micro_dataloader, facts_from(data, extra={"host.container": ok("docker")}))
    assert finding.status is Status.FAIL and finding.remediation.text
    assert "df -h /dev/shm" in finding.remediation.commands and finding.remediation.links
