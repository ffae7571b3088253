"""Remedies, written once: every pip, package-manager, driver and GPU-reset command a finding
prints, and the documentation links findings point to.

A check asks for a command here and never formats one itself, so the wheel index, the way the
user's own interpreter runs pip, and the shape of a driver install are the same in every finding.
The PyTorch wheel index base comes from the compatibility table (``index.base`` in
``data/compat.json``), where its source is recorded.
"""

from __future__ import annotations

import re
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
    (unpinned: their own exact torch pin picks the matching release).

    Only a release the compatibility table lists is pinned: a version read from a paste (a typo'd
    ``torch 7.0``, a local build) never becomes ``torch==7.0``; the index then picks its newest build."""
    pin = compat.known_patch(version)
    spec = f"torch=={pin}" if pin else "torch"
    return pip_install(python, [spec, *extras], force=force, variant=variant)


_PIP_INSTALL = re.compile(r"(?:^|\s)(?:-m\s+)?pip\s+install\s")
_INDEX = re.compile(r"--(?:extra-)?index-url\s+(\S+)")


def torch_target(command: str) -> tuple[str | None, str | None] | None:
    """What a command written by :func:`torch_install` installs: (torch version or None, variant or None);
    None for any other command (a comment line, torchvision alone, an uninstall)."""
    line = command.split("   #", 1)[0].strip()
    if line.startswith("#") or not _PIP_INSTALL.search(line):
        return None
    pin = next((tok for tok in line.split() if tok == "torch" or tok.startswith("torch==")), None)
    if pin is None:
        return None
    url = _INDEX.search(line)
    base = compat.data()["index"]["base"]
    variant = url.group(1)[len(base):].strip("/") or None if url and url.group(1).startswith(base) else None
    return (pin.split("==", 1)[1] if "==" in pin else None), variant


def is_torch_uninstall(command: str) -> bool:
    line = command.split("   #", 1)[0]
    return "pip uninstall" in line and "torch" in line.split()


def installs_driver(commands: Iterable[str], links: Iterable[str] = ()) -> bool:
    """Whether a remedy installs or upgrades the NVIDIA driver (the commands and links written here)."""
    return any(link in (DRIVER_DOWNLOAD, DRIVER_GUIDE) for link in links) or any(
        driver_branch_package("") in c or "ubuntu-drivers install" in c or "after installing the driver" in c
        for c in commands)


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


def torch_source_build(arch: str, cuda: str | None, release: str | None = None, windows: bool = False) -> tuple[str, ...]:
    """Build torch ``release`` (its git tag ``v2.7.1``; None: the main branch) from source for a GPU no
    wheel carries (``arch`` as TORCH_CUDA_ARCH_LIST takes it: ``"3.5"``) with the CUDA ``cuda`` toolkit,
    one that still targets it and that release was built with; in cmd.exe syntax on Windows."""
    branch = f" --branch v{release}" if release else ""
    clone = f"git clone --recursive{branch} https://github.com/pytorch/pytorch && cd pytorch"
    if windows:
        home = f"C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v{cuda}" if cuda else "<CUDA toolkit folder>"
        return (clone, f"set TORCH_CUDA_ARCH_LIST={arch}", f"set CUDA_HOME={home}",
                "pip install -r requirements.txt && python setup.py develop   # in a Visual Studio developer prompt")
    return (clone,
            f"export TORCH_CUDA_ARCH_LIST={arch} CUDA_HOME=/usr/local/cuda" + (f"-{cuda}" if cuda else "")
            + (f"   # the CUDA {cuda} toolkit" if cuda else "   # a toolkit that targets it"),
            "pip install -r requirements.txt && python setup.py develop")


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
        return ("docker run --shm-size=16g …", "docker run --ipc=host …")
    return ("df -h /dev/shm   # how large it is now",
            "docker run --shm-size=16g …   # in a container (or --ipc=host)",
            "sudo mount -o remount,size=16G /dev/shm   # on the host")


def nccl_socket_ifname(current: str | None) -> tuple[str, ...]:
    """List the interfaces, then point NCCL at one that exists (or stop forcing one that does not)."""
    commands = ["ip -brief address   # the interfaces this machine has, with their addresses"]
    if current:
        commands.append(f"unset NCCL_SOCKET_IFNAME   # {current!r} matches no interface here; NCCL picks one itself")
    commands.append("export NCCL_SOCKET_IFNAME=<interface from the list, e.g. eth0 or ens5>")
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
                "conda install -c nvidia/label/cuda-<that version>.0 cuda-toolkit   # or NVIDIA's installer: "
                + CUDA_ARCHIVE,
                "export CUDA_HOME=$CONDA_PREFIX   # or /usr/local/cuda-<that version>")
    major = int(cuda.split(".")[0]) if cuda.split(".")[0].isdigit() else 0
    if major >= 11:
        return (f"conda install -c nvidia/label/cuda-{cuda}.0 cuda-toolkit   # nvcc and headers of CUDA {cuda}",
                "export CUDA_HOME=$CONDA_PREFIX")
    return (f"# install the CUDA {cuda} toolkit from {CUDA_ARCHIVE}",
            f"export CUDA_HOME=/usr/local/cuda-{cuda}")


def cudnn_dlls(dll: str, in_torch: bool) -> tuple[str, ...]:
    """The cuDNN DLLs a Windows program could not find: torch's own (reinstall the CUDA wheel) or a
    separate runtime's (cuDNN of the DLL's major version, its bin folder on PATH)."""
    if in_torch:
        return (pip_install(None, "torch", force=True) + "   # the CUDA wheel ships its cuDNN DLLs in torch\\lib;"
                " pick the index for your CUDA at " + PYTORCH_GET_STARTED,)
    major = dll.rsplit("_", 1)[-1].split(".")[0] if "_" in dll else ""
    if major == "8":
        return ("pip install nvidia-cudnn-cu12==8.9.7.29   # cuDNN 8, whose DLLs are *64_8.dll",
                "set PATH=%VIRTUAL_ENV%\\Lib\\site-packages\\nvidia\\cudnn\\bin;%PATH%",
                "# a cuDNN 8 installed from NVIDIA's zip also needs zlibwapi.dll on PATH (its Windows install guide)")
    if major == "9":
        return ("pip install \"nvidia-cudnn-cu12>=9,<10\"   # cuDNN 9, whose DLLs are *64_9.dll",
                "set PATH=%VIRTUAL_ENV%\\Lib\\site-packages\\nvidia\\cudnn\\bin;%PATH%")
    return (f"# install cuDNN from {CUDNN_ARCHIVE} and add its bin folder to PATH",)


def wsl2_convert() -> tuple[str, ...]:
    """WSL 1 -> WSL 2, run in Windows (PowerShell); the GPU then reaches Linux through /usr/lib/wsl/lib."""
    return ("wsl -l -v   # in PowerShell: the VERSION column says 1 or 2",
            "wsl --set-version <distro name from that list> 2",
            "wsl --set-default-version 2")


def disable_acs() -> tuple[str, ...]:
    """ACS off on every PCIe bridge that has it (NCCL's troubleshooting guide), until the next boot."""
    return ("for bdf in $(lspci -d '*:*:*' | awk '{print $1}'); do "
            "sudo setpci -s $bdf ECAP_ACS+0x6.w >/dev/null 2>&1 && sudo setpci -s $bdf ECAP_ACS+0x6.w=0000; done",
            "# for good: disable ACS (or VT-d / IOMMU) in the BIOS, or boot the kernel with iommu=pt",
            "export NCCL_P2P_DISABLE=1   # meanwhile: NCCL avoids peer-to-peer (slower, no hang)")


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
        return ("echo 'ListenAddress 127.0.0.1' | sudo tee /etc/ssh/sshd_config.d/10-local.conf && "
                "sudo kill -HUP $(pgrep -o sshd)   # or drop sshd from the image: docker exec / kubectl exec",)
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
    return ('docker run --user "$(id -u):$(id -g)" --gpus all …   # or USER 1000 in the Dockerfile',)


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


def container_gpus() -> tuple[str, ...]:
    """A container started with the host's GPUs and driver libraries, through the NVIDIA container runtime."""
    return ("docker run --gpus all …   # or CDI: --device nvidia.com/gpu=all; compose: deploy.resources.devices",
            container_toolkit_install())


def configure_container_runtime() -> tuple[str, ...]:
    """Register the nvidia runtime with Docker (the Container Toolkit's nvidia-ctk), then restart the daemon."""
    return ("sudo nvidia-ctk runtime configure --runtime=docker", "sudo systemctl restart docker")


def cdi_generate() -> tuple[str, ...]:
    """Write the CDI spec that names the GPUs for Podman / containerd."""
    return ("sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml", "nvidia-ctk cdi list   # nvidia.com/gpu=all, =0, …")


def wheel_lib_path(python: str | None, wheel_dir: str) -> str:
    """Put an nvidia-* wheel's lib folder on LD_LIBRARY_PATH for a program that is not Python."""
    py = python or "python"
    return (f'export LD_LIBRARY_PATH="$({py} -c "import nvidia.{wheel_dir} as m; print(m.__path__[0])")/lib'
            ':$LD_LIBRARY_PATH"')


def cuda_runtime_for_binary(major: int | None, cuda: str | None = None) -> tuple[str, ...]:
    """The CUDA toolkit's libraries for a program built against CUDA ``major`` (``cuda``: its full version
    when the soname names one, ``9.0``), found by the loader."""
    version = cuda or (f"{major}.x" if major else "<the CUDA version the program was built with>")
    return (f"# install the CUDA {version} toolkit (or its runtime libraries): {CUDA_ARCHIVE}",
            f"export LD_LIBRARY_PATH=/usr/local/cuda-{cuda or major or '<version>'}/lib64:$LD_LIBRARY_PATH")


def find_library(library: str) -> str:
    """Where the loader could find ``library`` (the loader cache, then the file system)."""
    return f"ldconfig -p | grep {shlex.quote(library.split('.so')[0])} || find / -name {shlex.quote(library + '*')} 2>/dev/null"


def system_library(library: str) -> str:
    """The distribution package that ships a system library (Debian/Ubuntu)."""
    return f"apt-file search {shlex.quote(library)}   # then: sudo apt-get install <that package>"


def extension_rebuild(python: str | None, package: str) -> str:
    """Build or fetch ``package``'s compiled extension again against the installed torch."""
    return pip(python, f"install --force-reinstall --no-cache-dir --no-build-isolation {shlex.quote(package)}")


def glibcxx_versions(library: str) -> str:
    """The symbol versions a libstdc++ (or any library) defines."""
    return f"strings {shlex.quote(library)} | grep -E 'GLIBCXX_|CXXABI_|GLIBC_' | sort -V | tail -3"


def nccl_debug() -> tuple[str, ...]:
    """Run again with NCCL's own diagnosis on."""
    return ("export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,SHM   # then run again: NCCL names the failing call",)


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
                    ("ibv_devinfo   # port state ACTIVE, link layer", "export NCCL_IB_DISABLE=1   # to confirm: NCCL "
                     "then uses sockets"), (NCCL_TROUBLESHOOTING,)),
        "nccl-p2p": ("Check GPU peer-to-peer access (ACS, IOMMU, a container without --ipc=host), or take P2P out to "
                     "confirm.", ("nvidia-smi topo -m", "export NCCL_P2P_DISABLE=1   # to confirm"),
                     (NCCL_TROUBLESHOOTING,)),
        "nccl-nvls": ("Take NVLink SHARP out to confirm (it needs the fabric manager and NVSwitch).",
                      ("export NCCL_NVLS_ENABLE=0   # to confirm",), (NCCL_TROUBLESHOOTING, FABRIC_GUIDE)),
        "container-driver-library": ("The host's driver libraries do not reach the container runtime: install the "
                                     "NVIDIA driver on the host, then the Container Toolkit.",
                                     ("nvidia-smi   # on the host: the driver works there", container_toolkit_install()),
                                     (CONTAINER_TOOLKIT_INSTALL,)),
        "container-runtime-configure": ("Install the NVIDIA Container Toolkit and register its runtime with Docker "
                                        "(or use --gpus all, which needs no runtime name).",
                                        (container_toolkit_install(), *configure_container_runtime()),
                                        (CONTAINER_TOOLKIT_CONFIGURE,)),
        "cdi-generate": ("Generate the CDI spec for the GPUs, then ask for them by their CDI name.", cdi_generate(),
                         (CDI_GUIDE,)),
        "k8s-gpu-capacity": ("No node advertises a free nvidia.com/gpu: check the device plugin runs on the GPU "
                             "nodes and what is allocated.",
                             ("kubectl describe nodes | grep -A2 -i 'nvidia.com/gpu'",
                              "kubectl get pods -A -o wide | grep -i nvidia-device-plugin"), (K8S_DEVICE_PLUGIN,)),
        "k8s-device-plugin": ("The device plugin's container cannot load libnvidia-ml: the node's container runtime "
                              "must be nvidia (default runtime or RuntimeClass).",
                              ("sudo nvidia-ctk runtime configure --runtime=containerd --set-as-default",
                               "sudo systemctl restart containerd"), (K8S_DEVICE_PLUGIN,)),
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
                                               "export TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas   # a toolkit "
                                               "new enough for this GPU"), (CUDA_ARCHIVE,)),
        "cuda-error": ("Find the call that failed: run again with CUDA_LAUNCH_BLOCKING=1 (errors are reported "
                       "asynchronously otherwise), and check the GPU and driver are healthy.",
                       ("CUDA_LAUNCH_BLOCKING=1 <the same command>   # the traceback then points at the failing call",
                        "nvidia-smi -q -d ECC,PERFORMANCE | head -40", "sudo dmesg -T | grep -iE 'xid|nvrm' | tail"),
                       (CUDA_RESULT_CODES,)),
        "nvml-error": ("Check the NVIDIA driver with nvidia-smi; an NVML error usually means the driver is not "
                       "loaded, was updated without a reboot, or is not reachable from this container.",
                       ("nvidia-smi", "cat /proc/driver/nvidia/version"), (NVML_RETURN_CODES,)),
        "triton-libcuda": ("Let Triton find the driver's libcuda.so.1: refresh the loader cache, or name its folder.",
                           ("sudo ldconfig   # then: ldconfig -p | grep libcuda.so.1",
                            "export TRITON_LIBCUDA_PATH=<the folder holding libcuda.so.1>   # e.g. /usr/lib64-nvidia"),
                           ()),
        "vllm-dtype": ("Run this GPU with float16: its architecture has no bfloat16.",
                       ("vllm serve <model> --dtype half",), ()),
    }
    return table.get(name) if name else None
