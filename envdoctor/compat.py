"""Compatibility knowledge: typed lookups over the shipped table ``envdoctor/data/compat.json``.

The table (driver ↔ CUDA ↔ cuDNN/NCCL ↔ GPU compute capability ↔ torch wheels) is data with a
source per row and an ``as_of`` date; this module only answers questions about it. It is loaded
once, lazily, so ``healthcheck`` and ``--help`` never pay for it. Unknown or future versions give
``None`` plus a "not in the table as of <date>" note — never an exception and never a false
"incompatible".
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Literal

from packaging.version import InvalidVersion, Version

from .model import Facts

CC = tuple[int, int]
Platform = Literal["linux_x86_64", "linux_aarch64", "windows_x86_64"]
INDEX = "https://download.pytorch.org/whl/"


# ---------------------------------------------------------------------------------------------
# Loading and small parsers

@functools.cache
def data() -> Mapping[str, Any]:
    """The parsed table (≈1 ms); cached for the life of the process."""
    text = resources.files("envdoctor").joinpath("data/compat.json").read_text(encoding="utf-8")
    return json.loads(text)


def as_of() -> str:
    return str(data()["as_of"])


def not_in_table(what: str) -> str:
    return f"{what} is not in envdoctor's compatibility table as of {as_of()}"


def source_url(source_id: str) -> str:
    """A link for a source id (its URL, or the repository file at its commit)."""
    src = data()["sources"].get(source_id) or {}
    if src.get("url"):
        return str(src["url"])
    if src.get("repo") and src.get("commit") and src.get("path"):
        return f"https://github.com/{src['repo']}/blob/{src['commit']}/{src['path']}"
    return ""


def version(text: Any) -> Version | None:
    """A lenient ``packaging`` version: ``"570.124.06"``, ``"2.6.0+cu126"``, ``"12.8"``; else None."""
    if text is None:
        return None
    try:
        return Version(str(text).strip())
    except InvalidVersion:
        m = re.match(r"\s*(\d+(?:\.\d+)*)", str(text))
        return Version(m.group(1)) if m else None


def minor_of(text: Any) -> str | None:
    """``"2.6.0+cu126"`` -> ``"2.6"``."""
    v = version(text)
    if v is None or len(v.release) < 2:
        return None
    return f"{v.release[0]}.{v.release[1]}"


def cuda_from_int(value: int) -> str:
    """The CUDA API encoding ``12080`` -> ``"12.8"``."""
    return f"{value // 1000}.{value % 1000 // 10}"


def cuda_to_int(text: str) -> int | None:
    v = version(text)
    if v is None:
        return None
    rel = (*v.release, 0)
    return rel[0] * 1000 + rel[1] * 10


def parse_cc(value: Any) -> CC | None:
    """``"9.0"``, ``[9, 0]``, ``(12, 0)``, ``"sm_120"``, ``"120"`` -> ``(major, minor)``."""
    if isinstance(value, (list, tuple)) and len(value) >= 2:
        try:
            return int(value[0]), int(value[1])
        except (TypeError, ValueError):
            return None
    if isinstance(value, str) and len(value) < 64:
        return _parse_cc_text(value)
    return None


@functools.lru_cache(maxsize=1024)  # asked per GPU and per table row: few distinct texts
def _parse_cc_text(value: str) -> CC | None:
    text = value.strip()
    m = re.fullmatch(r"(\d+)\.(\d)", text)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = re.fullmatch(r"(?:sm_|compute_)?(\d+)(\d)[af]?", text)
    if m:
        return int(m.group(1)), int(m.group(2))
    return None


def cc_text(cc: CC) -> str:
    return f"{cc[0]}.{cc[1]}"


def sm(cc: CC) -> str:
    return f"sm_{cc[0]}{cc[1]}"


@functools.lru_cache(maxsize=256)
def variant_cuda(variant: str) -> str | None:
    """``"cu128"`` -> ``"12.8"``; None for cpu/rocm."""
    m = re.fullmatch(r"cu(\d+)(\d)", variant or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


def variant_for_cuda(cuda: str) -> str:
    v = version(cuda)
    rel = (*(v.release if v else (0,)), 0)
    return f"cu{rel[0]}{rel[1]}"


def index_url(variant: str) -> str:
    return f"{INDEX}{variant}"


def platform_of(facts: Facts) -> Platform:
    os_name = str(facts.value("host.os") or "Linux")
    arch = str(facts.value("host.arch") or "x86_64").lower()
    if os_name == "Windows":
        return "windows_x86_64"
    return "linux_aarch64" if arch in ("aarch64", "arm64") else "linux_x86_64"


def driver_os(facts: Facts) -> str:
    """Whose driver numbering applies: WSL2 runs on the Windows driver."""
    if facts.value("host.os") == "Windows" or facts.value("host.wsl"):
        return "Windows"
    return "Linux"


# ---------------------------------------------------------------------------------------------
# Drivers

@dataclass(frozen=True)
class DriverNeed:
    cuda: str
    minimum: str | None  # the driver that supports this CUDA natively (per-toolkit table)
    floor: str | None  # the minor-version-compatibility floor for its major
    source: str
    verified: bool
    note: str = ""


def driver_floor(cuda_major: int, os_name: str = "Linux") -> tuple[str | None, Mapping[str, Any] | None]:
    for row in data()["driver_floors"]["rows"]:
        if row["cuda_major"] == cuda_major:
            return (row["windows"] if os_name == "Windows" else row["linux"]), row
    return None, None


def mvc_from_major() -> int:
    """The first CUDA major with minor-version compatibility (NVIDIA: CUDA 11). Before it, a runtime
    needs a driver at or above its own toolkit's minimum: a CUDA 10.1 driver cannot run CUDA 10.2."""
    row = data()["driver_floors"].get("minor_version_compatibility") or {}
    return int(row.get("from_major", 11))


def verified_minimum(cuda: str, os_name: str = "Linux") -> tuple[str, str] | None:
    """The lowest driver a verified row requires for ``cuda`` (its toolkit GA row, else the major's
    minor-version-compatibility floor), with the row's source; None when only unverified rows speak."""
    key = "windows" if os_name == "Windows" else "linux"
    v = version(cuda)
    if v is None:
        return None
    rows = [r for r in data()["toolkit_drivers"]["rows"] if r["cuda"] == minor_of(cuda) and r[key]]
    if rows:
        ga = min(rows, key=lambda r: r["update"])
        if ga["verified"]:
            return str(ga[key]), str(ga["source"])
    if v.release[0] >= mvc_from_major():
        floor, row = driver_floor(v.release[0], os_name)
        if floor and row and row["verified"]:
            return str(floor), str(row["source"])
    return None


def min_driver(cuda: str, os_name: str = "Linux") -> DriverNeed:
    """The driver a CUDA version needs on ``os_name``: natively, and through minor-version compatibility."""
    key = "windows" if os_name == "Windows" else "linux"
    v = version(cuda)
    major = v.release[0] if v else 0
    floor, floor_row = driver_floor(major, os_name) if major >= mvc_from_major() else (None, None)
    best = None
    for row in data()["toolkit_drivers"]["rows"]:
        if row["cuda"] == minor_of(cuda) and row[key]:
            if best is None or row["update"] < best["update"]:
                best = row  # GA row: the lowest driver for this minor
    if best is not None:
        return DriverNeed(str(cuda), best[key], floor, best["source"], bool(best["verified"]))
    note = not_in_table(f"CUDA {cuda}") + (f"; CUDA {major}.x needs at least {floor}" if floor else "")
    src = floor_row["source"] if floor_row else ""
    return DriverNeed(str(cuda), None, floor, src, bool(floor_row and floor_row["verified"]), note)


@dataclass(frozen=True)
class Answer:
    """A table answer with its provenance, or ``value=None`` and a note saying why."""

    value: Any
    note: str = ""
    source: str = ""
    verified: bool = False
    at_least: bool = False  # the true answer may be higher (input newer than the table)


def highest_cuda_for_driver(driver: str, os_name: str = "Linux") -> Answer:
    """The newest CUDA a driver version supports natively, from the per-toolkit minimums."""
    dv = version(driver)
    if dv is None:
        return Answer(None, f"driver version {driver!r} does not parse")
    key = "windows" if os_name == "Windows" else "linux"
    best = None
    for row in data()["toolkit_drivers"]["rows"]:
        need = version(row[key]) if row[key] else None
        if need is not None and dv >= need:
            if best is None or version(row["cuda"]) >= version(best["cuda"]):  # type: ignore[operator]
                best = row
    if best is None:
        oldest = min((r for r in data()["toolkit_drivers"]["rows"] if r[key]), key=lambda r: version(r[key]))
        return Answer(None, not_in_table(f"driver {driver}") + f" (older than every toolkit in it; the oldest, "
                      f"CUDA {oldest['cuda']}, needs {oldest[key]})")
    newest = max((r for r in data()["toolkit_drivers"]["rows"] if r[key]), key=lambda r: version(r["cuda"]))
    at_least = best is newest or best["cuda"] == newest["cuda"]
    note = (f"driver {driver} is newer than the table's newest toolkit minimum; it supports at least CUDA "
            f"{best['cuda']} ({not_in_table('anything newer')})") if at_least else ""
    return Answer(best["cuda"], note, best["source"], bool(best["verified"]), at_least)


def driver_cuda(facts: Facts) -> int | None:
    """The highest CUDA the driver supports, as the API encodes it (``12080``), from the facts.

    NVML/cuDriverGetVersion first; else derived from the driver version string via the table (a
    pasted collect_env carries the driver version but not its CUDA)."""
    for key in ("nvml.cuda_driver_version", "cuda.driver_version"):
        value = facts.value(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    drv = driver_version(facts)
    if drv:
        ans = highest_cuda_for_driver(drv, driver_os(facts))
        if ans.value:
            return cuda_to_int(ans.value)
    return None


def driver_version(facts: Facts) -> str | None:
    for key in ("nvml.driver_version", "driver.kernel_module_version"):
        value = facts.value(key)
        if value and version(value) is not None:
            return str(value)
    return None


def variant_for_driver(facts: Facts) -> tuple[str, str]:
    """The newest CUDA wheel variant of the newest release that this driver runs natively, and why."""
    cap = driver_cuda(facts)
    newest = newest_release()
    plat = platform_of(facts)
    variants = [v for v in release_variants(newest, plat) if variant_cuda(v)] if newest else []
    if cap is None:
        pick = _default_variant(newest) or (variants[-1] if variants else "cu128")
        return pick, ("No NVIDIA driver was read, so the variant cannot be matched to it; "
                      f"{pick} is the default CUDA build of torch {newest} (table as of {as_of()}).")
    have = cuda_from_int(cap)
    fits = [v for v in variants if cuda_to_int(variant_cuda(v) or "") <= cap]  # type: ignore[operator]
    if fits:
        pick = max(fits, key=lambda v: cuda_to_int(variant_cuda(v) or "0") or 0)
        return pick, f"Your driver supports CUDA {have}, so {pick} wheels run on it."
    for minor in releases_newest_first():
        older = [v for v in release_variants(minor, plat) if variant_cuda(v) and
                 (cuda_to_int(variant_cuda(v) or "") or 0) <= cap]
        if older:
            pick = max(older, key=lambda v: cuda_to_int(variant_cuda(v) or "0") or 0)
            return pick, (f"Your driver supports only CUDA {have}; the newest build for it is {pick} "
                          f"(torch {minor}); or upgrade the driver.")
    return "cu118", f"Your driver supports only CUDA {have}, older than any wheel in the table; upgrade the driver."


def release_default_variant(minor: str | None) -> str | None:
    """The CUDA variant PyPI's Linux x86_64 wheel of a torch release is built for (``pypi_default``)."""
    return _default_variant(minor)


def _default_variant(minor: str | None) -> str | None:
    if not minor:
        return None
    row = data()["torch_releases"]["rows"].get(minor) or {}
    return row.get("pypi_default")


def gpu_driver_requirement(cc: CC, os_name: str = "Linux") -> tuple[str, Mapping[str, Any]] | None:
    """A driver a GPU generation needs beyond the CUDA floor (Blackwell needs R570+)."""
    for row in data()["gpu_driver_requirements"]["rows"]:
        lo, hi = parse_cc(row["cc_min"]), parse_cc(row["cc_max"])
        if lo and hi and lo <= cc <= hi:
            need = row["windows"] if os_name == "Windows" else row["linux"]
            if need:
                return need, row
    return None


# ---------------------------------------------------------------------------------------------
# GPUs

@dataclass(frozen=True)
class GpuInfo:
    name: str
    cc: CC
    architecture: str
    segment: str
    integrated: bool
    source: str
    verified: bool


def normalize_gpu_name(name: str) -> str:
    # Parenthesised words stay: "NVIDIA TITAN X (Pascal)" is how NVML tells it from the Maxwell one.
    text = re.sub(r"[^a-z0-9]+", " ", str(name).lower())
    return " ".join(w for w in text.split() if w not in ("nvidia", "geforce", "tesla"))


@functools.cache
def _gpu_patterns() -> tuple[tuple[re.Pattern[str], Mapping[str, Any]], ...]:
    out = []
    for row in data()["gpus"]["rows"]:
        for pat in row["match"]:
            out.append((re.compile(r"(?<![a-z0-9])(?:" + pat + r")(?![a-z0-9])"), row))
    return tuple(out)


def gpu_by_name(name: str) -> GpuInfo | None:
    """Fuzzy product lookup: ``"NVIDIA GeForce RTX 5090"`` -> CC 12.0. The longest match wins."""
    text = normalize_gpu_name(name)
    best: tuple[int, Mapping[str, Any]] | None = None
    for rx, row in _gpu_patterns():
        m = rx.search(text)
        if m and (best is None or len(m.group(0)) > best[0]):
            best = (len(m.group(0)), row)
    if best is None:
        return None
    row = best[1]
    cc = parse_cc(row["cc"])
    assert cc is not None
    return GpuInfo(row["name"], cc, row["architecture"], row["segment"], bool(row.get("integrated")),
                   row["source"], bool(row["verified"]))


def cc_for_gpu(name: str) -> CC | None:
    info = gpu_by_name(name)
    return info.cc if info else None


def architecture(cc: CC) -> Mapping[str, Any] | None:
    text = cc_text(cc)
    for row in data()["architectures"]["rows"]:
        if text in row["ccs"]:
            return row
    return None


def is_integrated(cc: CC, name: str = "") -> bool:
    """Jetson / Tegra modules (iGPU): wheels for them come from NVIDIA's JetPack builds."""
    info = gpu_by_name(name) if name else None
    if info is not None:
        return info.integrated
    return any(row.get("integrated") and parse_cc(row["cc"]) == cc for row in data()["gpus"]["rows"])


# ---------------------------------------------------------------------------------------------
# Wheels and architectures

@dataclass(frozen=True)
class Target:
    cc: CC
    ptx: bool = False
    suffix: str = ""  # "a" (arch-specific) or "f" (family-specific)

    def label(self) -> str:
        return f"{'compute' if self.ptx else 'sm'}_{self.cc[0]}{self.cc[1]}{self.suffix}"


@dataclass(frozen=True)
class ArchList:
    targets: tuple[Target, ...]
    origin: str  # "torch" (the installed torch said so) or "table"
    source: str = ""
    verified: bool = True
    note: str = ""

    @property
    def sass(self) -> tuple[CC, ...]:
        return tuple(t.cc for t in self.targets if not t.ptx)

    @property
    def ptx(self) -> tuple[CC, ...]:
        return tuple(t.cc for t in self.targets if t.ptx)

    def describe(self) -> str:
        sass = sorted({t for t in self.targets if not t.ptx}, key=lambda t: t.cc)
        ptx = [t for t in self.targets if t.ptx]
        text = " ".join(t.label() for t in sass) or "no SASS"
        return text + (" + PTX " + " ".join(t.label() for t in ptx) if ptx else ", no PTX")

    def span(self) -> str:
        sass = sorted(t.cc for t in self.targets if not t.ptx)
        if not sass:
            return "no SASS"
        return f"{sm(sass[0])}…{sm(sass[-1])}" if len(sass) > 1 else sm(sass[0])


def parse_arch_list(items: Iterable[str], origin: str = "torch") -> ArchList:
    """``torch.cuda.get_arch_list()`` (``sm_90``, ``sm_90a``, ``compute_120``) -> ArchList."""
    out = []
    for item in items:
        m = re.fullmatch(r"(sm|compute)_(\d+)(\d)([af]?)", str(item).strip())
        if m:
            out.append(Target((int(m.group(2)), int(m.group(3))), m.group(1) == "compute", m.group(4)))
    return ArchList(tuple(out), origin)


@functools.lru_cache(maxsize=1024)  # asked once per GPU by several checks: 20,000 GPUs, a handful of answers
def arch_list(torch_version: str, variant: str, platform: Platform = "linux_x86_64") -> ArchList | None:
    """The table's arch list for a torch release (``"2.6.0"`` or ``"2.6"``) and variant, or None."""
    minor = minor_of(torch_version)
    for row in data()["torch_arch_lists"]["rows"]:
        if row["torch"] == minor and row["variant"] == variant and row["platform"] == platform:
            targets = [Target(parse_cc(c) or (0, 0)) for c in row["sass"]]
            targets += [Target(parse_cc(c) or (0, 0), ptx=True) for c in row["ptx"]]
            return ArchList(tuple(targets), "table", row["source"], bool(row["verified"]), row.get("note", ""))
    return None


@dataclass(frozen=True)
class Support:
    runs: bool
    how: Literal["sass", "ptx", "none"]
    target: Target | None = None
    reach: CC | None = None  # set when PTX exists but the wheel's CUDA predates the GPU's architecture

    def explain(self, cc: CC) -> str:
        if self.how == "sass" and self.target:
            same = self.target.cc == cc
            return f"SASS {self.target.label()}" + ("" if same else f" runs on {sm(cc)} (same major, lower minor)")
        if self.how == "ptx" and self.target and self.reach:
            return (f"PTX {self.target.label()} exists, but the CUDA this wheel was built with reaches only "
                    f"{sm(self.reach)}: the CUDA libraries it bundles (cuBLAS, cuDNN) predate {sm(cc)}, torch itself "
                    f"reports the GPU as not compatible, and such wheels fail on it in practice (cu102 wheels on "
                    f"Ampere, cu118/cu126 wheels on Blackwell)")
        if self.how == "ptx" and self.target:
            return f"PTX {self.target.label()} is JIT-compiled for {sm(cc)} (slow first start)"
        return f"no SASS for {cc[0]}.x ≤ {cc_text(cc)} and no PTX ≤ {cc_text(cc)}"


def reach_of(arch: ArchList, cuda: str | None = None) -> CC | None:
    """The newest architecture the CUDA a wheel was built with can target: the toolkit's highest
    target when its version is known, else the wheel's highest SASS. PyTorch wheels carry SASS for
    their toolkit's newest major (tests/test_compat_data.py checks this over the table)."""
    rng = toolkit_range(cuda) if cuda else None
    if rng is not None:
        return rng[1]
    return max(arch.sass) if arch.sass else None


def runs_on(arch: ArchList, cc: CC, reach: CC | None = None) -> Support:
    """Whether code in ``arch`` runs on a GPU of compute capability ``cc`` (NVIDIA binary compatibility).

    SASS sm_XY runs on X.Z with Z ≥ Y (same major); ``a`` targets only on X.Y exactly; ``f`` like plain
    SASS within the family; PTX compute_XY JIT-compiles for any CC ≥ X.Y unless arch-specific. With
    ``reach`` (see :func:`reach_of`), PTX does not count for a GPU of a newer major than the wheel's
    CUDA can target: torch's kernels might JIT, but the CUDA libraries it bundles (cuBLAS, cuDNN)
    predate the architecture, and such wheels failed in practice — cu102 wheels on Ampere, cu118 and
    cu126 wheels on Blackwell (real cases in tests/corpus)."""
    best: Support | None = None
    for t in arch.targets:
        if t.ptx:
            continue
        ok = t.cc == cc if t.suffix == "a" else (t.cc[0] == cc[0] and t.cc[1] <= cc[1])
        if ok and (best is None or (best.target and t.cc > best.target.cc)):
            best = Support(True, "sass", t)
    if best:
        return best
    for t in arch.targets:
        if t.ptx and (t.cc == cc if t.suffix == "a" else t.cc <= cc):
            if best is None or (best.target and t.cc > best.target.cc):
                best = Support(True, "ptx", t)
    if best is not None and reach is not None and cc[0] > reach[0]:
        return Support(False, "ptx", best.target, reach)
    return best or Support(False, "none")


# ---------------------------------------------------------------------------------------------
# Releases

def releases() -> Mapping[str, Mapping[str, Any]]:
    return data()["torch_releases"]["rows"]


def releases_newest_first() -> list[str]:
    return list(_releases_sorted())


@functools.cache  # per-GPU checks ask for it once per GPU
def _releases_sorted() -> tuple[str, ...]:
    return tuple(sorted(releases(), key=lambda m: version(m) or Version("0"), reverse=True))


def newest_release() -> str | None:
    order = releases_newest_first()
    return order[0] if order else None


def release_variants(minor: str, platform: Platform = "linux_x86_64") -> list[str]:
    row = releases().get(minor) or {}
    return list((row.get("variants") or {}).get(platform, []))


def latest_patch(minor: str) -> str | None:
    row = releases().get(minor)
    if not row:
        return None
    return max(row["patches"], key=lambda p: version(p) or Version("0"))


def python_supported(torch_version: str, python: str) -> Answer:
    """Whether ``python`` (``"3.11.7"``) has wheels for the torch release; None when either is unknown."""
    minor = minor_of(torch_version)
    py = minor_of(python)
    row = releases().get(minor or "")
    if not row or not py:
        return Answer(None, not_in_table(f"torch {torch_version}") if not row else "no Python version")
    return Answer(py in row["python"], "", row["source"][0], bool(row["verified"]))


def bundled_libs(torch_version: str, variant: str) -> Mapping[str, Any] | None:
    """The cuDNN/NCCL a torch build ships: the measured PyPI pins of that exact patch first, then
    the release's row for the variant."""
    v = version(torch_version)
    if v is None:
        return None
    exact = ".".join(str(p) for p in (*v.release, 0, 0)[:3])
    minor = minor_of(torch_version)
    rows = data()["torch_bundled_libs"]["rows"]
    for want in (exact, minor):
        hits = [r for r in rows if r["torch"] == want and r["variant"] == variant]
        if hits:
            hits.sort(key=lambda r: (r["channel"] != "pypi", not r["verified"]))
            return hits[0]
    return None


def companions(torch_version: str) -> Mapping[str, Any] | None:
    minor = minor_of(torch_version)
    for row in data()["companions"]["rows"]:
        if row["torch"] == minor:
            return row
    return None


def stable_abi_from(package: str) -> str | None:
    """The first release of ``package`` built against torch's stable ABI (it then runs with any torch
    at or above its own release), when the table knows one."""
    for row in data()["companions"].get("stable_abi") or ():
        if row["package"] == package:
            return str(row["from"])
    return None


def companion_torch(package: str, package_version: str) -> str | None:
    """The torch minor a torchvision/torchaudio release was built for."""
    minor = minor_of(package_version)
    for row in data()["companions"]["rows"]:
        if row.get(package) == minor:
            return row["torch"]
    return None


# ---------------------------------------------------------------------------------------------
# Recommendations

@dataclass(frozen=True)
class Recommendation:
    torch: str  # exact patch, e.g. "2.7.1"
    variant: str
    reason: str
    verified: bool
    source: str = ""
    driver_note: str = ""
    extras: tuple[str, ...] = field(default_factory=tuple)

    @property
    def index_url(self) -> str:
        return index_url(self.variant)

    def command(self) -> str:
        pkgs = " ".join((f"torch=={self.torch}", *self.extras))
        return f"pip install --force-reinstall {pkgs} --index-url {self.index_url}"


def driver_runs(cuda: str, driver_cuda_int: int | None) -> Literal["native", "mvc", "unknown"] | None:
    """How a driver that supports CUDA ``driver_cuda_int`` runs code built with ``cuda``.

    ``native``: the driver's CUDA is at least as new. ``mvc``: same major (11 or newer), newer minor —
    runs through CUDA minor-version compatibility (NVIDIA: a driver that reports CUDA X.y is at or
    above the X.x floor). None: a newer major, or a newer minor before CUDA 11 (no minor-version
    compatibility then), which the driver cannot run. ``unknown``: no driver was read."""
    if driver_cuda_int is None:
        return "unknown"
    code = cuda_to_int(cuda)
    if code is None:
        return None
    if code <= driver_cuda_int:
        return "native"
    if code // 1000 == driver_cuda_int // 1000 and code // 1000 >= mvc_from_major():
        return "mvc"
    return None


def recommend(ccs: Sequence[CC], driver_cuda_int: int | None = None, python: str | None = None,
              platform: Platform = "linux_x86_64", current: str | None = None,
              exclude: Iterable[tuple[str, str]] = (), extras: Sequence[str] = ()) -> Recommendation | None:
    """The nearest torch release + CUDA variant whose wheels run on every GPU in ``ccs``, on this
    driver and Python. "Nearest" = the installed release if a variant of it works, else the closest
    newer release, else the closest older one (the smallest change that fixes the problem); without
    an installed release, the newest. Within a release: the highest CUDA the driver runs natively."""
    excluded = set(exclude)
    cur = version(current) if current else None
    order = sorted(releases(), key=lambda m: version(m) or Version("0"))
    if cur is not None:
        cur_minor = Version(f"{cur.release[0]}.{cur.release[1] if len(cur.release) > 1 else 0}")
        newer = [m for m in order if (version(m) or Version("0")) >= cur_minor]
        older = [m for m in order if (version(m) or Version("0")) < cur_minor][::-1]
        candidates = newer + older
    else:
        candidates = order[::-1]
        if driver_cuda_int is None:
            # Neither the installed release nor the driver is known: the newest release built
            # for the lowest CUDA major that runs these GPUs asks the least of a driver nobody read.
            def lowest_cuda(minor: str) -> int:
                codes = [cuda_to_int(variant_cuda(v) or "") or 0 for v in release_variants(minor, platform)
                         if variant_cuda(v) and (a := arch_list(minor, v, platform)) is not None
                         and all(runs_on(a, cc, reach_of(a, variant_cuda(v))).runs for cc in ccs)
                         and (latest_patch(minor) or minor, v) not in excluded and (minor, v) not in excluded]
                return min(codes) if codes else 1 << 30
            # By CUDA major only, and no lower than 12 (drivers since 2022 run it): the newest release
            # within that, never an old release for the sake of a lower minor or an older major.
            candidates = sorted(candidates, key=lambda m: max(lowest_cuda(m) // 1000, 12))
    for minor in candidates:
        row = releases()[minor]
        if python and minor_of(python) not in row["python"]:
            continue
        best: tuple[tuple[bool, int], str, ArchList, str] | None = None
        for variant in release_variants(minor, platform):
            cuda = variant_cuda(variant)
            if cuda is None:
                continue
            patch = latest_patch(minor) or minor
            if (patch, variant) in excluded or (minor, variant) in excluded:
                continue
            code = cuda_to_int(cuda) or 0
            how = driver_runs(cuda, driver_cuda_int)
            if how is None:
                continue
            arch = arch_list(minor, variant, platform)
            if arch is None or not all(runs_on(arch, cc, reach_of(arch, cuda)).runs for cc in ccs):
                continue
            # Unknown driver: the lowest CUDA that works asks the least of it.
            rank = (how == "native", code) if how != "unknown" else (True, -code)
            if best is None or rank > best[0]:
                best = (rank, variant, arch, how)
        if best is not None:
            patch = latest_patch(minor) or minor
            _, variant, arch, how = best
            why = (f"torch {patch}+{variant} carries {arch.describe()}"
                   + ("" if arch.verified else f" (table row from {arch.source}, unverified)"))
            note = ""
            if driver_cuda_int is None:
                need = min_driver(variant_cuda(variant) or "")
                floor = need.minimum or need.floor
                note = (f"needs a driver for CUDA {variant_cuda(variant)}" + (f" (≥ {floor} on Linux)" if floor else "")
                        + "; the driver was not read: nvidia-smi's 'CUDA Version' must be at least that")
            else:
                have = cuda_from_int(driver_cuda_int)
                note = (f"your driver supports CUDA {have}" if how == "native" else
                        f"your driver supports CUDA {have}; CUDA {variant_cuda(variant)} runs on it through "
                        "minor-version compatibility")
            return Recommendation(patch, variant, why, arch.verified, arch.source, note, tuple(extras))
    return None


def last_release_for(cc: CC, platform: Platform = "linux_x86_64") -> tuple[str, str] | None:
    """The newest (release patch, variant) in the table whose wheels run on ``cc``, whatever the driver."""
    for minor in releases_newest_first():
        good = [v for v in release_variants(minor, platform)
                if variant_cuda(v) and (a := arch_list(minor, v, platform)) is not None
                and runs_on(a, cc, reach_of(a, variant_cuda(v))).runs]
        if good:
            return latest_patch(minor) or minor, max(good, key=lambda v: cuda_to_int(variant_cuda(v) or "0") or 0)
    return None


def current_release() -> str | None:
    """The newest release whose variant list is verified: what "a current wheel" means."""
    for minor in releases_newest_first():
        if releases()[minor]["verified"]:
            return minor
    return newest_release()


def supported_by_newest(cc: CC, platform: Platform = "linux_x86_64") -> bool | None:
    """Whether the current release has a wheel for ``cc``; None when it has no arch rows."""
    newest = current_release()
    if newest is None:
        return None
    lists = [(a, variant_cuda(v)) for v in release_variants(newest, platform)
             if variant_cuda(v) and (a := arch_list(newest, v, platform))]
    if not lists:
        return None
    return any(runs_on(a, cc, reach_of(a, cuda)).runs for a, cuda in lists)


@functools.lru_cache(maxsize=256)
def toolkit_row(cuda: str) -> Mapping[str, Any] | None:
    """The ``toolkit_targets`` row of a CUDA minor (``"10.2"``, ``"10.2.89"``), or None."""
    minor = minor_of(cuda)
    for row in data()["toolkit_targets"]["rows"]:
        if row["cuda"] == minor and parse_cc(row["min_cc"]) and parse_cc(row["max_cc"]):
            return row
    return None


def toolkit_range(cuda: str) -> tuple[CC, CC] | None:
    """Lowest and highest CC a CUDA toolkit can compile SASS for, or None when the table lacks it."""
    row = toolkit_row(cuda)
    if row is None:
        return None
    lo, hi = parse_cc(row["min_cc"]), parse_cc(row["max_cc"])
    assert lo is not None and hi is not None
    return lo, hi


def cudnn_tuple(value: Any) -> tuple[int, int, int] | None:
    """cuDNN as torch reports it (``90100``; cuDNN 8: ``8907``) or a string (``"9.10.2.21"``)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        if value >= 10000:
            return value // 10000, value % 10000 // 100, value % 100
        return value // 1000, value % 1000 // 100, value % 100
    v = version(value)
    if v is None:
        return None
    rel = (*v.release, 0, 0)
    return rel[0], rel[1], rel[2]
