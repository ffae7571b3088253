"""Driver, NVML, CUDA driver API, device nodes, container wiring and device visibility checks."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from envdoctor import views
from envdoctor.knowledge import catalogue, errors, remedies, versions

from ..kit import Remediation, error, evidence, fail, ok, skip, warn
from ..model import Facts, Finding, Reading, Reason, Status
from ..registry import CheckResult, check, owner_of
from ..views import VisibleDevices
from ._common import cpu_only
from ._text import assigned, gpu_count, no_gpu_seen

DRIVER_DOWNLOAD = remedies.DRIVER_DOWNLOAD
DRIVER_GUIDE = remedies.DRIVER_GUIDE
TOOLKIT_INSTALL = remedies.CONTAINER_TOOLKIT_INSTALL
CGROUP_NOTICE = remedies.CONTAINER_CGROUP_NOTICE
FORWARD_COMPAT = remedies.FORWARD_COMPAT
FABRIC_GUIDE = remedies.FABRIC_GUIDE
NVML_RETURN_CODES = remedies.NVML_RETURN_CODES
CUDA_RESULT_CODES = remedies.CUDA_RESULT_CODES

_VERSION_IN_NAME = re.compile(r"\.so\.(\d+\.\d+(?:\.\d+)?)$")


# -- shared helpers -------------------------------------------------------------------------------
def kernel_version(facts: Facts) -> str | None:
    return facts.value("driver.kernel_module_version")


def driver_branch(facts: Facts) -> str:
    """``570`` from the loaded driver's version, for package names. When no version was read,
    a shell substitution asking the installed module (modinfo reads it loaded or not), so the
    command still pastes as it is."""
    version = kernel_version(facts) or facts.value("nvml.driver_version")
    return str(version).split(".")[0] if version else "$(modinfo -F version nvidia | cut -d. -f1)"


def nvml_code(facts: Facts) -> int | None:
    init = facts.value("nvml.init")
    return init.get("code") if init else None


def cuda_code(facts: Facts) -> int | None:
    init = facts.value("cuda.init")
    return init.get("code") if init else None


def driver_loaded(facts: Facts) -> tuple[bool | None, str]:
    """Whether an NVIDIA kernel driver is running, and the evidence."""
    if kernel_version(facts):
        return True, f"the nvidia kernel module {kernel_version(facts)} is loaded"
    if facts.value("nvml.driver_version"):
        # Some containers and sandboxes hide /proc/driver/nvidia while the driver works.
        return True, f"NVML reports driver {facts.value('nvml.driver_version')}"
    if cuda_code(facts) == 0:
        return True, "cuInit succeeded"
    km = facts.get("driver.kernel_module_version")
    if km.reason is Reason.ABSENT:
        return False, "the nvidia kernel module is not loaded (/proc/driver/nvidia/version and /sys/module/nvidia are absent)"
    modules = facts.value("driver.modules") if facts.get("driver.modules").ok else None
    if isinstance(modules, Mapping) and modules.get("nvidia") is False and not km.ok:
        return False, "the nvidia kernel module is not loaded (lsmod lists no nvidia module)"
    return None, f"kernel module: {km.describe()}"


def no_nvidia_pci(facts: Facts) -> bool:
    """True when the PCI bus was read and holds no NVIDIA GPU. Containers see the host's PCI bus
    in /sys (sysfs is not namespaced), so this holds inside Docker too."""
    return facts.get("driver.pci_gpus").ok and not facts.value("driver.pci_gpus")


def driver_packages(facts: Facts, kind: str | None = None) -> list[Mapping[str, Any]]:
    """The installed NVIDIA driver packages a package listing shows (``rc``: removed, config kept, is not)."""
    return [p for p in facts.value("driver.packages") or () if isinstance(p, Mapping)
            and str(p.get("state", "installed")) in ("installed", "ii", "hi", "iU", "iF")
            and (kind is None or p.get("kind") == kind)]


def in_container(facts: Facts) -> str | None:
    return facts.value("host.container")


def version_in_filename(path: str | None) -> str | None:
    """``570.124.06`` from ``…/libnvidia-ml.so.570.124.06`` (the userspace driver's own version)."""
    if not path:
        return None
    match = _VERSION_IN_NAME.search(str(path))
    return match.group(1) if match else None


def _driver_need(facts: Facts) -> str:
    """" torch 2.6.0+cu126 (CUDA 12.6) needs driver ≥ 560.28.03." when torch's CUDA is known."""
    from envdoctor import views
    from envdoctor.knowledge import compat

    cuda = facts.value("torch.cuda_version")
    if not cuda:
        return ""
    need = compat.min_driver(str(cuda), views.driver_os(facts))
    if need.minimum:
        return f" torch {facts.value('torch.version')} (CUDA {cuda}) needs driver {need.minimum} or newer."
    if need.floor:
        return (f" torch {facts.value('torch.version')} (CUDA {cuda}) needs driver {need.floor} or newer "
                "(minor-version compatibility).")
    return ""


def _reset_commands(facts: Facts) -> tuple[str, ...]:
    """A GPU reset (remedies.gpu_resets) for each GPU the facts name (NVML index, else PCI address, which -i also takes)."""
    targets = [str(g.index) for g in views.gpus(facts) if g.index is not None]
    if not targets:
        targets = [str(g["address"]) for g in facts.value("driver.pci_gpus") or () if g.get("address")]
    if not targets:
        return (remedies.reboot(),)
    return remedies.gpu_resets(targets, f"when nothing runs on it; otherwise: {remedies.reboot()}")


def _reload_commands() -> tuple[str, ...]:
    return remedies.driver_reload()


_HOLD = remedies.driver_hold()


# -- driver-installed -------------------------------------------------------------------------------
@check("driver-installed", "An NVIDIA driver is installed and loaded", healthcheck=True, judges_failures=True,
       needs=("driver.kernel_module_version", "nvml.driver_version", "driver.pci_gpus", "nvml.init",
              "nvml.smi_not_found"))
def driver_installed(facts: Facts) -> CheckResult:
    ev = evidence(facts, "driver.kernel_module_version", "nvml.driver_version", "driver.pci_gpus", "driver.pci_scanned",
                  "nvml.init", "cuda.library_path", "host.container")
    loaded, why = driver_loaded(facts)
    if loaded:
        version = kernel_version(facts) or facts.value("nvml.driver_version")
        # The fact that showed the driver first: a paste shows NVML's version, not the kernel module's.
        decided = ("driver.kernel_module_version" if kernel_version(facts) else
                   "nvml.driver_version" if facts.value("nvml.driver_version") else "cuda.init")
        return ok(f"NVIDIA driver {version} is loaded" if version else "An NVIDIA driver is loaded",
                  detail=why + ".", evidence={decided: ev.get(decided, facts.value(decided)), **ev})
    smi = facts.get("nvml.smi_not_found")
    if smi.ok and not in_container(facts):
        # nvidia-smi ships with the driver; in a container, container-gpu judges it (the runtime injects it).
        return fail("nvidia-smi is not found: no NVIDIA driver is installed where it was run",
                    detail=f"{str(smi.value)!r}: nvidia-smi ships with the NVIDIA driver, so its utilities are not "
                    f"installed (or not on PATH) in that shell; {why}. In a container, nvidia-smi comes in only when "
                    "the container is started with its GPUs.", evidence={"nvml.smi_not_found": smi.value, **ev},
                    remedy=Remediation("On the machine: install the NVIDIA driver for its GPU (it brings nvidia-smi). "
                                       "In a container: start it with its GPUs.",
                                       (remedies.ubuntu_drivers_install("Ubuntu: the recommended driver for this GPU"),
                                        remedies.container_run("--gpus all", note="in a container")),
                                       (DRIVER_DOWNLOAD, TOOLKIT_INSTALL)))
    pci_reading = facts.get("driver.pci_gpus")
    pci = list(facts.value("driver.pci_gpus") or [])
    if pci:
        bound = sorted({str(g.get("driver")) for g in pci if g.get("driver")})
        addresses = ", ".join(g["address"] for g in pci)
        if "nouveau" in bound:
            detail = (f"{len(pci)} NVIDIA GPU(s) on the PCI bus ({addresses}) are driven by nouveau, the open-source "
                      "driver, which CUDA cannot use. See driver-nouveau.")
        else:
            detail = (f"An NVIDIA GPU is on the PCI bus but no driver is loaded: {len(pci)} device(s) with vendor "
                      f"0x10de ({addresses}), bound to {', '.join(bound) if bound else 'no driver'}; {why}. Usual "
                      "causes: the driver was never installed, a kernel update without a rebuilt DKMS module, or "
                      "Secure Boot refusing the unsigned module (dmesg: 'Lockdown: modprobe: unsigned module').")
        return fail("NVIDIA GPU present but no NVIDIA driver loaded", detail=detail, evidence=ev,
                    remedy=Remediation(
                        "Install (or rebuild) the driver for the running kernel, then load it." + _driver_need(facts),
                        (remedies.kernel_log("nvrm|nvidia|nouveau", flags="-iE", note="why it did not load"),
                         "dkms status; mokutil --sb-state   # module built for this kernel? Secure Boot on?",
                         remedies.dkms_rebuild("rebuild for this kernel"),
                         remedies.ubuntu_drivers_install("Ubuntu: the recommended driver for this GPU"),
                         remedies.then(remedies.load_module("nvidia"), "nvidia-smi")),
                        (DRIVER_GUIDE, DRIVER_DOWNLOAD)))
    if pci_reading.ok and loaded is False:
        scanned = facts.value("driver.pci_scanned")
        reasons = [f"none of the {scanned} PCI devices the kernel lists in /sys/bus/pci/devices has NVIDIA's vendor "
                   "id 0x10de, so no NVIDIA GPU is attached to this machine (or passed through to this VM)",
                   why]
        if not facts.get("nvml.library_path").ok:
            reasons.append("no NVIDIA userspace driver either: libnvidia-ml.so.1 is not on the loader path")
        if not facts.get("cuda.library_path").ok and facts.get("cuda.library_path").reason is Reason.ABSENT:
            reasons.append("and libcuda.so.1 cannot be loaded")
        container = in_container(facts)
        if container:
            reasons.append(f"this is a {container} container, whose /sys shows the host's PCI bus, so the host has "
                           "no NVIDIA GPU either")
        if cpu_only(facts):
            # A CPU-only machine is a valid setup: nothing is missing, so nothing to warn about (or to
            # --skip in CPU CI); the finding says once why every GPU check is skipped.
            return skip("No NVIDIA GPU on this machine: a CPU-only setup, so no NVIDIA driver is needed",
                        detail="; ".join(reasons) + ". The GPU checks are skipped. To use CUDA, run on a machine "
                        "(or VM with PCI passthrough) that has an NVIDIA GPU, then install its driver.", evidence=ev)
        return warn("No NVIDIA GPU and no NVIDIA driver on this machine", detail="; ".join(reasons) + ".",
                    evidence=ev, remedy=Remediation(
                        "Nothing to fix here if this machine is meant to be CPU-only. To use CUDA, run on a machine "
                        "(or VM with PCI passthrough) that has an NVIDIA GPU, then install its driver.",
                        (), (DRIVER_GUIDE,)))
    container = in_container(facts)
    packages = driver_packages(facts, "userspace")
    if (nvml_code(facts) == 9 or (packages and loaded is False)) and not container:
        # libnvidia-ml loaded (the userspace driver is installed) but the kernel module answers
        # nothing: NVML_ERROR_DRIVER_NOT_LOADED, nvidia-smi's "couldn't communicate with the NVIDIA
        # driver"; or a package listing shows the driver installed while no nvidia module is loaded.
        # On a bare host that is a broken install, not a CPU-only machine.
        seen = ("NVML loaded but reports NVML_ERROR_DRIVER_NOT_LOADED (nvidia-smi: \"couldn't communicate with the "
                "NVIDIA driver\")" if nvml_code(facts) == 9 else
                "The driver packages are installed (" + ", ".join(f"{p['name']} {p['version']}" for p in packages[:3])
                + ")")
        ev["driver.packages"] = [f"{p['name']} {p['version']}" for p in packages[:10]]
        return fail("The NVIDIA driver is installed but its kernel module is not loaded",
                    detail=f"{seen}: the userspace driver is installed, the kernel module is not "
                    f"running{'; ' + why if loaded is False else ''}. Usual causes: a kernel update without a "
                    "rebuilt DKMS module, Secure Boot refusing the unsigned module, or a driver install not "
                    "followed by a reboot.", evidence=ev,
                    remedy=Remediation(
                        "Rebuild the module for the running kernel and load it (or reboot after installing).",
                        (remedies.kernel_log("nvrm|nvidia", flags="-iE", note="why it did not load"),
                         "dkms status; mokutil --sb-state   # module built for this kernel? Secure Boot on?",
                         remedies.dkms_rebuild(),
                         remedies.then(remedies.load_module("nvidia"), "nvidia-smi")),
                        (DRIVER_GUIDE,)))
    if container and loaded is False:
        return warn(f"No NVIDIA driver visible in this {container} container",
                    detail=f"{why}. A container shares the host's driver; none was passed in. See container-gpu.",
                    evidence=ev,
                    remedy=Remediation("Start the container with GPU access (host: install nvidia-container-toolkit).",
                                       (remedies.container_run("--gpus all"),), (TOOLKIT_INSTALL,)))
    if loaded is False:
        return warn("No NVIDIA driver loaded", detail=f"{why}; the PCI bus could not be read "
                    f"({pci_reading.describe()}), so whether an NVIDIA GPU is installed is unknown.", evidence=ev,
                    remedy=Remediation("If this machine has an NVIDIA GPU, install its driver.",
                                       ("lspci -nn | grep -i nvidia", remedies.ubuntu_drivers_install()), (DRIVER_GUIDE,)))
    return skip("Driver state unknown", detail=why, evidence=ev)


# -- driver-nouveau -------------------------------------------------------------------------------------
@check("driver-nouveau", "nouveau does not own the NVIDIA GPU", healthcheck=True,
       needs=("driver.modules", "driver.pci_gpus"))
def driver_nouveau(facts: Facts) -> CheckResult:
    ev = evidence(facts, "driver.modules", "driver.pci_gpus")
    modules = facts.value("driver.modules") or {}
    pci = list(facts.value("driver.pci_gpus") or [])
    bound = [g["address"] for g in pci if g.get("driver") == "nouveau"]
    remedy = Remediation(
        "Blacklist nouveau, rebuild the initramfs so it is not loaded at boot, and reboot; then install/load the "
        "NVIDIA driver.",
        remedies.blacklist_nouveau(),
        (DRIVER_GUIDE,))
    if bound:
        return fail("nouveau is bound to the NVIDIA GPU", detail=f"GPU(s) {', '.join(bound)} are driven by nouveau, "
                    "the open-source driver; CUDA needs NVIDIA's driver, which cannot bind while nouveau holds the "
                    "device (dmesg: 'NVRM: nouveau, rivafb, nvidiafb or rivatv was loaded and obtained ownership of "
                    "the NVIDIA device(s)').", evidence=ev, remedy=remedy)
    if modules.get("nouveau") and not modules.get("nvidia"):
        return fail("nouveau is loaded and the nvidia module is not", detail="The nouveau module is loaded; it "
                    "claims NVIDIA GPUs at boot and keeps the nvidia module from loading.", evidence=ev, remedy=remedy)
    if modules.get("nouveau"):
        return ok("nouveau is loaded but not bound to a GPU", detail="Harmless while nvidia owns the GPUs; blacklist "
                  "it to be sure it never wins the race at boot.", evidence=ev)
    modules_read = isinstance(facts.value("driver.modules"), Mapping)
    if not modules_read and not pci:
        return skip("Kernel modules could not be read", detail=facts.get("driver.modules").describe(), evidence=ev)
    if not modules_read:
        # Only the PCI bus was read: no GPU is bound to nouveau, whether the module is loaded is unknown.
        return ok("nouveau is bound to no NVIDIA GPU", detail=f"Kernel modules not read "
                  f"({facts.get('driver.modules').describe()}).", evidence=evidence(facts, "driver.pci_gpus",
                                                                                     "driver.modules"))
    return ok("nouveau is not in use", evidence=ev)


# -- driver-version-mismatch -------------------------------------------------------------------------------
def _userspace_versions(facts: Facts) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The userspace driver's versions the facts show (source -> version), and its packages by release."""
    user_versions: dict[str, Any] = {}
    nvml_lib = version_in_filename(facts.value("nvml.library_path"))
    if nvml_lib:
        user_versions["libnvidia-ml"] = nvml_lib
    cuda_path = facts.value("cuda.library_path")
    # A forward-compatibility libcuda (…/compat/) is newer than the kernel module by design.
    libcuda = version_in_filename(cuda_path) if cuda_path and "/compat/" not in str(cuda_path) else None
    if libcuda:
        user_versions["libcuda"] = libcuda
    if facts.value("nvml.driver_version"):
        user_versions["NVML"] = facts.value("nvml.driver_version")
    if facts.value("driver.userspace_version"):
        user_versions["userspace driver"] = facts.value("driver.userspace_version")
    releases: dict[str, list[str]] = {}
    for p in driver_packages(facts, "userspace"):
        releases.setdefault(str(p["driver"]), []).append(str(p["name"]))
    if len(releases) == 1:
        user_versions["driver packages"] = next(iter(releases))
    return user_versions, releases


@check("driver-version-mismatch", "Kernel module and userspace driver are the same version", healthcheck=True,
       needs=("driver.kernel_module_version", "nvml.init"))
def driver_version_mismatch(facts: Facts) -> CheckResult:
    ev = evidence(facts, "driver.kernel_module_version", "nvml.driver_version", "nvml.library_path", "nvml.init",
                  "cuda.library_path", "cuda.init", "driver.userspace_version")
    kmod = kernel_version(facts)
    user_versions, releases = _userspace_versions(facts)
    if releases:
        ev["driver.packages"] = {v: names[:5] for v, names in releases.items()}
    remedy = Remediation(
        "The driver packages were updated (often by unattended-upgrades) while the old kernel module stayed "
        "loaded. Load the new module (reboot, or reload it on an idle machine), then hold the driver packages so "
        "it does not happen again.",
        (*_reload_commands(), _HOLD),
        ("https://github.com/NVIDIA/ubuntu-packaging-nvidia-driver/issues/3",))
    skew = {name: v for name, v in user_versions.items() if kmod and v != kmod}
    if nvml_code(facts) == 18:
        detail = "NVML: \"Failed to initialize NVML: Driver/library version mismatch\"."
        if kmod:
            detail += f" Kernel module {kmod}"
            detail += (f", userspace {', '.join(f'{k} {v}' for k, v in user_versions.items())}." if user_versions
                       else ".")
        return fail("Driver/library version mismatch", detail=detail, evidence=ev, remedy=remedy)
    if nvml_code(facts) == 13 and facts.get("nvml.init").source == "nvidia-smi":
        return fail("nvidia-smi and libnvidia-ml come from different driver releases",
                    detail="nvidia-smi: \"Failed to initialize NVML: Function Not Found\": the libnvidia-ml.so.1 it "
                    "loaded lacks a function this nvidia-smi needs — an older copy (a stale symlink or a leftover of a "
                    "previous driver) shadows the one installed with the current driver.", evidence=ev,
                    remedy=Remediation("Point libnvidia-ml.so.1 at the current driver's copy (or reinstall the driver "
                                       "so its links are rewritten), then check again.",
                                       ("ldconfig -p | grep -E 'libnvidia-ml|libcuda'   # every copy the loader knows",
                                        "ls -l $(ldconfig -p | awk '/libnvidia-ml.so.1/ {print $NF}')   # where it points",
                                        "cat /proc/driver/nvidia/version   # the kernel module's version",
                                        remedies.then(remedies.ldconfig(), "nvidia-smi")), (DRIVER_GUIDE,)))
    if cuda_code(facts) == 803:
        return fail("CUDA reports a driver mismatch (CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, 803)",
                    detail="cuInit: \"system has unsupported display driver / cuda driver combination\": libcuda and "
                    f"the kernel module are from different driver releases (kernel module {kmod or 'unknown'}).",
                    evidence=ev, remedy=remedy)
    if len(releases) > 1:
        return fail("Installed NVIDIA driver packages come from different releases",
                    detail="; ".join(f"{v}: {', '.join(names[:4])}" for v, names in sorted(releases.items()))
                    + (f". Kernel module {kmod}." if kmod else ".") + " libcuda, libnvidia-ml and nvidia-smi must "
                    "all be the release of the loaded kernel module.", evidence=ev, remedy=remedy)
    if skew and _image_compat_libcuda(facts) is not None:
        return skip("The newer userspace driver is the container image's forward-compatibility libcuda: judged by "
                    "cuda-forward-compat", evidence=ev)
    if skew:
        return fail("Kernel module and userspace driver versions differ",
                    detail=f"Kernel module {kmod}; " + ", ".join(f"{k} {v}" for k, v in skew.items()) + ".",
                    evidence=ev, remedy=remedy)
    if kmod and user_versions:
        return ok(f"Kernel module and userspace driver are both {kmod}", evidence=ev)
    return skip("Nothing to compare", detail="Needs the kernel module version and a userspace driver version.",
                evidence=ev)


def _image_compat_libcuda(facts: Facts) -> tuple[str, str] | None:
    """(kernel module, userspace) when, inside a container, the userspace driver the text shows (a libcuda's "DSO
    version", NVRM's "client") is a newer release than the host's kernel module: the NVIDIA runtime injects the
    host's own libraries, whose release is the module's, so a newer one is the image's cuda-compat libcuda."""
    if not facts.get("host.container").ok or not facts.value("host.container"):
        return None
    kmod, user = kernel_version(facts), facts.value("driver.userspace_version")
    if not kmod or not user or not facts.get("driver.userspace_version").ok:
        return None
    newer = versions.parse(str(user)), versions.parse(str(kmod))
    return (str(kmod), str(user)) if newer[0] is not None and newer[1] is not None and \
        newer[0].release[0] > newer[1].release[0] else None


# -- device-nodes ------------------------------------------------------------------------------------------
@check("device-nodes", "/dev/nvidia* device nodes exist and are accessible", healthcheck=True,
       needs=("driver.device_nodes",))
def device_nodes(facts: Facts) -> CheckResult:
    ev = evidence(facts, "driver.device_nodes", "driver.kernel_module_version", "driver.modules", "host.container")
    nodes = dict(facts.value("driver.device_nodes") or {})
    loaded, why = driver_loaded(facts)
    container = in_container(facts)
    if not loaded and (not container or no_nvidia_pci(facts)):
        return skip("No NVIDIA driver, so no device nodes expected", detail=why + (
            "; no NVIDIA GPU on the PCI bus" if no_nvidia_pci(facts) else ""), evidence=ev)
    if not isinstance(facts.value("driver.device_nodes"), Mapping):
        return skip("Device nodes not examined", detail=facts.get("driver.device_nodes").describe(), evidence=ev)
    gpu_nodes = {p: s for p, s in nodes.items() if re.fullmatch(r"/dev/nvidia\d+", p)}
    problems = []
    commands: list[str] = []
    if nodes.get("/dev/nvidiactl") == "absent" or not gpu_nodes:
        missing_nodes = [p for p in ("/dev/nvidiactl",) if nodes.get(p) == "absent"] + ([] if gpu_nodes else ["/dev/nvidia0…N"])
        problems.append(f"missing {', '.join(missing_nodes)}")
        if container:
            commands.append(remedies.container_run("--gpus all", note="the runtime creates the nodes"))
        else:
            commands.append(remedies.create_device_nodes())
    if nodes.get("/dev/nvidia-uvm") == "absent":
        problems.append("missing /dev/nvidia-uvm (CUDA needs it: without it cuInit fails with CUDA_ERROR_UNKNOWN, 999)")
        commands.append(remedies.container_run("--gpus all", note="or pass --device /dev/nvidia-uvm --device /dev/nvidia-uvm-tools")
                        if container else remedies.create_device_nodes(uvm=True))
    denied = sorted(p for p, s in nodes.items() if s == "denied")
    if denied:
        problems.append(f"this user cannot open {', '.join(denied)} read-write")
        commands.extend(("ls -l /dev/nvidia*", remedies.join_video_group("if the nodes are group video; log in again")))
    if not problems:
        return ok(f"{len(gpu_nodes)} GPU device node(s), /dev/nvidiactl and /dev/nvidia-uvm are accessible", evidence=ev)
    return fail("NVIDIA device nodes are missing or not accessible", detail="; ".join(problems) + ".", evidence=ev,
                remedy=Remediation("Create the missing nodes (normally done by the driver's udev rules or "
                                   "nvidia-modprobe) and give this user access.", tuple(commands), (DRIVER_GUIDE,)))


# -- container-gpu ------------------------------------------------------------------------------------------
def _no_gpu_runtime(facts: Facts, ev: dict[str, Any]) -> Finding:
    """Docker was asked for GPUs and has no device driver for them: the host lacks the NVIDIA runtime."""
    return fail("Docker has no NVIDIA runtime to give containers GPUs",
                detail=f"{facts.value('container.no_gpu_driver')!r}: the Docker daemon found no device driver for the "
                       "'gpu' capability that --gpus (or compose's capabilities: [gpu]) asks for — the NVIDIA "
                       "Container Toolkit is not installed on the host or not registered with this Docker (a "
                       "snap-installed Docker does not see it).", evidence=ev,
                remedy=Remediation("On the host: install nvidia-container-toolkit, register it with Docker and "
                                   "restart Docker.",
                                   (remedies.container_toolkit_install(),
                                    remedies.container_runtime_configure(),
                                    remedies.container_run("--rm", "--gpus all", image="ubuntu", argv="nvidia-smi", note="to verify")),
                                   (TOOLKIT_INSTALL,)))


def _device_plugin_without_nvml(facts: Facts) -> Finding | None:
    """The NVIDIA device plugin's own lines (its catalogue rows): its container could not load libnvidia-ml, which
    the NVIDIA container runtime puts into a container it starts; so the node's runtime did not start it."""
    rows = [r for r in catalogue.judged_rows(facts.value("text.messages") if facts.get("text.messages").ok else (),
                                             "container-gpu") if r.get("cause") == "k8s-device-plugin-nvml"]
    if not rows:
        return None
    said = remedies.message_remedy("k8s-device-plugin")
    text, commands, links = said if said else ("Make the node's container runtime nvidia.", (), ())
    return fail("The NVIDIA device plugin cannot load NVML: its container was not started by the NVIDIA runtime",
                detail=f"{rows[0].get('line', '')!r}: the device plugin finds the GPUs through libnvidia-ml, which "
                       "only the NVIDIA container runtime puts into its container. The node's container runtime "
                       "(Docker's default runtime, or containerd's) is not nvidia, so the plugin registers no GPU.",
                evidence=evidence(facts, "text.messages", "text.node_gpus"),
                remedy=Remediation(text, (*commands, remedies.device_plugin_logs()), links))


def _hook_cannot_load(facts: Facts) -> Finding:
    """nvidia-container-cli, the hook Docker runs on the host before the container starts, could not dlopen the
    driver's library: the container never started, so nothing in it is at fault."""
    line = str(facts.value("container.runtime_library_error"))
    said = remedies.message_remedy("container-driver-library")
    text, commands, links = said if said else ("Install the NVIDIA driver on the host.", (), ())
    return fail("The NVIDIA container runtime cannot load the host's driver library",
                detail=f"{line!r}: nvidia-container-cli, the hook Docker runs on the host before the container "
                       "starts, found no driver library: the driver is not installed on the host, or the hook does not "
                       "see the host's driver libraries.",
                evidence=evidence(facts, "container.runtime_library_error", "host.container", "text.messages"),
                remedy=Remediation(text + " Alternatively, if this Docker came from another channel than the "
                                   "toolkit's install guide uses (a snap, for one), install Docker Engine from Docker's "
                                   "own repository and configure the toolkit for it.", commands, links))


@check("container-gpu", "The container was started with GPU access", healthcheck=True,
       needs=("driver.device_nodes", "nvml.init", "nvml.gpus", "torch.devices", "nvml.smi_not_found"),
       owns=("cuda.init:35:no-gpus-requested",))
def container_gpu(facts: Facts) -> CheckResult:
    if facts.get("container.no_gpu_driver").ok:
        return _no_gpu_runtime(facts, evidence(facts, "container.no_gpu_driver", "host.container", "nvml.init"))
    if facts.get("container.runtime_library_error").ok:
        return _hook_cannot_load(facts)
    if plugin := _device_plugin_without_nvml(facts):
        return plugin
    if smi := _smi_missing_in_container(facts):
        return smi
    if compose := _compose_without_gpus(facts):
        return compose
    result = _container_gpu(facts)
    node = _node_gpus(facts)
    # A node that advertises no GPU is this check's failure; one that advertises GPUs does not show that this
    # container got one (the check's question), so it never makes the check pass.
    if node is not None and node.status is Status.FAIL:
        return node
    return result


def _compose_without_gpus(facts: Facts) -> Finding | None:
    """A Compose file whose services ask for no GPU (``text.compose_gpus`` False) beside CUDA seeing none: the
    container was started without GPUs (the NVIDIA runtime injects the driver only into one that asks)."""
    if not facts.get("text.compose_gpus").ok or facts.value("text.compose_gpus") is not False:
        return None
    symptom = no_gpu_seen(facts)
    if facts.value("nvml.smi_not_found") and facts.get("nvml.smi_not_found").ok:
        symptom = symptom or "nvidia-smi is not found in the container"
    if not symptom:
        return None
    return fail("The Compose service was started without GPUs",
                detail=f"The Compose file shown asks for no GPU (no deploy.resources.reservations.devices, gpus: or "
                f"runtime: nvidia), and {symptom}: without the request the NVIDIA runtime puts no driver into the "
                "container.", evidence=evidence(facts, "text.compose_gpus", "text.messages", "torch.cuda_available"),
                remedy=Remediation("Ask for the GPUs in the service (Compose's GPU support), then recreate it "
                                   "(docker compose up --force-recreate).",
                                   (remedies.compose_gpu_request(),
                                    remedies.container_runtime_configure()),
                                   (remedies.COMPOSE_GPU_SUPPORT, TOOLKIT_INSTALL)))


def _node_gpus(facts: Facts) -> Finding | None:
    """``kubectl describe node``'s ``nvidia.com/gpu`` (``text.node_gpus``): the NVIDIA device plugin advertises
    the node's GPUs as that extended resource (NVIDIA/k8s-device-plugin); 0 in Capacity means it registered none,
    0 in Allocatable of N means it marked them all unhealthy. None when the text shows no such block."""
    reading = facts.get("text.node_gpus")
    if not reading.ok or not isinstance(reading.value, Mapping):
        return None
    blocks = {str(k): v for k, v in reading.value.items() if isinstance(v, int) and not isinstance(v, bool)}
    if not blocks:
        return None
    capacity, allocatable = blocks.get("capacity"), blocks.get("allocatable")
    ev = evidence(facts, "text.node_gpus", "text.tools")
    if capacity == 0 or allocatable == 0:
        said = remedies.message_remedy("k8s-gpu-capacity")
        text, commands, links = said if said else ("Check the NVIDIA device plugin on the node.", (), ())
        shown = (f"Capacity nvidia.com/gpu: {capacity}" if capacity is not None else "") + \
            (", " if capacity is not None and allocatable is not None else "") + \
            (f"Allocatable nvidia.com/gpu: {allocatable}" if allocatable is not None else "")
        why = ("the NVIDIA device plugin registered no GPU on this node (it is not running there, or it cannot "
               "load NVML because the node's container runtime is not nvidia)" if capacity == 0 or
               (capacity is None and allocatable == 0) else
               f"the device plugin found {capacity} GPU(s) but reports none healthy (an Xid or a lost GPU makes it "
               "withdraw them)")
        return fail("The node advertises no allocatable GPU (nvidia.com/gpu 0)",
                    detail=f"`kubectl describe node` shows {shown}: {why}. No pod asking for nvidia.com/gpu is "
                    "scheduled there, and none started there gets a GPU.", evidence=ev,
                    remedy=Remediation(text + " Its pod's log names the reason.",
                                       (*commands, remedies.device_plugin_logs()),
                                       links))
    if allocatable:
        return ok(f"The node advertises {allocatable} allocatable GPU(s) (nvidia.com/gpu)", evidence=ev)
    return None


def _smi_missing_in_container(facts: Facts) -> Finding | None:
    """A shell that cannot find nvidia-smi in a container, or while another part of the same text shows a
    working driver (the two came from different places: the host and a container). The NVIDIA container
    runtime injects nvidia-smi, libnvidia-ml and libcuda only into a container that asks for GPUs."""
    reading = facts.get("nvml.smi_not_found")
    driver = facts.value("nvml.driver_version") if facts.get("nvml.driver_version").ok else None
    container = in_container(facts)
    if not reading.ok or not (driver or container):
        return None
    where = (f"this {container} container" if container else "the shell that printed it, while the driver "
             f"{driver} works where the other nvidia-smi output came from (usually the host, and this a container)")
    return fail("nvidia-smi is not found " + (f"in this {container} container" if container else
                                              "where it was run, though a driver works elsewhere in this text"),
                detail=f"{str(reading.value)!r}: in {where}. The NVIDIA container runtime puts nvidia-smi, "
                "libnvidia-ml and libcuda into a container only when the container asks for GPUs; without them no "
                "CUDA program there sees a GPU.",
                evidence=evidence(facts, "nvml.smi_not_found", "nvml.driver_version", "host.container"),
                remedy=Remediation("Start the container with its GPUs, through the NVIDIA container toolkit.",
                                   (remedies.container_run("--gpus all", note="or CDI: --device nvidia.com/gpu=all"),
                                    remedies.compose_gpu_request(),
                                    remedies.container_runtime_configure()),
                                   (TOOLKIT_INSTALL,)))


def _container_gpu(facts: Facts) -> CheckResult:
    container = in_container(facts)
    ev = evidence(facts, "host.container", "driver.device_nodes", "nvml.init", "cuda.library_path",
                  "visibility.nvidia_visible_devices", "visibility.nvidia_driver_capabilities", "container.gpus_requested")
    if not container:
        if facts.get("host.container").ok:
            return skip("Not in a container", evidence=ev)
        return skip("Container context unknown", detail=facts.get("host.container").describe(), evidence=ev)
    if no_nvidia_pci(facts) and not driver_loaded(facts)[0]:
        return skip("No NVIDIA GPU to pass into this container", detail=f"The PCI bus seen from this {container} "
                    "container (the host's) has no NVIDIA device.", evidence=ev)
    nodes = dict(facts.value("driver.device_nodes") or {})
    present = [p for p, s in nodes.items() if s != "absent"]
    nvd = facts.value("visibility.nvidia_visible_devices") or {}
    caps = facts.value("visibility.nvidia_driver_capabilities") or {}
    code = nvml_code(facts)
    nodes_unknown = not facts.get("driver.device_nodes").ok  # e.g. a pasted nvidia-smi output
    if code == 999 and (present or nodes_unknown):
        return fail("The container lost access to its GPUs (NVML: Unknown Error)",
                    detail="\"Failed to initialize NVML: Unknown Error\" inside a container"
                    + (" while /dev/nvidia* exist" if present else "") + ": the device nodes "
                    "are there but the container's cgroup no longer allows them. This happens to running containers "
                    "after `systemctl daemon-reload` (systemd re-applies device rules that drop the injected "
                    "/dev/nvidia* entries).", evidence=ev,
                    remedy=Remediation(
                        "Recreate the container now; to prevent it, create /dev/char symlinks for the NVIDIA nodes on "
                        "the host (or use CDI), and update the container toolkit.",
                        (remedies.container_restart("immediate fix"),
                         remedies.dev_char_symlinks(),
                         "# or in /etc/docker/daemon.json: \"exec-opts\": [\"native.cgroupdriver=cgroupfs\"]"),
                        (CGROUP_NOTICE,)))
    mode = nvd.get("mode")
    if nodes_unknown:
        # A pasted report: no /dev listing, so judge only from what NVML and torch said.
        if seen := next((k for k in ("nvml.gpus", "torch.devices") if facts.value(k)), None):
            return ok(f"GPUs are visible in this {container} container", evidence={**evidence(facts, seen), **ev})
        if code == 4:
            return fail("The container is not allowed to open the GPU devices", detail=f"Inside this {container} "
                        "container NVML reports \"Insufficient Permissions\": /dev/nvidia* were passed in but the "
                        "container may not open them — an SELinux/AppArmor label or a device-cgroup rule denies it.",
                        evidence=ev, remedy=Remediation(
                            "Let the container use the devices: on SELinux hosts run it with the container-toolkit's "
                            "policy or a label that allows it; check the device cgroup.",
                            ("getenforce   # on the host; 'Enforcing' with a denial in the audit log is the usual cause",
                             remedies.selinux_denials(),
                             remedies.container_run("--gpus all", "--security-opt label=disable", note="to confirm; then fix the policy")),
                            (TOOLKIT_INSTALL,)))
        no_libcuda = facts.get("cuda.init").reason is Reason.ABSENT
        unasked = facts.value("container.gpus_requested") is False
        if unasked and (cuda_code(facts) == 35 or facts.value("torch.cuda_available") is False or no_gpu_seen(facts)):
            no_libcuda = True  # without --gpus no driver reaches the container: CUDA reports 35 / no device
        if code == 9 or no_libcuda:
            title = ("The container was started without GPUs" if unasked and code != 9 else
                     "The container cannot reach the NVIDIA driver")
            asked = facts.get("container.gpus_requested")
            told = f" ({asked.detail})" if unasked and asked.detail else ""
            return fail(title, detail=f"Inside this {container} container{told} "
                        + ("torch finds no NVIDIA driver (no libcuda.so.1): the NVIDIA runtime injects the driver's "
                           "libraries only into containers that request GPUs with the compute capability"
                           if no_libcuda and code != 9 else
                           "NVML says it \"couldn't communicate with the NVIDIA driver\": the driver's libraries are "
                           "there but /dev/nvidiactl and /dev/nvidia* were not passed in")
                        + " — the container was started without the NVIDIA runtime, --gpus, or the 'gpu' + 'compute' "
                        "capabilities (docker compose: deploy.resources.reservations.devices).", evidence=ev,
                        remedy=Remediation(
                            "Start the container through the NVIDIA container toolkit with GPUs requested.",
                            (remedies.container_run("--gpus all", note="or CDI: --device nvidia.com/gpu=all"),
                             remedies.compose_gpu_request(),
                             remedies.container_runtime_configure()),
                            (TOOLKIT_INSTALL,)))
        return skip(f"GPU wiring of this {container} container not read", detail="The report has no /dev listing and "
                    "no GPU reading.", evidence=ev)
    if not present and not facts.get("cuda.library_path").ok:
        detail = (f"No /dev/nvidia* device nodes and no libcuda.so.1 in this {container} container: it was started "
                  "without GPU access")
        if mode in ("void", "none"):
            detail += f" (NVIDIA_VISIBLE_DEVICES={nvd.get('raw')!r} asks the runtime for no GPU)"
        elif mode == "unset":
            detail += " (NVIDIA_VISIBLE_DEVICES is unset: the NVIDIA runtime was not asked for a GPU)"
        return fail("The container has no GPU attached", detail=detail + ".", evidence=ev, remedy=Remediation(
            "On the host: install nvidia-container-toolkit and register it with Docker; start the container with "
            "GPUs. On Kubernetes request nvidia.com/gpu in the pod's resources.limits.",
            (remedies.container_toolkit_install(),
             remedies.container_runtime_configure(),
             remedies.container_run("--gpus all", note="or CDI: --device nvidia.com/gpu=all"),
             "# Kubernetes: resources: {limits: {nvidia.com/gpu: 1}}"),
            (TOOLKIT_INSTALL,)))
    lacking = list(caps.get("missing") or [])
    if lacking:
        return fail(f"NVIDIA_DRIVER_CAPABILITIES lacks {', '.join(lacking)}",
                    detail=f"NVIDIA_DRIVER_CAPABILITIES={caps.get('raw')!r}: the runtime injects only those parts of "
                    "the driver. 'compute' brings libcuda (CUDA), 'utility' brings libnvidia-ml and nvidia-smi.",
                    evidence=ev, remedy=Remediation("Start the container with the capabilities CUDA needs.",
                                                    (remedies.container_run("--gpus all", "-e NVIDIA_DRIVER_CAPABILITIES=compute,utility"),),
                                                    ("https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/"
                                                     "latest/docker-specialized.html",)))
    if present and not nodes.get("/dev/nvidia-uvm") == "absent":
        return ok(f"GPU device nodes are present in this {container} container", evidence=ev)
    return warn("The container's GPU wiring is incomplete", detail="Some NVIDIA device nodes or libraries are "
                "missing; see device-nodes and cuda-init.", evidence=ev,
                remedy=Remediation("Start the container with --gpus all.", (remedies.container_run("--gpus all"),),
                                   (TOOLKIT_INSTALL,)))


# -- nvml-bindings -------------------------------------------------------------------------------------------
@check("nvml-bindings", "The NVML Python bindings are nvidia-ml-py, not the deprecated pynvml",
       needs=("python.packages",))
def nvml_bindings(facts: Facts) -> CheckResult:
    packages = facts.value("python.packages")
    ev = {"python.packages": {k: v for k, v in (packages or {}).items() if k in ("pynvml", "nvidia-ml-py", "nvidia-ml-py3")}}
    if packages is None:
        return skip("Installed packages not read", detail=facts.get("python.packages").describe(), evidence=ev)
    py = facts.value("python.executable") or "python"
    bad = [name for name in ("pynvml", "nvidia-ml-py3") if name in packages]
    if not bad:
        if "nvidia-ml-py" in packages:
            return ok(f"nvidia-ml-py {packages['nvidia-ml-py']} provides pynvml", evidence=ev)
        return ok("No NVML Python bindings installed (torch does not need them)", evidence=ev)
    # Both distributions install a top-level pynvml module; whichever was installed last owns
    # it. pynvml >= 12 is a shim that warns "The pynvml package is deprecated. Please install
    # nvidia-ml-py instead."; older pynvml and nvidia-ml-py3 ship stale copies of the bindings.
    listed = ", ".join(f"{n} {packages[n]}" for n in bad)
    detail = (f"{listed} installed" + (f" alongside nvidia-ml-py {packages['nvidia-ml-py']}" if "nvidia-ml-py" in packages
                                      else "") +
              ". These distributions also provide the `pynvml` module; the deprecated ones cause \"FutureWarning: "
              "The pynvml package is deprecated. Please install nvidia-ml-py instead.\" (printed when torch.cuda is "
              "imported) or stale bindings (\"module 'pynvml' has no attribute '_nvmlGetFunctionPointer'\", memory "
              "numbers that disagree with nvidia-smi).")
    return warn("Deprecated NVML bindings installed", detail=detail, evidence=ev, remedy=Remediation(
        "Remove the deprecated distributions and (re)install nvidia-ml-py; the import name stays `pynvml`.",
        (remedies.pip_uninstall(py, [*bad, "nvidia-ml-py"]), remedies.pip_install(py, "nvidia-ml-py", upgrade=True)),
        ("https://pypi.org/project/nvidia-ml-py/", "https://github.com/gpuopenanalytics/pynvml")))


# -- nvml-init -----------------------------------------------------------------------------------------------
def _hang_remedy(what: str, facts: Facts) -> Remediation:
    return Remediation(
        f"{what} did not return: the driver is wedged (a process stuck in the kernel, state D) or a GPU is "
        "unresponsive. Look for Xid errors and stuck processes; reset the GPU or reboot.",
        (remedies.kernel_log("xid|nvrm", flags="-iE", tail=20), "ps -eo pid,stat,cmd | awk '$2 ~ /D/'",
         *_reset_commands(facts)),
        (remedies.XID_DOC,))


def _init_unfinished(facts: Facts, reading: Reading, ev: Mapping[str, Any], call: str, hung: str, crashed: str,
                     crash_remedy: Remediation) -> Finding | None:
    """The error for a driver initialisation (``call``) that hung or crashed its probe, else None."""
    if reading.reason is Reason.TIMEOUT:
        return error(hung, detail=reading.describe(), evidence=ev, remedy=_hang_remedy(call, facts))
    if reading.reason is Reason.CRASHED:
        return error(crashed, detail=reading.describe(), evidence=ev, remedy=crash_remedy)
    return None


# What to run for the nvmlInit results a user can act on; the title and explanation of each
# code come from envdoctor/data/errors.json (envdoctor.knowledge.errors.nvml).
_NVML_INIT_FIX: dict[int, tuple[str, ...]] = {
    4: ("ls -l /dev/nvidia*", remedies.join_video_group("then log in again")),
    9: (remedies.load_module("nvidia"), remedies.kernel_log("nvrm|nvidia", flags="-iE", tail=0)),
    15: (remedies.kernel_log("xid"), remedies.reboot("if it recurs: check power/cooling, reseat, then RMA")),
    17: (remedies.kernel_log(tail=0),),
    18: _reload_commands(),
    999: (remedies.kernel_log("xid|nvrm", flags="-iE", tail=0), remedies.reboot()),
}


def _nvml_init_text(code: Any, name: Any) -> tuple[str, str, tuple[str, ...]]:
    """(title, explanation, commands) for an nvmlInit result."""
    info = errors.nvml().get(code)
    commands = _NVML_INIT_FIX.get(code)
    if info is None or not info.title or info.meaning is None or commands is None:
        return f"NVML failed: {name}", "", ("nvidia-smi", remedies.kernel_log("xid|nvrm", flags="-iE", tail=20))
    return info.title, info.meaning, commands


@check("nvml-init", "NVML initialises", healthcheck=True, judges_failures=True, needs=("nvml.init",))
def nvml_init(facts: Facts) -> CheckResult:
    reading = facts.get("nvml.init")
    ev = evidence(facts, "nvml.init", "nvml.library_path", "nvml.driver_version", "nvml.device_count",
                  "driver.kernel_module_version")
    unfinished = _init_unfinished(
        facts, reading, ev, "nvmlInit", "NVML did not answer (nvmlInit hung)", "NVML crashed the process that loaded it",
        Remediation("libnvidia-ml crashed while initialising: a corrupt or mismatched driver install. Reinstall the "
                    "driver packages for the loaded kernel module.",
                    ("nvidia-smi", "ldconfig -p | grep libnvidia-ml",
                     remedies.apt_install(remedies.compute_library_package(driver_branch(facts)), reinstall=True)), (DRIVER_GUIDE,)))
    if unfinished:
        return unfinished
    if not reading.ok:
        if reading.reason is Reason.ABSENT:
            # The NVML child runs in envdoctor's own interpreter: without nvidia-ml-py there it could
            # not look. That says nothing about the user's environment, so skip and say how to enable it.
            return skip("NVML was not examined (nvidia-ml-py is missing where envdoctor runs)",
                        detail=f"{reading.describe()}. Install nvidia-ml-py next to envdoctor "
                        f"(`{remedies.nvml_bindings_in_envdoctor()}` in envdoctor's environment, or `pipx inject envdoctor "
                        "nvidia-ml-py`) to judge the driver and GPU health through NVML.", evidence=ev)
        return skip("NVML was not examined", detail=reading.describe(), evidence=ev)
    if not isinstance(reading.value, Mapping):
        return skip("nvmlInit's result was not read", detail="nvml.init holds no result.", evidence=ev)
    init = reading.value
    code = init.get("code")
    if code == 0:
        handle_errors = [(g, g.error) for g in views.gpus(facts) if g.error]
        if handle_errors:
            errs = "; ".join(f"GPU {g.index}: {err.get('name')} ({err.get('message')})" for g, err in handle_errors)
            return warn("NVML cannot open some GPUs", detail=errs, evidence=ev,
                        gpus=[g.index for g, _ in handle_errors if g.index is not None],
                        remedy=Remediation("Check the kernel log for those GPUs.",
                                           (remedies.kernel_log("xid|nvrm", flags="-iE", tail=0), "nvidia-smi")))
        shutdown = init.get("shutdown") if isinstance(init.get("shutdown"), Mapping) else None
        if shutdown:
            call = str(shutdown.get("call") or "nvmlShutdown")
            verb = "hung" if shutdown.get("status") == "timeout" else "crashed"
            return warn(f"NVML answered, but {call} {verb}", detail=f"{shutdown.get('detail', '')}. Every reading "
                        f"was complete; a driver that cannot release NVML makes nvidia-smi and monitoring agents hang "
                        "or crash on exit too.", evidence=ev, remedy=_hang_remedy(call, facts))
        count = facts.value("nvml.device_count")  # not read (a pasted nvidia-smi error) is not 0 GPUs
        return ok(f"NVML {facts.value('nvml.driver_version', '')}".rstrip() + (f": {count} GPU(s)" if count is not None
                                                                              else " initialises"), evidence=ev)
    message = init.get("message") or ""
    if code == 12:  # library not found
        loaded, why = driver_loaded(facts)
        if loaded is False:
            return skip("No NVML library (no NVIDIA driver installed)", detail=f"libnvidia-ml.so.1 is not on the "
                        f"loader path; {why}. Judged by driver-installed.", evidence=ev)
        return fail("libnvidia-ml.so.1 not found", detail=f"The kernel module is loaded ({why}) but the NVML library "
                    "is not on the loader path: the userspace driver package is missing, or (in a container) the "
                    "runtime did not inject it (NVIDIA_DRIVER_CAPABILITIES without 'utility').", evidence=ev,
                    remedy=Remediation("Install the userspace driver matching the kernel module and refresh the "
                                       "loader cache.",
                                       ("ldconfig -p | grep libnvidia-ml",
                                        remedies.apt_install(remedies.compute_library_package(driver_branch(facts))),
                                        remedies.ldconfig()), (DRIVER_GUIDE,)))
    title, text, commands = _nvml_init_text(code, init.get("name"))
    detail = f"\"Failed to initialize NVML: {message}\" ({init.get('name')}, {code}). {text}".strip()
    fix = text or (f"nvmlInit returned {init.get('name')}: GPU tools (nvidia-smi, DCGM, NVML-based monitoring) cannot "
                   "read the GPUs. Run nvidia-smi to see the same error, look up the code in NVML's nvmlReturn_t list, "
                   "and check the kernel log for NVRM/Xid lines; a driver reload (reboot) clears a driver in a bad state.")
    return fail(title, detail=detail, evidence=ev, remedy=Remediation(fix, commands, (DRIVER_GUIDE, NVML_RETURN_CODES)))


# -- cuda-init -----------------------------------------------------------------------------------------------
# What to run (and read) for the cuInit results seen in practice; what each code means, and the
# finding's title, come from envdoctor/data/errors.json (envdoctor.knowledge.errors.cuda_init_text).
_CUDA_INIT_FIX: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {
    3: (("nvidia-smi",), ()),
    34: (("echo $LD_LIBRARY_PATH | tr ':' '\\n' | grep stubs   # remove these entries",
          "ldconfig -p | grep libcuda.so.1"), ()),
    # 35 is the *runtime* API's cudaErrorInsufficientDriver (torch/cudart print it); cuInit never
    # returns it, but a parsed report may carry it.
    35: (("nvidia-smi   # 'CUDA Version' = the newest runtime this driver supports",), (DRIVER_DOWNLOAD,)),
    46: (("nvidia-smi --query-gpu=index,compute_mode --format=csv", "nvidia-smi --query-compute-apps=pid,gpu_uuid --format=csv"), ()),
    100: (("echo \"CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES\"", "nvidia-smi -L"), ()),
    101: (("nvidia-smi -L",), ()),
    304: (("ls -l /dev/nvidia*",), ()),
    800: (("ls -l /dev/nvidia*",), ()),
    802: (("systemctl status nvidia-fabricmanager",
           remedies.fabric_manager_install(None),
           remedies.service_enable("nvidia-fabricmanager")), (FABRIC_GUIDE,)),
    803: (_reload_commands(), ()),
    804: (("echo $LD_LIBRARY_PATH | tr ':' '\\n' | grep compat   # remove these entries",
           "ldconfig -p | grep libcuda.so.1"), (FORWARD_COMPAT,)),
    999: ((remedies.uvm_reload(), "ls -l /dev/nvidia-uvm", remedies.reboot("if that does not help")),
          ("https://github.com/pytorch/pytorch/issues/88639",)),
}


def _cuda_init_text(code: Any, name: str) -> tuple[str, str, tuple[str, ...], tuple[str, ...]]:
    """(title, explanation, commands, links) for a cuInit result."""
    known = errors.cuda_init_text(code)
    fix = _CUDA_INIT_FIX.get(code)
    if known is None or fix is None:
        return f"cuInit failed: {name}", "", ("nvidia-smi", remedies.kernel_log("xid|nvrm", flags="-iE", tail=20)), ()
    return known[0], known[1], fix[0], fix[1]


@check("cuda-init", "The CUDA driver API initialises (cuInit)", healthcheck=True, judges_failures=True,
       needs=("cuda.init",))
def cuda_init(facts: Facts) -> CheckResult:
    reading = facts.get("cuda.init")
    ev = evidence(facts, "cuda.init", "cuda.driver_version", "cuda.device_count", "cuda.library_path",
                  "driver.kernel_module_version")
    unfinished = _init_unfinished(
        facts, reading, ev, "cuInit", "cuInit did not return (CUDA initialisation hung)",
        "libcuda crashed the process that initialised it",
        Remediation("libcuda.so.1 crashed during cuInit: a corrupt driver install or a libcuda that does not belong "
                    "to the loaded driver.",
                    ("ldconfig -p | grep libcuda.so.1",
                     f"{facts.value('python.executable') or 'python3'} -X faulthandler -c "
                     "\"import ctypes; print(ctypes.CDLL('libcuda.so.1').cuInit(0))\"",
                     remedies.apt_install(remedies.compute_library_package(driver_branch(facts)), reinstall=True)), (DRIVER_GUIDE,)))
    if unfinished:
        return unfinished
    if not reading.ok:
        loaded, why = driver_loaded(facts)
        if reading.reason is Reason.ABSENT and loaded is False:
            return skip("No libcuda.so.1 (no NVIDIA driver)", detail=f"{reading.describe()}; {why}. Judged by "
                        "driver-installed.", evidence=ev)
        if reading.reason is Reason.ABSENT:
            return fail("libcuda.so.1 cannot be loaded", detail=f"{reading.describe()}, although {why}.", evidence=ev,
                        remedy=Remediation("Install the driver's CUDA library (or, in a container, request the "
                                           "'compute' capability) and refresh the loader cache.",
                                           ("ldconfig -p | grep libcuda.so.1",
                                            remedies.apt_install(remedies.compute_library_package(driver_branch(facts))), remedies.ldconfig()),
                                           (DRIVER_GUIDE,)))
        return skip("cuInit was not examined", detail=reading.describe(), evidence=ev)
    if not isinstance(reading.value, Mapping):
        return skip("cuInit's result was not read", detail="cuda.init holds no result.", evidence=ev)
    init = reading.value
    code = init.get("code")
    owner = owner_of(f"cuda.init:{code}")
    if code == 35 and facts.value("container.gpus_requested") is False:
        owner = owner_of("cuda.init:35:no-gpus-requested")  # the container got no driver at all
    if owner:
        # The check that names the cause judges it (and fails); one failure per cause.
        return skip(f"cuInit returned {code} {init.get('name') or ''}: judged by {owner}".replace("  ", " "),
                    detail=f"\"{init.get('message') or ''}\". {_cuda_init_text(code, '')[1]}", evidence=ev)
    if code == 0:
        count = facts.value("cuda.device_count")
        return ok("cuInit succeeded" + (f": {count} device(s)" if count is not None else "") + ", driver API "
                  f"{facts.value('cuda.driver_version', '?')}", evidence=ev)
    name = init.get("name") or f"CUresult {code}"
    message = init.get("message") or ""
    title, text, commands, links = _cuda_init_text(code, name)
    if code == 802:
        commands = tuple(c.replace("<branch>", driver_branch(facts)) for c in commands)
    fix = text or (f"cuInit returned {name}, so no CUDA program (torch included) can use the GPU. Look the code up in "
                   "the CUDA driver API's CUresult list and check the kernel log for NVRM/Xid lines; a driver reload "
                   "(reboot) clears a driver in a bad state.")
    return fail(title, detail=f"cuInit returned {code} {name}: \"{message}\". {text}".strip(), evidence=ev,
                remedy=Remediation(fix, commands, links or (CUDA_RESULT_CODES,)))



# -- cuda-visible-devices ----------------------------------------------------------------------------------------
@check("cuda-visible-devices", "CUDA_VISIBLE_DEVICES selects the GPUs you expect", healthcheck=True,
       needs=("visibility.cuda_visible_devices",))
def cuda_visible_devices(facts: Facts) -> Finding:
    reading = facts.get("visibility.cuda_visible_devices")
    if (not reading.ok or not isinstance(reading.value, Mapping)) and (raw := assigned(facts, "CUDA_VISIBLE_DEVICES")) \
            is not None:
        return _text_visible_devices(facts, raw)
    if not reading.ok or not isinstance(reading.value, Mapping):
        # A paste does not show the environment: a variable it does not show is unknown, not unset.
        return skip("CUDA_VISIBLE_DEVICES was not read", detail=reading.describe() if not reading.ok else
                    "visibility.cuda_visible_devices holds no value.",
                    evidence=evidence(facts, "visibility.cuda_visible_devices"))
    cvd = VisibleDevices.from_facts(facts)
    ev = evidence(facts, "visibility.cuda_visible_devices", "visibility.cuda_device_order", "visibility.cuda_devices",
                  "nvml.device_count")
    gpus = views.gpus(facts)
    raw = cvd.raw
    devices = cvd.devices
    shown = ", ".join(f"cuda:{d.cuda} = GPU {d.nvml_index} ({d.name}, {d.pci_bus_id})" for d in devices)
    if not cvd.is_set:
        if gpus and not cvd.order_certain:
            return warn("CUDA numbers these different GPUs fastest-first, not like nvidia-smi",
                        detail="CUDA_DEVICE_ORDER is unset, so cuda:0 is the fastest GPU, while nvidia-smi and NVML "
                        "number by PCI bus: 'GPU 0' in nvidia-smi may not be cuda:0.", evidence=ev,
                        remedy=Remediation("Number GPUs like nvidia-smi does (set it before the process starts).",
                                           (remedies.env_set("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),)))
        return ok("CUDA_VISIBLE_DEVICES is unset: every GPU is visible" + (f" ({shown})" if shown else ""), evidence=ev)
    if cvd.hides_all:
        why = {"duplicate": f"it names {cvd.stopped_at!r} twice, and a repeated device makes CUDA hide "
                            "every device",
               "negative": "a negative index (-1) ends the list before any device",
               "invalid": f"its first entry {cvd.stopped_at!r} is not a device index or UUID"}.get(
            cvd.stop_reason or "", "it is empty")
        status = fail if gpus else warn
        return status(f"CUDA_VISIBLE_DEVICES={raw!r} hides every GPU", detail=f"{why}; torch.cuda.is_available() "
                      "will be False (CUDA_ERROR_NO_DEVICE).", evidence=ev,
                      remedy=Remediation("Unset it, or list the GPUs to use (indices or GPU-/MIG- UUIDs from "
                                         "`nvidia-smi -L`).", (remedies.env_unset("CUDA_VISIBLE_DEVICES"), "nvidia-smi -L")))
    problems = []
    if cvd.stopped_at is not None:
        problems.append(f"CUDA stops reading at {cvd.stopped_at!r} ({cvd.stop_reason}), so "
                        f"{', '.join(repr(t) for t in cvd.ignored)} are ignored")
    if cvd.loose_tokens:
        problems.append(f"{', '.join(repr(t) for t in cvd.loose_tokens)} read as "
                        "the leading number only")
    if cvd.unmatched is not None:
        problems.append(f"{cvd.unmatched!r} matches no GPU on this machine (NVML sees {len(gpus)}), so the list "
                        f"ends there and only {len(devices)} device(s) are visible")
    if gpus and not cvd.order_certain and cvd.kind == "index":
        problems.append("the GPUs are different models and CUDA_DEVICE_ORDER is unset, so these indices count "
                        "fastest-first, not in nvidia-smi's order")
    if problems:
        return warn("CUDA_VISIBLE_DEVICES does not select what it says", detail=f"CUDA_VISIBLE_DEVICES={raw!r}: "
                    + "; ".join(problems) + "." + (f" Visible: {shown}." if shown else ""), evidence=ev,
                    remedy=Remediation("Use comma-separated indices or full UUIDs from `nvidia-smi -L`, no spaces or "
                                       "typos; set CUDA_DEVICE_ORDER=PCI_BUS_ID so indices match nvidia-smi; set both "
                                       "before the process starts (changing them after CUDA initialised has no effect).",
                                       ("nvidia-smi -L", remedies.env_set("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
                                        remedies.env_set("CUDA_VISIBLE_DEVICES", _intended(cvd, gpus),
                                                         "the GPUs the value names that exist here"))),
                    gpus=cvd.nvml_indices)
    if not cvd.mapped:
        return ok(f"CUDA_VISIBLE_DEVICES={raw!r} is well-formed", detail="NVML did not list the GPUs, so the entries "
                  "could not be matched to devices.", evidence=ev)
    return ok(f"CUDA_VISIBLE_DEVICES={raw!r} selects {len(devices)} GPU(s)", detail=shown, evidence=ev,
              gpus=cvd.nvml_indices)


def _text_entries(raw: str) -> tuple[list[int | str], str | None]:
    """The devices ``CUDA_VISIBLE_DEVICES=raw`` names as the CUDA runtime reads it (the rules the host probe's
    ``parse_cuda_visible_devices`` mirrors from torch's ``_parse_visible_devices``): a leading integer per entry, a
    list of ``GPU-``/``MIG-`` UUIDs, and the first negative or non-numeric entry ends the list; a repeated device
    hides every device. Returns (entries, the entry that ended the list or None)."""
    tokens = [t.strip() for t in raw.split(",")]
    entries: list[int | str] = []
    uuid = raw.strip().startswith(("GPU-", "MIG-"))
    for token in tokens:
        value: int | str | None
        if uuid:
            value = token if token.startswith(("GPU-", "MIG-")) else None
        else:
            m = re.match(r"\d+", token)
            value = int(m.group(0)) if m else None
        if value is None:
            return entries, token
        if value in entries:
            return [], token
        entries.append(value)
    return entries, None


def _text_visible_devices(facts: Facts, raw: str) -> Finding:
    """A ``CUDA_VISIBLE_DEVICES`` a command line in the text sets, judged against the GPUs the text shows."""
    ev = evidence(facts, "text.env_assignments", "nvml.device_count", "nvml.gpus", "torch.cuda_available",
                  "text.messages")
    entries, stop = _text_entries(raw)
    symptom = no_gpu_seen(facts)
    shown = gpu_count(facts)
    remedy = Remediation("Unset it, or list GPUs that exist (indices from 0, or GPU- UUIDs from `nvidia-smi -L`), "
                         "before the process starts.",
                         (remedies.env_unset("CUDA_VISIBLE_DEVICES"), remedies.list_gpus()))
    if not entries:
        if not raw.strip():
            why = "it is empty"
        elif (stop or "").startswith("-"):
            why = "a negative index (-1) ends the list before any device"
        elif stop is not None and [t.strip() for t in raw.split(",")].count(stop) > 1:
            why = f"it names {stop!r} twice, and a repeated device makes CUDA hide every device"
        else:
            why = f"its first entry {stop!r} is not a device index or UUID"
        title = f"CUDA_VISIBLE_DEVICES={raw!r} set in the text hides every GPU"
        detail = f"The command line sets CUDA_VISIBLE_DEVICES={raw!r}: {why}, so CUDA shows the process no device."
        if symptom:
            return fail(title, detail=f"{detail} And {symptom}: that is this variable's doing.", evidence=ev,
                        remedy=remedy)
        return warn(title, detail=detail + " (Right only for a run meant to use no GPU.)", evidence=ev, remedy=remedy)
    if shown is None:
        return skip(f"CUDA_VISIBLE_DEVICES={raw!r} is set; the text shows no GPU list to match it to", evidence=ev)
    count, where = shown
    indices = [e for e in entries if isinstance(e, int)]
    if not indices:
        known = {str(g.get("uuid")) for g in facts.value("nvml.gpus") or () if isinstance(g, Mapping) and g.get("uuid")}
        if not known:
            return skip(f"CUDA_VISIBLE_DEVICES={raw!r} names UUIDs; the text shows none to match them to",
                        evidence=ev)
        missing_uuid = [str(e) for e in entries if not any(k.startswith(str(e)) for k in known)]
        if not missing_uuid:
            return ok(f"CUDA_VISIBLE_DEVICES={raw!r} names GPUs the text lists", evidence=ev)
        status = fail if missing_uuid[0] == entries[0] else warn
        return status(f"CUDA_VISIBLE_DEVICES names {missing_uuid[0]!r}, a GPU the text does not list",
                      detail=f"The GPUs shown have the UUIDs {', '.join(sorted(known))}; CUDA ends the list at the "
                      "first UUID that matches none.", evidence=ev, remedy=remedy)
    absent = [i for i in indices if i >= count]
    if not absent:
        return ok(f"CUDA_VISIBLE_DEVICES={raw!r} names GPUs that exist (the text shows {count})", evidence=ev)
    visible = indices[:indices.index(absent[0])]
    title = (f"CUDA_VISIBLE_DEVICES={raw!r} names GPU {absent[0]}, but the text shows {count} GPU(s) "
             f"(0–{count - 1})" if count > 1 else
             f"CUDA_VISIBLE_DEVICES={raw!r} names GPU {absent[0]}, but the text shows one GPU (index 0)")
    detail = (f"CUDA ends the list at the first index that does not exist, so {len(visible)} device(s) are visible"
              + (f": {symptom}." if symptom and not visible else "."))
    fix = Remediation("List only GPUs that exist (numbered from 0 as `nvidia-smi -L` shows them), or unset it.",
                      (remedies.env_set("CUDA_VISIBLE_DEVICES", ",".join(str(i) for i in indices if i < count) or "0",
                                        "the GPUs the value names that exist"), remedies.list_gpus()))
    return (fail if not visible else warn)(title, detail=detail, evidence=ev, remedy=fix)


def _intended(cvd: VisibleDevices, gpus: Sequence[views.Gpu]) -> str:
    """A well-formed CUDA_VISIBLE_DEVICES for what a malformed one names: the indices or UUIDs in it
    (typos and spaces dropped) that exist on this machine, in order; every GPU when none does."""
    raw = cvd.raw or ""
    indices = [g.index for g in gpus if g.index is not None]
    if cvd.kind in ("uuid", "mig"):
        known = {g.uuid for g in gpus if g.uuid}
        known |= {str(m) for g in gpus for m in (g.get("mig_devices") or ())}
        picked = [t for t in dict.fromkeys(t.strip() for t in raw.split(",")) if t in known]
    else:
        picked = [t for t in dict.fromkeys(re.findall(r"\d+", raw)) if int(t) in indices]
    return ",".join(picked or [str(i) for i in indices]) or "0"


# -- cuda-forward-compat -------------------------------------------------------------------------------------------
@check("cuda-forward-compat", "No unusable CUDA forward-compatibility libcuda is loaded", healthcheck=True,
       needs=("cuda.library_path",), owns=("cuda.init:804",))
def cuda_forward_compat(facts: Facts) -> CheckResult:
    path = facts.value("cuda.library_path")
    ev = evidence(facts, "cuda.library_path", "cuda.init", "cuda.driver_version", "nvml.cuda_driver_version",
                  "driver.kernel_module_version")
    if (compat := _image_compat_libcuda(facts)) is not None:
        kmod, user = compat
        ev.update(evidence(facts, "driver.userspace_version", "host.container"))
        return fail(f"The container's libcuda ({user}) is newer than the host's kernel module ({kmod})",
                    detail=f"Inside a container the host's own libcuda is the kernel module's release ({kmod}); a "
                           f"libcuda of release {user} comes from the image: its CUDA forward-compatibility package "
                           "(cuda-compat, /usr/local/cuda/compat), loaded because the host driver is older than the "
                           "image's CUDA needs. It works only on datacenter GPUs whose driver branch the compat "
                           "package supports; elsewhere CUDA finds no working device.", evidence=ev,
                    remedy=Remediation(
                        "Use an image built for a CUDA the host driver supports (nvidia-smi's 'CUDA Version' on the "
                        "host), or upgrade the host driver to one that supports the image's CUDA.",
                        ("nvidia-smi   # on the host: the CUDA version this driver supports",
                         "ls /usr/local/cuda/compat   # in the image: the forward-compatibility libcuda"),
                        (FORWARD_COMPAT,)))
    remedy = Remediation(
        "Forward compatibility (a newer libcuda from the cuda-compat package on an older driver) works only on "
        "datacenter GPUs. Elsewhere, upgrade the host driver to one that supports the image's CUDA, or use an "
        "image/wheel built for the host's CUDA, and take …/compat off the loader path.",
        ("echo $LD_LIBRARY_PATH | tr ':' '\\n' | grep compat   # remove these entries",
         remedies.then("grep -r compat /etc/ld.so.conf.d/", remedies.ldconfig()), "nvidia-smi   # 'CUDA Version' the host driver supports"),
        (FORWARD_COMPAT,))
    if cuda_code(facts) == 804:
        return fail("Forward-compatibility libcuda on a GPU that does not support it (CUDA error 804)",
                    detail=f"cuInit: \"forward compatibility was attempted on non supported HW\"; libcuda loaded from "
                    f"{path or 'an unknown path'}.", evidence=ev, remedy=remedy)
    if not path:
        return skip("libcuda.so.1 not loaded", detail=facts.get("cuda.library_path").describe(), evidence=ev)
    if "/compat/" in str(path):
        nvml_cuda = facts.value("nvml.cuda_driver_version")
        return ok("A forward-compatibility libcuda is in use and works", detail=f"{path} (driver API "
                  f"{facts.value('cuda.driver_version', '?')}; the installed driver alone supports {nvml_cuda or '?'}). "
                  "This is supported on datacenter GPUs only.", evidence=ev)
    return ok("libcuda.so.1 is the driver's own copy", detail=str(path), evidence=ev)
