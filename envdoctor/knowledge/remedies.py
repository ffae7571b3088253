"""Remedies, written once: every pip, package-manager, driver and GPU-reset command a finding
prints, and the documentation links findings point to.

A check asks for a command here and never formats one itself, so the wheel index, the way the
user's own interpreter runs pip, and the shape of a driver install are the same in every finding.
Each command is typed (:class:`PipInstall`, :class:`DriverInstall`, :class:`GpuReset`, …) and
handed out as a :class:`Line`, the printed string that carries it, so the saved report keeps plain
strings while ``diagnose.cohere`` reads what a remedy installs from its fields.
The PyTorch wheel index base comes from the compatibility table (``index.base`` in
``data/compat.json``), where its source is recorded.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from envdoctor.knowledge import compat, versions
from envdoctor.record import Record, field

# ---------------------------------------------------------------------------------------------
# Links

PYTORCH_GET_STARTED = "https://pytorch.org/get-started/locally/"
#: What to paste for a full judgement: torch's own environment report.
COLLECT_ENV = "python -m torch.utils.collect_env"
PYTORCH_PREVIOUS = "https://pytorch.org/get-started/previous-versions/"
DRIVER_DOWNLOAD = "https://www.nvidia.com/Download/index.aspx"
DRIVER_GUIDE = "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/index.html"
CUDA_COMPATIBILITY = "https://docs.nvidia.com/deploy/cuda-compatibility/"
FORWARD_COMPAT = "https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html"
CUDA_WHEELS_DOC = "https://docs.nvidia.com/cuda/cuda-installation-guide-linux/#pip-wheels"
#: sbatch(1), --gpus-per-task: "… implicitly sets --gpu-bind=per_task:<gpus_per_task>": each task sees only its own.
SLURM_GPUS_PER_TASK = "https://slurm.schedmd.com/sbatch.html#OPT_gpus-per-task"
OPEN_MODULES_GPUS = "https://github.com/NVIDIA/open-gpu-kernel-modules#compatible-gpus"
DRIVER_FLAVORS = "https://docs.nvidia.com/cuda/cuda-installation-guide-linux/#switching-between-driver-module-flavors"
CONTAINER_TOOLKIT_INSTALL = ("https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/"
                             "install-guide.html")
CONTAINER_CGROUP_NOTICE = "https://github.com/NVIDIA/nvidia-container-toolkit/issues/48"
FABRIC_GUIDE = "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html"
NVML_RETURN_CODES = "https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceEnumvs.html"
CUDA_RESULT_CODES = "https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html"
XID_DOC = "https://docs.nvidia.com/deploy/xid-errors/index.html"
DCGM_DIAG = "https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html"
ROW_REMAP_DOC = "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html"
MIG_GUIDE = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/index.html"
NGC_SUPPORT_MATRIX = "https://docs.nvidia.com/deeplearning/frameworks/support-matrix/index.html"
NVIDIA_SMI_DOC = "https://docs.nvidia.com/deploy/nvidia-smi/index.html"
CUDNN_SUPPORT_MATRIX = "https://docs.nvidia.com/deeplearning/cudnn/latest/reference/support-matrix.html"
TORCH_FROM_SOURCE = "https://github.com/pytorch/pytorch#from-source"
TORCH_DOCKER_IMAGE = "https://github.com/pytorch/pytorch#docker-image"
NCCL_RELEASE_NOTES = "https://docs.nvidia.com/deeplearning/nccl/release-notes/index.html"
DOCKER_SHM_SIZE = "https://docs.docker.com/reference/cli/docker/container/run/#shm-size"


# ---------------------------------------------------------------------------------------------
# The typed commands
#
# A remedy's command is one of the frozen types below; its line is what the user copies. A check
# receives a :class:`Line`: a ``str`` (the printed line, so renderers, the saved report's
# ``remediation.commands`` and every comparison see exactly the text they always did) that also
# carries the typed command it renders (``line.command``). Reading remedies together
# (diagnose.cohere) reads those types, never the printed words. A saved report holds plain strings;
# it is re-judged by the checks, which build typed lines again.

#: What a torch install asks for: (pinned version or None, PyTorch variant or None).
Target = tuple[str | None, str | None]


class Command(Record):
    """One command a remedy prints. ``note`` is the comment after it (``   # …``)."""

    note: str = field(default="", kw_only=True)

    def words(self) -> str:  # pragma: no cover - every command type defines it
        raise NotImplementedError

    def render(self) -> str:
        words = self.words()
        return f"{words}   # {self.note}" if self.note else words

    def steps(self) -> tuple[Command, ...]:
        """The commands it runs (a chain: each of its steps)."""
        return (self,)

    # A single command installs no torch, uninstalls none and installs no driver unless its type
    # says so (PipInstall, PipUninstall, DriverInstall override these); a composite one (Chain,
    # Piped) does what one of its steps does.

    def torch_targets(self) -> tuple[Target, ...]:
        """The torch builds it installs (a :class:`PipInstall` naming ``torch``)."""
        return tuple(t for s in self.steps() if s is not self for t in s.torch_targets())

    @property
    def uninstalls_torch(self) -> bool:
        return any(s.uninstalls_torch for s in self.steps() if s is not self)

    @property
    def installs_driver(self) -> bool:
        return any(s.installs_driver for s in self.steps() if s is not self)


class Line(str):
    """A command line as printed, carrying the typed :class:`Command` it renders."""

    command: Command

    def __new__(cls, command: Command) -> Line:
        line = super().__new__(cls, command.render())
        line.command = command
        return line

    def __reduce__(self) -> tuple[Any, ...]:
        return Line, (self.command,)


def typed(commands: Iterable[str]) -> tuple[Command, ...]:
    """The typed commands of printed lines (a plain string, as read from a saved report, has none)."""
    return tuple(c.command for c in commands if isinstance(c, Line))


def _names(packages: str | Iterable[str]) -> tuple[str, ...]:
    return (packages,) if isinstance(packages, str) else tuple(packages)


def _runner(python: str | None, installer: str = "pip", sub: str = "") -> str:
    """``PY -m pip SUB`` (plain ``pip`` when the interpreter is not known), or ``uv pip SUB --python PY``."""
    return " ".join(shlex.quote(a) if installer == "uv" else a for a in _runner_argv(python, installer, sub))


def _runner_argv(python: str | None, installer: str, sub: str) -> list[str]:
    if installer == "uv":
        return ["uv", "pip", sub, *(["--python", python] if python else [])]
    return [*([python, "-m", "pip"] if python else ["pip"]), sub]


def _is_folder_index(index: str) -> bool:
    """An index given as a local folder of wheels (read with ``--find-links``), not a URL."""
    return "://" not in index


def _package_argv(package: str, quoted: bool) -> list[str]:
    """A requirement as pip receives it: a printed one may carry the shell's quotes (``'jax[cuda12]'``)."""
    if quoted:
        return [package]
    try:
        return shlex.split(package)
    except ValueError:
        return [package]


class Pip(Command):
    """``pip ARGS`` run by the target interpreter (``/opt/venv/bin/python -m pip list``)."""

    python: str | None
    args: str

    def words(self) -> str:
        return f"{_runner(self.python, 'pip', '')}{self.args}"


class PipInstall(Command):
    """``pip install [--force-reinstall] [--no-deps] [-U] PACKAGES [--index-url <PyTorch index>]``:
    ``python`` is the installer (its interpreter's pip; None: plain ``pip``), ``packages`` the
    requirements as written (``torch==2.7.1``), ``variant`` the PyTorch index (``cu128``)."""

    python: str | None
    packages: tuple[str, ...]
    variant: str | None = None
    force_reinstall: bool = False
    no_deps: bool = False
    upgrade: bool = False
    quote: bool = False
    #: How ``envdoctor fix`` runs it (none of these is set in a printed remedy, so its line is unchanged):
    #: the installer (``pip``, or ``uv`` for a uv-managed venv), the index the variant's wheels come from
    #: instead of PyTorch's (a mirror URL, or a local folder read with ``--no-index --find-links``), and a
    #: constraints file (``torch==2.5.1+cu121``: the installed CUDA torch kept).
    installer: str = field(default="pip", kw_only=True)
    index: str | None = field(default=None, kw_only=True)
    constraints: str | None = field(default=None, kw_only=True)

    def _flags(self) -> list[str]:
        uv = self.installer == "uv"
        return [f for f, on in (("--reinstall" if uv else "--force-reinstall", self.force_reinstall),
                                ("--no-deps", self.no_deps), ("--upgrade" if uv else "-U", self.upgrade)) if on]

    def _index_argv(self) -> list[str]:
        if self.index:
            return ["--no-index", "--find-links", self.index] if _is_folder_index(self.index) else ["--index-url",
                                                                                                    self.index]
        return ["--index-url", index_url(self.variant)] if self.variant else []

    def words(self) -> str:
        names = [shlex.quote(n) for n in self.packages] if self.quote else list(self.packages)
        tail = f" {' '.join(shlex.quote(a) for a in self._index_argv())}" if self.index or self.variant else ""
        if self.constraints:
            tail += f" -c {shlex.quote(self.constraints)}"
        return " ".join([_runner(self.python, self.installer, "install"), *self._flags(), *names]) + tail

    def argv(self) -> list[str]:
        """The command as run (no shell): the same words, unquoted."""
        names = [a for n in self.packages for a in _package_argv(n, self.quote)]
        return [*_runner_argv(self.python, self.installer, "install"), *self._flags(), *names, *self._index_argv(),
                *(["-c", self.constraints] if self.constraints else [])]

    def torch_targets(self) -> tuple[Target, ...]:
        pin = next((p for p in self.packages if p == "torch" or p.startswith("torch==")), None)
        if pin is None:
            return ()
        return (((pin.split("==", 1)[1] or None) if "==" in pin else None, self.variant or None),)


class PipUninstall(Command):
    python: str | None
    packages: tuple[str, ...]
    installer: str = field(default="pip", kw_only=True)  # uv's uninstall never asks: no -y

    def words(self) -> str:
        return f"{_runner(self.python, self.installer, 'uninstall')} {'' if self.installer == 'uv' else '-y '}" + \
            " ".join(self.packages)

    def argv(self) -> list[str]:
        return [*_runner_argv(self.python, self.installer, "uninstall"), *([] if self.installer == "uv" else ["-y"]),
                *self.packages]

    @property
    def uninstalls_torch(self) -> bool:
        return "torch" in self.packages


#: conda's names for the pip distributions fix may change in a conda environment: the pytorch
#: channel and conda-forge publish torch as ``pytorch`` (https://pytorch.org/get-started/previous-versions/,
#: https://github.com/conda-forge/pytorch-cpu-feedstock/issues/164); the companions keep their names.
CONDA_NAMES = {"torch": "pytorch"}
#: The last torch release on PyTorch's own conda channel: "2.5 will be the last release of PyTorch that
#: will be published to the pytorch channel on Anaconda" (https://github.com/pytorch/pytorch/issues/138506).
#: A newer torch comes from conda-forge, whose CUDA build is asked for by its build string
#: (``pytorch=X=*cuda*``, conda-forge/pytorch-cpu-feedstock#164) and its CUDA major by ``cuda-version``.
CONDA_LAST_PYTORCH_CHANNEL_RELEASE = (2, 5)
CONDA_FORGE_PYTORCH = "https://github.com/conda-forge/pytorch-cpu-feedstock/issues/164"


class CondaEnvInstall(Command):
    """``CONDA install -p PREFIX -y SPEC… [-c CHANNEL…]``: a conda environment's own manager (conda,
    mamba or micromamba, which take the same words) installing into that prefix; how ``envdoctor fix``
    changes a package conda installed."""

    exe: str
    prefix: str
    specs: tuple[str, ...]
    channels: tuple[str, ...] = ()

    def argv(self) -> list[str]:
        return [self.exe, "install", "-p", self.prefix, "-y", *self.specs,
                *(a for c in self.channels for a in ("-c", c))]

    def words(self) -> str:
        return " ".join(shlex.quote(a) for a in self.argv())

    def torch_targets(self) -> tuple[Target, ...]:
        pin = next((p for p in self.specs if p == "pytorch" or p.startswith("pytorch=")), None)
        if pin is None:
            return ()
        version = pin.split("=")[1] if "=" in pin else None
        cuda = next((p.split("=", 1)[1] for p in self.specs if p.startswith(("pytorch-cuda=", "cuda-version="))), None)
        return ((version or None, f"cu{cuda.replace('.', '')}" if cuda else None),)


def conda_name(pip_name: str) -> str:
    """conda's name of a pip distribution (``torch`` -> ``pytorch``)."""
    return CONDA_NAMES.get(pip_name, pip_name)


def conda_env_install(exe: str, prefix: str, install: PipInstall) -> CondaEnvInstall:
    """The conda install that does what ``install`` (a torch remedy's pip install) asks, in a conda env.

    torch <= 2.5 from PyTorch's channel, as its install page wrote it: ``pytorch=X pytorch-cuda=12.4
    -c pytorch -c nvidia`` (``cpuonly`` for the CPU build); a newer torch from conda-forge:
    ``pytorch=X=*cuda*`` with ``cuda-version=12.4`` (``pytorch=X=*cpu*`` for the CPU build)."""
    cuda = versions.variant_cuda(install.variant)
    specs: list[str] = []
    version: str | None = None
    for p in install.packages:
        req = p.strip("'\"")
        name, _, pin = req.partition("==")
        if name == "torch":
            version = pin or None
        else:
            specs.append(f"{conda_name(name)}={pin}" if pin else conda_name(name))
    release = tuple(int(x) for x in (version or "0.0").split(".")[:2] if x.isdigit())
    if version is not None and release <= CONDA_LAST_PYTORCH_CHANNEL_RELEASE:
        torch_specs = [f"pytorch={version}", f"pytorch-cuda={cuda}" if cuda else "cpuonly"]
        channels: tuple[str, ...] = ("pytorch", "nvidia") if cuda else ("pytorch",)
    else:
        build = "*cuda*" if cuda else "*cpu*"
        torch_specs = [f"pytorch={version or '*'}={build}", *([f"cuda-version={cuda}"] if cuda else [])]
        channels = ("conda-forge",)
    return CondaEnvInstall(exe, prefix, (*torch_specs, *specs), channels)


class CondaInstall(Command):
    """``conda install -c CHANNEL PACKAGE``."""

    channel: str
    package: str

    def words(self) -> str:
        return f"conda install -c {self.channel} {self.package}"


class CondaRemove(Command):
    """``conda remove PACKAGE`` (from the active environment)."""

    package: str

    def words(self) -> str:
        return f"conda remove {self.package}"


class AptInstall(Command):
    """``sudo apt install [--reinstall] PACKAGE`` (``apt-get install -y`` with ``assume_yes``)."""

    package: str
    reinstall: bool = False
    assume_yes: bool = False

    def words(self) -> str:
        if self.assume_yes:
            return f"sudo apt-get install -y {self.package}"
        return f"sudo apt install {'--reinstall ' if self.reinstall else ''}{self.package}"

    @property
    def installs_driver(self) -> bool:
        """A driver branch's package (``nvidia-driver-570``) is the driver, however it was asked for."""
        return self.package.startswith(driver_branch_package(""))


class DriverInstall(Command):
    """The NVIDIA driver of a branch from Ubuntu's packages (``nvidia-driver-570``); ``branch=None``
    with ``windows``: NVIDIA's installer from nvidia.com, then ``nvidia-smi`` to confirm it;
    ``ubuntu_pick``: Ubuntu's own pick for the GPU (``ubuntu-drivers install``)."""

    branch: str | int | None = None
    windows: bool = False
    ubuntu_pick: bool = False

    def words(self) -> str:
        if self.ubuntu_pick:
            return "sudo ubuntu-drivers install"
        if self.windows or self.branch is None:
            return "nvidia-smi"
        return AptInstall(driver_branch_package(self.branch)).words()

    @property
    def installs_driver(self) -> bool:
        return True


class GpuReset(Command):
    """``sudo nvidia-smi -r -i GPU``: resets one GPU (NVML index or PCI address); nothing may run on it."""

    target: str | int | None

    def words(self) -> str:
        return f"sudo nvidia-smi -r -i {self.target}"


class EnvSet(Command):
    """``export NAME=VALUE [NAME=VALUE …]`` (POSIX shells)."""

    pairs: tuple[tuple[str, str], ...]

    def words(self) -> str:
        return "export " + " ".join(f"{k}={v}" for k, v in self.pairs)


class EnvUnset(Command):
    name: str

    def words(self) -> str:
        return f"unset {self.name}"


class ContainerRun(Command):
    """``docker run OPTIONS …`` (``…``: the user's own image and command), or with ``image``/``argv``
    a complete one (``docker run --rm --gpus all ubuntu nvidia-smi``)."""

    options: tuple[str, ...]
    image: str = ""
    argv: str = ""

    def words(self) -> str:
        rest = " ".join(p for p in (self.image, self.argv) if p) or "…"
        return " ".join([CONTAINER_RUN, *self.options, rest])


class ShellStep(Command):
    """A system step with no parameters of its own to read (``sudo reboot``, ``sudo ldconfig``, a
    ``dmesg`` filter): ``kind`` names it for a reader, ``text`` is the line."""

    kind: str
    text: str

    def words(self) -> str:
        return self.text


class Chain(Command):
    """Steps run one after another: ``a && b`` (``joiner``: ``" && "``, or ``"; "`` and such)."""

    parts: tuple[Command, ...]
    joiner: str = " && "

    def words(self) -> str:
        return self.joiner.join(p.render() for p in self.parts)

    def steps(self) -> tuple[Command, ...]:
        return tuple(s for p in self.parts for s in p.steps())


class Piped(Command):
    """A command whose output goes through a filter: ``pip list | grep -i nccl``."""

    first: Command
    filter: str

    def words(self) -> str:
        return f"{self.first.render()} | {self.filter}"

    def steps(self) -> tuple[Command, ...]:
        return self.first.steps()


class Commented(Command):
    """A command shown for elsewhere, commented out (``# on macOS: pip install torch``): it runs nothing
    here, so it installs nothing here either."""

    prefix: str
    inner: Command

    def words(self) -> str:
        return f"# {self.prefix}: {self.inner.render()}"

    def steps(self) -> tuple[Command, ...]:
        return ()


def torch_targets(commands: Iterable[Command]) -> tuple[Target, ...]:
    return tuple(t for c in commands for t in c.torch_targets())


# ---------------------------------------------------------------------------------------------
# pip

def index_url(variant: str) -> str:
    """The PyTorch wheel index of a variant: ``cu128`` -> ``<index.base>cu128``."""
    return f"{compat.data()['index']['base']}{variant}"


def pip(python: str | None, args: str, *, then: str = "", note: str = "") -> Line:
    """``args`` run by the target interpreter's pip (``/opt/venv/bin/python -m pip install …``), so it
    installs where torch lives, not into whatever ``pip`` is first on PATH; plain ``pip`` when the
    interpreter is not known (a pasted report). ``then``: a filter its output goes through."""
    command: Command = Pip(python, args, note="" if then else note)
    return Line(Piped(command, then, note=note) if then else command)


def pip_install_command(python: str | None, packages: str | Sequence[str], *, force: bool = False,
                        no_deps: bool = False, upgrade: bool = False, variant: str | None = None,
                        quote: bool = False, note: str = "") -> PipInstall:
    return PipInstall(python, _names(packages), variant, force, no_deps, upgrade, quote, note=note)


def pip_install(python: str | None, packages: str | Sequence[str], *, force: bool = False, no_deps: bool = False,
                upgrade: bool = False, variant: str | None = None, quote: bool = False, note: str = "") -> Line:
    """``pip install [--force-reinstall] [--no-deps] [-U] PACKAGES [--index-url <PyTorch index>]``."""
    return Line(pip_install_command(python, packages, force=force, no_deps=no_deps, upgrade=upgrade,
                                    variant=variant, quote=quote, note=note))


def pip_uninstall(python: str | None, packages: str | Iterable[str]) -> Line:
    return Line(PipUninstall(python, _names(packages)))


def pip_replace(python: str | None, remove: str | Iterable[str], install: str, *, upgrade: bool = False) -> Line:
    """``pip uninstall -y OLD && pip install NEW``: one package swapped for another in one line."""
    return Line(Chain((PipUninstall(python, _names(remove)), PipInstall(python, (install,), upgrade=upgrade))))


def torch_install_command(python: str | None, version: str | None, variant: str | None, extras: Sequence[str] = (),
                          force: bool = True, note: str = "") -> PipInstall:
    pin = compat.known_patch(version)
    spec = f"torch=={pin}" if pin else "torch"
    return PipInstall(python, (spec, *extras), variant, force_reinstall=force, note=note)


def torch_install(python: str | None, version: str | None, variant: str | None, extras: Sequence[str] = (),
                  force: bool = True, note: str = "") -> Line:
    """The exact (re)install of a torch build from a PyTorch variant index, companions alongside
    (unpinned: their own exact torch pin picks the matching release).

    Only a release the compatibility table lists is pinned: a version read from a paste (a typo'd
    ``torch 7.0``, a local build) never becomes ``torch==7.0``; the index then picks its newest build."""
    return Line(torch_install_command(python, version, variant, extras, force, note))


#: PEP 668: an interpreter whose installer is the distribution's (Debian 12, Ubuntu 23.04+, Fedora…)
#: refuses ``pip install`` with "externally-managed-environment"; the PEP's own advice is a venv.
PEP_668 = "https://peps.python.org/pep-0668/"
#: Where the venv of a rewritten install goes (relative: envdoctor then finds it as "a .venv here").
NEW_VENV = ".venv"


class VenvCreate(Command):
    """``PYTHON -m venv DIR``: a virtual environment of an interpreter."""

    python: str
    path: str = NEW_VENV

    def words(self) -> str:
        return f"{self.python} -m venv {self.path}"


def into_venv(line: str, managed: str, path: str = NEW_VENV) -> str:
    """``line`` with every ``pip install`` the externally-managed interpreter ``managed`` would run
    (refused there, PEP 668) run by a new venv of it instead: ``/usr/bin/python3 -m venv .venv &&
    .venv/bin/python -m pip install torch==…``; an uninstall in that interpreter has nothing to do in
    the new venv and is left out of the chain. Any other line is returned as it was."""
    command = line.command if isinstance(line, Line) else None
    if command is None:
        return line
    steps = command.parts if isinstance(command, Chain) else (command,)
    installs = [s for s in steps if isinstance(s, PipInstall) and s.python == managed]
    if not installs:
        return line
    venv_python = f"{path}/bin/python"
    kept: list[Command] = [VenvCreate(managed, path)]
    for s in steps:
        if isinstance(s, PipUninstall) and s.python == managed:
            continue
        kept.append(s.replace(python=venv_python) if isinstance(s, PipInstall) and s.python == managed else s)
    note = command.note or (installs[0].note if len(steps) == 1 else "")
    return Line(Chain(tuple(kept), note=(f"{note}; " if note else "") + f"then: envdoctor check --python {path}"))


def elsewhere(prefix: str, command: str) -> Line:
    """A command for another machine or OS, commented out here (``# on macOS: pip install torch``)."""
    inner = command.command if isinstance(command, Line) else ShellStep("text", str(command))
    return Line(Commented(prefix, inner))


def installs_driver(commands: Iterable[str], links: Iterable[str] = ()) -> bool:
    """Whether a remedy installs or upgrades the NVIDIA driver: one of its typed commands does, or
    it links NVIDIA's driver download or installation guide."""
    return any(link in (DRIVER_DOWNLOAD, DRIVER_GUIDE) for link in links) or any(
        c.installs_driver for c in typed(commands))


def envdoctor_upgrade() -> Line:
    """envdoctor itself, in its own environment, from its source: the distribution (``gpu-envdoctor``)
    is not published on a package index, so a bare ``pip install -U gpu-envdoctor`` finds nothing."""
    import sys

    # The interpreter envdoctor runs in: a bare `pip` is often the system's (PEP 668 refuses it, or it
    # installs into another environment than envdoctor's own).
    return Line(Chain((ShellStep("git-pull", "git pull"), PipInstall(sys.executable, (".",), upgrade=True)),
                      note="in your clone of envdoctor"))


def nvml_bindings_in_envdoctor() -> Line:
    """nvidia-ml-py (NVML's Python bindings) next to envdoctor, in envdoctor's own environment."""
    return Line(PipInstall(None, ("nvidia-ml-py",), upgrade=True))


def conda_install(channel: str, package: str, note: str = "") -> Line:
    return Line(CondaInstall(channel, package, note=note))


def conda_remove(package: str, note: str = "") -> Line:
    return Line(CondaRemove(package, note=note))


# ---------------------------------------------------------------------------------------------
# System packages, drivers, GPUs

def apt_install(package: str, *, reinstall: bool = False, note: str = "") -> Line:
    """``sudo apt install [--reinstall] PACKAGE`` (Ubuntu/Debian, where NVIDIA's driver packages live)."""
    return Line(AptInstall(package, reinstall, note=note))


def driver_branch_package(branch: str | int) -> str:
    """Ubuntu's package for a driver branch: ``nvidia-driver-570``."""
    return f"nvidia-driver-{branch}"


def driver_install(branch: str | int, note: str = "") -> Line:
    """The driver of ``branch`` from Ubuntu's packages: ``sudo apt install nvidia-driver-570``."""
    return Line(DriverInstall(branch, note=note))


def driver_install_windows() -> Line:
    """On Windows the driver comes from nvidia.com's installer; ``nvidia-smi`` then confirms it."""
    return Line(DriverInstall(windows=True, note="after installing the driver from nvidia.com: 'CUDA Version' "
                                                 "must cover torch's CUDA"))


def compute_library_package(branch: str) -> str:
    """The driver's CUDA user-space library package (libcuda, libnvidia-ml): ``libnvidia-compute-570``."""
    return f"libnvidia-compute-{branch}"


def fabric_manager_package(branch: str) -> str:
    return f"nvidia-fabricmanager-{branch}"


#: Where the fabric manager's package names and versions come from: NVIDIA's packaging templates
#: (``nvidia-fabricmanager-<branch>_<driver version>-1`` in NVIDIA's CUDA repository; "the version of
#: fabricmanager must match the NVIDIA driver installed"); Ubuntu's archive builds the same package
#: names as ``<driver version>-0ubuntu…`` (packages.ubuntu.com, source fabric-manager-<branch>). The
#: name holds for the newest branches too: Ubuntu 24.04's source fabric-manager-590 (590.48.01-0ubuntu0.24.04.2)
#: and fabric-manager-595 (595.71.05) build nvidia-fabricmanager-590 / -595 (packages.ubuntu.com, 2026).
FABRIC_PACKAGING = "https://github.com/NVIDIA/apt-packaging-fabric-manager"

#: The shell's answer for the driver version when none was read.
_DRIVER_VERSION_SHELL = "$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"


def fabric_manager_install(driver: str | None) -> Line:
    """``sudo apt install 'nvidia-fabricmanager-570=570.124.06-*'``: the fabric manager of exactly the
    driver's version (a bare branch package installs the branch's latest, which then refuses to start
    beside an older driver). The ``-*`` takes the packaging revision of either repository (NVIDIA's
    ``-1``, Ubuntu's ``-0ubuntu…``); apt-get matches a version with ``*`` as a glob. Without a
    driver version read, the shell asks ``nvidia-smi`` for it."""
    import re as _re

    if driver and _re.fullmatch(r"\d+(\.\d+)+", str(driver)):
        version = str(driver)
        return Line(AptInstall(f"'{fabric_manager_package(version.split('.')[0])}={version}-*'",
                               note=f"exactly the driver's version {version}"))
    return step("fabric-manager-install", f'V={_DRIVER_VERSION_SHELL}; sudo apt install '
                f'"{fabric_manager_package("${V%%.*}")}=$V-*"', "exactly the driver's version")


def gpu_reset(target: str | int | None, note: str = "") -> Line:
    """``sudo nvidia-smi -r -i GPU``: resets one GPU (NVML index or PCI address); nothing may run on it."""
    return Line(GpuReset(target, note=note))


def gpu_resets(targets: Iterable[str | int | None], note: str = "") -> tuple[Line, ...]:
    return tuple({str(c): c for c in (gpu_reset(t, note) for t in targets)}.values())


def dkms_rebuild(note: str = "") -> Line:
    """Rebuild the NVIDIA kernel module for the running kernel (DKMS, Ubuntu/Debian)."""
    return Line(Chain((AptInstall("linux-headers-$(uname -r)"), ShellStep("dkms", "sudo dkms autoinstall")), note=note))


def ubuntu_drivers_install(note: str = "") -> Line:
    """Ubuntu's own pick of the driver for the installed GPU."""
    return Line(DriverInstall(ubuntu_pick=True, note=note))


def container_toolkit_install() -> Line:
    """The NVIDIA Container Toolkit on the host (its apt repository is added first, see the install guide)."""
    return Line(AptInstall("nvidia-container-toolkit", assume_yes=True, note="host, after adding NVIDIA's repository"))


def env_set(name: str, value: str, note: str = "") -> Line:
    return Line(EnvSet(((name, value),), note=note))


def env_unset(name: str, note: str = "") -> Line:
    return Line(EnvUnset(name, note=note))


def container_run(*options: str, image: str = "", argv: str = "", note: str = "") -> Line:
    return Line(ContainerRun(tuple(options), image, argv, note=note))


def container_restart(note: str = "") -> Line:
    """The user's container restarted (``<container>``: its name or id)."""
    return step("docker-restart", "docker restart <container>", note)


def step(kind: str, text: str, note: str = "") -> Line:
    """A named system step (see :class:`ShellStep`)."""
    return Line(ShellStep(kind, text, note=note))


def then(*commands: str, note: str = "") -> Line:
    """Commands run one after another in one line (``a && b``); a plain string is a step of its own
    (a read-only look such as ``nvidia-smi``)."""
    return Line(Chain(tuple(_command(c) for c in commands), note=note))


def _command(text: str) -> Command:
    return text.command if isinstance(text, Line) else ShellStep("text", str(text))


def reboot(note: str = "") -> Line:
    return step("reboot", "sudo reboot", note)


def kernel_log(grep: str = "", *, flags: str = "-i", times: bool = False, tail: int | None = None,
               note: str = "") -> Line:
    """The kernel log, filtered: ``sudo dmesg [-T] [| grep FLAGS PATTERN] [| tail [-N]]`` (``tail=0``:
    plain ``tail``)."""
    text = "sudo dmesg" + (" -T" if times else "") + (f" | grep {flags} {shlex.quote(grep)}" if grep else "")
    if tail is not None:
        text += " | tail" + (f" -{tail}" if tail else "")
    return step("kernel-log", text, note)


def ldconfig(note: str = "") -> Line:
    """Rebuild the loader cache (after a library was installed, moved or removed)."""
    return step("ldconfig", "sudo ldconfig", note)


def load_module(module: str, note: str = "") -> Line:
    return step("modprobe", f"sudo modprobe {module}", note)


def uvm_reload() -> Line:
    """nvidia_uvm unloaded and loaded again (CUDA error 999 after a suspend, a wedged UVM)."""
    return Line(Chain((ShellStep("modprobe", "sudo modprobe -r nvidia_uvm"), ShellStep("modprobe", "sudo modprobe nvidia_uvm")),
                      note="or: sudo nvidia-modprobe -u -c 0"))


def driver_reload() -> tuple[Line, ...]:
    """The NVIDIA kernel modules reloaded: a reboot, or by hand on an idle machine."""
    return (
        reboot("simplest and always works"),
        step("comment", "# or, on an idle machine with no display server using the GPU:"),
        step("module-reload", "sudo systemctl stop nvidia-persistenced nvidia-fabricmanager 2>/dev/null; "
             "sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia_peermem nvidia 2>/dev/null; "
             "sudo modprobe nvidia && sudo modprobe nvidia_uvm"),
    )


def driver_hold() -> Line:
    """Debian/Ubuntu: hold the driver packages, so unattended-upgrades does not replace them under a
    running module."""
    return step("apt-mark-hold", "sudo apt-mark hold $(dpkg-query -W -f='${binary:Package}\\n' | grep -E "
                "'^(nvidia|libnvidia|xserver-xorg-video-nvidia)')",
                "Debian/Ubuntu: stop unattended-upgrades from updating the driver under a running module")


def blacklist_nouveau() -> tuple[Line, ...]:
    """nouveau blacklisted, the initramfs rebuilt without it, and a reboot."""
    return (step("modprobe-config", "printf 'blacklist nouveau\\noptions nouveau modeset=0\\n' | "
                 "sudo tee /etc/modprobe.d/blacklist-nouveau.conf"),
            step("initramfs", "sudo update-initramfs -u", "Fedora/RHEL: sudo dracut --force"),
            reboot())


def create_device_nodes(uvm: bool = False) -> Line:
    """The /dev/nvidia* nodes created by nvidia-modprobe (``uvm``: /dev/nvidia-uvm, loading nvidia_uvm)."""
    if uvm:
        return step("nvidia-modprobe", "sudo nvidia-modprobe -u -c 0", "loads nvidia_uvm and creates /dev/nvidia-uvm")
    return step("nvidia-modprobe", "sudo nvidia-modprobe -c 0",
                "creates /dev/nvidiactl and /dev/nvidia0 (or: nvidia-smi as root)")


def join_video_group(note: str = "") -> Line:
    return step("usermod", "sudo usermod -aG video $USER", note)


def service_enable(service: str, note: str = "") -> Line:
    """``sudo systemctl enable --now SERVICE``: started now and at every boot."""
    return step("systemctl", f"sudo systemctl enable --now {service}", note)


def container_runtime_configure() -> Line:
    """The NVIDIA runtime registered with Docker, and Docker restarted to use it."""
    return Line(Chain((ShellStep("nvidia-ctk", "sudo nvidia-ctk runtime configure --runtime=docker"),
                       ShellStep("systemctl", "sudo systemctl restart docker"))))


def dev_char_symlinks() -> Line:
    return step("nvidia-ctk", "sudo nvidia-ctk system create-dev-char-symlinks --create-all", "on the host")


def selinux_denials() -> Line:
    return step("ausearch", "sudo ausearch -m avc -ts recent | grep nvidia")


def gpu_setting(args: str, note: str = "") -> Line:
    """An nvidia-smi setting changed as root (``-pm 1``, ``-i 0 -c DEFAULT``, ``mig -i 0 -lgip``)."""
    return step("nvidia-smi", f"sudo nvidia-smi {args}", note)


def pcie_link(bus: str) -> Line:
    """The PCIe link's capability and current state of one device (as root: lspci hides them otherwise)."""
    return step("lspci", f"sudo lspci -vv -s {bus} | grep -E 'LnkCap|LnkSta'")


def memory_test() -> Line:
    """A host-memory test with memtester (4 GiB, one pass)."""
    return Line(Chain((AptInstall("memtester"), ShellStep("memtester", "sudo memtester 4G 1"))))


def slurm_master_env() -> tuple[Line, ...]:
    """MASTER_ADDR (the job's first node) and MASTER_PORT, exported in a Slurm batch script before srun."""
    return (env_set("MASTER_ADDR", '$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)'),
            env_set("MASTER_PORT", "29500"))


#: The start of a container command, for prose that names its options (``docker run --cpus/--memory``).
CONTAINER_RUN = "docker run"


def torch_source_build(arch: str, cuda: str | None, release: str | None = None, windows: bool = False) -> tuple[str, ...]:
    """Build torch ``release`` (its git tag ``v2.7.1``; None: the main branch) from source for a GPU no
    wheel carries (``arch`` as TORCH_CUDA_ARCH_LIST takes it: ``"3.5"``) with the CUDA ``cuda`` toolkit,
    one that still targets it and that release was built with; in cmd.exe syntax on Windows."""
    branch = f" --branch v{release}" if release else ""
    clone = step("git-clone", f"git clone --recursive{branch} https://github.com/pytorch/pytorch && cd pytorch")
    if windows:
        home = f"C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v{cuda}" if cuda else "<CUDA toolkit folder>"
        return (clone, step("env-set-cmd", f"set TORCH_CUDA_ARCH_LIST={arch}"), step("env-set-cmd", f"set CUDA_HOME={home}"),
                step("build", "pip install -r requirements.txt && python setup.py develop",
                     "in a Visual Studio developer prompt"))
    return (clone,
            Line(EnvSet((("TORCH_CUDA_ARCH_LIST", arch), ("CUDA_HOME", "/usr/local/cuda" + (f"-{cuda}" if cuda else ""))),
                        note=f"the CUDA {cuda} toolkit" if cuda else "a toolkit that targets it")),
            step("build", "pip install -r requirements.txt && python setup.py develop"))


# ---------------------------------------------------------------------------------------------
# Evidence in pasted text: shared memory, NCCL, launchers, the CUDA toolkit, Windows DLLs

K8S_EMPTYDIR_DOC = "https://kubernetes.io/docs/concepts/storage/volumes/#emptydir"
NCCL_ENV_DOC = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-socket-ifname"
NCCL_TROUBLESHOOTING = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
TORCHRUN_DOC = "https://pytorch.org/docs/stable/elastic/run.html"
CUDA_ARCHIVE = "https://developer.nvidia.com/cuda-toolkit-archive"
CONDA_CUDA_TOOLKIT = "https://docs.nvidia.com/cuda/cuda-installation-guide-linux/#conda-installation"
CUDNN_ARCHIVE = "https://developer.nvidia.com/rdp/cudnn-archive"
WSL_CUDA_GUIDE = "https://docs.nvidia.com/cuda/wsl-user-guide/index.html"


def shm_commands(container: str | None) -> tuple[str, ...]:
    """A larger /dev/shm where it lives: the container's start command, a Kubernetes pod spec, the host."""
    if container == "kubernetes":
        return ("# in the pod spec:\nvolumes:\n- name: dshm\n  emptyDir: {medium: Memory, sizeLimit: 16Gi}\n"
                "# and in the container:\nvolumeMounts:\n- name: dshm\n  mountPath: /dev/shm",)
    if container:
        return (container_run("--shm-size=16g"), container_run("--ipc=host"))
    return (step("shm-size", "df -h /dev/shm", "how large it is now"),
            container_run("--shm-size=16g", note="in a container (or --ipc=host)"),
            shm_remount("on the host"))


def shm_remount(note: str = "") -> Line:
    """A larger /dev/shm on the host, until the next boot."""
    return step("shm-remount", "sudo mount -o remount,size=16G /dev/shm", note)


def nccl_socket_ifname(current: str | None) -> tuple[str, ...]:
    """List the interfaces, then point NCCL at one that exists (or stop forcing one that does not)."""
    commands = ["ip -brief address   # the interfaces this machine has, with their addresses"]
    if current:
        commands.append(env_unset("NCCL_SOCKET_IFNAME", f"{current!r} matches no interface here; NCCL picks one itself"))
    commands.append(env_set("NCCL_SOCKET_IFNAME", "<interface from the list, e.g. eth0 or ens5>"))
    return tuple(commands)


def launch_nproc(command: str | None, gpus: int | None) -> str:
    """The launch line with ``--nproc_per_node`` set to the GPUs it can see (``gpu``: torchrun counts them)."""
    value = str(gpus) if gpus else "gpu"
    if command:
        fixed = re.sub(r"--nproc([_-])per\1node(=|\s+)\d+", lambda m: f"--nproc{m.group(1)}per{m.group(1)}node"
                       f"{m.group(2)}{value}", command)
        if fixed != command:
            return fixed.rstrip(" \\")
    return f"torchrun --nproc_per_node={value} …"


def cuda_toolkit_install(cuda: str | None, windows: bool = False) -> tuple[str, ...]:
    """A CUDA toolkit (nvcc, headers) of torch's own CUDA version, and CUDA_HOME pointing at it."""
    if windows:
        version = cuda or "<torch.version.cuda>"
        return (("python -c \"import torch; print(torch.version.cuda)\"   # the CUDA version the toolkit must match",)
                if not cuda else ()) + (
            f"# install the CUDA {version} toolkit for Windows: {CUDA_ARCHIVE}",
            f"setx CUDA_HOME \"C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v{version}\"   "
            "# then open a new terminal")
    if not cuda:
        return ("python -c \"import torch; print(torch.version.cuda)\"   # the CUDA version the toolkit must match",
                conda_install("nvidia/label/cuda-<that version>.0", "cuda-toolkit", "or NVIDIA's installer: "
                              + CUDA_ARCHIVE),
                env_set("CUDA_HOME", "$CONDA_PREFIX", "or /usr/local/cuda-<that version>"))
    major = int(cuda.split(".")[0]) if cuda.split(".")[0].isdigit() else 0
    if major >= 11:
        return (conda_install(f"nvidia/label/cuda-{cuda}.0", "cuda-toolkit", f"nvcc and headers of CUDA {cuda}"),
                env_set("CUDA_HOME", "$CONDA_PREFIX"))
    return (f"# install the CUDA {cuda} toolkit from {CUDA_ARCHIVE}",
            env_set("CUDA_HOME", f"/usr/local/cuda-{cuda}"))


def cudnn_dlls(dll: str, in_torch: bool) -> tuple[str, ...]:
    """The cuDNN DLLs a Windows program could not find: torch's own (reinstall the CUDA wheel) or a
    separate runtime's (cuDNN of the DLL's major version, its bin folder on PATH)."""
    if in_torch:
        return (pip_install(None, "torch", force=True, note="the CUDA wheel ships its cuDNN DLLs in torch\\lib;"
                            " pick the index for your CUDA at " + PYTORCH_GET_STARTED),)
    major = dll.rsplit("_", 1)[-1].split(".")[0] if "_" in dll else ""
    if major == "8":
        return (pip_install(None, "nvidia-cudnn-cu12==8.9.7.29", note="cuDNN 8, whose DLLs are *64_8.dll"),
                "set PATH=%VIRTUAL_ENV%\\Lib\\site-packages\\nvidia\\cudnn\\bin;%PATH%",
                "# a cuDNN 8 installed from NVIDIA's zip also needs zlibwapi.dll on PATH (its Windows install guide)")
    if major == "9":
        return (pip_install(None, '"nvidia-cudnn-cu12>=9,<10"', note="cuDNN 9, whose DLLs are *64_9.dll"),
                "set PATH=%VIRTUAL_ENV%\\Lib\\site-packages\\nvidia\\cudnn\\bin;%PATH%")
    return (f"# install cuDNN from {CUDNN_ARCHIVE} and add its bin folder to PATH",)


def wsl2_convert() -> tuple[str, ...]:
    """WSL 1 -> WSL 2, run in Windows (PowerShell); the GPU then reaches Linux through /usr/lib/wsl/lib."""
    return ("wsl -l -v   # in PowerShell: the VERSION column says 1 or 2",
            "wsl --set-version <distro name from that list> 2",
            "wsl --set-default-version 2")


def disable_acs() -> tuple[str, ...]:
    """ACS off on every PCIe bridge that has it (NCCL's troubleshooting guide), until the next boot."""
    return (step("setpci", "for bdf in $(lspci -d '*:*:*' | awk '{print $1}'); do "
                 "sudo setpci -s $bdf ECAP_ACS+0x6.w >/dev/null 2>&1 && sudo setpci -s $bdf ECAP_ACS+0x6.w=0000; done"),
            step("comment", "# for good: disable ACS (or VT-d / IOMMU) in the BIOS, or boot the kernel with iommu=pt"),
            env_set("NCCL_P2P_DISABLE", "1", "meanwhile: NCCL avoids peer-to-peer (slower, no hang)"))


# ---------------------------------------------------------------------------------------------
# Exposure: services on every interface, Jupyter without a token, containers running as root

JUPYTER_SECURITY_DOC = "https://jupyter-server.readthedocs.io/en/latest/operators/public-server.html"
DOCKER_USER_DOC = "https://docs.docker.com/reference/cli/docker/container/run/"
K8S_SECURITY_CONTEXT = "https://kubernetes.io/docs/tasks/configure-pod-container/security-context/"
SSHD_CONFIG_DOC = "https://man.openbsd.org/sshd_config"


def bind_local(service: str, port: int | None) -> tuple[str, ...]:
    """Start ``service`` on the loopback only, and reach it through an SSH tunnel from your machine."""
    p = str(port) if port else {"jupyter": "8888", "tensorboard": "6006", "sshd": "22"}.get(service, "<port>")
    tunnel = f"ssh -N -L {p}:127.0.0.1:{p} <user>@<this host>   # on your own machine, then open http://127.0.0.1:{p}"
    if service == "jupyter":
        return (f"jupyter lab --ip=127.0.0.1 --port={p}   # instead of --ip=0.0.0.0 (c.ServerApp.ip in its config)",
                tunnel)
    if service == "tensorboard":
        return (f"tensorboard --logdir <dir> --host 127.0.0.1 --port {p}   # instead of --bind_all or --host 0.0.0.0",
                tunnel)
    if service == "sshd":
        return (step("sshd-config", "echo 'ListenAddress 127.0.0.1' | sudo tee /etc/ssh/sshd_config.d/10-local.conf && "
                     "sudo kill -HUP $(pgrep -o sshd)", "or drop sshd from the image: docker exec / kubectl exec"),)
    return ()


def jupyter_require_auth() -> tuple[str, ...]:
    """A Jupyter server that asks for a token (its default) or a password again."""
    return ("jupyter lab --ip=127.0.0.1   # without --ServerApp.token='' / --NotebookApp.token='': a random token",
            "jupyter server password   # or set a password (stored hashed in ~/.jupyter/jupyter_server_config.json)")


def run_as_user(container: str | None) -> tuple[str, ...]:
    """Run the training container as an unprivileged user."""
    if container == "kubernetes":
        return ("# in the pod spec, for the container:\nsecurityContext:\n  runAsNonRoot: true\n  runAsUser: 1000\n"
                "  runAsGroup: 1000\n  allowPrivilegeEscalation: false",)
    return (container_run('--user "$(id -u):$(id -g)"', "--gpus all", note="or USER 1000 in the Dockerfile"),)


# ---------------------------------------------------------------------------------------------
# The dynamic loader (checks/loader.py) and the message catalogue's causes (checks/messages.py)

XFORMERS_INSTALL = "https://github.com/facebookresearch/xformers#installing-xformers"
TENSORFLOW_PIP = "https://www.tensorflow.org/install/pip"
JAX_INSTALL = "https://jax.readthedocs.io/en/latest/installation.html"
CONTAINER_TOOLKIT_CONFIGURE = ("https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/"
                               "install-guide.html#configuring-docker")
CDI_GUIDE = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/cdi-support.html"
K8S_DEVICE_PLUGIN = "https://github.com/NVIDIA/k8s-device-plugin#quick-start"
BITSANDBYTES_INSTALL = "https://huggingface.co/docs/bitsandbytes/main/en/installation"
FLASH_ATTN = "https://github.com/Dao-AILab/flash-attention#installation-and-features"
CUDA_HOST_COMPILERS = ("https://docs.nvidia.com/cuda/cuda-installation-guide-linux/index.html"
                       "#host-compiler-support-policy")
DEEPSPEED_INSTALL = "https://www.deepspeed.ai/tutorials/advanced-install/"
NVCC_GPU_ARCH = "https://docs.nvidia.com/cuda/cuda-compiler-driver-nvcc/index.html#gpu-feature-list"
PYTORCH_DATALOADER = "https://pytorch.org/docs/stable/data.html#multi-process-data-loading"
ONNXRUNTIME_CUDA = "https://onnxruntime.ai/docs/execution-providers/CUDA-ExecutionProvider.html"


def container_gpus() -> tuple[str, ...]:
    """A container started with the host's GPUs and driver libraries, through the NVIDIA container runtime."""
    return (container_run("--gpus all", note="or CDI: --device nvidia.com/gpu=all; compose: deploy.resources.devices"),
            container_toolkit_install())


def cdi_generate() -> tuple[str, ...]:
    """Write the CDI spec that names the GPUs for Podman / containerd."""
    return (step("nvidia-ctk", "sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"),
            step("nvidia-ctk", "nvidia-ctk cdi list", "nvidia.com/gpu=all, =0, …"))


def wheel_lib_path(python: str | None, wheel_dir: str) -> str:
    """Put an nvidia-* wheel's lib folder on LD_LIBRARY_PATH for a program that is not Python."""
    py = python or "python"
    return env_set("LD_LIBRARY_PATH", f'"$({py} -c "import nvidia.{wheel_dir} as m; print(m.__path__[0])")/lib'
                   ':$LD_LIBRARY_PATH"')


def cuda_runtime_for_binary(major: int | None, cuda: str | None = None) -> tuple[str, ...]:
    """The CUDA toolkit's libraries for a program built against CUDA ``major`` (``cuda``: its full version
    when the soname names one, ``9.0``), found by the loader."""
    version = cuda or (f"{major}.x" if major else "<the CUDA version the program was built with>")
    return (f"# install the CUDA {version} toolkit (or its runtime libraries): {CUDA_ARCHIVE}",
            env_set("LD_LIBRARY_PATH", f"/usr/local/cuda-{cuda or major or '<version>'}/lib64:$LD_LIBRARY_PATH"))


def find_library(library: str) -> str:
    """Where the loader could find ``library`` (the loader cache, then the file system)."""
    return f"ldconfig -p | grep {shlex.quote(library.split('.so')[0])} || find / -name {shlex.quote(library + '*')} 2>/dev/null"


def windows_library(library: str) -> tuple[Line, ...]:
    """Where a DLL is on this Windows machine, then its folder on PATH (the folders Windows loads DLLs from)."""
    return (step("where", f"where.exe /R C:\\ {library}", "the folders that hold it"),
            step("set-path", "set PATH=<that folder>;%PATH%", "cmd; PowerShell: $env:PATH = \"<that folder>;$env:PATH\""))


def system_library(library: str) -> str:
    """The distribution package that ships a system library (Debian/Ubuntu)."""
    return step("apt-file", f"apt-file search {shlex.quote(library)}", "then: sudo apt-get install <that package>")


def extension_rebuild(python: str | None, package: str) -> str:
    """Build or fetch ``package``'s compiled extension again against the installed torch."""
    return pip(python, f"install --force-reinstall --no-cache-dir --no-build-isolation {shlex.quote(package)}")


def glibcxx_versions(library: str) -> str:
    """The symbol versions a libstdc++ (or any library) defines."""
    return f"strings {shlex.quote(library)} | grep -E 'GLIBCXX_|CXXABI_|GLIBC_' | sort -V | tail -3"


def nccl_debug() -> tuple[str, ...]:
    """Run again with NCCL's own diagnosis on."""
    return (Line(EnvSet((("NCCL_DEBUG", "INFO"), ("NCCL_DEBUG_SUBSYS", "INIT,NET,SHM")),
                        note="then run again: NCCL names the failing call")),)


@lru_cache(maxsize=512)
def message_remedy(name: str | None, python: str | None = None,
                   container: str | None = None) -> tuple[str, tuple[str, ...], tuple[str, ...]] | None:
    """``(what to do, commands, links)`` for a catalogue row's ``remedy`` name (envdoctor/data/messages.json);
    None for no remedy or an unknown name. Each framework gets its own commands, never another's."""
    table: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
        "no-visible-gpu": ("Make a GPU visible to the process: check CUDA_VISIBLE_DEVICES (empty or an index that "
                           "does not exist hides every GPU), start a container with its GPUs, and check the driver.",
                           ("echo \"CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES\"   # unset it, or list GPUs that exist",
                            "nvidia-smi -L   # the GPUs the driver sees", container_gpus()[0]),
                           (DRIVER_DOWNLOAD,)),
        "driver-install": ("Install the NVIDIA driver for this GPU (or, in a container, start it with the GPUs).",
                           (ubuntu_drivers_install("or the driver from NVIDIA's page"), container_gpus()[0]),
                           (DRIVER_DOWNLOAD,)),
        "shm": ("Give the processes more shared memory: NCCL puts its intra-node buffers in /dev/shm.",
                shm_commands(container), (DOCKER_SHM_SIZE, NCCL_TROUBLESHOOTING)),
        "nccl-debug": ("Run again with NCCL_DEBUG=INFO: NCCL's own log names the call that failed.", nccl_debug(),
                       (NCCL_TROUBLESHOOTING,)),
        "nccl-socket": ("Point NCCL at an interface that reaches the other ranks.", nccl_socket_ifname(None),
                        (NCCL_ENV_DOC,)),
        "nccl-ib": ("Check the InfiniBand/RoCE link, or take IB out to confirm.",
                    ("ibv_devinfo   # port state ACTIVE, link layer", env_set("NCCL_IB_DISABLE", "1", "to confirm: NCCL then uses sockets")), (NCCL_TROUBLESHOOTING,)),
        "nccl-p2p": ("Check GPU peer-to-peer access (ACS, IOMMU, a container without --ipc=host), or take P2P out to "
                     "confirm.", ("nvidia-smi topo -m", env_set("NCCL_P2P_DISABLE", "1", "to confirm")),
                     (NCCL_TROUBLESHOOTING,)),
        "nccl-nvls": ("Take NVLink SHARP out to confirm (it needs the fabric manager and NVSwitch).",
                      (env_set("NCCL_NVLS_ENABLE", "0", "to confirm"),), (NCCL_TROUBLESHOOTING, FABRIC_GUIDE)),
        "proprietary-kernel-module": ("The open kernel modules run only GPUs with a GSP (Turing and later): install the "
                                      "proprietary kernel module flavour of the driver for this GPU instead of the open "
                                      "one (NVIDIA's guide: switching between driver module flavors).",
                                      ("lspci -nn | grep -i nvidia   # the GPU and its PCI id",
                                       "modinfo -F license nvidia   # 'Dual MIT/GPL' is the open flavour, 'NVIDIA' the "
                                       "proprietary one"),
                                      (DRIVER_FLAVORS, OPEN_MODULES_GPUS)),
        "container-driver-library": ("The host's driver libraries do not reach the container runtime: install the "
                                     "NVIDIA driver on the host, then the Container Toolkit.",
                                     ("nvidia-smi   # on the host: the driver works there", container_toolkit_install()),
                                     (CONTAINER_TOOLKIT_INSTALL,)),
        "container-runtime-configure": ("Install the NVIDIA Container Toolkit and register its runtime with Docker "
                                        "(or use --gpus all, which needs no runtime name).",
                                        (container_toolkit_install(), container_runtime_configure()),
                                        (CONTAINER_TOOLKIT_CONFIGURE,)),
        "cdi-generate": ("Generate the CDI spec for the GPUs, then ask for them by their CDI name.", cdi_generate(),
                         (CDI_GUIDE,)),
        "k8s-gpu-capacity": ("No node advertises a free nvidia.com/gpu: check the device plugin runs on the GPU "
                             "nodes and what is allocated.",
                             ("kubectl describe nodes | grep -A2 -i 'nvidia.com/gpu'",
                              "kubectl get pods -A -o wide | grep -i nvidia-device-plugin"), (K8S_DEVICE_PLUGIN,)),
        "k8s-device-plugin": ("The device plugin's container cannot load libnvidia-ml: the node's container runtime "
                              "must be nvidia (default runtime or RuntimeClass).",
                              (step("nvidia-ctk", "sudo nvidia-ctk runtime configure --runtime=containerd --set-as-default"),
                               step("systemctl", "sudo systemctl restart containerd")), (K8S_DEVICE_PLUGIN,)),
        "tensorflow-cuda": ("Install TensorFlow with its CUDA libraries (pip), which puts them where TensorFlow "
                            "looks.", (pip(python, "install 'tensorflow[and-cuda]'"),), (TENSORFLOW_PIP,)),
        "framework-cudnn": ("Make the cuDNN the framework loads at least the one it was built with: one cuDNN in "
                            "the environment (another framework's pin or a system copy shadows it).",
                            (pip(python, "list 2>/dev/null | grep -i cudnn   # every cuDNN wheel installed"),
                             "echo $LD_LIBRARY_PATH   # a system cuDNN folder here shadows the wheel's"),
                            (CUDNN_SUPPORT_MATRIX,)),
        "jax-cuda": ("Install JAX with the CUDA libraries it was built against.",
                     (pip(python, "install -U 'jax[cuda12]'"),), (JAX_INSTALL,)),
        "xformers": ("Install the xFormers build made for the installed torch (pip resolves the release pinned to "
                     "it), or the torch that build wants.", (pip(python, "install -U xformers"),),
                     (XFORMERS_INSTALL,)),
        "flash-attn": ("FlashAttention 2 needs an Ampere (CC 8.0) or newer GPU: use PyTorch's SDPA attention on "
                       "this GPU instead.", ("python -c \"import torch; print(torch.cuda.get_device_capability())\"   # (8, 0) or "
                                                   "newer for FlashAttention 2",), (FLASH_ATTN,)),
        "bitsandbytes": ("Install the bitsandbytes build with CUDA support.", (pip(python, "install -U bitsandbytes"),),
                         (BITSANDBYTES_INSTALL,)),
        "ptxas": ("The ptxas in use predates this GPU: use a Triton/torch release that knows it, or point Triton at "
                  "a newer toolkit's ptxas.", (pip(python, "install -U triton"),
                                               env_set("TRITON_PTXAS_PATH", "/usr/local/cuda/bin/ptxas", "a toolkit new enough for this GPU")), (CUDA_ARCHIVE,)),
        "cuda-error": ("Find the call that failed: run again with CUDA_LAUNCH_BLOCKING=1 (errors are reported "
                       "asynchronously otherwise), and check the GPU and driver are healthy.",
                       ("CUDA_LAUNCH_BLOCKING=1 <the same command>   # the traceback then points at the failing call",
                        "nvidia-smi -q -d ECC,PERFORMANCE | head -40", kernel_log("xid|nvrm", flags="-iE", times=True, tail=0)),
                       (CUDA_RESULT_CODES,)),
        "nvml-error": ("Check the NVIDIA driver with nvidia-smi; an NVML error usually means the driver is not "
                       "loaded, was updated without a reboot, or is not reachable from this container.",
                       ("nvidia-smi", "cat /proc/driver/nvidia/version"), (NVML_RETURN_CODES,)),
        "triton-libcuda": ("Let Triton find the driver's libcuda.so.1: refresh the loader cache, or name its folder.",
                           (ldconfig("then: ldconfig -p | grep libcuda.so.1"),
                            env_set("TRITON_LIBCUDA_PATH", "<the folder holding libcuda.so.1>", "e.g. /usr/lib64-nvidia")),
                           ()),
        "vllm-dtype": ("Run this GPU with float16: its architecture has no bfloat16.",
                       ("vllm serve <model> --dtype half",), ()),
        "torch-gpu-arch": ("Install a torch build whose CUDA kernels include this GPU's architecture: the message names "
                           "the CUDA builds that do (newer GPUs need a newer CUDA build; the oldest ones an older torch).",
                           ("nvidia-smi --query-gpu=name,compute_cap --format=csv   # the GPU's compute capability",
                            torch_install(python, None, "<the cuXYZ build the message names>")),
                           (PYTORCH_GET_STARTED,)),
        "torch-reinstall": ("Reinstall torch: its CUDA runtime bindings are missing, so the install is broken or "
                            "mixed.", (torch_install(python, None, None),), (PYTORCH_GET_STARTED,)),
        "dataloader-worker": ("Find what ended the worker: the kernel's out-of-memory killer (host memory), a Bus "
                              "error (shared memory), or the worker's own exception, which num_workers=0 shows.",
                              (kernel_log("killed process|out of memory", flags="-iE", tail=20),
                               "df -h /dev/shm   # a Bus error means this is too small",
                               step("comment", "# rerun with DataLoader(num_workers=0): the worker's own error is "
                                    "raised in the main process")),
                              (PYTORCH_DATALOADER,)),
        "cuda-toolkit": ("Install a CUDA toolkit (nvcc) of torch's CUDA version and point CUDA_HOME at it.",
                         cuda_toolkit_install(None), (CUDA_ARCHIVE,)),
        "host-compiler": ("Build with a host compiler this CUDA toolkit supports (the message names the range), "
                          "and name it for the build.",
                          (apt_install("g++-12", note="or any version in the range the message names"),
                           env_set("CC", "gcc-12"), env_set("CXX", "g++-12")), (CUDA_HOST_COMPILERS,)),
        "ninja": ("Install ninja: torch builds its C++/CUDA extensions with it.", (pip(python, "install ninja"),), ()),
        "nccl-devices": ("Give each rank its own GPU: select the device from LOCAL_RANK before the process group "
                         "starts, and check CUDA_VISIBLE_DEVICES lists distinct GPUs for the ranks of one node.",
                         (step("comment", "# in the script, before init_process_group: "
                               "torch.cuda.set_device(int(os.environ['LOCAL_RANK']))"),
                          "nvidia-smi -L   # the GPUs, one per rank"), (NCCL_TROUBLESHOOTING,)),
        "jax-gpu": ("This GPU is below the compute capability JAX's CUDA build supports: run JAX on the CPU here, "
                    "or on a newer GPU.", ("nvidia-smi --query-gpu=name,compute_cap --format=csv",
                                          env_set("JAX_PLATFORMS", "cpu", "meanwhile")), (JAX_INSTALL,)),
        "bitsandbytes-cuda": ("Install a bitsandbytes release that ships a binary for torch's CUDA, with that CUDA's "
                              "runtime libraries where the loader finds them.",
                              (pip(python, "install -U bitsandbytes"),
                               "python -m bitsandbytes   # bitsandbytes' own diagnosis: the binaries and CUDA it found"),
                              (BITSANDBYTES_INSTALL,)),
        "deepspeed-cuda": ("DeepSpeed builds its ops with the CUDA toolkit: use one of torch's CUDA version (or "
                           "install DeepSpeed without prebuilding ops).",
                           cuda_toolkit_install(None), (DEEPSPEED_INSTALL,)),
        "driver-load": ("Load the NVIDIA kernel module on the host (install the driver if it is not there), then "
                        "start the container again.", (load_module("nvidia"), "nvidia-smi   # on the host"),
                        (DRIVER_DOWNLOAD,)),
        "nvrm-init": ("The driver could not bring the GPU up: read the kernel log around the NVRM lines (Xid, "
                      "power, PCIe), check the GPU is seen on the bus, then reset it or reboot.",
                      (kernel_log("nvrm|xid", flags="-iE", times=True, tail=40), "lspci -nn | grep -i nvidia",
                       reboot()), (DRIVER_DOWNLOAD,)),
        "onnxruntime-gpu": ("Install onnxruntime-gpu in place of onnxruntime (one of the two, never both), for torch's "
                            "CUDA major; if it is installed, its CUDA libraries could not be loaded.",
                            (pip_replace(python, "onnxruntime", "onnxruntime-gpu"),
                             "python -c \"import onnxruntime as o; print(o.get_available_providers())\""),
                            (ONNXRUNTIME_CUDA,)),
        "tensorflow-gpu-arch": ("This GPU is below the compute capability this TensorFlow build supports: use a GPU "
                                "it supports, or run TensorFlow on the CPU here.",
                                ("nvidia-smi --query-gpu=name,compute_cap --format=csv",
                                 env_set("CUDA_VISIBLE_DEVICES", "", "meanwhile: TensorFlow runs on the CPU")),
                                (TENSORFLOW_PIP,)),
        "nvcc-arch": ("This nvcc predates the requested architecture: build with a CUDA toolkit that knows it, or "
                      "ask for architectures this toolkit has.",
                      ("nvcc --list-gpu-arch   # the architectures this nvcc knows",
                       env_set("TORCH_CUDA_ARCH_LIST", "<an architecture from that list>", "for torch extensions")),
                      (NVCC_GPU_ARCH, CUDA_ARCHIVE)),
        "nccl-gpu-arch": ("The NCCL that ran has no device code for this GPU's architecture (its CUDA kernels were "
                          "built for other GPUs): use the NCCL built for this GPU, the one of a torch CUDA build that "
                          "supports it, and take an older libnccl off LD_LIBRARY_PATH.",
                          ("nvidia-smi --query-gpu=name,compute_cap --format=csv   # the GPU's compute capability",
                           pip(python, "list 2>/dev/null | grep -i nccl   # the NCCL wheels installed"),
                           "echo $LD_LIBRARY_PATH   # a folder holding another libnccl.so.2 here is loaded first"),
                          (NCCL_TROUBLESHOOTING,)),
        "driver-update": ("Update the NVIDIA driver to a release whose CUDA version is at least the one the message "
                          "names (on a data-centre GPU, CUDA's forward-compatibility package is the other way).",
                          ("nvidia-smi   # 'CUDA Version' in the header: the newest CUDA this driver runs",
                           ubuntu_drivers_install("or the driver from NVIDIA's page")), (DRIVER_DOWNLOAD,)),
        "windows-paging-file": ("Windows ran out of committed virtual memory: every DataLoader worker process maps "
                                "torch's CUDA DLLs again. Let Windows size the paging file itself (or make it larger), "
                                "or start fewer DataLoader workers.",
                                (step("windows-settings", "SystemPropertiesPerformance.exe",
                                      "Advanced > Virtual memory > Change: 'System managed size', then restart"),
                                 "DataLoader(..., num_workers=2)   # fewer workers, or 0 to confirm"),
                                ("https://learn.microsoft.com/en-us/troubleshoot/windows-client/performance/"
                                 "how-to-determine-the-appropriate-page-file-size-for-64-bit-versions-of-windows",)),
        "cudnn-init": ("cuDNN could not start: make the cuDNN the framework loads the one it was built with (one copy in "
                       "the environment), and leave it GPU memory (TensorFlow takes all of it at start unless told to "
                       "grow; another process may hold it).",
                       ("nvidia-smi --query-compute-apps=pid,used_memory --format=csv   # what holds GPU memory",
                        env_set("TF_FORCE_GPU_ALLOW_GROWTH", "true", "TensorFlow: allocate GPU memory as needed"),
                        pip(python, "list 2>/dev/null | grep -i cudnn   # every cuDNN wheel installed")),
                       (CUDNN_SUPPORT_MATRIX,)),
        "pci-bar": ("The GPU's memory window (BAR) got no address: enable 'Above 4G Decoding' (and Resizable BAR) in "
                    "the BIOS; in a VM give the guest UEFI (OVMF) firmware; or let Linux reassign it with the pci=realloc "
                    "kernel parameter.",
                    (kernel_log("BAR|NVRM", flags="-iE", tail=20),
                     "lspci -vv -d 10de: | grep -iE 'Region|Memory at'   # an unassigned region reads <unassigned> or size 0",
                     step("grub", "sudo update-grub", "after adding pci=realloc to GRUB_CMDLINE_LINUX_DEFAULT in "
                          "/etc/default/grub; then reboot")), (DRIVER_DOWNLOAD,)),
        "nouveau-blacklist": ("Another kernel driver (nouveau, or vfio-pci for a GPU meant for a VM) was bound to the "
                              "GPU before nvidia: blacklist nouveau, rebuild the initramfs and reboot.",
                              (*blacklist_nouveau(), "lspci -nnk -d 10de:   # 'Kernel driver in use: nvidia' after the "
                                                     "reboot"), (DRIVER_DOWNLOAD,)),
    }
    return table.get(name) if name else None


#: TensorFlow's install page: GPU support on native Windows ended after TensorFlow 2.10 (WSL 2 from 2.11 on).
TENSORFLOW_WINDOWS = "https://www.tensorflow.org/install/pip#windows-native"


#: The first TensorFlow whose Linux wheel has the ``and-cuda`` extra (pip brings CUDA and cuDNN): tensorflow/docs
#: rewrote its GPU install steps to it for 2.14 (commit 7442d72c6, 2023-09-28, site/en/install/pip.md); before
#: it, the page installed CUDA and cuDNN themselves (``conda install … cudatoolkit=11.2 cudnn=8.1.0`` for 2.5–2.11).
_TF_AND_CUDA_FROM = (2, 14)


def tensorflow_gpu(python: str | None, windows: bool, tensorflow: str | None = None
                   ) -> tuple[str, tuple[Line | str, ...], tuple[str, ...]]:
    """What makes TensorFlow find its CUDA libraries: on Linux its ``and-cuda`` extra (from 2.14; before it, the CUDA
    and cuDNN the release was built with); on native Windows there is no GPU TensorFlow after 2.10 (TensorFlow's
    install page): WSL 2, or a release up to 2.10 with the CUDA and cuDNN it was built with. ``tensorflow``: the
    installed release, when the text shows it (its build is looked up in TensorFlow's tested configurations)."""
    build = compat.tensorflow_build(tensorflow, "Windows" if windows else "Linux") if tensorflow else None
    built = (f"TensorFlow {tensorflow} was built with CUDA {build['cuda']} and cuDNN {build['cudnn']} "
             f"({compat.said(build['source'])})") if build else ""
    newer = compat.tensorflow_not_in_table(tensorflow) if tensorflow and not build else None
    links = (compat.source_url(build["source"]),) if build else ()
    if windows and build:
        return (f"{built}: on native Windows it finds them through PATH. Install CUDA {build['cuda']} and "
                f"cuDNN {build['cudnn']} and put their bin folders on PATH; or run TensorFlow in WSL 2.",
                (step("cmd", "where cudart64_*.dll cudnn64_*.dll", "the CUDA and cuDNN DLLs PATH finds"),),
                (CUDA_ARCHIVE, CUDNN_ARCHIVE, *links))
    if windows:
        return ("TensorFlow's GPU support on native Windows ended with TensorFlow 2.10: run TensorFlow in WSL 2 (and "
                "install it there with its CUDA libraries), or stay with TensorFlow 2.10 and install the CUDA 11.2 "
                "and cuDNN 8.1 it was built with.",
                (step("wsl", "wsl --install", "in PowerShell, then inside WSL: pip install 'tensorflow[and-cuda]'"),
                 pip(python, "install \"tensorflow<2.11\"", note="native Windows: the last GPU release line")),
                (TENSORFLOW_WINDOWS,))
    if build and tuple(int(p) for p in str(build["tensorflow"]).split(".")) < _TF_AND_CUDA_FROM:
        return (f"{built}: install them (NVIDIA's archives) and put their lib64 folder on LD_LIBRARY_PATH; or "
                "move to a TensorFlow from 2.14 on, whose pip extra brings its CUDA libraries.",
                (pip(python, "install 'tensorflow[and-cuda]'", note="alternative: a TensorFlow from 2.14 on"),),
                (CUDA_ARCHIVE, CUDNN_ARCHIVE, *links))
    pinned = f"install 'tensorflow[and-cuda]=={build['tensorflow']}.*'" if build else "install 'tensorflow[and-cuda]'"
    return ((f"{built}. " if built else f"{newer}. " if newer else "") + "Install TensorFlow with its CUDA libraries (pip), which puts them "
            "where TensorFlow looks, and take LD_LIBRARY_PATH entries that point at another CUDA off it.",
            (pip(python, pinned),), (TENSORFLOW_PIP, *links))


def link_library(library: str, stubs: bool) -> tuple[Line | str, ...]:
    """What lets the linker (ld) find a library at build time: where it is, then its folder on LIBRARY_PATH (the
    toolkit's ``lib64/stubs`` for the driver's libcuda.so, which a build links against without a driver)."""
    folder = "$CUDA_HOME/lib64/stubs" if stubs else "$CUDA_HOME/lib64"
    return (find_library(library), env_set("LIBRARY_PATH", f"{folder}:$LIBRARY_PATH", "the folders ld searches for -l"))


def gpu_holders() -> tuple[Line, ...]:
    """Which compute mode each GPU is in, and which processes hold them (nvidia-smi's queries; a GPU in
    Exclusive_Process mode takes one CUDA process at a time)."""
    return (step("nvidia-smi", "nvidia-smi --query-gpu=index,compute_mode --format=csv"),
            step("nvidia-smi", "nvidia-smi --query-compute-apps=pid,process_name,gpu_uuid --format=csv",
                 "the processes holding the GPUs"))


#: Docker's page for GPUs in Compose (deploy.resources.reservations.devices).
COMPOSE_GPU_SUPPORT = "https://docs.docker.com/compose/how-tos/gpu-support/"


def compose_gpu_request() -> str:
    """The Compose service's GPU request (Docker's "GPU support" page), as a comment to put in the file: it is
    YAML, not a command to run."""
    return ("# docker compose: deploy: {resources: {reservations: {devices: "
            "[{driver: nvidia, count: all, capabilities: [gpu]}]}}}")


def device_plugin_logs() -> Line:
    """The NVIDIA device plugin's log (its Helm chart's label; the GPU operator may use another namespace)."""
    return step("kubectl", "kubectl logs -n kube-system -l app.kubernetes.io/name=nvidia-device-plugin",
                "or the namespace the GPU operator uses")


def list_gpus() -> Line:
    """The GPUs the driver has, with their indices and UUIDs."""
    return step("nvidia-smi", "nvidia-smi -L")
