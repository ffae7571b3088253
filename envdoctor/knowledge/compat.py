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
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from packaging.version import Version

from envdoctor.knowledge import datafiles
from envdoctor.knowledge.versions import CC, cc_text, cuda_major, cuda_to_int, minor_of, parse_cc, sm, variant_cuda
from envdoctor.knowledge.versions import parse as version
from envdoctor.model import Source
from envdoctor.record import Record

Platform = Literal["linux_x86_64", "linux_aarch64", "windows_x86_64"]


# ---------------------------------------------------------------------------------------------
# Loading and small parsers

@functools.cache
def data() -> Mapping[str, Any]:
    """The parsed table (≈1 ms); cached for the life of the process."""
    text = datafiles.read_text("compat.json")
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


def said(source_id: str, verified: bool = True) -> str:
    """A table row's provenance in a user's words: ``from PyTorch's release notes, unconfirmed`` (the
    source id stays in the JSON, see :func:`source`)."""
    words = str((data()["sources"].get(source_id) or {}).get("said") or "from envdoctor's compatibility table")
    return words if verified else f"{words}, unconfirmed"


def source(source_id: str, verified: bool = True) -> Source:
    """The :class:`~envdoctor.model.Source` a remedy carries for a table row: id, verified, words, link."""
    return Source(source_id, bool(verified), said(source_id, verified), source_url(source_id))


# ---------------------------------------------------------------------------------------------
# Drivers

class DriverNeed(Record):
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


def _v(text: Any) -> Version:
    """A table cell's version, for ordering rows (every version cell in the table parses; the data
    tests hold that)."""
    return version(text) or Version("0")


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


@functools.lru_cache(maxsize=1024)  # pure table lookups, asked again for every report judged
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


class Answer(Record):
    """A table answer with its provenance, or ``value=None`` and a note saying why."""

    value: Any
    note: str = ""
    source: str = ""
    verified: bool = False
    at_least: bool = False  # the true answer may be higher (input newer than the table)


@functools.lru_cache(maxsize=1024)  # pure table lookups, asked again for every report judged
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
            if best is None or _v(row["cuda"]) >= _v(best["cuda"]):
                best = row
    if best is None:
        oldest = min((r for r in data()["toolkit_drivers"]["rows"] if r[key]), key=lambda r: _v(r[key]))
        return Answer(None, not_in_table(f"driver {driver}") + f" (older than every toolkit in it; the oldest, "
                      f"CUDA {oldest['cuda']}, needs {oldest[key]})")
    newest = max((r for r in data()["toolkit_drivers"]["rows"] if r[key]), key=lambda r: _v(r["cuda"]))
    at_least = best is newest or best["cuda"] == newest["cuda"]
    note = (f"driver {driver} is newer than the table's newest toolkit minimum; it supports at least CUDA "
            f"{best['cuda']} ({not_in_table('anything newer')})") if at_least else ""
    return Answer(best["cuda"], note, best["source"], bool(best["verified"]), at_least)


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

class GpuInfo(Record):
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
            out.append((_bounded(pat), row))
    return tuple(out)


def _bounded(pattern: str) -> re.Pattern[str]:
    """A ``match`` regex of the table, anchored at word edges of the normalised name."""
    return re.compile(r"(?<![a-z0-9])(?:" + pattern + r")(?![a-z0-9])")


@functools.lru_cache(maxsize=1024)  # pure table lookups, asked again for every report judged
def _gpu_row(name: str) -> Mapping[str, Any] | None:
    """The table's row for a product name: the longest match wins."""
    text = normalize_gpu_name(name)
    best: tuple[int, Mapping[str, Any]] | None = None
    for rx, row in _gpu_patterns():
        m = rx.search(text)
        if m and (best is None or len(m.group(0)) > best[0]):
            best = (len(m.group(0)), row)
    return best[1] if best else None


def gpu_by_name(name: str) -> GpuInfo | None:
    """Fuzzy product lookup: ``"NVIDIA GeForce RTX 5090"`` -> CC 12.0. The longest match wins."""
    row = _gpu_row(name)
    if row is None:
        return None
    cc = parse_cc(row["cc"])
    assert cc is not None
    return GpuInfo(row["name"], cc, row["architecture"], row["segment"], bool(row.get("integrated")),
                   row["source"], bool(row["verified"]))


class Peaks(Record):
    """Dense (no 2:4 sparsity) datasheet peaks of one GPU model, from its ``gpus`` row."""

    model: str
    tflops: Mapping[str, float]  # fp32 / tf32 / bf16 / fp16 -> TFLOP/s
    memory_gbps: float | None  # memory bandwidth, GB/s
    source: str  # a source id of the table
    verified: bool

    @property
    def url(self) -> str:
        return source_url(self.source)


def gpu_peaks(name: str | None) -> Peaks | None:
    """The datasheet peaks for a device name as torch or NVML reports it (``"NVIDIA H100 PCIe"``),
    or for a model name these peaks carry (``"H100 PCIe"``); None for a GPU the table has no peaks
    for. Within the product's row the first variant whose ``match`` matches wins, else the variant
    without one."""
    if not name:
        return None
    row = _gpu_row(name)
    variants = [v for v in (row or {}).get("peaks") or () if isinstance(v, Mapping)]
    text = normalize_gpu_name(name)
    chosen = next((v for v in variants if v.get("match") and _bounded(str(v["match"])).search(text)), None)
    if chosen is None:
        chosen = next((v for v in variants if not v.get("match")), None)
    if chosen is None:
        return None
    bandwidth = chosen.get("memory_bandwidth_gbps")
    return Peaks(str(chosen["model"]), {str(k): float(v) for k, v in chosen["peak_tflops"].items()},
                 float(bandwidth) if isinstance(bandwidth, (int, float)) else None,
                 str(chosen["source"]), bool(chosen["verified"]))


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

class Target(Record):
    cc: CC
    ptx: bool = False
    suffix: str = ""  # "a" (arch-specific) or "f" (family-specific)

    def label(self) -> str:
        return f"{'compute' if self.ptx else 'sm'}_{self.cc[0]}{self.cc[1]}{self.suffix}"


class ArchList(Record):
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


class Support(Record):
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


def known_patch(torch_version: str | None) -> str | None:
    """The exact release ``torch_version`` names (``"2.6.0+cu126"`` -> ``"2.6.0"``) when the table lists
    that patch; None for anything else (a typo such as ``7.0``, a nightly, a release newer than the table),
    so no command ever pins a torch that does not exist."""
    v = version(str(torch_version or "").split("+", 1)[0])
    if v is None or v.is_prerelease or v.is_devrelease or v.local:
        return None
    row = releases().get(minor_of(str(v)) or "")
    if not row:
        return None
    for patch in row["patches"]:
        if version(patch) == v:
            return str(patch)
    return None


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
    if cuda_major(code) == cuda_major(driver_cuda_int) and cuda_major(code) >= mvc_from_major():
        return "mvc"
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


def source_build_for(cc: CC, platform: Platform = "linux_x86_64") -> tuple[str, str] | None:
    """The newest (release patch, CUDA) from which torch can be built from source with kernels for ``cc``:
    a release that was built with a CUDA toolkit that still compiles for ``cc``. None when no release in
    the table was built with such a toolkit: then a source build is no way out either (a GeForce 210,
    CC 1.2, has no toolkit newer than CUDA 6.5; torch was never built with one that old)."""
    for minor in releases_newest_first():
        cudas = sorted({c for v in release_variants(minor, platform) if (c := variant_cuda(v))},
                       key=lambda c: cuda_to_int(c) or 0, reverse=True)
        for cuda in cudas:
            rng = toolkit_range(cuda)
            if rng is not None and rng[0] <= cc <= rng[1]:
                return latest_patch(minor) or minor, cuda
    return None


def oldest_torch_cuda(platform: Platform = "linux_x86_64") -> str | None:
    """The oldest CUDA any torch release in the table was built with on ``platform``."""
    cudas = {c for m in releases() for v in release_variants(m, platform) if (c := variant_cuda(v))}
    return min(cudas, key=lambda c: cuda_to_int(c) or 0) if cudas else None


def current_release() -> str | None:
    """The newest release whose variant list is verified: what "current torch" means, for every check
    and remedy (gpu-eol, python-supported, the CPU wheel, the default variant). A newer release whose
    row is not confirmed yet is known (:func:`newest_release`) but never called current."""
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


# ---------------------------------------------------------------------------------------------
# CUDA libraries: file name -> family -> the NVIDIA pip wheel that ships it

class CudaLibrary(Record):
    """One ``cuda_libraries`` row: the libraries whose file name starts with ``prefix``."""

    prefix: str  # "libcudart", "libcudnn" (libcudnn_ops too), "libcuda." (the driver's)
    family: str  # what a loader or symbol error calls it: "cudart", "cublas" (libcublasLt too)
    wheel: str | None  # the pip distribution without its -cuNN suffix; None: not from a CUDA wheel
    wheel_dir: str | None  # site-packages/nvidia/<wheel_dir>/lib of its suffixed (CUDA <= 12) wheel
    always_suffixed: bool = False  # -cuNN even for CUDA 13 (nvidia-cudnn-cu13)
    soname_major_is_cuda: bool = False  # libcudart.so.12 is CUDA 12's
    symbols: tuple[str, ...] = ()  # prefixes of the symbols the family defines
    role: str = "toolkit"  # "driver" (the NVIDIA driver ships it), "torch" (torch's own), "toolkit" (a CUDA library)
    windows_names: tuple[str, ...] = ()  # DLL stems that are not the prefix without "lib" (nvcuda for libcuda)
    title: str = ""  # what a finding calls the family: "the CUDA runtime", "cuDNN"


@functools.cache
def cuda_libraries() -> tuple[CudaLibrary, ...]:
    """Every row of the ``cuda_libraries`` table, in its order."""
    return tuple(CudaLibrary(str(r["prefix"]), str(r["family"]), r.get("wheel"), r.get("wheel_dir"),
                             bool(r.get("always_suffixed", False)), bool(r.get("soname_major_is_cuda", False)),
                             tuple(r.get("symbols", ())), str(r.get("role", "toolkit")),
                             tuple(r.get("windows_names", ())), str(r.get("title", r["family"])))
                 for r in data()["cuda_libraries"]["rows"])


def _longest(candidates: Iterable[tuple[str, CudaLibrary]], text: str) -> CudaLibrary | None:
    best: tuple[str, CudaLibrary] | None = None
    for prefix, lib in candidates:
        if text.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, lib)
    return best[1] if best else None


def cuda_library(file_name: str) -> CudaLibrary | None:
    """The row of a library file (``"libcublasLt.so.12"``, a path, ``"libnvrtc-builtins.so.12.8"``): the
    longest prefix of its base name; None for anything else. A Windows DLL (``cudart64_110.dll``,
    ``cudnn_ops_infer64_8.dll``, ``nvcuda.dll``, a ``C:\\…`` path) is the row whose prefix is ``lib`` + its
    stem's start, or whose ``windows_names`` holds its stem."""
    base = file_name.replace("\\", "/").rsplit("/", 1)[-1]
    if base.lower().endswith(".dll"):
        stem = base[:-4]
        named = next((lib for lib in cuda_libraries() if stem.lower() in (n.lower() for n in lib.windows_names)), None)
        return named or _longest(((lib.prefix, lib) for lib in cuda_libraries() if not lib.prefix.endswith(".")),
                                 "lib" + stem)
    return _longest(((lib.prefix, lib) for lib in cuda_libraries()), base)


#: auditwheel's renamed copies (``libcudart-a7b20f20.so.11.0``) belong to the wheel that bundled them
#: (older torch wheels, in torch/lib), not to NVIDIA's.
_BUNDLED_COPY_RE = re.compile(r"-[0-9a-f]{8}\.so(\.|$)")


def wheel_library(file_name: str) -> CudaLibrary | None:
    """The row of a library file that NVIDIA's pip wheel ships (None for the driver's libraries,
    torch's own and auditwheel's bundled copies)."""
    lib = cuda_library(file_name)
    if lib is None or lib.wheel is None or _BUNDLED_COPY_RE.search(file_name.rsplit("/", 1)[-1]):
        return None
    return lib


def cuda_library_by_symbol(symbol: str) -> CudaLibrary | None:
    """The row whose family defines ``symbol`` (``"__nvJitLinkComplete_12_4"`` -> nvJitLink)."""
    return _longest(((prefix, lib) for lib in cuda_libraries() for prefix in lib.symbols), symbol)


def library_family(name: str | None) -> str | None:
    """``"libcusparse.so.12"`` (or a path) -> ``"cusparse"``; a symbol name -> the family that defines it."""
    if not name:
        return None
    lib = cuda_library(name) or cuda_library_by_symbol(name.rsplit("/", 1)[-1])
    return lib.family if lib else None


def family_library(family: str) -> CudaLibrary | None:
    """A family's main library, its first row: ``"cublas"`` -> libcublas (not libcublasLt)."""
    return next((lib for lib in cuda_libraries() if lib.family == family), None)


def family_title(family: str | None) -> str | None:
    """What a finding calls a family: ``"cudart"`` -> ``"the CUDA runtime"``; None for an unknown family."""
    lib = family_library(family) if family else None
    return lib.title if lib else None


def family_role(family: str | None) -> str | None:
    """``"driver"`` (libcuda, NVML: the NVIDIA driver's), ``"torch"`` or ``"toolkit"``; None for an unknown family."""
    lib = family_library(family) if family else None
    return lib.role if lib else None


def family_wheel(family: str) -> str | None:
    """The pip distribution (without -cuNN) that ships a family: ``"cudart"`` -> ``"nvidia-cuda-runtime"``."""
    lib = family_library(family)
    return lib.wheel if lib else None


def wheel_name(wheel: str, cuda_major: int | str) -> str:
    """The distribution for a CUDA major: ``("nvidia-cuda-runtime", 12)`` -> ``"nvidia-cuda-runtime-cu12"``,
    ``("nvidia-cuda-runtime", 13)`` -> ``"nvidia-cuda-runtime"``,
    ``("nvidia-cudnn", 13)`` -> ``"nvidia-cudnn-cu13"`` (always suffixed)."""
    table = data()["cuda_libraries"]
    suffixed = {lib.wheel for lib in cuda_libraries() if lib.always_suffixed}
    if int(cuda_major) <= int(table["suffix_until_cuda_major"]) or wheel in suffixed:
        return f"{wheel}-cu{int(cuda_major)}"
    return wheel


def wheel_dist_stem(wheel: str) -> str:
    """The start of a wheel's ``.dist-info`` folder name: ``"nvidia-cuda-runtime"`` -> ``"nvidia_cuda_runtime"``
    (``nvidia_cuda_runtime_cu12-12.4.127.dist-info``)."""
    return wheel.replace("-", "_")


def wheel_lib_dir(lib: CudaLibrary, cuda_major: int | None) -> str | None:
    """The ``site-packages/nvidia/<dir>`` holding a family's libraries for a CUDA major: its own folder up to
    the last suffixed major (``cuda_runtime``), the shared one after (``cu13``), its own when always suffixed."""
    table = data()["cuda_libraries"]
    if cuda_major is None or lib.always_suffixed or cuda_major <= int(table["suffix_until_cuda_major"]):
        return lib.wheel_dir
    return table["shared_wheel_dirs"].get(str(cuda_major), lib.wheel_dir)


def shared_wheel_dirs() -> tuple[str, ...]:
    """The ``site-packages/nvidia/<dir>`` folders that CUDA 13+ toolkit wheels share (``"cu13"``)."""
    return tuple(str(d) for d in data()["cuda_libraries"]["shared_wheel_dirs"].values())
