"""What a live run imports while its children run (envdoctor.pipeline.collect.overlap): for a terminal,
the renderer's rich modules, so the torch child's end is followed by judging and printing only."""

from __future__ import annotations

import subprocess
import sys

import pytest

CODE = ("import os, sys\n"
        "from envdoctor.pipeline import collect\n"
        "from envdoctor.pipeline.plan import Plan\n"
        "collect.overlap(Plan(command={command!r}, output={output!r}, fast={fast!r}))\n"
        "before = set(sys.modules)\n"
        "from envdoctor.output.render import make_console, render_terminal\n"
        "from envdoctor.pipeline.judge import judge\n"
        "from envdoctor.model import Facts\n"
        "rep = judge(Facts({{}}), (), 'live', Plan(command={command!r}))\n"
        "sys.stdout = open(os.devnull, 'w')\n"
        "render_terminal(rep, make_console())\n"
        "sys.stdout = sys.__stdout__\n"
        "print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in ('rich', 'envdoctor')))\n"
        "print('rich.console' in before)\n")


@pytest.mark.parametrize(("command", "output", "fast", "loaded"), [
    ("check", "terminal", False, True),
    ("report", "json", False, False),
    ("healthcheck", "line", True, False),
])
def test_a_terminal_run_imports_the_renderers_rich_while_the_children_run(command, output, fast, loaded):
    out = subprocess.run([sys.executable, "-c", CODE.format(command=command, output=output, fast=fast)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    late, early = out.stdout.strip().splitlines()[-2:]
    assert early == str(loaded)
    if loaded:
        assert late == "[]", late  # the first render imports nothing of rich or envdoctor any more
