"""Probe the CUDA user-space libraries on disk: every copy of libcudart, libcudnn, libnccl (and
libcublas, for conflict detection), their versions, what the dynamic loader picks for each soname,
what ``ldd`` resolves for libcudart and torch's CUDA libraries, and the CUDA toolkit (nvcc).

Only named places are searched, in the order the loader would use them where that order exists:
``LD_LIBRARY_PATH`` entries, the loader cache (``ldconfig -p``), ``CUDA_HOME``/``CUDA_PATH``,
``/usr/local/cuda*``, pip wheels (``site-packages/nvidia/*/lib`` of the target interpreter), the
conda prefix and ``torch/lib``. Versions come from the library's own API through ctypes in a child
process (``child/lib_probe.py``), else from the wheel's dist-info, the file name, or the headers.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from envdoctor.knowledge import compat, versions
from envdoctor.process.host import ChildResult, CommandResult, Host

from ..model import Reading, Reason, missing, ok
from .spec import Options, ProbeSpec

SOURCE_CHILD = "child:lib_probe"

#: Library families this probe inventories (its ``libs.<family>_copies`` facts).
INVENTORIED = ("cudart", "cudnn", "nccl", "cublas")
COPY_KEYS = {family: f"libs.{family}_copies" for family in INVENTORIED}

_V = TypeVar("_V")


class _FromCompat(Mapping[str, _V]):
    """A table built from compat.json on first use, so importing the probe never loads it."""

    def __init__(self, build: Callable[[], dict[str, _V]]) -> None:
        self._build = build
        self._table: dict[str, _V] | None = None

    def _get(self) -> dict[str, _V]:
        if self._table is None:
            self._table = self._build()
        return self._table

    def __getitem__(self, key: str) -> _V:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


def _main_library(family: str) -> compat.CudaLibrary:
    lib = compat.family_library(family)
    assert lib is not None and lib.wheel, f"compat.json's cuda_libraries has no wheel row for {family}"
    return lib


#: The main library of each family by file name (compat.json's cuda_libraries), not libcublasLt or
#: cuDNN's sub-libraries; ``-[0-9a-f]{8}`` covers auditwheel's hashed copies that older torch wheels
#: bundled in torch/lib (``libcudart-a7b20f20.so.11.0``).
FAMILIES: Mapping[str, re.Pattern[str]] = _FromCompat(lambda: {
    family: re.compile(rf"^{re.escape(_main_library(family).prefix)}(-[0-9a-f]{{8}})?\.so(\.\d+)*$")
    for family in INVENTORIED})

#: pip distribution stem per family (``nvidia_cuda_runtime_cu12-12.4.127.dist-info``; CUDA 13
#: wheels dropped the suffix for toolkit parts: ``nvidia_cuda_runtime-13.0.96.dist-info``).
WHEEL_DIST: Mapping[str, str] = _FromCompat(lambda: {
    family: compat.wheel_dist_stem(str(_main_library(family).wheel)).removeprefix("nvidia_")
    for family in INVENTORIED})

#: Version macros in the headers that ship next to a library (toolkit ``include/``, wheel ``include/``).
HEADERS = {
    "cudart": ("cuda_runtime_api.h", ("CUDART_VERSION",)),
    "cudnn": ("cudnn_version.h", ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL")),
    "nccl": ("nccl.h", ("NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH")),
}

KEYS = (
    *COPY_KEYS.values(),
    "libs.loader_choice", "libs.ldd", "libs.ld_library_path", "libs.ldconfig", "libs.search_dirs",
    "libs.wheel_dirs", "libs.torch_requires",
    "toolkit.cuda_home", "toolkit.nvcc_path", "toolkit.nvcc_version",
)

# The child loads files until one kills it; each crash or hang costs one retry.
_MAX_CHILDREN = 4
_MAX_LOADS = 24
_MAX_LDD = 14
# Compiled CUDA extensions of other packages (site-packages-relative folder / file pattern): a
# wheel built for another CUDA major or torch release fails to resolve its libraries here.
_EXTENSIONS = (
    ("torchvision", r"_C\.so", "torchvision"),
    ("torchaudio/lib", r"libtorchaudio\.so", "torchaudio"),
    ("xformers", r"_C\.so", "xformers"),
    ("", r"flash_attn_2_cuda\.cpython.*\.so", "flash-attn"),
    ("vllm", r"_C\.abi3\.so", "vllm"),
    ("bitsandbytes", r"libbitsandbytes_cuda\d+\.so", "bitsandbytes"),
)
_LDD_LINE = re.compile(r"^(\S+)\s+=>\s+(.*?)\s*(\(0x[0-9a-fA-F]+\))?$")


#: The version codec of each family's API integer (``cudaRuntimeGetVersion``, ``cudnnGetVersion``,
#: ``ncclGetVersion``, ``CUDART_VERSION``).
_API_TEXT: dict[str, Callable[[int], str | None]] = {
    "cudart": versions.cuda_from_int, "cudnn": versions.cudnn_text, "nccl": versions.nccl_text,
}


def dotted(family: str, api: Any) -> str | None:
    """An API version integer as the dotted version users know: ``12040`` -> ``12.4`` (cudart),
    ``90100`` -> ``9.1.0`` (cuDNN), ``22105`` -> ``2.21.5`` (NCCL)."""
    if isinstance(api, bool) or not isinstance(api, int) or api <= 0:
        return None
    decode = _API_TEXT.get(family)
    return decode(api) if decode else str(api)


def file_version(name: str) -> str | None:
    """``libcudart.so.12.4.127`` -> ``12.4.127``; ``libcudart.so.12`` -> ``12``; unversioned -> None."""
    match = re.search(r"\.so\.(\d+(?:\.\d+)*)$", name)
    return match.group(1) if match else None


def soname_guess(name: str) -> str | None:
    """The soname NVIDIA's file naming implies: ``libcudnn.so.9.1.0`` -> ``libcudnn.so.9``."""
    match = re.match(r"^(lib[A-Za-z_]+)(?:-[0-9a-f]{8})?\.so(?:\.(\d+))?", name)
    if not match:
        return None
    return match.group(1) + ".so" + (f".{match.group(2)}" if match.group(2) else "")


def parse_ldconfig(text: str) -> dict[str, list[str]]:
    """``ldconfig -p`` -> soname -> paths in cache order (first wins for the loader)."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=>" not in line:
            continue
        left, _, path = line.partition("=>")
        name = left.strip().split(" (", 1)[0].strip()
        path = path.strip()
        if name and path.startswith("/"):
            out.setdefault(name, []).append(path)
    return out


def parse_ldd(text: str) -> tuple[dict[str, str], list[str], list[str]]:
    """``ldd`` output -> (soname -> resolved path, sonames not found, other notes)."""
    resolved: dict[str, str] = {}
    not_found: list[str] = []
    notes: list[str] = []
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        match = _LDD_LINE.match(s)
        if match:
            name, target = match.group(1), match.group(2).strip()
            if target == "not found":
                if name not in not_found:
                    not_found.append(name)
            elif target:
                resolved[name] = target
            continue
        if s.startswith(("linux-vdso", "linux-gate")) or re.match(r"^/\S+\s+\(0x", s):
            continue
        notes.append(s[:300])
    return resolved, not_found, notes


def parse_nvcc(text: str) -> str | None:
    """``Cuda compilation tools, release 13.0, V13.0.88`` -> ``13.0.88`` (else the release)."""
    match = re.search(r"\bV(\d+\.\d+(?:\.\d+)*)", text)
    if match:
        return match.group(1)
    match = re.search(r"release (\d+\.\d+)", text)
    return match.group(1) if match else None


def parse_header(text: str, macros: tuple[str, ...], family: str) -> str | None:
    values = []
    for macro in macros:
        match = re.search(rf"^\s*#\s*define\s+{macro}\s+(\d+)", text, re.MULTILINE)
        if not match:
            return None
        values.append(int(match.group(1)))
    if family == "cudart":
        return dotted("cudart", values[0])
    return ".".join(str(v) for v in values)


def torch_pins(requires: Iterable[str]) -> dict[str, str]:
    """torch's ``Requires-Dist`` -> ``{"nvidia-cuda-runtime-cu12": "12.4.127"}`` for exact pins."""
    pins: dict[str, str] = {}
    for req in requires:
        req = req.split(";", 1)[0].strip()
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*===?\s*([^\s,;]+)$", req)
        if match:
            name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
            if name.startswith(("nvidia-", "triton", "pytorch-triton")):
                pins[name] = match.group(2)
    return pins


@dataclass
class _Copy:
    family: str
    path: str  # the file, symlinks resolved (what /proc/self/maps shows)
    names: list[str] = field(default_factory=list)
    found_via: list[str] = field(default_factory=list)
    origin: str = "system"
    ld_library_path_entry: str | None = None
    package: str | None = None
    package_version: str | None = None
    site: str | None = None

    def add(self, name: str, via: str) -> None:
        if name not in self.names:
            self.names.append(name)
        if via not in self.found_via:
            self.found_via.append(via)


@dataclass
class _Dir:
    path: str
    via: str
    origin: str
    ld_entry: str | None = None
    site: str | None = None


class _Scan:
    """Collects candidate files from the named places, deduplicated by the file they point to."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.copies: dict[str, _Copy] = {}
        self.searched: list[dict[str, Any]] = []
        self._dist_cache: dict[str, list[str]] = {}
        self._dirs: dict[str, tuple[str, list[tuple[str, str]]]] = {}

    def origin_of(self, real: str, default: str) -> str:
        if re.search(r"/(site|dist)-packages/nvidia/[^/]+/lib/", real):
            return "pip"
        if re.search(r"/(site|dist)-packages/torch/lib/", real):
            return "torch"
        if real.startswith("/usr/local/cuda") or "/cuda-" in real or "/cuda/" in real:
            return "toolkit" if default == "system" else default
        return default

    def add_file(self, name: str, family: str, via: str, d: _Dir | None) -> None:
        real = self.host.realpath(name)
        if not self.host.is_file(real):
            return
        copy = self.copies.get(real)
        if copy is None:
            copy = self.copies[real] = _Copy(family, real)
            copy.origin = self.origin_of(real, d.origin if d else "system")
        copy.add(name, via)
        if d is not None and d.ld_entry is not None and copy.ld_library_path_entry is None:
            copy.ld_library_path_entry = d.ld_entry
        if d is not None and d.site and copy.site is None and copy.origin == "pip":
            copy.site = d.site

    def scan_dir(self, d: _Dir) -> None:
        real = self.host.realpath(d.path)
        if real in self._dirs:
            # The same folder under another name (/usr/local/cuda -> cuda-13.0, lib64 -> lib):
            # note the extra route to its files, list them once.
            first, found = self._dirs[real]
            for path, family in found:
                self.add_file(path, family, d.via, d)
            self.searched.append({"dir": d.path, "via": d.via, "same_as": first})
            return
        found = []
        for name in self.host.list_dir(d.path):
            for family, rx in FAMILIES.items():
                if rx.match(name):
                    found.append((os.path.join(d.path, name), family))
        for path, family in found:
            self.add_file(path, family, d.via, d)
        self._dirs[real] = (d.path, found)
        self.searched.append({"dir": d.path, "via": d.via, "exists": self.host.exists(d.path), "matches": len(found)})

    def dists(self, site: str) -> list[str]:
        if site not in self._dist_cache:
            self._dist_cache[site] = [n for n in self.host.list_dir(site)
                                      if n.startswith("nvidia_") and n.endswith(".dist-info")]
        return self._dist_cache[site]

    def package_of(self, copy: _Copy, soname: str | None) -> None:
        """Name and version of the pip wheel that ships ``copy``, from its dist-info folder name."""
        if copy.origin != "pip" or not copy.site:
            return
        stem = WHEEL_DIST[copy.family]
        rx = re.compile(rf"^nvidia_{stem}(_cu(\d+))?-([^-]+)\.dist-info$")
        found = []
        for name in self.dists(copy.site):
            match = rx.match(name)
            if match:
                found.append((match.group(2), match.group(3), name))
        if not found:
            return
        major = (soname or "").rsplit(".so.", 1)[-1] if soname and ".so." in soname else None
        # cu12 and cu13 wheels can sit side by side; prefer the one whose CUDA major (suffix, or
        # version for the suffix-less CUDA 13 toolkit wheels) matches the file's soname major.
        def rank(item: tuple[str | None, str, str]) -> int:
            suffix, version, _ = item
            if copy.family in ("cudart", "cublas") and major:
                return 0 if (suffix or version.split(".")[0]) == major else 1
            dirname = os.path.basename(os.path.dirname(os.path.dirname(copy.path)))
            if dirname.startswith("cu") and suffix:
                return 0 if dirname == f"cu{suffix}" else 1
            return 0
        found.sort(key=rank)
        suffix, version, name = found[0]
        copy.package = "nvidia-" + stem.replace("_", "-") + (f"-cu{suffix}" if suffix else "")
        copy.package_version = version


def _child_loads(host: Host, options: Options, files: list[dict[str, str]], deadline: float, per_child: float
                 ) -> tuple[dict[str, Any], dict[str, tuple[str, str]], str]:
    """Run the load child until every task answered, crashed or hung; returns (records,
    task -> (reason, detail) for tasks that killed a child, a note when the child could not run).

    Each child gets at most ``per_child`` seconds, so one library stuck in its constructor leaves
    time for a fresh child to load the others."""
    records: dict[str, Any] = {}
    failed: dict[str, tuple[str, str]] = {}
    note = ""
    for _ in range(_MAX_CHILDREN):
        remaining = deadline - time.monotonic()
        if remaining < 0.2:
            note = "no time left to load the remaining libraries"
            break
        skip = sorted(k for k in records if k.startswith(("so:", "file:"))) + sorted(failed)
        result = host.run_child("lib_probe", {"mode": "load", "files": files, "skip": skip},
                                timeout=min(remaining, per_child), python=options.python)
        records.update(result.data)
        if result.ok:
            note = ""
            break
        task = result.stage
        if result.status in ("timeout", "crashed") and task.startswith(("so:", "file:")) and task not in records:
            failed[task] = (result.status, result.explain())
            note = ""
            continue
        note = f"{result.status}: {result.explain()}"
        break
    return records, failed, note


def _run_ldd(host: Host, path: str, role: str, timeout: float) -> dict[str, Any]:
    res = host.run(["ldd", path], timeout=timeout)
    entry: dict[str, Any] = {"file": path, "role": role}
    if res.status != "ok":
        entry.update(reason=res.status, detail=res.detail)
        return entry
    resolved, not_found, notes = parse_ldd(res.stdout)
    entry.update(resolved={k: os.path.normpath(v) for k, v in resolved.items()}, not_found=not_found)
    if res.returncode != 0:
        text = (res.stderr.strip() or res.stdout.strip()).splitlines()
        entry.update(reason="failed", detail=(text[-1] if text else f"ldd exited with {res.returncode}")[:300])
    elif notes:
        entry["notes"] = notes[:5]
    return entry


def _cuda_home(host: Host) -> tuple[str | None, str]:
    """CUDA_HOME as torch.utils.cpp_extension._find_cuda_home picks it (what extension builds use)."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = host.getenv(var)
        if value:
            return value, f"${var}"
    nvcc = host.which("nvcc")
    if nvcc:
        return os.path.dirname(os.path.dirname(nvcc)), f"parent of nvcc on PATH ({nvcc})"
    if host.exists("/usr/local/cuda"):
        return "/usr/local/cuda", "default /usr/local/cuda"
    return None, "no $CUDA_HOME, $CUDA_PATH, nvcc on PATH or /usr/local/cuda"


def probe_toolkit(host: Host, timeout: float) -> dict[str, Reading]:
    out: dict[str, Reading] = {}
    home, how = _cuda_home(host)
    out["toolkit.cuda_home"] = ok(home, "env/PATH", how) if home else missing(Reason.ABSENT, "env/PATH", how)
    candidate = os.path.join(home, "bin", "nvcc") if home else None
    nvcc = candidate if candidate and host.access(candidate, os.X_OK) else host.which("nvcc")
    if not nvcc:
        out["toolkit.nvcc_path"] = missing(Reason.ABSENT, "PATH", "nvcc is neither in $CUDA_HOME/bin nor on PATH")
        out["toolkit.nvcc_version"] = missing(Reason.ABSENT, "nvcc --version", "no nvcc: the CUDA toolkit is not "
                                              "installed (only needed to build CUDA extensions)")
        return out
    out["toolkit.nvcc_path"] = ok(nvcc, "CUDA_HOME/bin" if nvcc == candidate else "PATH")
    res: CommandResult = host.run([nvcc, "--version"], timeout=timeout)
    version = parse_nvcc(res.stdout) if res.ok else None
    if version:
        out["toolkit.nvcc_version"] = ok(version, "nvcc --version")
    elif res.status != "ok":
        out["toolkit.nvcc_version"] = missing(res.reason or Reason.FAILED, "nvcc --version", res.detail)
    else:
        tail = (res.stderr.strip() or res.stdout.strip())[-300:]
        out["toolkit.nvcc_version"] = missing(Reason.FAILED, "nvcc --version",
                                              f"exit code {res.returncode}, no version in output: {tail}")
    return out


def _ldconfig(host: Host, timeout: float) -> tuple[CommandResult | None, str]:
    # /sbin is often not on a user's PATH; ldconfig lives there on every glibc distribution.
    exe = host.which("ldconfig") or next((p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig")
                                          if host.access(p, os.X_OK)), None)
    if exe is None:
        return None, "ldconfig not found"
    return host.run([exe, "-p"], timeout=timeout), exe


def probe_libraries(host: Host, options: Options) -> dict[str, Reading]:
    start = time.monotonic()
    budget = max(PROBE.deadline(options), 0.5)
    deadline = start + budget
    out: dict[str, Reading] = {}
    # No more threads than cores: each runs a command (ldd, ldconfig, a child), and a dozen
    # at once on two cores only slow each other and the torch child down.
    pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1), thread_name_prefix="libs")
    try:
        return _probe(host, options, pool, start, deadline, budget, out)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _probe(host: Host, options: Options, pool: ThreadPoolExecutor, start: float, deadline: float,
           budget: float, out: dict[str, Reading]) -> dict[str, Reading]:
    """Start the slow steps (nvcc, ldconfig, the site child), scan the named places while they
    run, then load what was found in a child while ``ldd`` runs on the binaries that matter."""
    step = min(3.0, budget * 0.35)  # one command or child of the first round
    toolkit_f: Future[dict[str, Reading]] = pool.submit(probe_toolkit, host, step)
    ldconfig_f = pool.submit(_ldconfig, host, step)
    site_f: Future[ChildResult] = pool.submit(host.run_child, "lib_probe", {"mode": "site"}, step, None,
                                              options.python)

    ld_entries = _ld_library_path(host)
    out["libs.ld_library_path"] = ok(ld_entries, "env:LD_LIBRARY_PATH")
    dirs = _system_dirs(host, ld_entries)
    site, site_note = _site(_wait(site_f, deadline))
    torch_path = site.get("torch_path")
    more, wheel_dirs = _site_dirs(host, site)
    scan = _scan(host, dirs + more)
    out["libs.ldconfig"], cache = _read_ldconfig(_wait(ldconfig_f, deadline), scan)

    copies = list(scan.copies.values())
    loadable = [c for c in copies if c.family in ("cudart", "cudnn", "nccl")][:_MAX_LOADS]
    files = [{"path": str(host.path(c.names[0])), "family": c.family} for c in loadable]
    ldd_targets = _ldd_targets(host, copies, site)
    ldd_timeout = max(0.2, min(3.0, deadline - time.monotonic() - 0.1))
    same = _identical(host, [p for p, _ in ldd_targets])
    ldd_fs = [pool.submit(_run_ldd, host, str(host.path(p)), role, ldd_timeout) if same[i] == i else None
              for i, (p, role) in enumerate(ldd_targets)]
    # Loading is milliseconds per library when warm; a cold network filesystem can take a second.
    per_child = max(1.5, budget * 0.45)
    loads = _Loads(*(_child_loads(host, options, files, deadline - 0.05, per_child) if files else ({}, {}, "")))

    by_family, sonames = _copies(host, scan, copies, loads)
    for family, key in COPY_KEYS.items():
        detail = "; ".join(x for x in (site_note, loads.note) if x)
        out[key] = ok(by_family[family], "search+" + SOURCE_CHILD, detail)
    out["libs.loader_choice"] = ok(_loader_choice(host, sonames, [e for e in ld_entries if e], cache, loads),
                                   SOURCE_CHILD)
    out["libs.ldd"] = ok(_ldd_results(ldd_fs, ldd_targets, deadline, same), "ldd")
    out["libs.search_dirs"] = ok(scan.searched, "search")
    out["libs.wheel_dirs"] = ok(sorted(set(wheel_dirs)), SOURCE_CHILD + ":site", "" if site else site_note)
    out["libs.torch_requires"] = _torch_requires(site, torch_path, site_note)
    out.update(_toolkit(_wait(toolkit_f, deadline)))
    return out


@dataclass(frozen=True)
class _Loads:
    """What the load children answered: records by task, tasks that killed a child, and a note
    when the children could not run at all."""

    records: dict[str, Any]
    failed: dict[str, tuple[str, str]]
    note: str


def _ld_library_path(host: Host) -> list[str]:
    # LD_LIBRARY_PATH: an empty entry means the current directory to glibc's loader.
    raw = host.getenv("LD_LIBRARY_PATH") or ""
    return raw.split(":") if raw else []


def _system_dirs(host: Host, ld_entries: list[str]) -> list[_Dir]:
    """LD_LIBRARY_PATH, $CUDA_HOME/$CUDA_PATH, /usr/local/cuda* and $CONDA_PREFIX, in that order."""
    dirs: list[_Dir] = []
    for i, entry in enumerate(ld_entries):
        if entry:
            dirs.append(_Dir(entry, f"LD_LIBRARY_PATH[{i}]", "system", ld_entry=entry))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = host.getenv(var)
        if value:
            dirs += [_Dir(os.path.join(value, sub), f"${var}", "toolkit") for sub in ("lib64", "lib")]
    for name in host.list_dir("/usr/local"):
        if name.startswith("cuda"):
            base = f"/usr/local/{name}"
            dirs += [_Dir(os.path.join(base, sub), "/usr/local/cuda*", "toolkit") for sub in ("lib64", "lib")]
    conda = host.getenv("CONDA_PREFIX")
    if conda:
        dirs.append(_Dir(os.path.join(conda, "lib"), "$CONDA_PREFIX", "conda"))
    return dirs


def _site(site_res: ChildResult | None) -> tuple[Mapping[str, Any], str]:
    """The target interpreter's site-packages and torch folder from the site child, and a note
    when it did not answer."""
    site: Mapping[str, Any] = (site_res.data.get("site") or {}) if site_res is not None else {}
    if site_res is None:
        return site, "the site child did not answer in time"
    if not site_res.ok and not site:
        return site, f"{site_res.status}: {site_res.explain()}"
    return site, ""


def _site_dirs(host: Host, site: Mapping[str, Any]) -> tuple[list[_Dir], list[str]]:
    """The conda prefix, pip's ``nvidia/*/lib`` and ``torch/lib`` of the target interpreter, and
    the wheel folders torch's RPATH reaches."""
    torch_path = site.get("torch_path")
    torch_site = os.path.dirname(torch_path) if torch_path else None
    dirs: list[_Dir] = []
    if site.get("conda") and site.get("prefix"):
        dirs.append(_Dir(os.path.join(site["prefix"], "lib"), "conda prefix", "conda"))
    wheel_dirs: list[str] = []
    for sp in site.get("site_packages") or []:
        for pkg in host.list_dir(os.path.join(sp, "nvidia")):
            lib = os.path.join(sp, "nvidia", pkg, "lib")
            if host.exists(lib):
                dirs.append(_Dir(lib, "site-packages/nvidia", "pip", site=sp))
                if sp == torch_site or torch_site is None:
                    wheel_dirs.append(host.realpath(lib))
    if torch_path:
        tlib = os.path.join(torch_path, "lib")
        dirs.append(_Dir(tlib, "torch/lib", "torch", site=torch_site))
        wheel_dirs.append(host.realpath(tlib))
    return dirs, wheel_dirs


def _scan(host: Host, dirs: list[_Dir]) -> _Scan:
    scan = _Scan(host)
    seen: set[str] = set()
    for d in dirs:
        key = f"{d.via}\0{d.path}"
        if key not in seen:
            seen.add(key)
            scan.scan_dir(d)
    return scan


def _read_ldconfig(pair: tuple[CommandResult | None, str] | None, scan: _Scan
                   ) -> tuple[Reading, dict[str, list[str]]]:
    """The ``libs.ldconfig`` reading and the whole cache; the cache's copies join the scan."""
    if pair is None:
        return missing(Reason.TIMEOUT, "ldconfig -p", "ldconfig -p did not finish in time"), {}
    res, exe = pair
    if res is None:
        return missing(Reason.ABSENT, "ldconfig -p", exe), {}
    if res.status != "ok":
        return missing(res.reason or Reason.FAILED, f"{exe} -p", res.detail), {}
    cache = parse_ldconfig(res.stdout)
    mine = {name: paths for name, paths in cache.items() if any(rx.match(name) for rx in FAMILIES.values())}
    for name, paths in mine.items():
        family = next(f for f, rx in FAMILIES.items() if rx.match(name))
        for p in paths:
            scan.add_file(p, family, "ldconfig", None)
    return ok(mine, f"{exe} -p"), cache


def _ldd_targets(host: Host, copies: list[_Copy], site: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Files to run ``ldd`` on: every libcudart, torch's CUDA libraries, other packages' CUDA
    extensions."""
    targets: list[tuple[str, str]] = [(c.path, "libcudart") for c in copies if c.family == "cudart"][:_MAX_LDD - 2]
    torch_path = site.get("torch_path")
    if torch_path:
        for name in host.list_dir(os.path.join(torch_path, "lib")):
            if name == "libtorch_cuda.so":
                targets.append((os.path.join(torch_path, "lib", name), "libtorch_cuda"))
        for name in host.list_dir(torch_path):
            if re.match(r"^_C(\.cpython[^/]*|\.abi3)?\.so$", name):
                targets.append((os.path.join(torch_path, name), "torch._C"))
    for sp in site.get("site_packages") or []:
        for folder, pattern, pkg in _EXTENSIONS:
            where = os.path.join(sp, folder) if folder else sp
            for name in host.list_dir(where):
                if re.fullmatch(pattern, name) and len(targets) < _MAX_LDD:
                    targets.append((os.path.join(where, name), f"extension:{pkg}"))
    return targets


def _copies(host: Host, scan: _Scan, copies: list[_Copy], loads: _Loads
            ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    """The copy records per family, and soname -> family for every soname seen."""
    elf: Mapping[str, str | None] = loads.records.get("elf") or {}
    by_family: dict[str, list[dict[str, Any]]] = {f: [] for f in FAMILIES}
    sonames: dict[str, str] = {}
    for c in copies:
        first = str(host.path(c.names[0]))
        soname = elf.get(first) or soname_guess(os.path.basename(c.path)) or soname_guess(os.path.basename(c.names[0]))
        if soname:
            sonames.setdefault(soname, c.family)
        scan.package_of(c, soname)
        by_family[c.family].append(_copy_entry(host, c, soname, f"file:{first}", loads))
    return by_family, sonames


def _copy_entry(host: Host, c: _Copy, soname: str | None, task: str, loads: _Loads) -> dict[str, Any]:
    rec = loads.records.get(task) or {}
    api = rec.get("api_version") if isinstance(rec.get("api_version"), int) else None
    fv = next((v for v in (file_version(os.path.basename(c.path)), *(file_version(os.path.basename(n)) for n in c.names))
               if v and "." in v), None)
    entry: dict[str, Any] = {
        "path": c.path, "names": c.names, "soname": soname, "family": c.family,
        "version": None, "api_version": api, "version_source": None,
        "origin": c.origin, "found_via": c.found_via, "ld_library_path_entry": c.ld_library_path_entry,
        "package": c.package, "package_version": c.package_version, "file_version": fv,
    }
    entry.update(_load_outcome(c.family, task, rec, loads))
    entry.update(_copy_version(host, c, soname, api, fv))
    return entry


def _load_outcome(family: str, task: str, rec: Mapping[str, Any], loads: _Loads) -> dict[str, Any]:
    """``load`` and ``load_detail`` of a copy: how loading it in the child went."""
    if task in loads.failed:
        reason, detail = loads.failed[task]
        return {"load": reason, "load_detail": detail}
    if rec:
        return {"load": "ok" if rec.get("loaded") else "failed",
                "load_detail": rec.get("error") or rec.get("version_error") or ""}
    if family in ("cudart", "cudnn", "nccl"):
        return {"load": "skipped", "load_detail": loads.note or "not loaded"}
    return {"load": "not_loaded", "load_detail": "version read from the file/package name only"}


def _copy_version(host: Host, c: _Copy, soname: str | None, api: int | None, fv: str | None) -> dict[str, Any]:
    """``version`` and ``version_source``: the library's API, else its wheel, file name, headers or
    soname; nothing when none of them speaks."""
    if api is not None:
        return {"version": dotted(c.family, api), "version_source": "ctypes"}
    if c.package_version:
        return {"version": c.package_version, "version_source": "package"}
    if fv:
        return {"version": fv, "version_source": "filename"}
    header = _header_version(host, c.family, c.path)
    if header:
        return {"version": header, "version_source": "header"}
    if soname and file_version(soname):
        return {"version": file_version(soname), "version_source": "soname"}
    return {}


def _loader_choice(host: Host, sonames: Mapping[str, str], ld_dirs: list[str], cache: Mapping[str, list[str]],
                   loads: _Loads) -> dict[str, Any]:
    """What the loader picks for each soname: dlopen in the child, else the search order."""
    choice: dict[str, Any] = {}
    for soname, family in sorted(sonames.items()):
        if family not in ("cudart", "cudnn", "nccl") or not re.match(r"^lib[A-Za-z_]+\.so(\.\d+)*$", soname):
            continue
        predicted, via = _search_order(host, soname, ld_dirs, cache)
        rec = loads.records.get(f"so:{soname}")
        item: dict[str, Any] = {"family": family, "predicted": predicted, "predicted_via": via}
        if rec:
            path = rec.get("path")
            item.update(path=path, file=rec.get("file"), api_version=rec.get("api_version"),
                        version=dotted(family, rec.get("api_version")), error=rec.get("error"),
                        via=_via(path, ld_dirs, cache, soname) if path else None, method="dlopen")
        elif f"so:{soname}" in loads.failed:
            reason, detail = loads.failed[f"so:{soname}"]
            item.update(path=None, reason=reason, detail=detail, method="dlopen")
        else:
            item.update(path=predicted, file=host.realpath(predicted) if predicted else None,
                        via=via, method="search-order", detail=loads.note or "not loaded in a child")
        choice[soname] = item
    return choice


def _identical(host: Host, paths: list[str]) -> list[int]:
    """For each path, the index of the first path that is the same file: the same inode, or the same
    size and bytes where the file does not name ``$ORIGIN`` (whose resolution depends on where the
    copy lies). ``ldd`` runs once per distinct file: a thousand identical copies on
    ``LD_LIBRARY_PATH`` cost one ``ldd``, not a dozen."""
    import hashlib

    stats: list[os.stat_result | None] = []
    for p in paths:
        try:
            stats.append(os.stat(host.path(p)))
        except OSError:
            stats.append(None)
    sizes = [st.st_size for st in stats if st is not None]
    first: dict[tuple[object, ...], int] = {}
    out: list[int] = []
    for i, (p, st) in enumerate(zip(paths, stats, strict=True)):
        keys: list[tuple[object, ...]] = []
        if st is not None:
            keys.append(("inode", st.st_dev, st.st_ino))
            if sizes.count(st.st_size) > 1 and st.st_size <= 256 << 20:
                keys.extend(_content_key(host.path(p), st.st_size, hashlib.sha256))
        rep = next((first[k] for k in keys if k in first), i)
        for k in keys:
            first.setdefault(k, rep)
        out.append(rep)
    return out


def _content_key(path: os.PathLike[str], size: int, digest: Any) -> list[tuple[object, ...]]:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return []
    return [] if b"$ORIGIN" in data else [("bytes", size, digest(data).digest())]


def _ldd_results(futures: list[Future[dict[str, Any]] | None], targets: list[tuple[str, str]], deadline: float,
                 same: list[int]) -> list[dict[str, Any]]:
    ldd: list[dict[str, Any]] = []
    for i, (p, role) in enumerate(targets):
        f = futures[same[i]]
        got = _wait(f, deadline) if f is not None else None
        if got is None:
            ldd.append({"file": p, "role": role, "reason": "timeout",
                        "detail": "ldd did not finish within the probe's deadline"})
        elif same[i] != i:
            ldd.append({**got, "file": p, "role": role, "same_file_as": targets[same[i]][0]})
        else:
            ldd.append(got)
    return ldd


def _torch_requires(site: Mapping[str, Any], torch_path: str | None, site_note: str) -> Reading:
    if site.get("torch_requires") is not None:
        return ok(torch_pins(site["torch_requires"]), "torch metadata")
    if not torch_path and site:
        return missing(Reason.ABSENT, "torch metadata", "torch is not installed")
    return missing(Reason.FAILED, "torch metadata", site.get("torch_requires_error") or site_note or "not read")


def _toolkit(tk: dict[str, Reading] | None) -> dict[str, Reading]:
    if tk is None:
        return {key: missing(Reason.TIMEOUT, "nvcc --version", "nvcc --version did not finish in time")
                for key in ("toolkit.cuda_home", "toolkit.nvcc_path", "toolkit.nvcc_version")}
    return tk


def _wait(fut: Future[Any], deadline: float) -> Any:
    try:
        return fut.result(timeout=max(0.0, deadline - time.monotonic()))
    except Exception:  # noqa: BLE001 - timeout or a bug in a helper: the caller records the gap
        return None


def _header_version(host: Host, family: str, path: str) -> str | None:
    spec = HEADERS.get(family)
    if spec is None:
        return None
    header, macros = spec
    libdir = os.path.dirname(path)
    for inc in (os.path.join(os.path.dirname(libdir), "include"), os.path.join(libdir, "include")):
        candidate = os.path.join(inc, header)
        # A stat first (the folder was just listed, so it answers like the listing did): a read
        # runs in a deadline thread, and a thousand copies without headers cost two thousand.
        if not host.exists(candidate):
            continue
        text, _, _ = host.read_text(candidate, limit=1 << 18)
        if text:
            version = parse_header(text, macros, family)
            if version:
                return version
    return None


def _search_order(host: Host, soname: str, ld_dirs: list[str], cache: Mapping[str, list[str]]
                  ) -> tuple[str | None, str | None]:
    """glibc's order for a dlopen without RPATH: LD_LIBRARY_PATH, the cache, then the defaults."""
    for i, d in enumerate(ld_dirs):
        candidate = os.path.join(d, soname)
        if host.exists(candidate):
            return candidate, f"LD_LIBRARY_PATH[{i}]"
    if cache.get(soname):
        return cache[soname][0], "ldconfig"
    for d in ("/lib64", "/usr/lib64", "/lib", "/usr/lib"):
        candidate = os.path.join(d, soname)
        if host.exists(candidate):
            return candidate, "default dirs"
    return None, None


def _via(path: str, ld_dirs: list[str], cache: Mapping[str, list[str]], soname: str) -> str:
    where = os.path.dirname(path)
    for i, d in enumerate(ld_dirs):
        if os.path.normpath(d) == os.path.normpath(where):
            return f"LD_LIBRARY_PATH[{i}]"
    if path in cache.get(soname, []):
        return "ldconfig"
    return "other (RPATH of the interpreter or a default directory)"


# Runs beside the torch child; its own steps keep well under the deadline.
PROBE = ProbeSpec("libraries", probe_libraries, KEYS, scale=1.0)
PROBES = [PROBE]
