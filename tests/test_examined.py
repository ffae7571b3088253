"""What was examined: "No problems found" is said only about facts that were read, and the screen,
the Markdown and the JSON summary count what could not be judged ("not in the text") apart from what
passed and from what does not apply."""

from __future__ import annotations

import json

from envdoctor.checks.driver import cuda_visible_devices

from envdoctor.kit import evidence, ok, skip, warn
from envdoctor.model import Reason, Status, missing
from envdoctor.output.examined import Examined, unjudged_because

from .builders import facts
from .fakes.nvidia_facts import nv_facts
from .judging import judge_one
from .test_cli import run

LIBCUDART = b"ImportError: libcudart.so.12: cannot open shared object file: No such file or directory\n"


def test_a_variable_the_paste_does_not_show_is_unknown_not_unset() -> None:
    shown_unset = judge_one(cuda_visible_devices, nv_facts())  # the live probe read the environment
    assert shown_unset.status is Status.OK and "is unset" in shown_unset.title
    for unknown in (None, missing(Reason.NOT_IN_REPORT, "parser:collect_env"), missing(Reason.NOT_COLLECTED)):
        found = judge_one(cuda_visible_devices, nv_facts(visibility__cuda_visible_devices=unknown))
        assert found.status is Status.SKIP and "not read" in found.title, found


def test_the_headline_speaks_only_of_what_was_examined() -> None:
    f = facts(host__shm_size=missing(Reason.NOT_IN_REPORT, "parser:collect_env"))
    passed = ok("torch imports", evidence=evidence(f, "torch.version"))
    unread = skip("/dev/shm size not known", evidence=evidence(f, "host.shm_size"))
    absent = skip("Not in a container", evidence=evidence(f, "host.container"))
    seen = Examined.of([passed, unread, unread, absent], f, "paste:stdin")
    assert (seen.passed, seen.unjudged_count, seen.not_applicable) == (1, 2, 1)
    assert seen.headline() == ("No problems found in what this text shows (1 check passed); 2 could not be judged: "
                               "not in the text.")
    assert seen.counts() == ["1 ok", "2 could not be judged: not in the text", "1 not applicable here"]
    assert Examined.of([unread], f, "paste:stdin").headline() == \
        "Nothing in this text could be judged: 1 check needs facts it does not show."
    nothing = Examined.of([unread, absent], f, "paste:stdin").headline()
    assert nothing is not None and not nothing.startswith("No problems found") and "could be judged" in nothing
    assert Examined.of([passed, warn("x")], f, "paste:stdin").headline() is None  # problems: the rows say it


def test_a_live_run_names_the_real_reason() -> None:
    f = facts(host__shm_size=missing(Reason.DENIED, "host", "permission denied"))
    unread = skip("/dev/shm size not known", evidence=evidence(f, "host.shm_size"))
    assert unjudged_because(unread, f, "live") == "denied"
    seen = Examined.of([ok("torch imports", evidence=evidence(f, "torch.version")), unread], f, "live")
    assert seen.headline() == "No problems found in what was examined (1 check passed); 1 could not be judged: denied."


def test_the_headline_loader_paste_is_never_an_all_clear() -> None:
    proc = run("diagnose", "-", stdin=LIBCUDART)
    out = proc.stdout.decode()
    assert "No problems found" not in out, out
    assert "CUDA_VISIBLE_DEVICES is unset" not in run("diagnose", "-", "-v", stdin=LIBCUDART).stdout.decode()
    assert "could not be judged" in out or "could be judged" in out
    report = json.loads(run("diagnose", "-", "--json", stdin=LIBCUDART).stdout)
    assert report["summary"]["ok"] == 0 and report["summary"]["unjudged"] > 0
    assert report["summary"]["worst"] != "ok"
    visible = next(f for f in report["findings"] if f["id"] == "cuda-visible-devices")
    assert visible["status"] == "skip"
    markdown = run("diagnose", "-", "--markdown", stdin=LIBCUDART).stdout.decode()
    assert "No problems found" not in markdown and "could not be judged" in markdown


def test_a_paste_that_passes_says_what_it_showed() -> None:
    from pathlib import Path

    case = Path(__file__).parent / "corpus" / "pytorch-121631-healthy-a10x2.txt"
    out = run("diagnose", str(case)).stdout.decode()
    head = next(line for line in out.splitlines() if line.startswith("No problems found"))
    assert head.startswith("No problems found in what this text shows (") and "not in the text" in head
    report = json.loads(run("diagnose", str(case), "--json").stdout)
    assert report["summary"]["worst"] == "ok" and report["summary"]["unjudged"] > 0


def test_a_text_that_does_not_show_torch_the_driver_or_the_gpus_is_not_an_all_clear() -> None:
    # A driver line alone passes a check or two, but says nothing of torch's build or the GPUs: what decides most
    # problems. Such a text is told what it lacks and what to paste, never "No problems found".
    from envdoctor.knowledge.remedies import COLLECT_ENV

    text = b"NVIDIA-SMI 475.14       Driver Version: 475.14       CUDA Version: 11.4\nPython 3.10.11\n"
    out = run("diagnose", "-", stdin=text).stdout.decode()
    assert "No problems found" not in out, out
    head = out.splitlines()[1]
    assert head.startswith("Nothing wrong in what this text shows (") and "torch's build or the GPUs" in head, head
    assert f"`{COLLECT_ENV}`" in head
    markdown = run("diagnose", "-", "--markdown", stdin=text).stdout.decode()
    assert "No problems found" not in markdown and "does not show torch's build" in markdown


def test_a_saved_live_report_and_a_live_run_keep_their_all_clear() -> None:
    # The rule is about what a text shows: a live run probed everything it could, whatever it found.
    f = facts(host__shm_size=missing(Reason.DENIED, "host", "permission denied"))
    seen = Examined.of([ok("torch imports", evidence=evidence(f, "torch.version"))], f, "live")
    assert seen.not_shown == () and seen.headline() == "No problems found in what was examined (1 check passed)."
