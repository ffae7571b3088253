"""Remedies, written once: every pip, package-manager, driver and GPU-reset command a finding
prints, and the documentation links findings point to.

A check asks for a command here and never formats one itself, so the wheel index, the way the
user's own interpreter runs pip, and the shape of a driver install are the same in every finding.
The PyTorch wheel index base comes from the compatibility table (``index.base`` in
``data/compat.json``), where its source is recorded.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence

from . import compat

# ---------------------------------------------------------------------------------------------
# Links

PYTORCH_GET_STARTED = "https://pytorch.org/get-started/locally/"
PYTORCH_PREVIOUS = "https://pytorch.org/get-started/previous-versions/"
DRIVER_DOWNLOAD = "https://www.nvidia.com/Download/index.aspx"
DRIVER_GUIDE = "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/index.html"
CUDA_COMPATIBILITY = "https://docs.nvidia.com/deploy/cuda-compatibility/"
FORWARD_COMPAT = "https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html"
CUDA_WHEELS_DOC = "https://docs.nvidia.com/cuda/cuda-installation-guide-linux/#pip-wheels"
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
# pip

def index_url(variant: str) -> str:
    """The PyTorch wheel index of a variant: ``cu128`` -> ``<index.base>cu128``."""
    return f"{compat.data()['index']['base']}{variant}"


def pip(python: str | None, args: str) -> str:
    """``args`` run by the target interpreter's pip (``/opt/venv/bin/python -m pip install …``), so it
    installs where torch lives, not into whatever ``pip`` is first on PATH; plain ``pip`` when the
    interpreter is not known (a pasted report)."""
    return f"{python} -m pip {args}" if python else f"pip {args}"


def pip_install(python: str | None, packages: str | Sequence[str], *, force: bool = False, no_deps: bool = False,
                upgrade: bool = False, variant: str | None = None, quote: bool = False) -> str:
    """``pip install [--force-reinstall] [--no-deps] [-U] PACKAGES [--index-url <PyTorch index>]``."""
    names = [packages] if isinstance(packages, str) else list(packages)
    if quote:
        names = [shlex.quote(n) for n in names]
    flags = [f for f, on in (("--force-reinstall", force), ("--no-deps", no_deps), ("-U", upgrade)) if on]
    tail = f" --index-url {index_url(variant)}" if variant else ""
    return pip(python, " ".join(["install", *flags, *names]) + tail)


def pip_uninstall(python: str | None, packages: str | Iterable[str]) -> str:
    names = [packages] if isinstance(packages, str) else list(packages)
    return pip(python, "uninstall -y " + " ".join(names))


def torch_install(python: str | None, version: str | None, variant: str | None, extras: Sequence[str] = (),
                  force: bool = True) -> str:
    """The exact (re)install of a torch build from a PyTorch variant index, companions alongside
    (unpinned: their own exact torch pin picks the matching release)."""
    spec = f"torch=={version}" if version else "torch"
    return pip_install(python, [spec, *extras], force=force, variant=variant)


def envdoctor_upgrade() -> str:
    """envdoctor itself, in its own environment (the distribution is ``gpu-envdoctor``)."""
    return "pip install -U gpu-envdoctor"


# ---------------------------------------------------------------------------------------------
# System packages, drivers, GPUs

def apt_install(package: str, *, reinstall: bool = False, note: str = "") -> str:
    """``sudo apt install [--reinstall] PACKAGE`` (Ubuntu/Debian, where NVIDIA's driver packages live)."""
    command = f"sudo apt install {'--reinstall ' if reinstall else ''}{package}"
    return f"{command}   # {note}" if note else command


def driver_branch_package(branch: str | int) -> str:
    """Ubuntu's package for a driver branch: ``nvidia-driver-570``."""
    return f"nvidia-driver-{branch}"


def compute_library_package(branch: str) -> str:
    """The driver's CUDA user-space library package (libcuda, libnvidia-ml): ``libnvidia-compute-570``."""
    return f"libnvidia-compute-{branch}"


def fabric_manager_package(branch: str) -> str:
    return f"nvidia-fabricmanager-{branch}"


def gpu_reset(target: str | int | None, note: str = "") -> str:
    """``sudo nvidia-smi -r -i GPU``: resets one GPU (NVML index or PCI address); nothing may run on it."""
    command = f"sudo nvidia-smi -r -i {target}"
    return f"{command}   # {note}" if note else command


def gpu_resets(targets: Iterable[str | int | None], note: str = "") -> tuple[str, ...]:
    return tuple(dict.fromkeys(gpu_reset(t, note) for t in targets))


def dkms_rebuild(note: str = "") -> str:
    """Rebuild the NVIDIA kernel module for the running kernel (DKMS, Ubuntu/Debian)."""
    command = f"{apt_install('linux-headers-$(uname -r)')} && sudo dkms autoinstall"
    return f"{command}   # {note}" if note else command


def ubuntu_drivers_install(note: str = "") -> str:
    """Ubuntu's own pick of the driver for the installed GPU."""
    command = "sudo ubuntu-drivers install"
    return f"{command}   # {note}" if note else command


def container_toolkit_install() -> str:
    """The NVIDIA Container Toolkit on the host (its apt repository is added first, see the install guide)."""
    return "sudo apt-get install -y nvidia-container-toolkit   # host, after adding NVIDIA's repository"


def torch_source_build(arch: str, cuda: str | None) -> tuple[str, ...]:
    """Build torch from source for a GPU no wheel carries (``arch`` as TORCH_CUDA_ARCH_LIST takes it:
    ``"3.5"``) with a toolkit that still targets it (``cuda``: ``"10.2"``, None for the default one)."""
    return ("git clone --recursive https://github.com/pytorch/pytorch && cd pytorch",
            f"export TORCH_CUDA_ARCH_LIST={arch} CUDA_HOME=/usr/local/cuda" + (f"-{cuda}" if cuda else "")
            + "   # a toolkit that targets it",
            "pip install -r requirements.txt && python setup.py develop")
