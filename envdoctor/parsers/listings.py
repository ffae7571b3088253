"""Evidence from the listings system tools print, read line by line by the signature table
(:data:`envdoctor.parsers.evidence.SIGNATURES`): each matcher finds one stable line shape of a
tool's output and each writer records it in the scan's ``evidence`` map; :func:`write` turns that
into the facts the live probes write. Nothing here decides anything.

The shapes, each the tool's own fixed format (never one thread's wording):

* ``ldd FILE``: the command (``$ ldd …/libtorch_cuda.so``, with a prompt or an ``VAR=… `` prefix) or
  ldd's own ``FILE:`` header, then one row per dependency, ``libX.so.N => /path/libX.so.N (0x…)`` or
  ``libX.so.N => not found``. Written as ``libs.ldd`` entries in the libraries probe's shape.
* ``ldconfig -p``: ``libX.so.N (libc6,x86-64) => /path/libX.so.N``. Written as ``libs.ldconfig``
  (CUDA and driver sonames only).
* ``echo $LD_LIBRARY_PATH`` followed by the colon list it printed, or an ``LD_LIBRARY_PATH=…`` line of
  ``env`` / ``export`` / ``declare -x``. Written as ``libs.ld_library_path``.
* ``lsmod`` (whole, or through ``| grep PATTERN``): rows ``name size used [by]``. A grep that printed
  no row says the module is not loaded. Written as ``driver.modules``.
* Package listings of the NVIDIA driver: ``dpkg -l`` rows (``ii  nvidia-utils-550  550.54.15-0ubuntu1
  amd64 …``), ``rpm -qa`` names (``libnvidia-ml-575.64.03-1.el9.x86_64``), ``yum``/``dnf list``
  rows (``cuda-drivers.x86_64  384.81-1  @repo``) and ``apt list --installed`` rows
  (``nvidia-driver-550/jammy,now 550.107.02-0ubuntu1 amd64 [installed]``). Only packages whose
  version is a driver release (``NNN.NN[.NN]``) are kept. Written as ``driver.packages``.
"""

from __future__ import annotations

import os
import posixpath
import re
from typing import Any

from ..lazyre import lazy_re
from ..model import Reading, ok

SOURCE = "pasted text"
KEYS = ("libs.ldd", "libs.ldconfig", "libs.ld_library_path", "driver.modules", "driver.packages")

#: Kernel modules ``driver.modules`` reports (the driver probe's set).
MODULES = ("nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nvidia_peermem", "nouveau")
#: CUDA and driver libraries worth keeping from a loader listing.
_CUDA_LIB_RE = lazy_re(r"^lib(?:cuda|cudart|cublas|cublasLt|cudnn\w*|nccl|nvJitLink|nvrtc\w*|cusparse\w*|cufft\w*|"
                          r"curand|cusolver\w*|cupti|nvshmem\w*|cufile\w*|nvidia-ml|nvToolsExt)[.-]")

#: Listing rows are short; a longer line is a log payload, never read by these matchers (bounded cost).
_ROW_LIMIT = 1000

# -- ldd ----------------------------------------------------------------------------------------------
_LDD_CMD_RE = lazy_re(r"(?:^|[\s$#>%])ldd(?:\s+-\w+)*\s+([^\s|;&]+)")
_LDD_HEADER_RE = lazy_re(r"^(/\S+\.so[\w.\-]*):$")
_LDD_ROW_RE = lazy_re(r"^(\S+\.so[\w.\-]*)\s+=>\s+(?:(not found)|(\S+)\s+\(0x[0-9a-fA-F]+\))\s*$")


def _ldd(text: str) -> tuple[str, Any] | None:
    if len(text) > _ROW_LIMIT:
        return None
    if "=>" in text:
        m = _LDD_ROW_RE.match(text)
        return ("row", (m.group(1), None if m.group(2) else m.group(3))) if m else None
    if "ldd" in text and (m := _LDD_CMD_RE.search(text)):
        arg = m.group(1)
        return ("file", arg) if ("/" in arg or ".so" in arg) and not arg.startswith("$") else None
    if text.endswith(":") and (m := _LDD_HEADER_RE.match(text)):
        return "file", m.group(1)
    return None


def _role(path: str) -> str:
    """The libraries probe's ``role`` of a file ldd was run on; ``"nvidia-wheel"`` for a library of a pip
    CUDA wheel (``site-packages/nvidia/<dir>/lib``), ``"other"`` for anything else."""
    name = posixpath.basename(path)
    if name.startswith("libtorch_cuda"):
        return "libtorch_cuda"
    if "/torch/_C" in path or name.startswith("_C.cpython"):
        return "torch._C"
    if name.startswith("libcudart"):
        return "libcudart"
    if re.search(r"/(?:site|dist)-packages/nvidia/[^/]+/lib/", path):
        return "nvidia-wheel"
    return "other"


def _write_ldd(scan: Any, _text: str, found: tuple[str, Any]) -> None:
    entries = scan.evidence.setdefault("_ldd", [])
    kind, value = found
    if kind == "file":
        path = posixpath.normpath(value) if value.startswith("/") else value
        entries.append({"file": path, "role": _role(path), "resolved": {}, "not_found": []})
        return
    if not entries:  # rows without the command above them
        entries.append({"file": "(ldd output)", "role": "other", "resolved": {}, "not_found": []})
    soname, path = value
    entry = entries[-1]
    if path is None:
        if soname not in entry["not_found"]:
            entry["not_found"].append(soname)
    else:
        entry["resolved"].setdefault(soname, path)


# -- ldconfig -p --------------------------------------------------------------------------------------
_LDCONFIG_ROW_RE = lazy_re(r"^(lib\S+\.so[\w.\-]*)\s+\(([^)]*)\)\s+=>\s+(\S+)$")


def _ldconfig(text: str) -> tuple[str, str, str] | None:
    if "=>" not in text or "(" not in text:
        return None
    m = _LDCONFIG_ROW_RE.match(text)
    return (m.group(1), m.group(2), m.group(3)) if m and _CUDA_LIB_RE.match(m.group(1)) else None


def _write_ldconfig(scan: Any, _text: str, found: tuple[str, str, str]) -> None:
    soname, _abi, path = found
    paths = scan.evidence.setdefault("_ldconfig", {}).setdefault(soname, [])
    if path not in paths:
        paths.append(path)


# -- LD_LIBRARY_PATH ------------------------------------------------------------------------------------
_ECHO_RE = lazy_re(r"(?:^|[\s$#>%])echo\s+[\"']?\$\{?LD_LIBRARY_PATH\}?[\"']?\s*$")
_ASSIGN_RE = lazy_re(r"^(?:export\s+|declare\s+-x\s+|setenv\s+)?LD_LIBRARY_PATH[=\s]\"?([^\s\"]*)\"?\s*$")
_PATH_LIST_RE = lazy_re(r"^[^\s:]*(?::[^\s:]*)*$")


def _ld_library_path(text: str) -> str | None:
    """The value of an ``LD_LIBRARY_PATH=…`` line (``env``, ``export``, ``declare -x``); the ``echo``
    form is read by :func:`follow`, which sees the next line."""
    if "LD_LIBRARY_PATH" not in text:
        return None
    m = _ASSIGN_RE.match(text)
    return m.group(1) if m and "$" not in m.group(1) else None


def _write_ld_library_path(scan: Any, _text: str, value: str) -> None:
    scan.evidence.setdefault("_ld_library_path", value.split(":"))


def follow(lines: list[str], found: dict[str, Any]) -> None:
    """What a command printed on the next line: ``echo $LD_LIBRARY_PATH`` and its colon list."""
    if "_ld_library_path" in found:
        return
    for i, line in enumerate(lines):
        if "LD_LIBRARY_PATH" not in line or not _ECHO_RE.search(line.strip()):
            continue
        for following in lines[i + 1:i + 4]:
            text = following.strip()
            if not text or text.startswith("```"):
                continue
            if "/" in text and _PATH_LIST_RE.match(text):
                found["_ld_library_path"] = text.split(":")
                return
            break


# -- lsmod --------------------------------------------------------------------------------------------
_LSMOD_CMD_RE = lazy_re(r"(?:^|[\s$#>%])lsmod\b(?:\s*\|\s*(?:e?grep|rg)\s+(?:-\w+\s+)*[\"']?([^\"'|]*)[\"']?)?")
_LSMOD_ROW_RE = lazy_re(r"^([a-z][a-z0-9_]*)\s+(\d+)\s+(\d+|-)(?:\s+\S+)?\s*$")
_LSMOD_HEADER_RE = lazy_re(r"^Module\s+Size\s+Used by\s*$")


def _lsmod(text: str) -> tuple[str, str] | None:
    if "lsmod" in text and (m := _LSMOD_CMD_RE.search(text)):
        return "command", (m.group(1) or "").strip()
    if text.startswith("Module") and _LSMOD_HEADER_RE.match(text):
        return "command", ""
    m = _LSMOD_ROW_RE.match(text) if text.startswith(("nvidia", "nouveau")) else None
    return ("row", m.group(1)) if m and m.group(1) in MODULES else None


def _write_lsmod(scan: Any, _text: str, found: tuple[str, str]) -> None:
    blocks = scan.evidence.setdefault("_lsmod", [])
    kind, value = found
    if kind == "command":
        blocks.append({"filter": value, "rows": []})
    elif blocks:  # a row counts only under an lsmod command or header
        blocks[-1]["rows"].append(value)


def _modules(blocks: list[dict[str, Any]]) -> dict[str, bool] | None:
    """Which of :data:`MODULES` the listings show loaded; a module the listing would have shown (a
    whole lsmod, or a grep whose pattern it matches) and did not is not loaded."""
    seen: dict[str, bool] = {}
    for block in blocks:
        pattern = block["filter"].replace("\\|", "|")
        words = [w.strip() for w in re.split(r"[|,]", pattern) if w.strip().strip("^$")]
        for name in MODULES:
            if name in block["rows"]:
                seen[name] = True
            elif not words or any(w.strip("^$").lower() in name for w in words):
                seen.setdefault(name, False)
    return seen or None


# -- package listings ------------------------------------------------------------------------------------
_DRIVER_VERSION_RE = lazy_re(r"^(?:\d+:)?(\d{3}\.\d{2,3}(?:\.\d{2,3})?)(?=$|[-+~._a-z])")
_ARCH = r"(?:x86_64|i686|noarch|aarch64|ppc64le)"
_DPKG_ROW_RE = lazy_re(r"^([a-zA-Z]{2,3})\s+([a-z0-9][a-z0-9+.\-]*)(?::[a-z0-9]+)?\s+(\S+)\s+"
                          r"(?:amd64|arm64|i386|all|ppc64el|armhf)\b")
_RPM_RE = lazy_re(rf"^([A-Za-z0-9_+.\-]+?)-((?:\d+:)?\d{{3}}\.\d{{2,3}}(?:\.\d{{2,3}})?)-([^-\s]+)\.{_ARCH}$")
_YUM_RE = lazy_re(rf"^([A-Za-z0-9_+.\-]+)\.{_ARCH}\s+(\S+)\s+\S+\s*$")
_APT_RE = lazy_re(r"^([a-z0-9][a-z0-9+.\-]*)/\S+\s+(\S+)\s+\S+\s+\[installed")
_DRIVER_NAME_RE = lazy_re(r"nvidia|^cuda-drivers|^libcuda1")
_NOT_DRIVER_RE = lazy_re(r"container|docker|pcp-pmda|nvidia-cuda-|nvidia-visual-profiler|nsight|nvidia-prime|"
                            r"nvidia-settings|nvidia-xconfig|libxnvctrl", re.IGNORECASE)
_KERNEL_RE = lazy_re(r"^(?:a?kmod-nvidia|dkms-nvidia|nvidia-dkms|nvidia-kernel-|nvidia-kmod|kmod-nvidia)")


def _package(text: str) -> dict[str, str] | None:
    # Package names are lower case in every listing; the cheap test first (every line of a paste comes here).
    if len(text) > _ROW_LIMIT or not ("nvidia" in text or "cuda-drivers" in text or "libcuda1" in text):
        return None
    found = None
    if (m := _DPKG_ROW_RE.match(text)) is not None:
        found = {"name": m.group(2), "version": m.group(3), "state": m.group(1), "manager": "dpkg"}
    elif (m := _RPM_RE.match(text)) is not None:
        found = {"name": m.group(1), "version": f"{m.group(2)}-{m.group(3)}", "state": "installed", "manager": "rpm"}
    elif (m := _YUM_RE.match(text)) is not None:
        found = {"name": m.group(1), "version": m.group(2), "state": "installed", "manager": "yum"}
    elif (m := _APT_RE.match(text)) is not None:
        found = {"name": m.group(1), "version": m.group(2), "state": "installed", "manager": "apt"}
    if found is None or not _DRIVER_NAME_RE.search(found["name"]) or _NOT_DRIVER_RE.search(found["name"]):
        return None
    release = _DRIVER_VERSION_RE.match(found["version"])
    if release is None:
        return None
    found["driver"] = release.group(1)
    found["kind"] = "kernel" if _KERNEL_RE.match(found["name"]) else "userspace"
    return found


def _write_package(scan: Any, _text: str, found: dict[str, str]) -> None:
    packages = scan.evidence.setdefault("_packages", [])
    if found not in packages and len(packages) < 200:
        packages.append(found)


#: (name, matcher, writer) of each listing line, in the order the signature table tries them.
SIGNATURES = (
    ("ldd", _ldd, _write_ldd),
    ("ldconfig", _ldconfig, _write_ldconfig),
    ("ld-library-path", _ld_library_path, _write_ld_library_path),
    ("lsmod", _lsmod, _write_lsmod),
    ("driver-package", _package, _write_package),
)


def write(found: dict[str, Any], out: dict[str, Reading]) -> None:
    """The facts of the listings the signatures found (a live reading of the same key wins)."""
    def put(key: str, value: Any, why: str) -> None:
        if not (out.get(key) and out[key].ok):
            out[key] = ok(value, SOURCE, why)

    ldd = [e for e in found.get("_ldd", ()) if e["resolved"] or e["not_found"]]
    if ldd:
        put("libs.ldd", ldd, "ldd output as pasted")
    if found.get("_ldconfig"):
        put("libs.ldconfig", found["_ldconfig"], "`ldconfig -p` lines as pasted (CUDA and driver libraries)")
    if "_ld_library_path" in found:
        put("libs.ld_library_path", found["_ld_library_path"], "LD_LIBRARY_PATH as the text shows it")
    if found.get("_lsmod") and (modules := _modules(found["_lsmod"])):
        put("driver.modules", modules, "lsmod output as pasted (a module a grep would have shown and did not "
            "is not loaded)")
    if found.get("_packages"):
        put("driver.packages", found["_packages"], "NVIDIA driver packages in the pasted package listing")


def wheel_dirs(ldd: list[dict[str, Any]]) -> list[str]:
    """The ``site-packages/nvidia/*/lib`` folders a pasted ldd names (its files' own folders)."""
    dirs = []
    for entry in ldd:
        folder = os.path.dirname(str(entry.get("file") or ""))
        if entry.get("role") == "nvidia-wheel" and folder not in dirs:
            dirs.append(folder)
    return dirs


__all__ = ["KEYS", "MODULES", "SIGNATURES", "SOURCE", "follow", "wheel_dirs", "write"]
