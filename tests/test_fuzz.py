"""Fuzzing the report loader and the text readers with hypothesis: whatever the bytes, diagnose's
readers end in a Report, Facts, or one ReportError line, and judging and rendering what they
accept never raises. Deterministic (derandomized) and bounded, so CI spends seconds here;
``ENVDOCTOR_FUZZ_EXAMPLES=2000`` searches harder locally."""

from __future__ import annotations

import io
import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envdoctor.inputs import parse_report
from envdoctor.inputs import read_text as read_input
from envdoctor.model import Facts
from envdoctor.report import Report, ReportError, to_json

EXAMPLES = int(os.environ.get("ENVDOCTOR_FUZZ_EXAMPLES", "80"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

KEYS = ["torch.version", "torch.cuda_version", "torch.arch_list", "torch.devices", "nvml.gpus", "nvml.init",
        "nvml.driver_version", "nvml.device_count", "nvml.cuda_driver_version", "python.version", "python.packages",
        "driver.kernel_module_version", "cuda.init", "env.vars", "host.container", "torch.loaded_libraries"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=40), st.sampled_from(["2.6.0+cu126", "12.8", "9.0", "sm_90", "570.124.06",
                                                          "NVIDIA H100", "\x1b[31m", "\x9b", "hf_" + "A" * 24]))
json_values = st.recursive(scalars, lambda kids: st.one_of(st.lists(kids, max_size=5),
                                                           st.dictionaries(st.text(max_size=12), kids, max_size=5)),
                           max_leaves=25)
readings = st.one_of(json_values, st.fixed_dictionaries({"value": json_values}, optional={
    "reason": st.one_of(st.sampled_from(["absent", "timeout", "failed", "crashed", "bogus"]), json_values),
    "source": json_values, "detail": json_values}))
reports = st.fixed_dictionaries({"schema_version": st.one_of(st.just(1), json_values),
                                 "facts": st.one_of(st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=20)),
                                                                    readings, max_size=8), json_values)},
                                optional={"findings": json_values, "probes": json_values, "created_at": json_values,
                                          "origin": json_values, "warnings": json_values})


def _judge_and_render(loaded: Report | Facts) -> None:
    from rich.console import Console

    from envdoctor.output.render import healthcheck_line, render_markdown, render_terminal
    from envdoctor.pipeline.judge import judge

    facts = loaded if isinstance(loaded, Facts) else loaded.facts
    rep = judge(facts, () if isinstance(loaded, Facts) else loaded.probes, "fuzz")
    json.loads(to_json(rep))
    render_markdown(rep)
    render_terminal(rep, Console(file=io.StringIO(), width=80), verbose=True)
    healthcheck_line(rep.findings, 0.0)


def _load(text: str) -> Report | Facts | None:
    try:
        return parse_report(text, "fuzz")
    except ReportError as exc:
        assert str(exc) and "\n" not in str(exc)
        return None


@FUZZ
@given(reports)
def test_any_report_shaped_json_loads_or_is_refused_in_one_line(data):
    loaded = _load(json.dumps(data))
    if loaded is not None:
        _judge_and_render(loaded)


@FUZZ
@given(st.binary(max_size=2048))
def test_any_bytes_are_read_or_refused(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fuzz") / "input"
    path.write_bytes(data)
    try:
        text = read_input(str(path))
    except ReportError:
        return
    _load(text)


LINES = ["PyTorch version: 2.6.0+cu126", "CUDA used to build PyTorch: 12.6", "Is CUDA available: True",
         "GPU models and configuration: GPU 0: NVIDIA H100 80GB HBM3", "Nvidia driver version: 570.124.06",
         "cuDNN version: 9.1.0", "Python version: 3.12.1 (main) [GCC 11.2.0] (64-bit runtime)",
         "| NVIDIA-SMI 570.124.06   Driver Version: 570.124.06   CUDA Version: 12.8 |",
         "|   0  NVIDIA H100 80GB HBM3  On  | 00000000:18:00.0 Off |  0 |",
         "RuntimeError: CUDA error: no kernel image is available for execution on the device",
         "UserWarning: NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.",
         "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory",
         "torch==2.6.0", "nvidia-cudnn-cu12      9.1.0.70", "Error 802: system not yet initialized",
         "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4", "Ultralytics 8.3.2 🚀 Python-3.11 torch-2.6.0 CUDA:0 (H100, 81559MiB)"]


@FUZZ
@given(st.lists(st.one_of(st.sampled_from(LINES), st.text(max_size=80),
                          st.builds(lambda a, b: a[: len(a) // 2] + b, st.sampled_from(LINES), st.text(max_size=30))),
                min_size=1, max_size=25))
def test_pasted_text_in_any_mix_is_judged_or_refused(lines):
    loaded = _load("\n".join(lines) + "\n")
    if loaded is not None:
        _judge_and_render(loaded)


@FUZZ
@given(st.text(max_size=200), st.sampled_from(["hf_" + "Q" * 30, "ghp_" + "Z" * 36, "AKIA" + "7" * 16]))
def test_redaction_masks_a_token_wherever_it_sits(prefix, token):
    from envdoctor.redact import redact_text

    out = redact_text(prefix + "/" + token + "/tail")
    assert token not in out and redact_text(out) == out
