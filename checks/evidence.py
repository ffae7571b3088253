"""Checks judging the evidence a text carries about the run around the environment: DataLoader
workers out of shared memory, NCCL without a usable socket interface, more ranks than GPUs in a launch line, an extension build with no CUDA toolkit, Windows cuDNN DLLs
missing. The facts come from the signature table (envdoctor/parsers/evidence.py) or, for a live
report, from whatever probe writes the same keys; a fact not shown skips its check.

Registered after the host checks and before the driver's: each of these causes explains the CUDA
error that follows it (an invalid device ordinal, a NCCL error), so it is the first
failing finding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envdoctor.knowledge import remedies, versions

from ..kit import Remediation, evidence, fail, ok, skip, warn
from ..model import Facts, Finding
from ..registry import check
from ._common import framework_version, nccl_versions_differ
from ._text import assigned, message_causes, no_gpu_seen


def _shown(facts: Facts, key: str) -> bool:
    reading = facts.get(key)
    return reading.ok and bool(reading.value)


@check("dataloader-shm", "DataLoader workers have the shared memory they need",
       needs=("torch.shm_errors",))
def dataloader_shm(facts: Facts) -> Finding:
    ev = evidence(facts, "torch.shm_errors", "host.shm_size", "host.container")
    if not _shown(facts, "torch.shm_errors"):
        return skip("No DataLoader shared-memory failure shown", evidence=ev)
    lines = list(facts.value("torch.shm_errors"))
    container = facts.value("host.container") if facts.get("host.container").ok else None
    where = f"this {container} container's" if container else "the"
    return fail("DataLoader workers ran out of shared memory (/dev/shm)",
                detail=f"{lines[0]!r}: worker processes pass every batch through {where} /dev/shm, and it is too "
                       "small (a container gets 64 MiB unless told otherwise: Docker's default, and a Kubernetes "
                       "pod's without a memory emptyDir).",
                evidence=ev,
                remedy=Remediation("Give the run a larger /dev/shm (or share the host's IPC namespace); "
                                   "num_workers=0 in the DataLoader avoids it, slower.",
                                   remedies.shm_commands(container),
                                   (remedies.TORCH_DOCKER_IMAGE, remedies.DOCKER_SHM_SIZE, remedies.K8S_EMPTYDIR_DOC)))


@check("nccl-socket-interface", "NCCL finds a network interface to bootstrap on",
       needs=("nccl.socket_errors",))
def nccl_socket_interface(facts: Facts) -> Finding:
    ev = evidence(facts, "nccl.socket_errors", "nccl.socket_ifname")
    if not _shown(facts, "nccl.socket_errors"):
        return skip("No NCCL socket-interface failure shown", evidence=ev)
    if (mixed := nccl_versions_differ(facts)) and all("AF_INET" in line for line in facts.value("nccl.socket_errors")):
        ev.update(evidence(facts, "nccl.wheel_versions"))
        return skip("NCCL's address-family error next to NCCL wheels of different versions",
                    detail=f"{mixed[0]} is listed at {', '.join(mixed[1])}: ranks running different NCCL versions "
                           "misread each other's bootstrap messages (an address 'of family N'); nccl-mismatch judges "
                           "that.", evidence=ev)
    ifname = facts.value("nccl.socket_ifname") if facts.get("nccl.socket_ifname").ok else None
    forced = f" NCCL_SOCKET_IFNAME={ifname} restricts it to interfaces that do not exist here." if ifname else ""
    return fail("NCCL found no usable network interface",
                detail=f"{facts.value('nccl.socket_errors')[0]!r}: NCCL's bootstrap needs an IP interface, even "
                       f"on one node.{forced}",
                evidence=ev,
                remedy=Remediation("Point NCCL_SOCKET_IFNAME at an interface this machine has (the same name on "
                                   "every node, or a comma list / prefix).", remedies.nccl_socket_ifname(ifname),
                                   (remedies.NCCL_ENV_DOC, remedies.NCCL_TROUBLESHOOTING)))


def _gpu_count(facts: Facts) -> tuple[int | None, str]:
    if facts.get("launch.visible_devices").ok and facts.value("launch.visible_devices"):
        return len(facts.value("launch.visible_devices")), "CUDA_VISIBLE_DEVICES on the launch line"
    for key in ("torch.device_count", "nvml.device_count"):
        if facts.get(key).ok and isinstance(facts.value(key), int):
            return facts.value(key), key
    return None, ""


def _per_task_gpu(facts: Facts, ev: dict[str, Any], ordinal: str) -> Finding:
    """An invalid device ordinal under Slurm's --gpus-per-task: every task sees only the GPU bound to it (index 0),
    so a script that selects LOCAL_RANK fails on every rank but the first."""
    line = str(facts.value("launch.slurm_gpus_per_task"))
    ev.update(evidence(facts, "launch.slurm_gpus_per_task"))
    return fail("Each Slurm task sees only its own GPU, and the script selects another index",
                detail=f"{line!r} binds each task to its own GPU (sbatch: it implies --gpu-bind=per_task), so in "
                       f"every task that GPU is cuda:0. A script that calls set_device(LOCAL_RANK) then asks rank 1 "
                       f"and up for a GPU they cannot see: CUDA answered {ordinal!r}.", evidence=ev,
                remedy=Remediation("Select the GPU the task can see (cuda:0, or LOCAL_RANK % "
                                   "torch.cuda.device_count()), or allocate the GPUs per node (--gpus-per-node=N) so "
                                   "every task sees all of them.",
                                   ("#SBATCH --gpus-per-node=<the node's GPUs>   # instead of --gpus-per-task",
                                    "# or, in the training script: torch.cuda.set_device(int(os.environ['LOCAL_RANK']) "
                                    "% torch.cuda.device_count())"),
                                   (remedies.SLURM_GPUS_PER_TASK,)))


@check("launch-ranks", "The launch starts no more ranks per node than there are GPUs",
       needs=("launch.nproc_per_node",))
def launch_ranks(facts: Facts) -> Finding:
    ev = evidence(facts, "launch.nproc_per_node", "launch.visible_devices", "launch.command",
                  "cuda.invalid_device_ordinal", "torch.device_count", "nvml.device_count")
    ordinal = facts.value("cuda.invalid_device_ordinal") if facts.get("cuda.invalid_device_ordinal").ok else None
    if not facts.get("launch.nproc_per_node").ok:
        if not ordinal:
            return skip("No launch command shown", evidence=ev)
        if facts.get("launch.slurm_gpus_per_task").ok:
            return _per_task_gpu(facts, ev, ordinal)
        # CUDA's "invalid device ordinal": a process asked for a GPU index that does not exist. In
        # tickets that is almost always a launcher starting one rank per GPU it assumes
        # (--nproc_per_node, num_processes, mp.spawn(nprocs=…)) on a machine with fewer.
        return fail("A process asked for a GPU that does not exist (invalid device ordinal)",
                    detail=f"CUDA answered {ordinal!r}: the device index a process selected (usually LOCAL_RANK, "
                           "one per launched rank) is not below the number of visible GPUs.",
                    evidence=ev,
                    remedy=Remediation("Launch one rank per visible GPU (torchrun's `gpu` counts them), or fix the "
                                       "device index / CUDA_VISIBLE_DEVICES the script selects.",
                                       (remedies.launch_nproc(None, None),
                                        "nvidia-smi -L   # the GPUs this machine has"), (remedies.TORCHRUN_DOC,)))
    nproc = facts.value("launch.nproc_per_node")
    gpus, counted = _gpu_count(facts)
    command = facts.value("launch.command") if facts.get("launch.command").ok else None
    if gpus is not None and nproc <= gpus:
        return ok(f"{nproc} ranks per node for {gpus} GPUs", evidence=ev)
    if gpus is None and not ordinal:
        return skip(f"{nproc} ranks per node; the GPU count is not shown", evidence=ev)
    seen = f"only {gpus} GPU{'s' if gpus != 1 else ''} visible ({counted})" if gpus is not None else \
        f"CUDA answered {ordinal!r}: a rank asked for a GPU index that does not exist"
    return fail(f"The launch starts {nproc} ranks per node, more than the GPUs it can use",
                detail=f"--nproc_per_node={nproc} gives each rank its own GPU (LOCAL_RANK 0..{nproc - 1}), with "
                       f"{seen}.",
                evidence=ev,
                remedy=Remediation("Start one rank per visible GPU (torchrun's `gpu` counts them).",
                                   (remedies.launch_nproc(command, gpus),), (remedies.TORCHRUN_DOC,)))


@check("cuda-toolkit-missing", "A CUDA toolkit is there for extensions that compile",
       needs=("toolkit.build_errors",))
def cuda_toolkit_missing(facts: Facts) -> Finding:
    ev = evidence(facts, "toolkit.build_errors", "torch.cuda_version", "toolkit.nvcc_version", "host.os")
    if not _shown(facts, "toolkit.build_errors"):
        return skip("No extension build failure shown", evidence=ev)
    cuda = facts.value("torch.cuda_version") if facts.get("torch.cuda_version").ok else None
    match = f" matching torch's CUDA {cuda}" if cuda else " matching torch's own CUDA version"
    return fail("An extension build found no CUDA toolkit (CUDA_HOME / nvcc)",
                detail=f"{facts.value('toolkit.build_errors')[-1]!r}: torch.utils.cpp_extension compiles CUDA "
                       "code with nvcc from CUDA_HOME; the torch wheel carries the CUDA runtime, not the compiler.",
                evidence=ev,
                remedy=Remediation(f"Install a CUDA toolkit{match} and point CUDA_HOME at it.",
                                   remedies.cuda_toolkit_install(cuda, facts.value("host.os") == "Windows"),
                                   (remedies.CONDA_CUDA_TOOLKIT, remedies.CUDA_ARCHIVE)))


@check("cudnn-dll-missing", "Windows finds the cuDNN DLLs", needs=("libs.missing_dlls",))
def cudnn_dll_missing(facts: Facts) -> Finding:
    ev = evidence(facts, "libs.missing_dlls", "host.os")
    if not _shown(facts, "libs.missing_dlls"):
        return skip("No missing DLL shown", evidence=ev)
    cudnn = [d.replace("/", "\\").rsplit("\\", 1)[-1] for d in facts.value("libs.missing_dlls")
             if d.replace("/", "\\").rsplit("\\", 1)[-1].lower().startswith("cudnn")]
    if not cudnn:
        return skip("No cuDNN DLL among the missing ones", evidence=ev)
    if any(m.get("cause") == "windows-paging-file" for m in facts.value("text.messages") or () if hasattr(m, "get")):
        # "[WinError 1455] The paging file is too small … Error loading …cudnn…dll": the DLL is there, Windows ran out
        # of virtual memory mapping it (known-message says so, with its remedy).
        return skip("The cuDNN DLL failed for want of virtual memory, not for being missing", evidence=ev)
    lines = facts.value("libs.missing_dlls")
    in_torch = any("torch\\lib" in str(line).lower() or "torch/lib" in str(line).lower() for line in lines)
    return fail(f"Windows could not load {cudnn[0]}",
                detail=f"{cudnn[0]} is a cuDNN DLL; the program's CUDA backend loads it from the library path "
                       "(PATH), where no copy of that cuDNN version is.",
                evidence=ev,
                remedy=Remediation("Install the cuDNN the DLL name asks for and put its bin folder on PATH.",
                                   remedies.cudnn_dlls(cudnn[0], in_torch), (remedies.CUDNN_ARCHIVE,)))


#: Microsoft's WSL install guide (learn.microsoft.com/windows/wsl/install-manual, "Step 2 - Check requirements for
#: running WSL 2"): WSL 2 needs Windows 10 version 1903, build 18362, or later on x64 (18362.1049 for the backport).
#: An older build runs WSL 1 only, and WSL 1 has no GPU.
_WSL2_FIRST_BUILD = 18362


def _build_without_wsl2(facts: Facts) -> Finding | None:
    """A Windows build that cannot run WSL 2 (``host.windows_build``) in a text that names WSL."""
    build = facts.value("host.windows_build") if facts.get("host.windows_build").ok else None
    named = facts.get("text.wsl_named").ok or (facts.get("host.wsl").ok and facts.value("host.wsl") is True)
    if not isinstance(build, int) or not named or build >= _WSL2_FIRST_BUILD:
        return None
    ev = evidence(facts, "host.windows_build", "text.wsl_named", "host.wsl", "nvml.init")
    failing = _gpu_failing(facts)
    return (fail if failing else warn)(
        f"Windows build {build} runs only WSL 1: it has no GPU access",
        detail=f"WSL 2 needs Windows 10 build {_WSL2_FIRST_BUILD} (version 1903) or later; on build {build} WSL is WSL "
               "1, which translates Linux system calls and exposes no GPU." +
               (f" That is why {failing} in this text." if failing else "") +
               " Installing a Linux NVIDIA driver inside WSL never helps.", evidence=ev,
        remedy=Remediation("Update Windows (Windows 11, or Windows 10 21H2 or later for CUDA on WSL), then convert "
                           "the distribution to WSL 2 and keep only the Windows NVIDIA driver.",
                           ("winver   # in Windows: the build", *remedies.wsl2_convert()),
                           (remedies.WSL_CUDA_GUIDE,)))


@check("wsl-version", "WSL 2, where CUDA works (WSL 1 has no GPU)", needs=("host.kernel",))
def wsl_version(facts: Facts) -> Finding:
    ev = evidence(facts, "host.kernel", "host.wsl")
    kernel = facts.value("host.kernel") if facts.get("host.kernel").ok else None
    if (not kernel or "microsoft" not in str(kernel).lower()) and (old := _build_without_wsl2(facts)):
        return old
    if (not kernel or "microsoft" not in str(kernel).lower()) and (listed := _wsl_listed(facts)):
        return listed
    if not kernel or "microsoft" not in str(kernel).lower():
        return skip("Not WSL (or the kernel is not shown)", evidence=ev)
    if "microsoft-standard" in str(kernel).lower() or "wsl2" in str(kernel).lower():
        return ok(f"WSL 2 (kernel {kernel})", detail="CUDA reaches Linux through the Windows driver's "
                  "/usr/lib/wsl/lib/libcuda.so; never install a Linux NVIDIA driver inside WSL.", evidence=ev)
    return fail(f"This is WSL 1 (kernel {kernel}): it has no GPU access",
                detail="WSL 1 translates Linux system calls and exposes no GPU; CUDA needs WSL 2 with the Windows "
                       "NVIDIA driver. Installing a Linux NVIDIA driver or DKMS module inside WSL never helps.",
                evidence=ev,
                remedy=Remediation("Convert the distribution to WSL 2 (in Windows), keep only the Windows driver.",
                                   remedies.wsl2_convert(), (remedies.WSL_CUDA_GUIDE,)))


@check("nccl-p2p-acs", "GPU peer-to-peer is not routed through ACS/IOMMU", needs=("pci.acs_enabled",))
def nccl_p2p_acs(facts: Facts) -> Finding:
    ev = evidence(facts, "pci.acs_enabled")
    if not _shown(facts, "pci.acs_enabled"):
        if cured := _p2p_workaround(facts):
            return cured
        return skip("No PCIe ACS state shown", evidence=ev)
    count = facts.value("pci.acs_enabled")
    return fail(f"PCIe Access Control Services is on ({count} bridge line{'s' if count != 1 else ''} with SrcValid+)",
                detail="With ACS on, peer-to-peer traffic between GPUs under a PCIe switch is redirected to the root "
                       "complex / IOMMU: NCCL's P2P transfers hang or crawl (NCCL troubleshooting, PCI ACS).",
                evidence=ev,
                remedy=Remediation("Disable ACS on the PCIe bridges (and keep it off across reboots).",
                                   remedies.disable_acs(), (remedies.NCCL_TROUBLESHOOTING,)))


#: The catalogue's causes that are a collective that stopped making progress (NCCL's watchdog) or NCCL's P2P
#: transport failing (envdoctor/data/messages.json).
_HANG_CAUSES = frozenset({"nccl-watchdog-timeout", "nccl-p2p-error"})


def _p2p_workaround(facts: Facts) -> Finding | None:
    """A hang (a person says so, or NCCL's watchdog timed out) beside ``NCCL_P2P_DISABLE=1`` set in the text: that
    the variable is the workaround is the signature of peer-to-peer traffic the PCIe switch's ACS (or the IOMMU)
    sends through the root complex, where it stalls (NCCL's troubleshooting guide, "PCI Access Control Services")."""
    value = assigned(facts, "NCCL_P2P_DISABLE")
    if value is None or value.strip() != "1":
        return None
    stuck = facts.value("text.hang") if facts.get("text.hang").ok else None
    causes = message_causes(facts) & _HANG_CAUSES
    if not stuck and not causes:
        return None
    why = f"the text says {stuck!r}" if stuck else f"NCCL reports {sorted(causes)[0]}"
    return fail("GPU peer-to-peer hangs here, and NCCL_P2P_DISABLE=1 is the workaround the text shows",
                detail=f"A collective stops making progress ({why}) where NCCL_P2P_DISABLE=1 is set: that turning "
                       "peer-to-peer off lets it run is the mark of PCIe Access Control Services (or the IOMMU) "
                       "redirecting GPU-to-GPU traffic to the root complex, where NCCL's P2P transfers stall. "
                       "NCCL_P2P_DISABLE=1 only avoids it, at the cost of every intra-node transfer going through "
                       "host memory.",
                evidence=evidence(facts, "text.env_assignments", "text.hang", "text.messages"),
                remedy=Remediation("Check ACS on the PCIe bridges (lspci -vvv shows ACSCtl with SrcValid+ where it is "
                                   "on) and disable it (or the IOMMU / VT-d in the BIOS); then run without "
                                   "NCCL_P2P_DISABLE.", remedies.disable_acs(), (remedies.NCCL_TROUBLESHOOTING,)))


def _gpu_failing(facts: Facts) -> str | None:
    """What in the text shows the GPU failing to reach Linux (nvidia-smi missing or failing, CUDA seeing none)."""
    if facts.get("nvml.smi_not_found").ok:
        return "nvidia-smi is not found"
    init = facts.value("nvml.init") if facts.get("nvml.init").ok else None
    if isinstance(init, Mapping) and init.get("code") not in (None, 0):
        return "nvidia-smi fails"
    return no_gpu_seen(facts)


def _wsl_listed(facts: Facts) -> Finding | None:
    """`wsl -l -v` (``text.wsl_distros``): the default distribution (or the only one) and its WSL version."""
    rows = [r for r in facts.value("text.wsl_distros") or () if isinstance(r, Mapping)] \
        if facts.get("text.wsl_distros").ok else []
    target = next((r for r in rows if r.get("default")), rows[0] if len(rows) == 1 else None)
    if target is None or target.get("version") not in (1, 2):
        return None
    ev = evidence(facts, "text.wsl_distros", "nvml.smi_not_found", "nvml.init")
    name = str(target.get("name"))
    if target.get("version") == 2:
        return ok(f"WSL 2 ({name}, as `wsl -l -v` lists it)", evidence=ev)
    failing = _gpu_failing(facts)
    title = f"{name} runs on WSL 1 (`wsl -l -v`: VERSION 1): it has no GPU access"
    detail = ("WSL 1 translates Linux system calls and exposes no GPU; CUDA needs WSL 2 with the Windows NVIDIA "
              "driver." + (f" That is why {failing} in this text." if failing else ""))
    return (fail if failing else warn)(title, detail=detail, evidence=ev, remedy=Remediation(
        "Convert the distribution to WSL 2 (in Windows), keep only the Windows driver.",
        tuple(c.replace("<distro name from that list>", name) for c in remedies.wsl2_convert()),
        (remedies.WSL_CUDA_GUIDE,)))


#: TensorFlow's install page (tensorflow.org/install/pip, "Windows Native") and its 2.11 release notes
#: (github.com/tensorflow/tensorflow/releases/tag/v2.11.1): "TensorFlow 2.10 was the last
#: TensorFlow release that supported GPU on native-Windows"; from 2.11 on, GPU TensorFlow on Windows runs in WSL 2.
_TF_LAST_WINDOWS_GPU = (2, 10)


@check("tensorflow-windows-gpu", "TensorFlow on native Windows is a release that can use the GPU (2.10 or older)",
       needs=("text.frameworks", "host.os"))
def tensorflow_windows_gpu(facts: Facts) -> Finding:
    ev = evidence(facts, "text.frameworks", "host.os", "host.wsl", "text.tensorflow_gpus", "text.pip_missing_extras",
                  "nvml.gpus")
    version = framework_version(facts, "tensorflow") or ""
    parsed = versions.parse(version) if version else None
    if parsed is None:
        return skip("No TensorFlow version in the text", evidence=ev)
    if not facts.get("host.os").ok or facts.value("host.os") != "Windows" or facts.value("host.wsl") is True:
        return skip("Not native Windows (or the platform is not shown)", evidence=ev)
    gpus = facts.value("text.tensorflow_gpus") if facts.get("text.tensorflow_gpus").ok else None
    extras = [e for e in facts.value("text.pip_missing_extras") or () if isinstance(e, Mapping)
              and e.get("package") in ("tensorflow", "tensorflow-gpu")] if facts.get("text.pip_missing_extras").ok else []
    if parsed.release[:2] <= _TF_LAST_WINDOWS_GPU:
        if isinstance(gpus, int) and gpus > 0:
            return ok(f"TensorFlow {version} on native Windows sees {gpus} GPU(s)", evidence=ev)
        return skip(f"TensorFlow {version} still has native-Windows GPU builds", evidence=ev)
    text, commands, links = remedies.tensorflow_gpu(facts.value("python.executable"), True)
    shown = [str(g.get("name")) for g in facts.value("nvml.gpus") or () if isinstance(g, Mapping) and g.get("name")] \
        if facts.get("nvml.gpus").ok else []
    symptom = ("TensorFlow lists no GPU (`list_physical_devices('GPU')` is empty)" if gpus == 0 else
               f"pip says tensorflow {extras[0].get('version')} does not provide the extra "
               f"'{extras[0].get('extra')}' (no Windows wheel carries CUDA)" if extras else
               f"the {shown[0]} the text shows is not used by it" if shown else None)
    title = f"TensorFlow {version} has no GPU support on native Windows (the last was 2.10)"
    detail = ("TensorFlow's install page: TensorFlow 2.10 was the last release that supported the GPU on native "
              "Windows; from 2.11 on, the Windows build runs on the CPU only and the GPU build runs in WSL 2.")
    if symptom:
        return fail(title, detail=f"{detail} That is why {symptom}.", evidence=ev, remedy=Remediation(text, commands,
                                                                                                         links))
    return warn(title, detail=detail + " It will run on the CPU.", evidence=ev, remedy=Remediation(text, commands, links))
