"""Evidence from the lines system tools, launchers and libraries print, read by the line-signature
table (:data:`envdoctor.parsers.signatures.LINE_SIGNATURES`): each matcher here finds one stable
sentence and each writer records what it says in the scan's ``evidence`` map; :func:`write` turns
that into facts. Nothing here decides anything: the checks in ``checks/evidence.py`` judge.

The sentences and where they come from (their fixed words are matched, never one thread's text):

* DataLoader workers losing their shared memory — torch/utils/data/_utils/signal_handling.py /
  worker.py: "ERROR: Unexpected bus error encountered in worker. This might be caused by
  insufficient shared memory (shm)", "DataLoader worker (pid N) is killed by signal: Bus error",
  and torch's storage sharing: "unable to write to file </torch_…>", "unable to open shared memory
  object </torch_…>".
* NCCL's bootstrap: "Bootstrap : no socket interface found" (src/bootstrap.cc), "NCCL_SOCKET_IFNAME
  set by environment to X" (src/misc/socket.cc), ncclSocketInit's "is neither AF_INET(2) nor AF_INET6(10)",
  socketStartConnect's "Connect to <addr> failed : No route to host" (the interface NCCL picked has no
  route to the peer).
* The kernel (dmesg, journalctl): "NVRM: Xid (PCI:0000:02:00): 79, …" and "… has fallen off the bus",
  written as ``driver.xid_events`` exactly as the kernel-log probe writes them (the gpu-xid check judges).
* The fabric manager (systemctl, journalctl): "Job for nvidia-fabricmanager.service failed", "Active: failed",
  its own "fabric manager NVIDIA GPU driver interface version X don't match with driver version Y" and, on a
  system without NVSwitch, "… NVSwitch … Nothing to do [NV_WARN_NOTHING_TO_DO]".
* Launch lines: ``torchrun`` / ``python -m torch.distributed.launch|run`` with ``--nproc_per_node``
  (or ``--nproc-per-node``), an optional ``CUDA_VISIBLE_DEVICES=…`` prefix; CUDA's "invalid device ordinal".
* torch.utils.cpp_extension: "CUDA_HOME environment variable is not set"; the shell's "nvcc: not found"; a
  build script's "nvcc was not found"; cpp_extension's "The detected CUDA version (X) mismatches the version
  that was used to compile PyTorch (Y)" (its wording in :mod:`envdoctor.knowledge.messages`).
* The Docker daemon: 'could not select device driver "" with capabilities: [[gpu]]' (its wording in
  :mod:`envdoctor.knowledge.messages`).
* Windows loaders: "Could not locate cudnn_ops_infer64_8.dll", "Could not load library X.dll",
  torch's "Error loading \"…\\X.dll\" or one of its dependencies".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from envdoctor.knowledge.messages import NOT_COMPILED, docker_no_gpu_driver, toolkit_mismatch

from ..lazyre import lazy_re
from ..model import Reading, ok
from . import listings
from .containers import RUNTIME_HOOK

SOURCE = "pasted text"
KEYS = ("torch.shm_errors", "nccl.socket_errors", "nccl.socket_ifname", "driver.xid_events", "launch.nproc_per_node",
        "launch.visible_devices", "launch.command", "cuda.invalid_device_ordinal", "toolkit.build_errors",
        "libs.missing_dlls", "driver.fabricmanager_service", "driver.fabricmanager_mismatch",
        "driver.nvswitch_present", "nccl.wheel_versions", "host.kernel", "host.wsl", "pci.acs_enabled",
        "torch.cuda_version", "toolkit.nvcc_version", "driver.kernel_module_version", "host.shm_size", "host.os",
        "pci.nvidia_devices",
        "toolkit.mismatch_error", "container.no_gpu_driver", "container.runtime_library_error", "host.windows_build",
        "text.wsl_named", "launch.slurm_gpus_per_task", *listings.KEYS)

# -- matchers ---------------------------------------------------------------------------------------
_SHM_RE = lazy_re(r"insufficient shared memory \(shm\)|DataLoader worker \(pid\s*\d*\) is killed by signal: Bus error"
                     r"|unable to (?:write to file|open shared memory object|mmap \d+ bytes from file) </?torch"
                     r"|unable to open shared memory object </torch", re.IGNORECASE)
_NCCL_NO_IFACE_RE = lazy_re(r"Bootstrap\s*:\s*no socket interface found|no NCCL_SOCKET_IFNAME interface found"
                               r"|ncclSocketInit: connecting to address\s+with family \d+ is neither AF_INET"
                               r"|Socket creation failed\s*:\s*Address family not supported"
                               r"|socketStartConnect: Connect to \S+ failed\s*:\s*(?:No route to host|Network is unreachable)")
_IFNAME_RE = lazy_re(r"NCCL_SOCKET_IFNAME(?: set by environment to|\s*[=:])\s*([=^]?[\w.,^=-]+)")
_FALLEN_RE = lazy_re(r"(?:GPU at (?:PCI:)?([0-9a-fA-F:.]+) )?has\s+[\"'“]?fallen off (?:of )?the bus|^\s*(?:\S*NVRM:\s*)?fallen off (?:of )?the bus",
                        re.IGNORECASE)
_LAUNCH_RE = lazy_re(r"(?:^|\s|/)(?:torchrun|torch\.distributed\.(?:launch|run))\b")
_NPROC_RE = lazy_re(r"--nproc[_-]per[_-]node(?:=|\s+)(\d+)")
_VISIBLE_RE = lazy_re(r"CUDA_VISIBLE_DEVICES=([\"']?)([\d,\s]*)\1(?:\s|$)")
_ORDINAL_RE = lazy_re(r"invalid device ordinal", re.IGNORECASE)
_TOOLKIT_RE = lazy_re(r"CUDA_HOME environment variable is not set|\bnvcc: (?:command )?not found|\bnvcc was not found"
                         r"|\bnvcc\b.{0,20}No such file or directory|No such file or directory: '[^']{0,200}/nvcc'"
                         r"|could not find nvcc", re.IGNORECASE)
_DLL_RE = lazy_re(r"Could not (?:locate|load library)\s+([\w.-]+?\.dll)|Error loading\s+\"?([^\"]{0,300}?\.dll)\"",
                     re.IGNORECASE)


# systemd about the fabric manager: "Job for nvidia-fabricmanager.service failed", "Unit
# nvidia-fabricmanager.service could not be found.", and `systemctl status`'s "Active: failed (…)" /
# "Active: inactive (dead)" under the unit's "● nvidia-fabricmanager.service - …" header.
_FM_UNIT = "nvidia-fabricmanager"
_FM_LINE_RE = lazy_re(r"nvidia-fabricmanager(?:\.service)?\b.{0,40}?\b(failed|could not be found|not found|is masked|"
                         r"inactive)", re.IGNORECASE)
_ACTIVE_RE = lazy_re(r"^\s*Active:\s*(active|inactive|failed|activating|deactivating)\b")


# The fabric manager's own log (journalctl -u nvidia-fabricmanager, its start script): it refuses a driver of
# another version ("fabric manager NVIDIA GPU driver interface version 530.30.02 don't match with driver version
# 530.41.03", later "doesn't match"), and exits when the system has no NVSwitch to manage ("request to query
# NVSwitch device information from NVSwitch driver failed with error:WARNING Nothing to do
# [NV_WARN_NOTHING_TO_DO]": GPUs joined by an NVLink bridge, or none, need no fabric manager).
_FM_VERSION_RE = lazy_re(r"fabric manager NVIDIA GPU driver interface version\s+(\d+(?:\.\d+)+)\s+do\w*'?t\s+match"
                            r"\s+with\s+(?:the\s+)?driver version\s+(\d+(?:\.\d+)+)", re.IGNORECASE)


def _fabricmanager_log(text: str) -> tuple[str, Any] | None:
    if "NV_WARN_NOTHING_TO_DO" in text and "NVSwitch" in text:
        return "driver.nvswitch_present", False
    if "interface version" in text and (m := _FM_VERSION_RE.search(text)):
        return "driver.fabricmanager_mismatch", {"fabricmanager": m.group(1), "driver": m.group(2)}
    return None


def _write_fabricmanager_log(scan: Any, _text: str, found: tuple[str, Any]) -> None:
    scan.evidence.setdefault(found[0], found[1])


# An NCCL wheel's row in `pip freeze` ("nvidia-nccl-cu12==2.20.5"), `pip list` ("nvidia-nccl-cu12  2.20.5") or
# collect_env ("[pip3] nvidia-nccl-cu12==2.20.5"); every version a text lists is kept, so the listings of several
# nodes pasted together show whether they run one NCCL.
_NCCL_WHEEL_RE = lazy_re(r"^\s*(?:\[(?:pip3?|conda)\]\s*)?(nvidia-nccl-cu\d+)(?:\s*==\s*|\s+)(\d+\.\d+\.\d+)\b")


def _nccl_wheel(text: str) -> tuple[str, str] | None:
    m = _NCCL_WHEEL_RE.match(text) if "nvidia-nccl-cu" in text else None
    return (m.group(1), m.group(2)) if m else None


def _write_nccl_wheel(scan: Any, _text: str, found: tuple[str, str]) -> None:
    listed = scan.evidence.setdefault("nccl.wheel_versions", {}).setdefault(found[0], [])
    if found[1] not in listed:
        listed.append(found[1])


def _fabricmanager(text: str) -> str | None:
    if _FM_UNIT in text:
        m = _FM_LINE_RE.search(text)
        return {"could not be found": "not-found", "not found": "not-found", "is masked": "masked"}.get(
            m.group(1).lower(), m.group(1).lower()) if m else "unit"
    m = _ACTIVE_RE.match(text) if "Active:" in text else None
    return f"active:{m.group(1)}" if m else None


def _write_fabricmanager(scan: Any, _text: str, state: str) -> None:
    if state == "unit":
        scan.evidence["_fm_unit"] = True  # the next "Active:" line is this unit's
    elif state.startswith("active:"):
        if scan.evidence.pop("_fm_unit", False):
            scan.evidence.setdefault("driver.fabricmanager_service", state.split(":", 1)[1])
    else:
        scan.evidence.setdefault("driver.fabricmanager_service", state)


# A WSL kernel release wherever it is printed (uname -r, Python's platform string, dkms): WSL 1 reports
# "4.4.0-<Windows build>-Microsoft", WSL 2 "<x.y.z>-microsoft-standard[-WSL2]".
_WSL_KERNEL_RE = lazy_re(r"\b(\d+\.\d+\.\d+(?:[.-]\d+)*-(?:Microsoft|microsoft-standard(?:-WSL2)?))(?![\w-]*-WSL2)")


def _wsl_kernel(text: str) -> str | None:
    if "icrosoft" not in text:
        return None
    m = _WSL_KERNEL_RE.search(text)
    return m.group(1) if m else None


def _write_kernel(scan: Any, _text: str, kernel: str) -> None:
    scan.evidence.setdefault("host.kernel", kernel)


# Windows' `ver` ("Microsoft Windows [Version 10.0.17763.292]"), as WSL's issue template asks for it ("Windows build
# number: 10.0.19045.2965"): the build number, which says which WSL the machine can run.
_WINVER_RE = lazy_re(r"(?:Microsoft Windows \[Version|Windows build(?: number)?\s*:)\s*(?:Microsoft Windows \[Version\s*)?"
                     r"10\.0\.(\d{5})\b")
# The reporter naming WSL: "Ubuntu app WSL", "in WSL2", "Windows Subsystem for Linux".
_WSL_WORD_RE = lazy_re(r"(?<![\w/.-])WSL ?[12]?(?![\w/.-])|Windows Subsystem for Linux")


# Slurm's per-task GPU request, in a batch script's directive or on an srun/sbatch line: "#SBATCH --gpus-per-task=1",
# "srun --gpus-per-task 1 …". It binds each task to its own GPUs (sbatch(1): it implies --gpu-bind=per_task).
_GPUS_PER_TASK_RE = lazy_re(r"^\s*(?:#SBATCH\b.*?|(?:\S*[$#>]\s*)?(?:srun|sbatch|salloc)\b.*?)--gpus-per-task[=\s]+(\d{1,3})\b")


def _gpus_per_task(text: str) -> str | None:
    if "--gpus-per-task" not in text:
        return None
    m = _GPUS_PER_TASK_RE.match(text)
    return text.strip()[:200] if m else None


def _write_gpus_per_task(scan: Any, _text: str, line: str) -> None:
    scan.evidence.setdefault("launch.slurm_gpus_per_task", line)


def _winver(text: str) -> int | None:
    if "Windows" not in text:
        return None
    m = _WINVER_RE.search(text)
    return int(m.group(1)) if m else None


def _write_winver(scan: Any, _text: str, build: int) -> None:
    scan.evidence.setdefault("host.windows_build", build)


def _wsl_named(text: str) -> str | None:
    if "WSL" not in text and "Subsystem for Linux" not in text:
        return None
    return text.strip()[:160] if _WSL_WORD_RE.search(text) else None


def _write_wsl_named(scan: Any, _text: str, line: str) -> None:
    scan.evidence.setdefault("text.wsl_named", line)


# `lspci -vvv`'s ACS control of a PCIe bridge: "ACSCtl: SrcValid+ TransBlk- ReqRedir- …". With ACS on, GPU
# peer-to-peer traffic is redirected through the IOMMU/root complex and NCCL's P2P hangs or crawls
# (NCCL's troubleshooting guide, "PCI Access Control Services").
_ACS_RE = lazy_re(r"ACSCtl:\s*SrcValid\+")

# An NVIDIA display/3D controller with its PCI id, as `lspci -nn` prints it ("01:00.0 VGA compatible controller
# [0300]: NVIDIA Corporation GP102 [GeForce GTX 1080 Ti] [10de:1b06] (rev a1)") and as the kernel logs the bus scan
# (dmesg: "pci 0000:01:00.0: [10de:1b06] type 00 class 0x030000"); only class 03 (display), never the GPU's audio.
_LSPCI_NN_RE = lazy_re(r"(?:^|\s)(?:[0-9a-f]{4}:)?([0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f])\s+(?:VGA compatible|3D|Display) "
                       r"controller(?:\s*\[03[0-9a-f]{2}\])?:\s*NVIDIA Corporation\s+(.{0,120}?)\s*\[10de:([0-9a-f]{4})\]",
                       re.IGNORECASE)
_KERNEL_PCI_RE = lazy_re(r"\bpci (?:[0-9a-f]{4}:)?([0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]): \[10de:([0-9a-f]{4})\] type \S+ "
                         r"class 0x03", re.IGNORECASE)


def _pci_device(text: str) -> dict[str, Any] | None:
    if "10de:" not in text and "10DE:" not in text:
        return None
    if m := _LSPCI_NN_RE.search(text):
        return {"address": m.group(1).lower(), "device": m.group(3).lower(), "name": m.group(2).strip() or None}
    if m := _KERNEL_PCI_RE.search(text):
        return {"address": m.group(1).lower(), "device": m.group(2).lower(), "name": None}
    return None


def _write_pci_device(scan: Any, _text: str, found: dict[str, Any]) -> None:
    seen = scan.evidence.setdefault("pci.nvidia_devices", [])
    for old in seen:
        if old["address"] == found["address"] and old["device"] == found["device"]:
            old["name"] = old["name"] or found["name"]
            return
    seen.append(found)


def _acs(text: str) -> bool:
    return "ACSCtl" in text and bool(_ACS_RE.search(text))


def _write_acs(scan: Any, _text: str, _found: bool) -> None:
    scan.evidence["pci.acs_enabled"] = scan.evidence.get("pci.acs_enabled", 0) + 1


#: torch's own words when CUDA is asked of a CPU-only build (torch/cuda/__init__.py, _lazy_init).


def _not_compiled(text: str) -> str | None:
    return text.strip()[:200] if NOT_COMPILED in text else None


def _write_not_compiled(scan: Any, _text: str, line: str) -> None:
    scan.evidence.setdefault("_not_compiled", line)


# System tools whose output is one fact each:
# `nvcc --version`:               "Cuda compilation tools, release 11.0, V11.0.221"
# `cat /proc/driver/nvidia/version`: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 …"
#                                  (the open module: "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.…")
# `df -h /dev/shm`:               "shm   64M  0  64M  0% /dev/shm" (also "tmpfs … /dev/shm")
_NVCC_RE = lazy_re(r"Cuda compilation tools, release \d+\.\d+, V(\d+\.\d+\.\d+)")
_NVRM_RE = lazy_re(r"NVRM version: NVIDIA UNIX (?:Open )?(?:\w+ )*?Kernel Module(?: for \w+)?\s+(\d+\.\d+(?:\.\d+)?)\b")
_DF_SHM_RE = lazy_re(r"^\S+\s+(\d+(?:\.\d+)?)([KMGT]i?)\s+\S+\s+\S+\s+\d+%\s+/dev/shm\s*$")
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _tool_fact(text: str) -> tuple[str, Any] | None:
    if "Cuda compilation tools" in text and (m := _NVCC_RE.search(text)):
        return "toolkit.nvcc_version", m.group(1)
    if "NVRM version" in text and (m := _NVRM_RE.search(text)):
        return "driver.kernel_module_version", m.group(1)
    if text.endswith("/dev/shm") and (m := _DF_SHM_RE.match(text)):
        return "host.shm_size", int(float(m.group(1)) * _UNITS[m.group(2)[0]])
    return None


def _write_tool_fact(scan: Any, _text: str, found: tuple[str, Any]) -> None:
    scan.evidence.setdefault("tools", {}).setdefault(found[0], found[1])


# A Python traceback frame or a prompt on a drive letter ('File "C:\…\torch\__init__.py"', "PS J:\x>",
# "(.venv) D:\ComfyUI>") was printed on Windows.
_WINDOWS_PATH_RE = lazy_re(r'^(?:File "|PS |\([^)]*\) )?[A-Za-z]:\\[^"]*(?:"|>)')


def _windows(text: str) -> bool:
    return ":\\" in text and bool(_WINDOWS_PATH_RE.match(text))


def _write_windows(scan: Any, text: str, _found: bool) -> None:
    scan.evidence.setdefault("_windows", text.strip()[:120])


def _shm(text: str) -> str | None:
    return text.strip()[:200] if _SHM_RE.search(text) else None


def _nccl_no_iface(text: str) -> str | None:
    if not any(w in text for w in ("Bootstrap", "ncclSocketInit", "NCCL_SOCKET_IFNAME", "Socket creation failed",
                                   "socketStartConnect")):
        return None
    return text.strip()[:200] if _NCCL_NO_IFACE_RE.search(text) else None


def _ifname(text: str) -> re.Match[str] | None:
    return _IFNAME_RE.search(text) if "NCCL_SOCKET_IFNAME" in text else None


def _xid(text: str) -> list[dict[str, Any]] | None:
    """Xid events in the probe's own shape (probes/nvidia.py's parse_xid reads the same lines from dmesg);
    the kernel's "… has fallen off the bus" without its Xid line is the condition Xid 79 names."""
    if "NVRM" in text and "Xid" in text:
        from ..probes.nvidia import parse_xid  # the probes (host, subprocess) only for a paste quoting an Xid

        if events := parse_xid(text):
            return events
    if "fallen off" in text and (m := _FALLEN_RE.search(text)):
        return [{"pci": m.group(1), "code": 79, "text": "GPU has fallen off the bus.", "line": text.strip()[:400]}]
    return None


def _launch(text: str) -> dict[str, Any] | None:
    if "nproc" not in text or not _LAUNCH_RE.search(text):
        return None
    m = _NPROC_RE.search(text)
    if m is None:
        return None
    found: dict[str, Any] = {"nproc": int(m.group(1)), "command": text.strip()[:200]}
    if (v := _VISIBLE_RE.search(text)) is not None:
        found["visible"] = [d.strip() for d in v.group(2).split(",") if d.strip()]
    return found


def _ordinal(text: str) -> bool:
    return bool(_ORDINAL_RE.search(text)) if "ordinal" in text else False


def _toolkit(text: str) -> str | None:
    return text.strip()[:200] if ("CUDA_HOME" in text or "nvcc" in text) and _TOOLKIT_RE.search(text) else None


def _toolkit_mismatch(text: str) -> tuple[str, str, str] | None:
    found = toolkit_mismatch(text)
    return (text.strip()[:300], *found) if found else None


def _write_toolkit_mismatch(scan: Any, _text: str, found: tuple[str, str, str]) -> None:
    scan.evidence.setdefault("toolkit.mismatch_error", found)


def _no_gpu_driver(text: str) -> str | None:
    return text.strip()[:200] if docker_no_gpu_driver(text) else None


def _write_no_gpu_driver(scan: Any, _text: str, line: str) -> None:
    scan.evidence.setdefault("container.no_gpu_driver", line)


# nvidia-container-cli's "initialization error: load library failed: libnvidia-ml.so.1: cannot open shared object
# file: no such file or directory": the hook found no driver library on the host (a driver that is not installed,
# or a Docker, such as the snap's, whose hook cannot see the host's /usr/lib).
_HOOK_LIBRARY_RE = lazy_re(r"nvidia-container-cli:\s*initialization error:\s*load library failed:\s*"
                           r"(?P<lib>lib[\w.+-]{1,60}\.so[\d.]*)")


def _hook_library(text: str) -> str | None:
    if RUNTIME_HOOK not in text:
        return None
    m = _HOOK_LIBRARY_RE.search(text)
    return text[m.start():].strip()[:200] if m else None


def _write_hook_library(scan: Any, _text: str, line: str) -> None:
    scan.evidence.setdefault("container.runtime_library_error", line)


def _dll(text: str) -> list[str] | None:
    if ".dll" not in text.lower():
        return None
    names = [m.group(1) or m.group(2) for m in _DLL_RE.finditer(text)]
    return names or None


# -- writers ------------------------------------------------------------------------------------------
def _append(key: str) -> Callable[[Any, str, Any], None]:
    def write(scan: Any, _text: str, found: Any) -> None:
        values = scan.evidence.setdefault(key, [])
        for value in found if isinstance(found, list) else [found]:
            if value not in values and len(values) < 50:
                values.append(value)
    return write


def _write_ifname(scan: Any, _text: str, m: re.Match[str]) -> None:
    scan.evidence.setdefault("nccl.socket_ifname", m.group(1).strip())


def _write_launch(scan: Any, _text: str, found: dict[str, Any]) -> None:
    scan.evidence.setdefault("launch", found)


def _write_ordinal(scan: Any, text: str, _found: bool) -> None:
    scan.evidence.setdefault("cuda.invalid_device_ordinal", text.strip()[:200])


#: (name, matcher, writer) of each sentence, in the order the signature table tries them.
SIGNATURES: tuple[tuple[str, Callable[[str], Any], Callable[[Any, str, Any], None]], ...] = (
    ("dataloader-shm", _shm, _append("torch.shm_errors")),
    ("nccl-no-socket-interface", _nccl_no_iface, _append("nccl.socket_errors")),
    ("nccl-socket-ifname", _ifname, _write_ifname),
    ("kernel-xid", _xid, _append("driver.xid_events")),
    ("launch-command", _launch, _write_launch),
    ("invalid-device-ordinal", _ordinal, _write_ordinal),
    ("cuda-home-missing", _toolkit, _append("toolkit.build_errors")),
    ("toolkit-cuda-mismatch", _toolkit_mismatch, _write_toolkit_mismatch),
    ("windows-dll", _dll, _append("libs.missing_dlls")),
    ("docker-no-gpu-driver", _no_gpu_driver, _write_no_gpu_driver),
    ("container-hook-library", _hook_library, _write_hook_library),
    ("fabricmanager-service", _fabricmanager, _write_fabricmanager),
    ("fabricmanager-log", _fabricmanager_log, _write_fabricmanager_log),
    ("nccl-wheel", _nccl_wheel, _write_nccl_wheel),
    ("wsl-kernel", _wsl_kernel, _write_kernel),
    ("windows-build", _winver, _write_winver),
    ("slurm-gpus-per-task", _gpus_per_task, _write_gpus_per_task),
    ("wsl-named", _wsl_named, _write_wsl_named),
    ("pci-acs", _acs, _write_acs),
    ("pci-nvidia-device", _pci_device, _write_pci_device),
    ("torch-not-compiled-with-cuda", _not_compiled, _write_not_compiled),
    ("tool-output", _tool_fact, _write_tool_fact),
    ("windows-path", _windows, _write_windows),
    # ldd, ldconfig -p, LD_LIBRARY_PATH, lsmod and driver package listings (envdoctor/parsers/listings.py).
    *listings.SIGNATURES,
)


#: Lines longer than this are not joined with their neighbour (a log payload, not a wrapped sentence).
_WRAP_LINE = 300


def rewrapped(lines: list[str], found: dict[str, Any]) -> None:
    """The sentences a terminal, an issue form or a mail client wrapped onto two lines ("killed by
    signal: Bus" / "error."): every matcher whose fact no single line gave is run once more on each
    pair of adjacent short lines. Linear in the text. Also reads what a command printed on its next line
    (:func:`envdoctor.parsers.listings.follow`)."""
    listings.follow(lines, found)
    wanted = [(name, find, put) for name, find, put in SIGNATURES if name in _REWRAPPED and not _has(found, name)]
    if not wanted:
        return
    previous = ""
    seen: set[str] = set()
    for line in lines:
        line = unwrapped_line(line)
        if previous and line and len(previous) < _WRAP_LINE and len(line) < _WRAP_LINE:
            pair = f"{previous} {line}"
            if pair not in seen:
                seen.add(pair)
                for _name, find, put in wanted:
                    if hit := find(pair):
                        put(_Found(found), pair, hit)
        previous = line


# rich's logging handler (RichHandler, which kohya's scripts and many trainers use) prints the logging call's
# "file.py:NN" in a right-hand column of the message's first line, and wraps the message below it: the column is
# no part of the sentence.
_RICH_PATH_RE = lazy_re(r"\s{2,}[\w.-]{1,60}\.py:\d{1,6}$")


def unwrapped_line(line: str) -> str:
    """A line as part of a wrapped sentence: stripped, without rich's right-hand path column (looked for in the
    line's last 80 characters only: linear on any line)."""
    line = line.strip()
    tail = line[-80:]
    if ".py:" not in tail or (m := _RICH_PATH_RE.search(tail)) is None:
        return line
    return line[:len(line) - len(tail) + m.start()].rstrip()


# Signature name -> the scan key its writer fills.
_REWRAPPED = {"dataloader-shm": "torch.shm_errors", "nccl-no-socket-interface": "nccl.socket_errors",
              "cuda-home-missing": "toolkit.build_errors", "windows-dll": "libs.missing_dlls",
              "toolkit-cuda-mismatch": "toolkit.mismatch_error"}


def _has(found: dict[str, Any], name: str) -> bool:
    return bool(found.get(_REWRAPPED[name]))


class _Found:
    """The writers' view of a scan: they write into ``evidence``."""

    def __init__(self, evidence: dict[str, Any]) -> None:
        self.evidence = evidence


def _write_mismatch(found: dict[str, Any], out: dict[str, Reading]) -> None:
    """cpp_extension's refusal, and its two versions where nothing more specific gave them."""
    if not (mismatch := found.get("toolkit.mismatch_error")):
        return
    line, nvcc, cuda = mismatch
    out["toolkit.mismatch_error"] = ok(line, SOURCE, "torch.utils.cpp_extension's CUDA version check, as pasted")
    why = "from cpp_extension's \"The detected CUDA version … mismatches …\""
    if not (out.get("toolkit.nvcc_version") and out["toolkit.nvcc_version"].ok):
        out["toolkit.nvcc_version"] = ok(nvcc, SOURCE, why)
    if not (out.get("torch.cuda_version") and out["torch.cuda_version"].ok and out["torch.cuda_version"].value):
        out["torch.cuda_version"] = ok(cuda, SOURCE, why)


_AS_FOUND = {"nccl.wheel_versions": "the NCCL wheels' rows of the pasted package listings",
               "driver.fabricmanager_service": "systemd about nvidia-fabricmanager, as pasted",
               "driver.fabricmanager_mismatch": "the fabric manager's log, as pasted",
               "driver.nvswitch_present": "the fabric manager's log: NV_WARN_NOTHING_TO_DO (no NVSwitch to manage)"}


def _write_as_found(found: dict[str, Any], out: dict[str, Reading]) -> None:
    """The facts written as their signature found them (the NCCL wheels listed, the fabric manager)."""
    for key, why in _AS_FOUND.items():
        if key in found:
            out[key] = ok(found[key], SOURCE, why)


#: The facts written as a signature found them, each with where it came from.
_AS_FOUND_WHY = {
    "pci.nvidia_devices": "`lspci -nn` / kernel PCI lines pasted (NVIDIA display and 3D controllers with their PCI id)",
    "pci.acs_enabled": "lspci's ACSCtl lines with SrcValid+ (distinct lines; repeated identical lines count once)",
    "container.no_gpu_driver": "the Docker daemon's error, pasted",
    "host.windows_build": "Windows' version line (`ver`), pasted",
    "text.wsl_named": "the text names WSL",
    "container.runtime_library_error": "the NVIDIA container runtime hook's error, pasted",
    "cuda.invalid_device_ordinal": "CUDA's error, pasted",
    "launch.slurm_gpus_per_task": "Slurm's --gpus-per-task, as the text's batch script or command line sets it",
}


def write(found: dict[str, Any], out: dict[str, Reading]) -> None:
    """The facts of what the signatures found."""
    for key in ("torch.shm_errors", "nccl.socket_errors", "driver.xid_events", "toolkit.build_errors",
                "libs.missing_dlls"):
        if found.get(key):
            out[key] = ok(found[key], SOURCE, "lines pasted in the text")
    if "nccl.socket_ifname" in found:
        out["nccl.socket_ifname"] = ok(found["nccl.socket_ifname"], SOURCE, "NCCL_SOCKET_IFNAME as the text shows it")
    _write_as_found(found, out)
    if "host.kernel" in found and not (out.get("host.kernel") and out["host.kernel"].ok):
        out["host.kernel"] = ok(found["host.kernel"], SOURCE, "a WSL kernel release printed in the text")
        out.setdefault("host.wsl", ok(True, SOURCE, "the kernel release is WSL's"))
    if found.get("_not_compiled") and not (out.get("torch.cuda_version") and out["torch.cuda_version"].ok):
        # torch saying so is torch.version.cuda being None: the program asked a CPU-only build for CUDA.
        out["torch.cuda_version"] = ok(None, SOURCE, f"torch raised \"{NOT_COMPILED}\": {found['_not_compiled']!r}")
    if found.get("_windows") and not (out.get("host.os") and out["host.os"].ok):
        out["host.os"] = ok("Windows", SOURCE, f"a Windows path in the text: {found['_windows']!r}")
    for key, value in found.get("tools", {}).items():
        if not (out.get(key) and out[key].ok):
            out[key] = ok(value, SOURCE, {"toolkit.nvcc_version": "`nvcc --version` as pasted",
                                          "driver.kernel_module_version": "/proc/driver/nvidia/version as pasted",
                                          "host.shm_size": "`df -h /dev/shm` as pasted"}[key])
    _write_mismatch(found, out)
    for key, why in _AS_FOUND_WHY.items():
        if found.get(key):  # each is a non-empty line, list or count when a signature found it
            out[key] = ok(found[key], SOURCE, why)
    listings.write(found, out)
    if launch := found.get("launch"):
        out["launch.nproc_per_node"] = ok(launch["nproc"], SOURCE, f"from `{launch['command'][:120]}`")
        out["launch.command"] = ok(launch["command"], SOURCE)
        if "visible" in launch:
            out["launch.visible_devices"] = ok(launch["visible"], SOURCE, "the launch line's CUDA_VISIBLE_DEVICES")


__all__ = ["KEYS", "SIGNATURES", "SOURCE", "rewrapped", "unwrapped_line", "write"]
