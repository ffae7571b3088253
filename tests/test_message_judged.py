"""Issue 21, round 2: a fact a message writes reaches the check that judges it, and one cause is said once.

Every catalogue row another check judges (``judged_by``) and every row whose words carry facts (``writes``) is
rendered with seeded random arguments (a written argument gets a value of its fact's kind) and buried in prose, the
way tests/test_message_catalogue.py does: the judging check gives the top finding, and ``known-message`` folds into
it instead of standing beside it. A row whose check cannot judge its (random) arguments is still said, once.
"""

from __future__ import annotations

import random

import pytest

from envdoctor.knowledge import catalogue
from envdoctor.model import Finding, Status
from envdoctor.parsers import parse_text
from envdoctor.pipeline.diagnose import diagnose, sort_findings
from envdoctor.registry import load_registry
from tests.test_message_catalogue import DATA, _arg, _buried, _rendered

REGISTRY = load_registry(plugins=False)
DATA_IDS = {row["id"] for row in DATA["messages"]}
JUDGED = [row for row in catalogue.messages() if row.judged_by]
WRITING = [row for row in catalogue.messages() if row.writes]


def _problems(text: str) -> list[Finding]:
    return [f for f in sort_findings(diagnose(parse_text(text), REGISTRY)) if f.status not in (Status.OK, Status.SKIP)]


def _value_of(key: str, rng: random.Random, taken: set[str]) -> str:
    """A value of the fact's kind, different from the row's other written values (two versions a check compares)."""
    while True:
        if key.startswith("driver."):
            value = f"{rng.choice((470, 525, 535, 550, 570))}.{rng.randint(10, 99)}.{rng.randint(10, 99)}"
        elif key == "torch.version":
            value = f"2.{rng.randint(0, 9)}.{rng.randint(0, 3)}"
        else:  # a CUDA version: the toolkit's, torch's, the driver's
            value = f"{rng.choice((10, 11, 12, 13))}.{rng.randint(0, 8)}"
        if value.split(".")[0] not in {t.split(".")[0] for t in taken}:
            taken.add(value)
            return value


def _written_rendering(row: catalogue.Message, rng: random.Random) -> str:
    conversions = [m.group(0) for m in catalogue._PLACEHOLDER_RE.finditer(row.format)]
    by_arg = {arg: key for key, arg in row.writes}
    leading = catalogue.placeholders(row.format) - catalogue.pattern_of(row.format)[0].groups  # not matched
    taken: set[str] = set()
    args = []
    for i, conv in enumerate(conversions, start=1):
        key = by_arg.get(i - leading)
        args.append(_value_of(key, rng, taken) if key else _arg(rng, conv))
    return catalogue.render(row.format, args)


@pytest.mark.parametrize("row", WRITING, ids=[row.id for row in WRITING])
def test_a_row_s_written_facts_reach_its_check_and_known_message_folds_into_it(row: catalogue.Message) -> None:
    rng = random.Random(f"issue-21-judged:{row.id}")
    for _ in range(3):
        line = _written_rendering(row, rng)
        found = _problems(_buried(line, rng))
        assert found, (row.id, line)
        if row.judged_by:
            assert found[0].id == row.judged_by, (row.id, line, [(f.id, f.title) for f in found])
            assert row.id in (found[0].evidence.get("text.messages") or ()) or not [
                f for f in found if f.id == "known-message"], (row.id, line)
        title = catalogue.causes()[row.cause].title
        assert len([f for f in found if f.id == "known-message" and f.title == title]) <= 1, (row.id, line)
        # known-message never stands beside the check that judged the row
        assert not (row.judged_by and any(f.id == "known-message" and row.id in (f.evidence.get("text.messages") or ())
                                          for f in found)), (row.id, line)


@pytest.mark.parametrize("row", JUDGED, ids=[row.id for row in JUDGED])
def test_a_judged_row_is_said_once_whatever_its_check_could_read(row: catalogue.Message) -> None:
    """With random arguments the judging check may have nothing to judge: the message is then known-message's (a
    fallback, never silence); when the check spoke, known-message does not say it a second time."""
    rng = random.Random(f"issue-21:{row.id}")
    for _ in range(3):
        line = _rendered(row, rng)
        found = _problems(_buried(line, rng))
        assert found, (row.id, line)
        assert found[0].id != "unexplained-error", (row.id, line)
        saying = [f for f in found if f.id == "known-message" and row.id in (f.evidence.get("text.messages") or ())]
        assert len(saying) <= 1, (row.id, line)
        checks = [f for f in found if f.id not in ("known-message", "unexplained-error")]
        if saying:  # the fallback: nothing else explains the line
            assert not checks or saying[0].status is Status.FAIL and all(
                f.status is not Status.FAIL for f in checks), (row.id, line, [(f.id, f.title) for f in found])
        if row.id in DATA_IDS and any(f.id == row.judged_by for f in found):
            assert not saying, (row.id, line)


# -- the named misses: a synthetic text and its negative twin -------------------------------------------------------
def test_deepspeed_s_refusal_is_toolkit_mismatch_and_equal_versions_are_not() -> None:
    text = ("Building op fused_adam ...\ndeepspeed.ops.op_builder.builder.CUDAMismatchException: >- DeepSpeed Op "
            "Builder: Installed CUDA version 11.7 does not match the version torch was compiled with 12.4, unable to "
            "compile cuda/cpp extensions without a matching cuda version.\n")
    found = _problems(text)
    assert found[0].id == "toolkit-mismatch" and found[0].status is Status.FAIL
    assert "11.7" in found[0].title and "12.4" in found[0].title
    assert not [f for f in found if f.id == "known-message"]
    twin = _problems("Building op fused_adam ...\nCuda compilation tools, release 12.4, V12.4.131\ntorch: 2.4.0+cu124\n")
    assert not [f for f in twin if f.id == "toolkit-mismatch"]


def test_jax_s_cudnn_version_check_is_cudnn_mismatch_and_a_newer_cudnn_is_not() -> None:
    text = ("2025-01-07 10:01:02.123: E external/xla/xla/stream_executor/cuda/cuda_dnn.cc:535] Loaded runtime CuDNN "
            "library: 8.9.2 but source was compiled with: 9.1.0.  CuDNN library needs to have matching major version "
            "and equal or higher minor version.\n")
    found = _problems(text)
    assert found[0].id == "cudnn-mismatch" and "8.9.2" in found[0].title and "9.1.0" in found[0].title
    assert not any("torch" in c for c in found[0].remediation.command_lines())
    assert not [f for f in found if f.id == "known-message"]
    twin = _problems("Driver Version: 550.54.14\nI0107 cuda_dnn.cc:501] Loaded cuDNN version 9100\n")
    assert not [f for f in twin if f.id == "cudnn-mismatch"]


# -- unexplained-error: never above what explains, never a heading or the reporter's sentence -----------------------
def test_a_markdown_heading_or_the_reporter_s_sentence_is_no_error_line() -> None:
    text = ("### Error / output\n\nUpdate - my gpu is detected now but the training still failed\n"
            "Traceback (most recent call last):\n  File \"/home/u/run.py\", line 3, in <module>\n"
            "ValueError: grid of 0 blocks requested\n")
    quoted = [f.evidence.get("line") for f in _problems(text) if f.id == "unexplained-error"]
    assert quoted == ["ValueError: grid of 0 blocks requested"]
    # its twin: the same failure said by a tool, not by the reporter, is still read
    tool = _problems("Driver Version: 550.54.14\n[2025-01-07 10:01:02] worker 3: the training step failed\n")
    assert [f.evidence.get("line") for f in tool if f.id == "unexplained-error"]


def test_an_unexplained_line_never_stands_above_the_finding_that_explains_the_text() -> None:
    text = ("RuntimeError: Found cuDNN version 8700, but JAX was built against version 8904, which is newer.\n"
            "frobnicator: ERROR widget stalled\n")
    found = _problems(text)
    assert found[0].id == "cudnn-mismatch"
    assert [f.id for f in found].index("unexplained-error") > 0


def test_within_a_status_an_unexplained_line_follows_every_cause_and_symptom() -> None:
    from envdoctor.kit import warn

    unexplained = warn("Unexplained error: x", id="unexplained-error")
    symptom = warn("A DataLoader worker died", id="known-message", evidence={"role": "symptom"})
    cause = warn("Shared memory is small", id="zz-later-check")
    assert [f.id for f in sort_findings([unexplained, symptom, cause])] == [
        "zz-later-check", "known-message", "unexplained-error"]


# -- a symptom whose usual cause the context shows: a DataLoader worker dying in a container -------------------------
_WORKER = ('Traceback (most recent call last):\n  File "/usr/local/lib/python3.10/dist-packages/torch/utils/data/'
           'dataloader.py", line 1133, in _try_get_data\n{line}\n')


@pytest.mark.parametrize("line", ["RuntimeError: DataLoader worker (pid(s) 4121) exited unexpectedly",
                                  "RuntimeError: DataLoader worker (pid 77) is killed by signal: Killed."])
@pytest.mark.parametrize("start", ["$ docker run --gpus all -it registry.test/train:1 python train.py",
                                   "$ kubectl logs trainer-0", "$ podman run --device nvidia.com/gpu=all img python t.py"])
def test_a_worker_that_died_in_a_container_started_without_shm_flags_is_its_small_dev_shm(line: str, start: str) -> None:
    found = _problems(start + "\n" + _WORKER.format(line=line))
    top = found[0]
    assert top.id == "dataloader-shm" and top.status is Status.FAIL
    commands = " ".join(top.remediation.command_lines())
    assert ("--shm-size" in commands and "--ipc=host" in commands) or "emptyDir" in commands
    assert "alternative reading" in top.detail and "out-of-memory killer" in top.detail
    assert not [f for f in found if f.id == "known-message"]  # the worker's death is its evidence, said once


@pytest.mark.parametrize("start", ["", "$ docker run --gpus all --shm-size=16g -it img python train.py",
                                   "$ docker run --gpus all --ipc=host -it img python train.py"])
def test_a_worker_that_died_outside_a_container_or_with_shm_given_keeps_today_s_words(start: str) -> None:
    found = _problems(start + "\n" + _WORKER.format(line="RuntimeError: DataLoader worker (pid(s) 4121) exited "
                                                             "unexpectedly"))
    assert not [f for f in found if f.id == "dataloader-shm"]
    assert found[0].id == "known-message" and "out-of-memory killer" in found[0].title


# -- CUDA's error strings with the GPU context ------------------------------------------------------------------------
_SMI = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.14              Driver Version: 550.54.14      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA A100-SXM4-40GB          On  |   00000000:07:00.0 Off |                    0 |
| N/A   33C    P0             52W /  400W |       4MiB /  40960MiB |      0%   {mode} |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+
"""


@pytest.mark.parametrize("error", [
    "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable",
    "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: failed call to cuInit: CUDA_ERROR_DEVICE_UNAVAILABLE"])
def test_busy_or_unavailable_on_an_exclusive_gpu_is_its_compute_mode(error: str) -> None:
    found = _problems(_SMI.format(mode="E. Process") + error + "\n")
    top = found[0]
    assert top.id == "gpu-compute-mode" and top.status is Status.FAIL and "Exclusive_Process" in top.title
    assert any("-c DEFAULT" in c for c in top.remediation.command_lines())
    assert not [f for f in found if f.id in ("known-message", "cuda-init")]  # said once
    # the negative twin: the GPU in Default mode; still a finding of the busy GPU, never the compute mode's cure
    twin = _problems(_SMI.format(mode="   Default") + error + "\n")
    assert twin[0].id == "gpu-compute-mode" and "Exclusive" not in twin[0].title
    assert not any("-c DEFAULT" in c for c in twin[0].remediation.command_lines())


def test_no_kernel_image_goes_to_the_arch_check_when_the_gpu_and_torch_are_known() -> None:
    line = "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    known = _problems("torch: 2.5.1+cu121\nGPU 0: NVIDIA GeForce RTX 5090 (UUID: GPU-1234)\n" + line)
    assert known[0].id == "torch-arch-support" and known[0].status is Status.FAIL
    assert not [f for f in known if f.id == "known-message"]
    alone = _problems(line)  # nothing says which GPU or torch: still said, never "No problems found"
    assert alone and alone[0].id == "known-message" and alone[0].status is Status.WARN


def test_a_symptom_folds_into_a_failing_cause_only_never_into_an_unrelated_warning() -> None:
    from envdoctor.kit import fail, warn
    from envdoctor.pipeline.diagnose import fold_symptoms

    symptom = warn("A DataLoader worker process died", id="known-message",
                   evidence={"role": "symptom", "text.messages": ["dataloader-exited"], "lines": ["x"],
                             "cause": "dataloader-worker-killed"})
    unrelated = warn("Persistence mode is off", id="gpu-persistence")
    assert fold_symptoms([unrelated, symptom]) == [unrelated, symptom]
    cause = fail("DataLoader workers ran out of shared memory", id="dataloader-shm")
    folded = fold_symptoms([unrelated, cause, symptom])
    assert [f.id for f in folded] == ["gpu-persistence", "dataloader-shm"]
    assert list(folded[1].evidence["symptoms"]) == ["dataloader-exited"]
    # a failure that does not lead to it (messages.json's led_by) takes no symptom: both stand
    other = fail("torch is the CPU-only build", id="torch-cpu-build")
    assert fold_symptoms([other, symptom]) == [other, symptom]


def test_every_led_by_names_a_cause_of_the_catalogue_or_a_registered_check() -> None:
    from envdoctor.knowledge import catalogue

    ids = {s.id for s in load_registry(plugins=False)} | set(catalogue.causes())
    for cid, cause in catalogue.causes().items():
        assert set(cause.led_by) <= ids, (cid, sorted(set(cause.led_by) - ids))
        if cause.role == "symptom":
            assert cause.led_by, f"{cid}: a symptom says what leads to it"


@pytest.mark.parametrize("text, stands", [
    # a DataLoader worker's death is no symptom of a CPU-only torch: both are said, each with its own remedy
    ("RuntimeError: DataLoader worker (pid 4321) is killed by signal: Killed.\n"
     "AssertionError: Torch not compiled with CUDA enabled\n", "A DataLoader worker process died"),
    # nor is CUDA seeing no GPU one of a compiler mismatch
    ("Your compiler (c++) is not compatible with the compiler Pytorch was built with for this platform, which is g++ "
     "on linux.\nRuntimeError: No CUDA GPUs are available\n", "CUDA sees no GPU"),
])
def test_a_symptom_beside_a_failure_that_does_not_lead_to_it_stands_on_its_own(text: str, stands: str) -> None:
    found = _problems(text)
    assert any(f.title.startswith(stands) for f in found), [(f.id, f.title) for f in found]
