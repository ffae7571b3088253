"""The first screen: problems first (fail → error → warn), a count of the rest, a block per problem in
the same order, evidence behind -v except the deciding line, a summary naming the failing ids; piped
output never wrapped, without trailing spaces, URLs and commands whole and printed once."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from envdoctor.output.render import remedy_lines
from tests.faults import run_cli

CORPUS = Path(__file__).resolve().parent / "corpus"
URL = re.compile(r"https?://\S+")


def _check(path: Path, *args: str, columns: str = "80") -> list[str]:
    out = run_cli(["diagnose", str(path), *args], env={"COLUMNS": columns}, timeout=60)
    assert out.rc == 3, out.text  # an error outranks the fail in the exit code
    return out.stdout.decode().splitlines()


def _rows(lines: list[str]) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for line in lines
            if (m := re.match(r"^\S (ok|warn|fail|skip|error) +([a-z0-9-]+) ", line))]


def test_problems_come_first_and_the_rest_is_one_counted_line(mixed):
    lines = _check(mixed)
    assert _rows(lines) == [("fail", "torch-arch-support"), ("error", "library-conflicts"), ("warn", "host-shm-size")]
    # The first rows after the header (headline, no target line for a paste) are the problems.
    assert lines[1].startswith("✖ fail") and lines[3].startswith("▲ warn")
    # What passed, what the report does not show and what does not apply are counted apart.
    assert re.fullmatch(r"\d+ ok · \d+ could not be judged \(not in the report: \d+, failed: \d+\) · \d+ not applicable "
                        r"here — -v lists them with why", lines[4])


def test_with_v_the_ok_and_skip_rows_follow_the_problems(mixed):
    statuses = [s for s, _ in _rows(_check(mixed, "-v"))]
    assert statuses[:3] == ["fail", "error", "warn"]
    assert statuses[3:] == sorted(statuses[3:], key=["ok", "skip"].index) and {"ok", "skip"} <= set(statuses)


def test_blocks_follow_in_the_same_order_and_the_summary_names_the_failing_ids(mixed):
    lines = _check(mixed)
    heads = [line.split(" — ")[0] for line in lines if re.match(r"^\S (fail|error|warn): ", line)]
    assert heads == ["✖ fail: torch-arch-support", "⁉ error: library-conflicts", "▲ warn: host-shm-size"]
    assert re.fullmatch(r"Summary: 1 fail \(torch-arch-support\) · 1 error \(library-conflicts\) · 1 warn "
                        r"\(host-shm-size\) · \d+ ok · \d+ skip \(\d+ could not be judged\)", lines[-1])


def test_evidence_beyond_the_deciding_line_is_behind_v(mixed):
    short = "\n".join(_check(mixed))
    full = "\n".join(_check(mixed, "-v"))
    assert short.count("Evidence:") == 3 and "(+3 more with -v)" in short
    # The deciding fact (the wheel's arch list) is shown; the rest (torch's version, ...) with -v.
    assert "Evidence: torch.arch_list = " in short and "torch.devices" not in short
    assert "Evidence: torch.devices = " in full


def test_piped_output_is_never_wrapped_and_commands_print_once(mixed):
    lines = _check(mixed, columns="80")
    assert not [line for line in lines if line != line.rstrip()]  # no trailing spaces
    verbose = _check(mixed, "-v", columns="80")  # the facts too: one line each, not a wrapped table
    assert not [line for line in verbose if line != line.rstrip()]
    assert "  torch.version = 2.6.0+cu126  (collect_env)" in verbose
    assert any(len(line) > 80 for line in lines)  # long lines are kept whole, not wrapped at 80
    text = "\n".join(lines)
    assert "https://pytorch.org/get-started/previous-versions/" in URL.findall(text)
    assert not any(line.lstrip().startswith(("│", "╭", "╰")) for line in lines)  # no boxes on a pipe
    command = "pip install --force-reinstall torch==2.7.1 --index-url https://download.pytorch.org/whl/cu128"
    assert text.count(command) == 1 and f"    {command}" in lines


def test_alternatives_print_as_either_or_each_command_whole():
    remedy = SimpleNamespace(commands=(), alternatives=(
        SimpleNamespace(text="downgrade torch", commands=("pip install torch==2.7.1 --index-url https://x/cu126",)),
        SimpleNamespace(text="upgrade the driver", commands=("sudo apt install nvidia-driver-570",)),
    ))
    assert remedy_lines(remedy) == [
        ("  either: downgrade torch", "bold green"), ("    pip install torch==2.7.1 --index-url https://x/cu126", "bold"),
        ("  or: upgrade the driver", "bold green"), ("    sudo apt install nvidia-driver-570", "bold")]
    steps = SimpleNamespace(commands=("pip uninstall -y torch", "pip install torch"))
    assert [line for line, _ in remedy_lines(steps)] == ["    pip uninstall -y torch", "    pip install torch"]


def test_on_a_terminal_problems_are_panels_and_commands_stay_outside_them(mixed):
    from rich.console import Console

    from envdoctor.inputs import load
    from envdoctor.output.render import render_terminal
    from envdoctor.pipeline.diagnose import diagnose
    from envdoctor.registry import load_registry
    from envdoctor.report import Report

    facts = load(str(mixed)).facts
    report = Report(facts=facts, findings=tuple(diagnose(facts, list(load_registry(plugins=False)))))
    console = Console(force_terminal=True, width=90, record=True, color_system=None, highlight=False)
    render_terminal(report, console)
    lines = console.export_text().splitlines()
    panels = [line for line in lines if line.startswith("╭─ ")]
    assert [p.split()[1:3] for p in panels] == [["fail:", "torch-arch-support"], ["error:", "library-conflicts"],
                                                ["warn:", "host-shm-size"]]
    command = "pip install --force-reinstall torch==2.7.1 --index-url https://download.pytorch.org/whl/cu128"
    assert f"    {command}" in lines  # one line, wider than the 90 columns, outside the box
