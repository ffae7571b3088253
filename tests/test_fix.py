"""``envdoctor fix``: the plan, the snapshot, the apply, the verification and the rollback.

The slow tests seed broken venvs (tests/fixenv.py: hand-written wheels, ``--without-pip`` venvs) and
run the CLI on them with a stand-in GPU (the NVML stand-in of tests/fakes) and only local wheel
folders: pip runs with ``PIP_NO_INDEX=1`` and ``--torch-index`` names a folder, so nothing reaches a
network. Figures: every fixable venv fixed and verified, every other one restored to a byte-identical
``pip freeze --all``, the CUDA torch kept by every companion install.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from envdoctor.commands.fix import _uv, restore_snapshot, restore_tree, take_tree
from envdoctor.knowledge import remedies
from envdoctor.model import Finding, Remediation, Status
from envdoctor.pipeline.fixplan import Environment, plan_fix

from . import fixenv
from .faults import run_cli

PY = "/v/bin/python"


def _finding(fid: str, status: Status, *commands: str) -> Finding:
    return Finding(id=fid, status=status, title=fid, remediation=Remediation("do it", tuple(commands)))


# -- the plan (pure) -------------------------------------------------------------------------------
def test_a_pip_remedy_of_a_failing_finding_is_a_step_with_its_own_typed_command() -> None:
    line = remedies.torch_install(PY, "2.5.1", "cu124")
    plan = plan_fix([_finding("torch-cpu-build", Status.FAIL, remedies.pip_uninstall(PY, "torch"), line)],
                    Environment(python=PY, prefix="/v"))
    assert plan.answered == ("torch-cpu-build",)
    assert [s.command for s in plan.steps] == [remedies.PipUninstall(PY, ("torch",)), line.command]
    assert plan.steps[1].command.render() == str(line)  # the printed remedy is the step


def test_a_remedy_with_a_root_step_is_printed_never_run() -> None:
    plan = plan_fix([_finding("cuda-init", Status.FAIL, remedies.apt_install("libnvidia-compute-570"),
                              remedies.pip_install(PY, "x"))], Environment(python=PY, prefix="/v"))
    assert not plan.steps and plan.manual[0].needs_root


def test_read_only_pip_commands_are_no_steps_and_ok_findings_are_not_answered() -> None:
    show = remedies.pip(PY, "show nvidia-cublas-cu13")
    plan = plan_fix([_finding("cuda-major-mix", Status.WARN, show, remedies.pip_uninstall(PY, "nvidia-cublas-cu13")),
                     _finding("torch-companions", Status.OK, remedies.pip_install(PY, "torchvision"))],
                    Environment(python=PY, prefix="/v"))
    assert [s.command.render() for s in plan.steps] == [f"{PY} -m pip uninstall -y nvidia-cublas-cu13"]


def test_another_interpreters_pip_and_placeholders_are_not_run() -> None:
    plan = plan_fix([_finding("a", Status.FAIL, remedies.pip_install("/other/python", "x")),
                     _finding("b", Status.FAIL, remedies.torch_install(PY, None, "<the cuXYZ build the message names>"))],
                    Environment(python=PY, prefix="/v"))
    assert not plan.steps and len(plan.manual) == 2


def test_companions_get_the_constraints_torch_installs_do_not_and_uv_runs_a_uv_venv() -> None:
    env = Environment(python=PY, prefix="/v", installer="uv", torch="2.5.1+cu121", constraints="/v/c.txt",
                      torch_index="/idx")
    plan = plan_fix([_finding("x", Status.WARN, remedies.pip_replace(PY, "cupy-cuda11x", "cupy-cuda12x")),
                     _finding("y", Status.FAIL, remedies.torch_install(PY, "2.5.1", "cu124", ("torchvision",)))], env)
    cmds = [s.command for s in plan.steps]
    assert cmds[1].argv()[-2:] == ["-c", "/v/c.txt"]  # type: ignore[attr-defined]
    assert cmds[2].argv()[:5] == ["uv", "pip", "install", "--python", PY]  # type: ignore[attr-defined]
    assert "-c" not in cmds[2].argv() and cmds[2].argv()[-3:] == ["--no-index", "--find-links", "/idx/cu124"]  # type: ignore[attr-defined]


def test_a_package_conda_installed_is_left_to_conda() -> None:
    env = Environment(python=PY, prefix="/v", conda=True, conda_owned=("torch",))
    plan = plan_fix([_finding("t", Status.FAIL, remedies.torch_install(PY, "2.5.1", "cu124"))], env)
    assert not plan.steps and "conda" in plan.manual[0].why


def test_with_the_envs_conda_a_conda_owned_torch_is_a_conda_step() -> None:
    # PyTorch's channel up to 2.5 (pytorch-cuda=, -c pytorch -c nvidia), conda-forge after it (*cuda*, cuda-version).
    env = Environment(python=PY, prefix="/v", conda=True, conda_owned=("pytorch",), conda_exe="/base/bin/conda")
    for version, variant, argv in (
            ("2.5.1", "cu124", ["pytorch=2.5.1", "pytorch-cuda=12.4", "torchvision", "-c", "pytorch", "-c", "nvidia"]),
            ("2.4.1", "cpu", ["pytorch=2.4.1", "cpuonly", "torchvision", "-c", "pytorch"]),
            ("2.7.1", "cu128", ["pytorch=2.7.1=*cuda*", "cuda-version=12.8", "torchvision", "-c", "conda-forge"])):
        install = remedies.torch_install(PY, version, variant, ("torchvision",), force=False)
        plan = plan_fix([_finding("torch-cpu-build", Status.FAIL, remedies.pip_uninstall(PY, ("torch", "torchvision")),
                                  install)], env)
        (step,) = plan.steps  # the uninstall is left to conda, which replaces a build in place
        assert step.command.argv() == ["/base/bin/conda", "install", "-p", "/v", "-y", *argv]
        assert step.command.torch_targets() == ((version, None if variant == "cpu" else variant),)
        assert plan.answered == ("torch-cpu-build",) and not plan.manual
    # An uninstall nothing puts back has no conda form here: printed.
    plan = plan_fix([_finding("t", Status.WARN, remedies.pip_uninstall(PY, "torch"))], env)
    assert not plan.steps and "conda" in plan.manual[0].why


def test_the_printed_remedies_of_a_check_are_unchanged_by_the_fix_fields() -> None:
    line = remedies.torch_install(PY, "2.5.1", "cu124", ("torchvision",))
    assert str(line) == f"{PY} -m pip install --force-reinstall torch==2.5.1 torchvision --index-url " \
                        f"{remedies.index_url('cu124')}"
    assert str(remedies.pip_uninstall(PY, "torch")) == f"{PY} -m pip uninstall -y torch"


# -- the snapshot of the files (fast) --------------------------------------------------------------
def test_the_tree_restores_removed_changed_and_added_files_and_links(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("old")
    (site / "keep.txt").write_text("k")
    (site / "link").symlink_to("keep.txt")
    take_tree([str(site)], tmp_path / "tree")
    shutil.rmtree(site / "torch")
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("new")
    (site / "added").mkdir()
    (site / "added" / "x.py").write_text("x")
    os.unlink(site / "link")
    restore_tree([str(site)], tmp_path / "tree")
    assert (site / "torch" / "__init__.py").read_text() == "old"
    assert not (site / "added").exists() and os.readlink(site / "link") == "keep.txt"
    assert sorted(p.name for p in site.iterdir()) == ["keep.txt", "link", "torch"]


def test_restore_of_a_folder_that_is_no_snapshot_is_a_usage_error(tmp_path: Path) -> None:
    said: list[str] = []
    assert restore_snapshot(str(tmp_path), echo=said.append) == 2
    assert "not a snapshot" in said[0]


# -- seeded venvs (slow) ---------------------------------------------------------------------------
ARCH_OLD = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86")
ARCH_ALL = ARCH_OLD + ("sm_90",)


@dataclass
class World:
    root: Path
    pip_dir: Path
    seed: Path
    pypi: Path
    torch_index: Path
    broken_index: Path
    slow_index: Path
    nvml_dir: str


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    from .fakes.nvidia_fakes import fake_nvml

    root = tmp_path_factory.mktemp("fix")
    # seed/: every wheel a venv is seeded from; pypi/: what PyPI holds (torch without a local tag); the
    # torch index: one folder per variant, as PyTorch's index has.
    seed, pypi = root / "seed", root / "pypi"
    index, broken, slow = root / "torch-index", root / "broken-index", root / "slow-index"
    for v in ("2.5.1+cpu", "2.4.0+cpu"):
        fixenv.torch_wheel(seed, v)
    fixenv.torch_wheel(pypi, "2.6.0")  # PyPI's own torch: what an unconstrained companion install pulls in
    fixenv.torch_wheel(seed, "2.5.1+cu121", arch=ARCH_OLD)
    fixenv.torch_wheel(seed, "2.5.1+cu124", arch=ARCH_ALL)
    fixenv.torch_wheel(seed, "2.4.0+cu121", arch=ARCH_OLD)
    fixenv.torch_wheel(index / "cu124", "2.4.1+cu124", arch=ARCH_ALL)
    for name, version, req in (("torchvision", "0.19.0+cu121", "torch==2.4.0"), ("torchaudio", "2.4.0+cu121", "torch==2.4.0"),
                               ("torchvision", "0.20.1+cu121", "torch==2.5.1"), ("torchaudio", "2.5.1+cu121", "torch==2.5.1")):
        fixenv.module_wheel(seed, name, version, (req,))
        fixenv.module_wheel(index / "cu121", name, version, (req,))
    for name, version, req in (("torchvision", "0.20.1+cu124", "torch==2.5.1"), ("torchaudio", "2.5.1+cu124", "torch==2.5.1")):
        fixenv.module_wheel(index / "cu124", name, version, (req,))
    fixenv.torch_wheel(index / "cu121", "2.5.1+cu121", arch=ARCH_OLD)
    fixenv.torch_wheel(index / "cu124", "2.5.1+cu124", arch=ARCH_ALL)
    fixenv.torch_wheel(index / "cpu", "2.5.1+cpu")
    for name, version in (("nvidia-cublas-cu12", "12.4.5.8"), ("nvidia-cublas-cu13", "13.0.0.19"),
                          ("nvidia-cudnn-cu13", "9.13.0.50"), ("nvidia-cuda-runtime-cu13", "13.0.48"),
                          ("cupy-cuda11x", "13.3.0"), ("numpy", "2.1.0"), ("numpy", "1.26.4"), ("xformers", "0.0.27")):
        fixenv.module_wheel(pypi, name, version)
    fixenv.module_wheel(pypi, "cupy-cuda12x", "13.3.0", ("torch>=2.6",))  # the newest pulls another torch
    fixenv.module_wheel(pypi, "cupy-cuda12x", "13.2.0")
    for wheel in pypi.glob("*.whl"):
        shutil.copy2(wheel, seed / wheel.name)
    # A mirror whose "cu124" torch is mislabelled (a CPU build): the install succeeds, the check still fails.
    _mislabelled(broken / "cu124")
    fixenv.torch_wheel(slow / "cu124", "2.5.1+cu124", arch=ARCH_ALL, payload=96 << 20)
    nvml = fake_nvml(root, {"count": 1})
    return World(root, fixenv.pip_folder(root), seed, pypi, index, broken, slow, nvml["_LIB_DIRS"])


def _mislabelled(folder: Path) -> None:
    source = fixenv.TORCH_SOURCE.format(version="2.5.1+cu124", cuda=None, arch=())
    fixenv.write_wheel(folder, "torch", "2.5.1+cu124", {"torch/__init__.py": source})


@dataclass
class Case:
    name: str
    seed: tuple[str, ...]
    fixable: bool
    cc: str = "8.0"
    kind: str = "venv"  # venv, uv, conda, system
    index: str = "good"  # good, broken, slow, missing
    conda_owned: tuple[str, ...] = ()
    expect_steps: bool = True
    notes: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case("cpu-wheel-on-a-gpu", ("torch==2.5.1+cpu",), True),
    Case("cpu-wheel-older-torch", ("torch==2.4.0+cpu",), True),
    Case("cpu-wheel-on-an-older-gpu", ("torch==2.5.1+cpu",), True, cc="7.0"),
    Case("arch-the-wheel-lacks", ("torch==2.5.1+cu121",), True, cc="9.0"),
    Case("torchvision-for-another-torch", ("torch==2.5.1+cu121", "torchvision==0.19.0+cu121"), True),
    Case("torchaudio-for-another-torch", ("torch==2.5.1+cu121", "torchaudio==2.4.0+cu121"), True),
    Case("both-companions-for-another-torch", ("torch==2.5.1+cu121", "torchvision==0.19.0+cu121",
                                               "torchaudio==2.4.0+cu121"), True),
    Case("cu12-and-cu13-nvidia-wheels", ("torch==2.5.1+cu121", "nvidia-cublas-cu12", "nvidia-cublas-cu13"), True),
    Case("three-cu13-leftovers", ("torch==2.5.1+cu121", "nvidia-cublas-cu12", "nvidia-cublas-cu13",
                                  "nvidia-cudnn-cu13", "nvidia-cuda-runtime-cu13"), True),
    Case("companion-that-would-replace-the-cuda-torch", ("torch==2.5.1+cu121", "cupy-cuda11x"), True),
    Case("uv-managed-venv", ("torch==2.5.1+cpu",), True, kind="uv"),
    Case("conda-style-prefix", ("torch==2.5.1+cpu",), True, kind="conda"),
    Case("conda-owns-torch", ("torch==2.5.1+cpu",), False, kind="conda", conda_owned=("torch",), expect_steps=False),
    # The env's own conda (a stand-in: tests/fakes/conda_standin.py, not a real conda) changes what conda installed.
    Case("conda-owns-torch-and-conda-fixes-it", ("torch==2.5.1+cpu",), True, kind="conda", conda_owned=("pytorch",),
         notes={"conda": True}),
    Case("conda-with-a-mislabelled-wheel", ("torch==2.5.1+cpu",), False, kind="conda", conda_owned=("pytorch",),
         index="broken", notes={"conda": True}),
    # Its remedies install into a new venv (PEP 668): the user's steps, never fix's.
    Case("externally-managed-interpreter", ("torch==2.5.1+cpu",), False, kind="system", expect_steps=False),
    Case("numpy-2-under-an-old-torch", ("torch==2.4.0+cu121", "numpy==2.1.0"), False, expect_steps=False),
    Case("extension-built-for-another-torch", ("torch==2.5.1+cu121", "xformers"), False, expect_steps=False),
    Case("healthy-cuda-torch", ("torch==2.5.1+cu124",), False, expect_steps=False),
    Case("mirror-with-a-mislabelled-wheel", ("torch==2.5.1+cpu",), False, index="broken"),
    Case("mirror-without-the-wheel", ("torch==2.5.1+cpu", "torchvision==0.20.1+cu121"), False, index="missing"),
    Case("mirror-without-companions", ("torch==2.5.1+cu121", "torchvision==0.19.0+cu121"), False, index="missing"),
    Case("companion-with-no-release-for-this-torch", ("torch==2.5.1+cu121", "cupy-cuda11x"), False,
         notes={"only_newest_cupy": True}),
]


_BASES: dict[tuple[str, tuple[str, ...]], Path] = {}
_BASES_LOCK = threading.Lock()


def _base(world: World, seed: tuple[str, ...]) -> Path:
    """One venv seeded with ``seed``, made once per world and copied for each case that starts from it
    (a copy is milliseconds, a pip install of the seed a second or more on a loaded machine)."""
    key = (str(world.root), seed)
    with _BASES_LOCK:
        if key not in _BASES:
            where = world.root / "bases" / str(len(_BASES))
            python = fixenv.make_venv(where, world.pip_dir)
            fixenv.pip_install(python, world.seed, *seed)
            _BASES[key] = where
        return _BASES[key]


def _seed(world: World, case: Case) -> Path:
    where = world.root / "venvs" / case.name
    if case.kind == "system":
        python = fixenv.make_system_prefix(where, world.pip_dir)
        fixenv.pip_install(python, world.seed, *case.seed, system=True)
    else:
        # A venv finds its prefix from where bin/python is, so a copy (links kept) is a venv of its own.
        shutil.copytree(_base(world, case.seed), where, symlinks=True)
        python = fixenv.mark_venv(where, uv=case.kind == "uv", conda=case.kind == "conda")
    for name in case.conda_owned:
        (where / "conda-meta" / f"{name}-2.5.1-cpu_0.json").write_text(json.dumps({"name": name}))
    return python


def _index(world: World, case: Case) -> Path:
    return {"good": world.torch_index, "broken": world.broken_index, "slow": world.slow_index,
            "missing": world.root / "empty-index"}[case.index]


CONDA_STANDIN = Path(__file__).resolve().parent / "fakes" / "conda_standin.py"


def _env(world: World, case: Case, cfg: Path, pypi: Path | None = None) -> dict[str, str]:
    conda = {"CONDA_EXE": str(CONDA_STANDIN), "CONDA_STANDIN_CHANNEL": str(_index(world, case)),
             "CONDA_STANDIN_LOG": str(world.root / f"conda-{case.name}.log")} if case.notes.get("conda") else \
        {"CONDA_EXE": ""}
    return {"FAKE_NVML_CONFIG": str(cfg), "LD_LIBRARY_PATH": world.nvml_dir, "ENVDOCTOR_STANDIN_CC": case.cc,
            "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(pypi or world.pypi), "UV_OFFLINE": "1",
            "UV_FIND_LINKS": str(pypi or world.pypi), **conda}


def _nvml_cfg(world: World, case: Case) -> Path:
    cfg = world.root / f"nvml-{case.name}.cfg"
    cfg.write_text(f"count=1\ndriver_version=570.124.06\ncuda_version=12080\ngpu0.cc={case.cc}\n")
    return cfg


def _pypi_for(world: World, case: Case) -> Path:
    if not case.notes.get("only_newest_cupy"):
        return world.pypi
    folder = world.root / "pypi-newest-cupy"
    if not folder.exists():
        shutil.copytree(world.pypi, folder)
        (folder / "cupy_cuda12x-13.2.0-py3-none-any.whl").unlink()
    return folder


def _torch(freeze: bytes) -> str | None:
    return next((line.split("==", 1)[1] for line in freeze.decode().splitlines() if line.startswith("torch==")), None)


def _run_case(world: World, case: Case) -> dict[str, Any]:
    python = _seed(world, case)
    before = fixenv.freeze(python)
    meta_before = _conda_meta(python)
    cfg = _nvml_cfg(world, case)
    (world.root / "empty-index").mkdir(exist_ok=True)
    out = run_cli(["fix", "--yes", "--json", "--python", str(python), "--torch-index", str(_index(world, case))],
                  env=_env(world, case, cfg, _pypi_for(world, case)), timeout=240)
    after = fixenv.freeze(python)
    doc = json.loads(out.stdout) if out.stdout.strip().startswith(b"{") else {}
    return {"case": case, "rc": out.rc, "doc": doc, "before": before, "after": after, "text": out.text,
            "meta_before": meta_before, "meta_after": _conda_meta(python)}


def _conda_meta(python: Path) -> dict[str, bytes]:
    folder = python.parent.parent / "conda-meta"
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.is_dir() else {}


@pytest.fixture(scope="module")
def results(world: World) -> list[dict[str, Any]]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda c: _run_case(world, c), CASES))


def test_seeded_venvs_are_fixed_and_verified_or_restored_byte_for_byte(results: list[dict[str, Any]]) -> None:
    fixable = [r for r in results if r["case"].fixable]
    others = [r for r in results if not r["case"].fixable]
    uv_missing = _uv() is None
    fixed = [r for r in fixable if r["rc"] == 0 and r["doc"].get("outcome", {}).get("status") == "fixed"]
    identical = [r for r in others if r["after"] == r["before"]]
    lines = [f"{r['case'].name}: rc={r['rc']} {r['doc'].get('outcome', {}).get('status')}" for r in results]
    print("\n".join(lines))
    print(f"fixable fixed and verified: {len(fixed)}/{len(fixable)}; others byte-identical: "
          f"{len(identical)}/{len(others)}")
    assert len(results) >= 20
    expected_fixed = len(fixable) - (1 if uv_missing else 0)  # without uv a uv venv cannot be fixed (exit 3)
    assert len(fixed) >= max(expected_fixed, int(0.9 * len(fixable) + 0.999) - (1 if uv_missing else 0)), \
        "\n".join(r["text"][-3000:] for r in fixable if r not in fixed)
    assert len(identical) == len(others), "\n".join(r["text"][-3000:] for r in others if r not in identical)
    for r in results:
        doc, case = r["doc"], r["case"]
        assert doc.get("kind") == "envdoctor-fix", r["text"]
        if case.name == "uv-managed-venv" and uv_missing:
            assert r["rc"] == 3 and r["after"] == r["before"] and doc["target"]["installer"] == "uv", r["text"]
            continue
        # No change without a printed plan: every command run is a step of the plan printed first.
        planned = [s["command"] for s in doc["plan"]["steps"]]
        ran = [s["command"] for s in doc["outcome"]["steps"]]
        assert ran == planned[:len(ran)], r["text"]
        assert bool(planned) == case.expect_steps, r["text"]
        if r["after"] != r["before"]:
            assert r["rc"] == 0, r["text"]
        else:
            assert r["rc"] == (0 if case.fixable else 1), r["text"]
        if not case.fixable and ran:
            assert doc["outcome"]["restored"]["identical"] is True, r["text"]
            assert doc["outcome"]["status"] == "rolled-back"
        # The CUDA torch survives every companion install (only a step that names torch changes it).
        torch_before = _torch(r["before"])
        names_torch = any("torch==" in c for c in ran)
        if torch_before and "+cu" in torch_before and not names_torch:
            assert _torch(r["after"]) == torch_before, r["text"]


def test_the_constrained_companion_keeps_the_cuda_torch(results: list[dict[str, Any]]) -> None:
    r = next(r for r in results if r["case"].name == "companion-that-would-replace-the-cuda-torch")
    assert _torch(r["after"]) == "2.5.1+cu121", r["text"]
    assert b"cupy-cuda12x==13.2.0" in r["after"], r["after"]  # the release that pairs with the installed torch
    step = r["doc"]["plan"]["steps"][-1]
    assert step["argv"][-2] == "-c" and "torch==2.5.1+cu121" in Path(step["argv"][-1]).read_text()


def test_a_uv_managed_venv_is_changed_by_uv(results: list[dict[str, Any]]) -> None:
    r = next(r for r in results if r["case"].name == "uv-managed-venv")
    steps = r["doc"]["plan"]["steps"]
    assert steps and all(s["installer"] == "uv" and s["argv"][:3] == ["uv", "pip", s["argv"][2]] for s in steps)
    if _uv() is not None:
        assert r["doc"]["outcome"]["status"] == "fixed", r["text"]


def test_the_refusal_of_an_externally_managed_interpreter_advises_a_venv(results: list[dict[str, Any]]) -> None:
    r = next(r for r in results if r["case"].name == "externally-managed-interpreter")
    assert r["doc"]["outcome"]["status"] == "refused" and r["rc"] == 1
    assert "--break-system-packages" not in " ".join(str(s) for s in r["doc"]["plan"]["steps"])


def test_without_yes_the_plan_is_printed_and_nothing_changes(world: World) -> None:
    case = Case("plan-only", ("torch==2.5.1+cpu",), True)
    python = _seed(world, case)
    before = fixenv.freeze(python)
    out = run_cli(["fix", "--python", str(python), "--torch-index", str(world.torch_index)],
                  env=_env(world, case, _nvml_cfg(world, case)), timeout=120)
    assert out.rc == 1, out.text
    assert "torch-cpu-build" in out.text and "pip uninstall -y torch" in out.text and "--yes" in out.text
    assert fixenv.freeze(python) == before
    assert not (python.parent.parent / ".envdoctor-fix").exists()


def _killer(python: Path, payload: Path, signum: int, target: str, stop: threading.Event) -> dict[str, Any]:
    """Once the new torch's payload is being written, send ``signum`` to the installer (``target`` pip)."""
    seen: dict[str, Any] = {}
    while not stop.is_set():
        if payload.exists():
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if str(python).encode() in cmd and b"install" in cmd:
                    os.kill(int(pid), signum)
                    seen["pid"] = int(pid)
                    return seen
        time.sleep(0.002)
    return seen


@pytest.mark.parametrize("signum, who, code", [(signal.SIGKILL, "installer", 1), (signal.SIGINT, "installer", 1),
                                               (signal.SIGINT, "envdoctor", 130), (signal.SIGTERM, "envdoctor", 143)])
def test_a_kill_mid_install_leaves_a_byte_identical_freeze(world: World, signum: int, who: str, code: int) -> None:
    case = Case(f"killed-{who}-{signum}", ("torch==2.5.1+cpu",), False, index="slow")
    python = _seed(world, case)
    before = fixenv.freeze(python)
    payload = fixenv.site_packages(python.parent.parent) / "torch" / "lib" / "payload.bin"
    env = _env(world, case, _nvml_cfg(world, case))
    args = ["fix", "--yes", "--json", "--python", str(python), "--torch-index", str(world.slow_index)]
    if who == "envdoctor":
        out = run_cli(args, env=env, timeout=240, signal_after=(payload.exists, signum))
    else:
        stop = threading.Event()
        with ThreadPoolExecutor(1) as pool:
            killed = pool.submit(_killer, python, payload, signum, who, stop)
            out = run_cli(args, env=env, timeout=240)
            stop.set()
            assert killed.result().get("pid"), out.text
    assert out.rc == code, out.text
    assert fixenv.freeze(python) == before, out.text
    doc = json.loads(out.stdout)
    assert doc["outcome"]["restored"]["identical"] is True
    assert doc["outcome"]["status"] == "rolled-back"


def _installers(python: Path) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if str(python).encode() in cmd and b"install" in cmd:
                found.append(int(pid))
    return found


def test_after_a_kill_9_of_envdoctor_itself_restore_puts_the_snapshot_back(world: World) -> None:
    case = Case("killed-envdoctor-9", ("torch==2.5.1+cpu",), False, index="slow")
    python = _seed(world, case)
    before = fixenv.freeze(python)
    payload = fixenv.site_packages(python.parent.parent) / "torch" / "lib" / "payload.bin"
    out = run_cli(["fix", "--yes", "--python", str(python), "--torch-index", str(world.slow_index)],
                  env=_env(world, case, _nvml_cfg(world, case)), timeout=240, signal_after=(payload.exists, signal.SIGKILL))
    assert out.rc == -signal.SIGKILL, out.text
    for pid in _installers(python):  # the installer leads its own group: it outlives a kill -9 of envdoctor
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.monotonic() + 30
    while _installers(python) and time.monotonic() < deadline:
        time.sleep(0.05)
    snapshots = list((python.parent.parent / ".envdoctor-fix").iterdir())
    assert len(snapshots) == 1
    restored = run_cli(["fix", "--restore", str(snapshots[0])], timeout=120)
    assert restored.rc == 0, restored.text
    assert "byte-identical" in restored.text
    assert fixenv.freeze(python) == before


def test_a_package_conda_installed_is_changed_by_the_envs_conda_as_planned_and_rolled_back_with_conda_meta(
        world: World, results: list[dict[str, Any]]) -> None:
    r = next(r for r in results if r["case"].name == "conda-owns-torch-and-conda-fixes-it")
    doc = r["doc"]
    assert r["rc"] == 0 and doc["outcome"]["status"] == "fixed", r["text"]
    assert doc["target"]["conda_exe"] == str(CONDA_STANDIN)
    prefix = doc["target"]["prefix"]
    (step,) = doc["plan"]["steps"]  # conda replaces the CPU build in place: no uninstall first
    assert step["argv"] == [str(CONDA_STANDIN), "install", "-p", prefix, "-y", "pytorch=2.5.1", "pytorch-cuda=12.4",
                            "-c", "pytorch", "-c", "nvidia"], step
    # The commands the stand-in was called with are the snapshot's lists and then exactly the planned step.
    calls = [json.loads(line) for line in (world.root / f"conda-{r['case'].name}.log").read_text().splitlines()]
    assert calls == [["list", "-p", prefix, "--explicit"], ["list", "-p", prefix, "--json"], step["argv"][1:]]
    assert _torch(r["after"]) == "2.5.1+cu124"
    snap = Path(doc["snapshot"])
    assert "@EXPLICIT" in (snap / "conda-explicit.txt").read_text()
    assert json.loads((snap / "conda-list.json").read_text())[0]["name"] == "pytorch"
    metas = sorted(p.name for p in (Path(prefix) / "conda-meta").glob("*.json"))
    assert metas == ["pytorch-2.5.1-py_cu124_0.json", "pytorch-cuda-12.4-0.json"], metas
    # A conda step whose finding still fails (a mislabelled wheel) is rolled back, conda-meta/ with the files.
    r = next(r for r in results if r["case"].name == "conda-with-a-mislabelled-wheel")
    assert r["rc"] == 1 and r["doc"]["outcome"]["status"] == "rolled-back", r["text"]
    assert r["doc"]["outcome"]["steps"][0]["command"].startswith(str(CONDA_STANDIN) + " install")
    assert r["after"] == r["before"] and r["meta_after"] == r["meta_before"], r["text"]
    assert "history" in r["meta_after"] and r["meta_after"]["history"] == b""



@pytest.mark.parametrize("target", ["{}", "[1]", '{"python": 3}'])
def test_restore_from_a_damaged_snapshot_is_one_line_and_exit_2(tmp_path: Path, target: str) -> None:
    (tmp_path / "target.json").write_text(target)
    (tmp_path / "folders.txt").write_text("")
    (tmp_path / "freeze.txt").write_text("")
    said: list[str] = []
    from envdoctor.commands.fix import restore_snapshot

    assert restore_snapshot(str(tmp_path), echo=said.append) == 2 and len(said) == 1 and "not a snapshot" in said[0]


def test_anything_that_breaks_after_the_first_change_is_rolled_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not only a signal: a verification that cannot run (or a full disk) after a step changed the environment
    rolls it back and exits 3."""
    from envdoctor.commands import fix as fixmod

    rolled: list[bool] = []
    monkeypatch.setattr(fixmod, "_snapshot", lambda *a: b"freeze")
    monkeypatch.setattr(fixmod, "_snapshot_dir", lambda env: Path("/nonexistent-envdoctor-test"))
    monkeypatch.setattr(fixmod, "_run_steps", lambda *a: None)
    monkeypatch.setattr(fixmod, "_verify", lambda *a: (_ for _ in ()).throw(fixmod.FixError("registry broken")))
    monkeypatch.setattr(fixmod, "_rollback", lambda *a: rolled.append(True) or True)
    monkeypatch.setattr(fixmod, "_conda_steps", lambda fp: False)
    out = fixmod.Outcome()
    code = fixmod._apply(None, None, None, [], out, {})  # type: ignore[arg-type]
    assert rolled == [True] and code == 3 and any("could not finish: registry broken" in line for line in out.lines)


def test_a_check_that_passed_before_and_fails_after_is_a_failed_verification(monkeypatch: pytest.MonkeyPatch) -> None:
    """The answered finding passes, but the fix broke another check (torchvision no longer matches, say):
    that is a failed verification (rolled back), not a fix."""
    from types import SimpleNamespace

    from envdoctor.commands import fix as fixmod
    from envdoctor.model import Facts, Finding, Status

    def report(**statuses: Status) -> Any:
        return SimpleNamespace(findings=[Finding(cid.replace("_", "-"), s, cid) for cid, s in statuses.items()],
                               facts=Facts({}))

    after = report(torch_cuda_build=Status.OK, torch_companions=Status.FAIL, nccl_mismatch=Status.FAIL)
    monkeypatch.setattr(fixmod, "examine", lambda plan: after)
    fp = SimpleNamespace(answered=("torch-cuda-build",), steps=())
    env = SimpleNamespace(torch=None)
    out = fixmod.Outcome()
    out.before = fixmod.worst_statuses(report(torch_cuda_build=Status.FAIL, torch_companions=Status.OK,
                                              nccl_mismatch=Status.SKIP).findings)
    failed = fixmod._verify(None, fp, env, out)  # type: ignore[arg-type]
    # the companions broke; NCCL was not examined before (skip), so its failure is not the fix's doing
    assert failed == "verification failed: torch-companions was ok before and is fail now"
    assert out.verified == {"torch-cuda-build": "ok"}


def test_worst_status_of_a_check_with_one_finding_per_gpu() -> None:
    from envdoctor.commands.fix import worst_statuses
    from envdoctor.model import Finding, Status

    found = [Finding("gpu-xid", Status.OK, "GPU 0"), Finding("gpu-xid", Status.FAIL, "GPU 1"),
             Finding("gpu-xid", Status.WARN, "GPU 2"), Finding("driver-installed", Status.SKIP, "x")]
    assert worst_statuses(found) == {"gpu-xid": "fail", "driver-installed": "skip"}
