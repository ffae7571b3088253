"""Parse the text of ``python -m torch.utils.collect_env`` (every torch release's classic
``Key: value`` layout, and vLLM's sectioned ``Key   : value`` variant) into Facts readings.

What collect_env prints is not always what its label says, and this module maps each field to
what it really is (see torch/utils/collect_env.py):

* "CUDA runtime version" is ``nvcc --version`` — the toolkit on PATH, never the runtime torch
  loads — so it becomes ``toolkit.nvcc_version``.
* "cuDNN version" is a file search (``ldconfig -p | grep libcudnn``, ``where cudnn*.dll``), not
  ``torch.backends.cudnn.version()``: it lists cuDNN copies on the system, which pip wheels do
  not use. It becomes ``libs.cudnn_copies``; ``torch.cudnn_version`` stays "not in report".
* "GPU models and configuration" and "Nvidia driver version" come from ``nvidia-smi``, i.e. NVML.
* ``None`` is printed as "Could not collect"; for "CUDA used to build PyTorch" that *is* the
  answer (``torch.version.cuda is None``: a CPU build), elsewhere it means the read failed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..lazyre import lazy_re
from ..model import Reading, Reason, missing, ok
from ._util import is_placeholder, to_bool, unread, version_in
from .signatures import scan_messages

SOURCE = "collect_env"

# Field labels as collect_env (and vLLM's copy of it) print them, lower-cased, spaces collapsed.
FIELDS = frozenset({
    "pytorch version", "is debug build", "cuda used to build pytorch", "rocm used to build pytorch",
    "os", "gcc version", "clang version", "cmake version", "libc version", "python version",
    "python platform", "is cuda available", "cuda runtime version", "cuda_module_loading set to",
    "gpu models and configuration", "nvidia driver version", "cudnn version", "is xpu available",
    "hip runtime version", "miopen runtime version", "is xnnpack available", "caching allocator config",
    "cpu", "versions of relevant libraries",
    # vLLM's collect_env adds these.
    "vllm version", "vllm build flags", "gpu topology", "rocm version", "neuron sdk version",
    "aphrodite version", "aphrodite build flags",
})
#: Fields whose presence identifies a collect_env paste (the rest also appear in other tools' output).
_MARKERS = ("pytorch version", "is cuda available", "cuda used to build pytorch", "is debug build",
            "gpu models and configuration", "cudnn version")

KEYS = (
    "host.os", "host.distro", "host.kernel", "host.arch", "host.glibc", "host.wsl",
    "python.version", "python.packages",
    "torch.version", "torch.debug", "torch.cuda_version", "torch.hip_version", "torch.cuda_available",
    "torch.cuda_available_messages", "torch.device_count", "torch.devices", "torch.arch_list",
    "torch.cudnn_version", "torch.cudnn_build_version", "torch.nccl_version", "torch.library_errors", "torch.loader_failures", "text.messages", "text.error_lines",
    "torch.companion_cuda", "container.cuda_requirement", "container.driver_requirement", "container.gpus_requested",
    "nvml.driver_version", "nvml.device_count", "nvml.gpus",
    "cuda.init", "cuda.driver_version", "driver.kernel_module_version", "driver.userspace_version",
    "toolkit.nvcc_version", "libs.cudnn_copies", "env.vars",
)

_KEY_CHARS_RE = lazy_re(r"[A-Za-z][A-Za-z0-9_ ]*")


def _key_value(line: str) -> tuple[str, str] | None:
    """``"Key  : value"`` split at the first colon, in linear time whatever the line holds."""
    idx = line.find(":")
    if idx <= 0:
        return None
    key = line[:idx].rstrip()
    if not key or not _KEY_CHARS_RE.fullmatch(key):
        return None
    return key, line[idx + 1:].strip()
# Hand-edited pastes sometimes lose the colon of the first line ("PyTorch version 1.5.0").
_TORCH_NO_COLON_RE = lazy_re(r"^(PyTorch version)\s+(\d\S*)$")
_PKG_RE = lazy_re(r"^\[(pip\d*|conda)\]\s+(.*)$")
_PIP_RE = lazy_re(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:==\s*(\S+)|\(\s*([^)\s]+)\s*\)|@\s*\S+)")
_CONDA_RE = lazy_re(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s+(\S+)")
_GPU_LINE_RE = lazy_re(r"^GPU\s+(\d+):\s*(.*\S)")
_ENV_RE = lazy_re(r"^([A-Z_][A-Z0-9_]*)=(.*)$")
_PLATFORM_RE = lazy_re(r"^Linux-(.+?)-(x86_64|aarch64|arm64|ppc64le|s390x|armv7l|i686)(?:-with-(?:glibc)?([\d.]+)?.*)?$")
_ARCH_RE = lazy_re(r"\((x86_64|aarch64|arm64|ppc64le|s390x|armv7l|i686|AMD64)\)\s*$")

def looks_like(lines: Sequence[str]) -> bool:
    """True when at least two collect_env field labels occur (one alone is too weak: "OS: …")."""
    seen: set[str] = set()
    for line in lines:
        if (kv := _key_value(line)) and (key := _norm_key(kv[0])) in _MARKERS:
            seen.add(key)
            if len(seen) >= 2 or key == "pytorch version":
                return True
    return False


def _norm_key(text: str) -> str:
    return " ".join(text.lower().split())


def _split(lines: Sequence[str]) -> tuple[dict[str, tuple[str, list[str]]], list[str], dict[str, str]]:
    """Fields (label -> first value, continuation lines), package lines, vLLM env variables."""
    fields: dict[str, tuple[str, list[str]]] = {}
    packages: list[str] = []
    env: dict[str, str] = {}
    current: str | None = None
    in_env = False
    for line in lines:
        if _PKG_RE.match(line):
            packages.append(line)
            continue
        m = _TORCH_NO_COLON_RE.match(line)
        kv = _key_value(line) or ((m.group(1), m.group(2)) if m else None)
        key = _norm_key(kv[0]) if kv else ""
        if kv and key in FIELDS:
            # The first occurrence wins: a paste holding two reports is judged by the first.
            if key not in fields:
                fields[key] = (kv[1].strip(), [])
                current = key
            else:
                current = None
            in_env = False
            continue
        if line.strip().lower() == "environment variables":
            in_env, current = True, None
            continue
        if in_env and (e := _ENV_RE.match(line.strip())):
            env[e.group(1)] = e.group(2)
            continue
        if current is not None and line.strip() and not set(line.strip()) <= {"="}:
            fields[current][1].append(line.strip())
    return fields, packages, env


def parse(lines: Sequence[str]) -> dict[str, Reading]:
    """Readings for every key in :data:`KEYS` this paste speaks about (the caller fills the rest)."""
    fields, package_lines, env = _split(lines)
    out: dict[str, Reading] = {}

    def value(label: str) -> str | None:
        found = fields.get(label)
        return found[0] if found is not None else None

    _torch(fields, out)
    _host(value("os"), value("python platform"), value("libc version"), value("python version"), out)
    if (py := value("python version")) is not None:
        ver = version_in(py) if not is_placeholder(py) else None
        out["python.version"] = ok(ver, SOURCE) if ver else unread(py, SOURCE, "Python version")
    packages = _packages(package_lines)
    if (vllm := value("vllm version")) and not is_placeholder(vllm) and "vllm" not in packages:
        if v := version_in(vllm):
            packages["vllm"] = vllm.split()[0] if vllm.split()[0][:1].isdigit() else v
    if packages or package_lines:
        out["python.packages"] = ok(packages, SOURCE)
    if (nvcc := value("cuda runtime version")) is not None:
        # collect_env labels `nvcc --version` "CUDA runtime version"; it is the toolkit on PATH,
        # which neither pip wheels nor conda builds of torch load at run time.
        ver = version_in(nvcc) if not is_placeholder(nvcc) else None
        out["toolkit.nvcc_version"] = ok(ver, SOURCE, "nvcc --version") if ver else unread(nvcc, SOURCE, "nvcc")
    _gpus(fields, out)
    _driver(value("nvidia driver version"), out)
    _cudnn(fields.get("cudnn version"), out)
    scan_messages(lines, out)
    if env:
        out["env.vars"] = ok(env, SOURCE)
    return out


def _torch(fields: dict[str, tuple[str, list[str]]], out: dict[str, Reading]) -> None:
    raw = fields.get("pytorch version", (None, []))[0]
    if raw is not None:
        if is_placeholder(raw):
            # collect_env prints N/A when `import torch` raised or torch is not installed.
            out["torch.version"] = missing(Reason.FAILED, SOURCE,
                                           f"collect_env could not import torch (PyTorch version: {raw})")
        else:
            out["torch.version"] = ok(raw.split()[0], SOURCE)
    torch_read = "torch.version" in out and out["torch.version"].ok
    if (dbg := fields.get("is debug build")) is not None and (b := to_bool(dbg[0])) is not None:
        out["torch.debug"] = ok(b, SOURCE)
    hip_raw = fields.get("rocm used to build pytorch", ("", []))[0]
    hip = None if is_placeholder(hip_raw) else hip_raw.split()[0] if hip_raw else None
    if "rocm used to build pytorch" in fields:
        out["torch.hip_version"] = ok(hip, SOURCE)
    if (cuda := fields.get("cuda used to build pytorch")) is not None:
        text = cuda[0]
        if not is_placeholder(text):
            ver = version_in(text)
            out["torch.cuda_version"] = ok(ver, SOURCE) if ver else unread(text, SOURCE, "CUDA used to build PyTorch")
        elif torch_read:
            # None is printed as "Could not collect" (or "None"): torch.version.cuda is None, i.e.
            # a CPU-only (or ROCm, "N/A") build. That is the answer, not a failed read.
            out["torch.cuda_version"] = ok(None, SOURCE, f"CUDA used to build PyTorch: {text}")
        else:
            out["torch.cuda_version"] = unread(text, SOURCE, "CUDA used to build PyTorch")
    if (avail := fields.get("is cuda available")) is not None:
        b = to_bool(avail[0])
        out["torch.cuda_available"] = ok(b, SOURCE) if b is not None else unread(avail[0], SOURCE, "CUDA available")
    out["torch.nccl_version"] = missing(Reason.NOT_IN_REPORT, SOURCE, "collect_env does not print torch's NCCL version")
    out["torch.cudnn_version"] = missing(
        Reason.NOT_IN_REPORT, SOURCE,
        "collect_env's 'cuDNN version' is a search for libcudnn files on the system, not the cuDNN torch "
        "loads; see libs.cudnn_copies")


def _host(os_text: str | None, platform: str | None, libc: str | None, python: str | None,
          out: dict[str, Reading]) -> None:
    name = None
    if platform and not is_placeholder(platform):
        head = platform.split("-", 1)[0]
        name = {"Linux": "Linux", "Windows": "Windows", "macOS": "Darwin", "Darwin": "Darwin"}.get(head)
    if name is None and os_text and not is_placeholder(os_text):
        low = os_text.lower()
        name = "Windows" if "windows" in low else "Darwin" if ("mac" in low or "darwin" in low) else "Linux"
    if name:
        out["host.os"] = ok(name, SOURCE)
    arch = None
    if os_text and not is_placeholder(os_text):
        if m := _ARCH_RE.search(os_text):
            arch = m.group(1)
        out["host.distro"] = ok(_ARCH_RE.sub("", os_text).strip(), SOURCE)
    elif os_text is not None:
        out["host.distro"] = unread(os_text, SOURCE, "OS")
    if platform and (m := _PLATFORM_RE.match(platform.strip())):
        out["host.kernel"] = ok(m.group(1), SOURCE)
        arch = arch or m.group(2)
        out["host.wsl"] = ok("microsoft" in m.group(1).lower(), SOURCE)
    if arch is None and python and "(AMD64)" in python:
        arch = "AMD64"
    if arch:
        out["host.arch"] = ok("x86_64" if arch == "AMD64" else arch, SOURCE)
    if libc is not None:
        if libc.lower().startswith("glibc") and (v := version_in(libc)):
            out["host.glibc"] = ok(v, SOURCE)
        elif libc.strip().lower() == "n/a":
            out["host.glibc"] = missing(Reason.UNSUPPORTED, SOURCE, "no glibc on this platform (Libc version: N/A)")
        else:
            out["host.glibc"] = unread(libc, SOURCE, "Libc version")


def normalize_name(name: str) -> str:
    """PEP 503 normalisation (``Torch_Vision`` -> ``torch-vision``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _packages(lines: Sequence[str]) -> dict[str, str]:
    pip: dict[str, str] = {}
    conda: dict[str, str] = {}
    for line in lines:
        m = _PKG_RE.match(line)
        if not m:
            continue
        tool, rest = m.group(1), m.group(2).strip()
        if rest.lower().startswith(("could not collect", "no relevant packages")):
            continue
        if tool == "conda":
            if c := _CONDA_RE.match(rest):
                name = normalize_name(c.group(1))
                # conda's "pytorch" package installs the distribution pip calls "torch".
                conda[{"pytorch": "torch"}.get(name, name)] = c.group(2)
        elif p := _PIP_RE.match(rest):
            version = p.group(2) or p.group(3)
            if version:
                pip[normalize_name(p.group(1))] = version
    # pip lists the interpreter that ran collect_env; conda may list another environment, so it
    # only fills names pip did not report.
    return {**conda, **pip}


def _gpus(fields: dict[str, tuple[str, list[str]]], out: dict[str, Reading]) -> None:
    found = fields.get("gpu models and configuration")
    if found is None:
        return
    first, more = found
    if is_placeholder(first) and not more:
        reading = unread(first, SOURCE, "GPU models")
        out["nvml.gpus"] = out["nvml.device_count"] = reading
        return
    gpus: list[dict[str, Any]] = []
    for line in ([first] if first else []) + more:
        if m := _GPU_LINE_RE.match(line):
            name = m.group(2)
            if name.endswith(")") and (cut := name.rfind("(UUID:")) > 0:
                name = name[:cut].rstrip()
            gpus.append({"index": int(m.group(1)), "name": name})
        elif not gpus and first and line == first and not is_placeholder(first):
            # On ROCm and macOS collect_env prints torch's device name without "GPU n:".
            gpus.append({"index": 0, "name": first})
    hip = out.get("torch.hip_version")
    if not (hip is not None and hip.ok and hip.value):
        out["nvml.gpus"] = ok(gpus, SOURCE, "nvidia-smi -L")
        out["nvml.device_count"] = ok(len(gpus), SOURCE, "nvidia-smi -L")
    avail = out.get("torch.cuda_available")
    if avail is not None and avail.ok:
        # torch sees what nvidia-smi lists when CUDA is available (unless CUDA_VISIBLE_DEVICES
        # filters, which collect_env does not show), and nothing when it is not.
        devices = [{"index": g["index"], "name": g["name"]} for g in gpus] if avail.value else []
        out["torch.devices"] = ok(devices, SOURCE, "device names from nvidia-smi -L")
        out["torch.device_count"] = ok(len(devices), SOURCE)


def _driver(text: str | None, out: dict[str, Reading]) -> None:
    if text is None:
        return
    version = version_in(text) if not is_placeholder(text) else None
    out["nvml.driver_version"] = ok(version, SOURCE) if version else unread(text, SOURCE, "Nvidia driver version")


_CUDNN_FILE_RE = lazy_re(r"(?:^|[\\/])(?:lib)?cudnn(?:64)?(?:_[a-z_]+?)?(?:64)?(?:\.so)?[._]([\d.]+?)(?:\.dll|\.dylib)?$")


def _cudnn(found: tuple[str, list[str]] | None, out: dict[str, Reading]) -> None:
    if found is None:
        return
    first, more = found
    paths = [p for p in ([first] + more) if p and not p.lower().startswith("probably one of the following")]
    paths = [p for p in paths if ("/" in p or "\\" in p or "cudnn" in p.lower())]
    if not paths:
        if first and not is_placeholder(first) and (v := version_in(first)):
            # Some reports print a bare number; keep it as a copy of unknown location.
            out["libs.cudnn_copies"] = ok([{"path": None, "version": v, "origin": "system"}], SOURCE)
        elif is_placeholder(first) and first.strip().lower() not in ("no cuda", "could not collect"):
            out["libs.cudnn_copies"] = ok([], SOURCE)
        else:
            out["libs.cudnn_copies"] = unread(first, SOURCE, "cuDNN version")
        return
    # One entry per (directory, version): the search lists every sub-library of a copy.
    copies: dict[tuple[str, str | None], dict[str, Any]] = {}
    for path in paths:
        name = re.split(r"[\\/]", path)[-1]
        folder = path[: len(path) - len(name)]
        m = _CUDNN_FILE_RE.search(path)
        version = m.group(1).strip(".") if m else None
        key = (folder, version)
        main = bool(re.match(r"^(lib)?cudnn(64_\d|\.so|\.\d)", name))
        if key not in copies or main:
            copies[key] = {"path": path, "version": version, "origin": "system"}
    out["libs.cudnn_copies"] = ok(list(copies.values()), SOURCE,
                                  "files found by collect_env's cuDNN search (ldconfig / CUDA_PATH)")


__all__ = ["FIELDS", "KEYS", "SOURCE", "looks_like", "normalize_name", "parse"]
