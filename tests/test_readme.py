"""The README's claims, checked: every shell block is either run here or says why not, the blocks
that can run here run, the sample output of `diagnose` is what envdoctor prints today, the test
command takes the CPU build of torch, and nothing tells a user to install a package no index has."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
MARKERS = ("<!-- runs-here -->", "<!-- test-command -->")
NOT_HERE = re.compile(r"<!-- not-run-here: (.+?) -->")
#: Blocks another test runs for real: the Slurm ones (tests/test_slurm.py, on a Slurm it starts) and the
#: fleet engines' configuration lines (tests/test_engines.py, against promtool and node_exporter).
RUN_ELSEWHERE = re.compile(r"<!-- (?:slurm-[a-z-]+|engine-config: \w+) -->")


def _shell_blocks() -> list[tuple[str, str]]:
    """(the marker line above it, the block's text) for every ```sh block."""
    lines = README.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() == "```sh":
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            above = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            blocks.append((above.strip(), "\n".join(lines[i + 1:end])))
    return blocks


def test_every_shell_block_runs_here_or_says_why_not():
    blocks = _shell_blocks()
    assert len(blocks) >= 5
    for above, text in blocks:
        reason = NOT_HERE.fullmatch(above)
        assert above in MARKERS or RUN_ELSEWHERE.fullmatch(above) or (reason and len(reason.group(1).split()) >= 4), \
            (above, text)


def _bin() -> Path:
    return Path(sys.executable).parent


@pytest.mark.parametrize("block", [t for a, t in _shell_blocks() if a == "<!-- runs-here -->"])
def test_the_blocks_that_run_here_run(block, tmp_path):
    """Run as a user pastes them, in a fresh folder, with envdoctor on PATH (~ is the folder)."""
    env = {**os.environ, "HOME": str(tmp_path), "PATH": f"{_bin()}:{os.environ['PATH']}",
           "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"}
    (tmp_path / ".config/fish/completions").mkdir(parents=True)
    for line in block.splitlines():
        # A line for another shell (zsh's `eval "$(…)"`): bash runs what it evaluates, zsh's script.
        inner = re.fullmatch(r'eval "\$\((.+)\)"\s*(#.*)?', line.strip())
        run = inner.group(1) if inner and "zsh" in line else line
        proc = subprocess.run(["bash", "-e", "-c", run], capture_output=True, text=True, cwd=tmp_path, env=env,
                              timeout=120)
        assert proc.returncode == 0 and not proc.stderr, (line, proc)
        if run is not line:
            assert proc.stdout.startswith("#compdef envdoctor"), proc.stdout[:200]
    assert "_envdoctor_completion" in (tmp_path / ".config/fish/completions/envdoctor.fish").read_text()


def test_the_test_command_takes_the_cpu_build_of_torch_and_ci_runs_it():
    [command] = [t for a, t in _shell_blocks() if a == "<!-- test-command -->"]
    assert "-r .ci/torch-cpu.txt" in command and "'torch==2.13.0'" not in command
    pins = [line for line in (ROOT / ".ci/torch-cpu.txt").read_text().splitlines()
            if line and not line.startswith("#")]
    assert "--find-links https://download.pytorch.org/whl/cpu/torch/" in pins
    assert 'torch==2.13.0+cpu; sys_platform != "darwin"' in pins  # Linux/Windows: the +cpu build or nothing
    assert "test-command" in (ROOT / ".ci/run").read_text()  # CI runs it verbatim
    assert "torch-cpu.txt" in (ROOT / ".ci/run").read_text()  # and its installed-layout venv takes the same


def test_the_diagnose_sample_is_what_envdoctor_prints_today():
    m = re.search(r"```\n\$ envdoctor diagnose (\S+)\n(.*?)\n\$ echo \$\?\n(\d+)\n```", README, re.S)
    assert m, "the diagnose sample is gone"
    env = {**os.environ, "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1", "NO_COLOR": "1"}
    env.pop("COLUMNS", None)
    proc = subprocess.run([sys.executable, "-m", "envdoctor", "diagnose", m.group(1)], capture_output=True, text=True,
                          cwd=ROOT / "tests/corpus", env=env, timeout=120)
    assert proc.stdout.splitlines() == m.group(2).splitlines()
    assert proc.returncode == int(m.group(3))


def test_the_one_node_cluster_sample_has_todays_format():
    m = re.search(r"\$ torchrun --nproc-per-node=4 -m envdoctor check --distributed\n(.*?)\n\$ echo", README, re.S)
    assert m
    lines = m.group(1).splitlines()
    assert lines[0].startswith("envdoctor 0.1.0 cluster check · 4 rank(s) · launcher torchrun · ")
    assert [line.split(" · ")[0] for line in lines if line.startswith("rank ")] == [f"rank {i}" for i in range(4)]
    assert lines[-1].startswith("Cluster summary: ") and " · 0 error · " in lines[-1]


def test_no_install_of_an_unpublished_package():
    """gpu-envdoctor is not on any index: the README and the remedies install from source or a wheel."""
    from envdoctor.knowledge import remedies

    assert "pip install gpu-envdoctor" not in README and "install --no-cache-dir gpu-envdoctor" not in README
    assert "published as" not in README
    assert "gpu-envdoctor" not in remedies.envdoctor_upgrade()


def test_the_kubernetes_job_counts_a_broken_node_and_never_ignores_it():
    assert "action: Ignore" not in README and "action: Count" in README
    assert "https://kubernetes.io/docs/tasks/job/pod-failure-policy/" in README


def test_contributing_shows_the_readmes_test_command() -> None:
    """CONTRIBUTING says the two always agree: hold it to that."""
    contributing = (Path(__file__).resolve().parent.parent / "CONTRIBUTING.md").read_text()
    readme_cmd = re.search(r"<!-- test-command -->\n```sh\n(.*?)\n```", README, re.S)
    assert readme_cmd and f"```sh\n{readme_cmd.group(1)}\n```" in contributing
