"""Generate ``envdoctor/data/torch_wheels.json`` (the torch wheel matrix) from its snapshot, offline.

One row per torch release (patch) from 1.7.0 x platform x variant: the CUDA it was built with, its
SASS/PTX arch list, the ``nvidia-*`` / triton pins of the wheel's metadata, the Python versions it has
wheels for, the torchvision/torchaudio releases built for it, its date and its sources.

Inputs:

* ``tools/snapshots/pypi_torch_wheels.json`` -- what PyPI holds (written by ``--refresh``): per torch
  release the upload date and the wheel file tags; per platform one wheel's ``*.dist-info/METADATA``
  (``Requires-Python``, the ``nvidia-*`` and triton ``Requires-Dist`` pins) and ``torch/version.py``
  (``__version__`` with its local tag, ``cuda``); per torchvision / torchaudio release the torch it pins
  (``Requires-Dist: torch==X``).
* ``envdoctor/data/compat.json`` -- the variants each release has on PyTorch's own index
  (``torch_releases`` ``variants``) and the arch lists (``torch_arch_lists``), each row with its source.

A PyPI row (``index: "pypi"``) is what that wheel says of itself; a row of PyTorch's index
(``index: "pytorch"``) holds the variant and arch list compat.json cites, and no pins or Python list
(those wheels are not on PyPI, and the snapshot did not read them). A release compat.json has no row for
has PyPI rows only.

    python tools/gen_torch_wheels.py            # rewrite envdoctor/data/torch_wheels.json
    python tools/gen_torch_wheels.py --check    # exit 1 when the shipped table differs (the test runs this)
    python tools/gen_torch_wheels.py --refresh  # with network (PyPI): read the wheels again, then rewrite
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script from anywhere

from tools import _common

SNAPSHOT = "pypi_torch_wheels.json"
OUTPUT = os.path.join(_common.ROOT, "envdoctor", "data", "torch_wheels.json")
FIRST = (1, 7)  # the matrix starts at torch 1.7
COMPANIONS = ("torchvision", "torchaudio")
PLATFORM_TAGS = (  # wheel platform tag -> the matrix's platform
    (re.compile(r"(many)?linux.*_x86_64"), "linux_x86_64"),
    (re.compile(r"(many)?linux.*_aarch64"), "linux_aarch64"),
    (re.compile(r"win_amd64"), "windows_x86_64"),
    (re.compile(r"macosx_.*_arm64"), "macos_arm64"),
    (re.compile(r"macosx_.*_x86_64"), "macos_x86_64"),
)
_PIN_RE = re.compile(r"^((?:nvidia-[a-z0-9-]+)|cuda-toolkit|triton|pytorch-triton[a-z-]*)(?:\[[^\]]*\])?\s*\(?==\s*"
                     r"([0-9][^;,\s)]*)\)?")
_VERSION_LINE_RE = re.compile(r"^(__version__|cuda|hip)\s*(:[^=]*)?=")  # the torch/version.py lines kept
_TORCH_REQ_RE = re.compile(r"^torch\s*\(?\s*([<>=!~][^;)]*)\)?")  # "torch==2.8.0", "torch (==1.7.0)", "torch>=2.14.0"


def _vkey(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text.split("+", 1)[0])[:3])


def _release(text: str) -> bool:
    """A final release (no rc / dev / post suffix)."""
    return re.fullmatch(r"\d+\.\d+(\.\d+)?", text) is not None


def platform_of(tag: str) -> str | None:
    for rx, name in PLATFORM_TAGS:
        if rx.fullmatch(tag):
            return name
    return None


def _python_of(tag: str) -> str | None:
    """``cp312`` -> ``3.12``; ``cp314t`` (free-threaded) -> ``3.14t``; ``cp37m`` -> ``3.7``."""
    m = re.fullmatch(r"cp3(\d+)(t?)m?", tag)
    return f"3.{m.group(1)}{m.group(2)}" if m else None


def _wheel_tags(filename: str) -> tuple[str, str, str] | None:
    """``torch-2.8.0-cp312-cp312-manylinux_2_28_x86_64.whl`` -> (python, abi, platform)."""
    if not filename.endswith(".whl"):
        return None
    parts = filename[:-4].split("-")
    return (parts[-3], parts[-2], parts[-1]) if len(parts) >= 5 else None


# ---------------------------------------------------------------------------------------------
# Refresh (network; never in tests)

def _pins(metadata: str) -> tuple[str | None, list[str]]:
    requires_python = None
    pins = []
    for line in metadata.splitlines():
        if line.startswith("Requires-Python:"):
            requires_python = line.split(":", 1)[1].strip()
        elif line.startswith("Requires-Dist:"):
            value = line.split(":", 1)[1].strip()
            if "extra ==" not in value and (_PIN_RE.match(value) or _TORCH_REQ_RE.match(value)):
                pins.append(value)
    return requires_python, pins


def _probe(url: str, size: int, dist: str) -> dict[str, Any]:
    from tools import pypi_wheels

    meta_rx = re.compile(rf"{dist}-[^/]+\.dist-info/METADATA")
    ver_rx = re.compile(r"torch/version\.py")
    wanted = [meta_rx, ver_rx] if dist == "torch" else [meta_rx]
    got = pypi_wheels.members(url, size, wanted)
    requires_python, pins = _pins(got.get(meta_rx.pattern, ""))
    out: dict[str, Any] = {"requires_python": requires_python, "requires_dist": pins}
    version_py = got.get(ver_rx.pattern, "")
    if dist == "torch":
        out["version_py"] = [line.rstrip() for line in version_py.splitlines() if _VERSION_LINE_RE.match(line)]
    return out


def _pick(files: list[dict[str, Any]], platform: str) -> dict[str, Any] | None:
    """One wheel of a platform to read: the highest CPython tag that is not free-threaded (or ``py3``)."""
    best = None
    for f in files:
        tags = _wheel_tags(str(f["filename"]))
        if tags is None or platform_of(tags[2]) != platform or tags[1].endswith("t"):
            continue
        py = _python_of(tags[0]) or ("3.0" if tags[0] == "py3" else None)
        if py and (best is None or _vkey(py) > _vkey(best[0])):
            best = (py, f)
    return best[1] if best else None


def refresh() -> dict[str, Any]:
    from tools import pypi_wheels

    snap: dict[str, Any] = {
        "about": ("What PyPI holds for torch, torchvision and torchaudio, read by tools/gen_torch_wheels.py "
                  "--refresh from PyPI's JSON API (https://pypi.org/pypi/<project>/json) and, per platform, one "
                  "wheel's *.dist-info/METADATA and torch/version.py (HTTP range reads of the wheel; only the "
                  "lines that matter are kept)."),
        "fetched": datetime.date.today().isoformat(),
    }
    jobs: list[tuple[str, str, str, dict[str, Any]]] = []
    for dist in ("torch", *COMPANIONS):
        api = f"{pypi_wheels.PYPI}/pypi/{dist}/json"
        releases = pypi_wheels.project(dist)["releases"]
        rows: dict[str, Any] = {}
        for version, files in sorted(releases.items(), key=lambda kv: _vkey(kv[0])):
            files = [f for f in files if not f.get("yanked") and str(f["filename"]).endswith(".whl")]
            if not _release(version) or not files or (dist == "torch" and _vkey(version)[:2] < FIRST):
                continue
            uploaded = min(str(f["upload_time"])[:10] for f in files)
            tags = sorted({"-".join(t) for f in files if (t := _wheel_tags(str(f["filename"])))})
            row: dict[str, Any] = {"uploaded": uploaded, "url": f"https://pypi.org/project/{dist}/{version}/"}
            if dist == "torch":
                row["wheels"] = tags
                row["probes"] = {}
                for platform in sorted({p for _, _, t in map(_wheel_tags_or_none, tags) if (p := platform_of(t))}):
                    f = _pick(files, platform)
                    if f is not None:
                        jobs.append((dist, version, platform, {"url": pypi_wheels.file_url(api, f),
                                                               "size": int(f["size"]), "wheel": f["filename"]}))
            else:
                f = _pick(files, "linux_x86_64") or _pick(files, "windows_x86_64") or _pick(files, "macos_arm64")
                if f is not None:
                    jobs.append((dist, version, "", {"url": pypi_wheels.file_url(api, f), "size": int(f["size"]),
                                                     "wheel": f["filename"]}))
            rows[version] = row
        snap[dist] = rows

    def run(job: tuple[str, str, str, dict[str, Any]]) -> tuple[str, str, str, dict[str, Any]]:
        dist, version, platform, f = job
        try:
            probe = _probe(f["url"], f["size"], dist)
        except (OSError, ValueError) as exc:
            probe = {"error": f"{type(exc).__name__}: {exc}"[:200]}
        return dist, version, platform, {"wheel": f["wheel"], **probe}

    with ThreadPoolExecutor(max_workers=6) as pool:
        for dist, version, platform, probe in pool.map(run, jobs):
            row = snap[dist][version]
            if dist == "torch":
                row["probes"][platform] = probe
            else:
                pins = [p for p in probe.get("requires_dist", []) if _TORCH_REQ_RE.match(p)]
                row["wheel"] = probe["wheel"]
                row["torch"] = pins
                if "error" in probe:
                    row["error"] = probe["error"]
    return snap


def _wheel_tags_or_none(tag: str) -> tuple[str, str, str]:
    py, abi, plat = tag.split("-", 2)
    return py, abi, plat


def dump_snapshot(snap: Mapping[str, Any]) -> str:
    """One release a line, so a refresh's diff reads as the releases that changed."""
    lines = ["{"]
    keys = list(snap)
    for i, key in enumerate(keys):
        comma = "," if i < len(keys) - 1 else ""
        value = snap[key]
        if isinstance(value, dict):
            lines.append(f" {json.dumps(key)}: {{")
            inner = list(value.items())
            for j, (k, v) in enumerate(inner):
                lines.append(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False, sort_keys=True)}"
                             + ("," if j < len(inner) - 1 else ""))
            lines.append(" }" + comma)
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Generate (offline)

def _minor(version: str) -> str:
    return ".".join(str(p) for p in _vkey(version)[:2])


def version_py(lines: list[str]) -> dict[str, str | None]:
    """The ``__version__``, ``cuda`` and ``hip`` of torch/version.py's lines (None where ``None``)."""
    out: dict[str, str | None] = {"__version__": None, "cuda": None, "hip": None}
    for line in lines:
        m = re.match(r"^(__version__|cuda|hip)\s*(?::[^=]*)?=\s*(?:'([^']*)'|\"([^\"]*)\"|None)", line)
        if m:
            out[m.group(1)] = m.group(2) or m.group(3) or None
    return out


def _variant(cuda: str | None, hip: str | None) -> str:
    if cuda:
        return "cu" + cuda.replace(".", "")
    if hip:
        return "rocm" + ".".join(hip.split(".")[:2])
    return "cpu"


def _variant_cuda(variant: str) -> str | None:
    if not variant.startswith("cu"):
        return None
    digits = variant[2:]
    return f"{digits[:-1]}.{digits[-1]}"


def _companions(snap: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """torch release -> {"torchvision": "0.23.0", "torchaudio": "2.8.0"}: per companion, its newest release
    whose ``Requires-Dist: torch…`` admits that torch (``==2.8.0`` up to torchvision 0.2x, ``>=2.14.0`` once
    built against torch's stable ABI) and that was on PyPI no earlier than that torch's predecessor."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import Version

    out: dict[str, dict[str, str]] = {}
    torches = sorted((snap.get("torch") or {}), key=_vkey)
    for dist in COMPANIONS:
        rows = sorted((snap.get(dist) or {}).items(), key=lambda kv: _vkey(kv[0]))
        for torch in torches:
            for version, row in rows:
                for req in row.get("torch", []):
                    m = _TORCH_REQ_RE.match(req)
                    try:
                        spec = SpecifierSet(m.group(1).replace(" ", "")) if m else None
                    except InvalidSpecifier:
                        spec = None
                    if spec is not None and Version(torch) in spec:
                        out.setdefault(torch, {})[dist] = version  # rows ascend: the newest wins
    return out


def _arch(compat: Mapping[str, Any], minor: str, variant: str, platform: str) -> Mapping[str, Any] | None:
    for row in compat["torch_arch_lists"]["rows"]:
        if row["torch"] == minor and row["variant"] == variant and row["platform"] == platform:
            return row
    return None


_MARKER_ENV = {
    "linux_x86_64": {"platform_system": "Linux", "sys_platform": "linux", "platform_machine": "x86_64"},
    "linux_aarch64": {"platform_system": "Linux", "sys_platform": "linux", "platform_machine": "aarch64"},
    "windows_x86_64": {"platform_system": "Windows", "sys_platform": "win32", "platform_machine": "AMD64"},
    "macos_arm64": {"platform_system": "Darwin", "sys_platform": "darwin", "platform_machine": "arm64"},
    "macos_x86_64": {"platform_system": "Darwin", "sys_platform": "darwin", "platform_machine": "x86_64"},
}


def _applies(requirement: str, platform: str, python: str) -> bool:
    """Whether a Requires-Dist line's marker holds on the platform (with the wheel's Python)."""
    from packaging.markers import InvalidMarker, Marker

    _, sep, marker = requirement.partition(";")
    if not sep:
        return True
    try:
        return Marker(marker.strip()).evaluate({**_MARKER_ENV[platform], "python_version": python,
                                                "python_full_version": python + ".0"})
    except InvalidMarker:
        return False


def _pin_fields(pins: list[str], platform: str, python: str) -> tuple[dict[str, str], str | None, str | None]:
    out: dict[str, str] = {}
    for pin in pins:
        m = _PIN_RE.match(pin)
        if m and _applies(pin, platform, python):
            out[m.group(1)] = m.group(2)
    cudnn = next((v for k, v in out.items() if k.startswith("nvidia-cudnn")), None)
    nccl = next((v for k, v in out.items() if k.startswith("nvidia-nccl")), None)
    return dict(sorted(out.items())), cudnn, nccl


def build(snap: Mapping[str, Any], compat: Mapping[str, Any]) -> dict[str, Any]:
    companions = _companions(snap)
    releases = compat["torch_releases"]["rows"]
    rows: list[dict[str, Any]] = []
    sources: dict[str, Any] = {}
    for version, rel in sorted((snap.get("torch") or {}).items(), key=lambda kv: _vkey(kv[0])):
        minor = _minor(version)
        sid = f"pypi_torch_{version}"
        sources[sid] = {"said": f"from torch {version}'s wheels on PyPI", "url": rel["url"],
                        "date": rel["uploaded"]}
        pythons: dict[str, list[str]] = {}
        for tag in rel["wheels"]:
            py, _, plat = _wheel_tags_or_none(tag)
            platform, pyv = platform_of(plat), _python_of(py)
            if platform and pyv and pyv not in pythons.setdefault(platform, []):
                pythons[platform].append(pyv)
        comp = companions.get(version, {})
        row_src = [sid] + [f"pypi_{d}_{comp[d]}" for d in COMPANIONS if d in comp]
        for d in COMPANIONS:
            if d in comp:
                crow = snap[d][comp[d]]
                sources[f"pypi_{d}_{comp[d]}"] = {"said": f"from {d} {comp[d]}'s wheel metadata on PyPI",
                                                  "url": crow["url"], "date": crow["uploaded"]}
        seen: set[tuple[str, str]] = set()
        for platform in sorted(rel.get("probes") or {}):
            probe = rel["probes"][platform]
            said = version_py(probe.get("version_py") or [])
            if "error" in probe or said["__version__"] is None:
                continue
            cuda = said["cuda"]
            variant = _variant(cuda, said["hip"])
            wheel_py = _python_of(_wheel_tags(str(probe["wheel"]))[0]) if _wheel_tags(str(probe["wheel"])) else None
            pins, cudnn, nccl = _pin_fields(probe.get("requires_dist", []), platform, (wheel_py or "3.12").rstrip("t"))
            arch = _arch(compat, minor, variant, platform) if cuda else None
            rows.append(_row(version, platform, variant, "pypi", cuda, arch,
                             sorted(pythons.get(platform, []), key=_vkey), probe.get("requires_python"),
                             pins, cudnn, nccl, comp, rel["uploaded"], row_src, probe["wheel"]))
            seen.add((platform, variant))
        for platform, variants in sorted(((releases.get(minor) or {}).get("variants") or {}).items()):
            if version not in (releases.get(minor) or {}).get("patches", []):
                continue
            rsrc = (releases[minor].get("source") or [])
            for variant in variants:
                if (platform, variant) in seen:
                    continue
                cuda = _variant_cuda(variant)
                arch = _arch(compat, minor, variant, platform) if cuda else None
                rows.append(_row(version, platform, variant, "pytorch", cuda, arch, None, None, {}, None, None,
                                 comp, rel["uploaded"], row_src + [s for s in rsrc if s not in row_src], None,
                                 verified=bool(releases[minor].get("verified"))))
    newest = max((snap.get("torch") or {"0": None}), key=_vkey)
    return {
        "schema_version": 1,
        "as_of": snap.get("fetched"),
        "newest_torch": newest,
        "description": ("The torch wheel matrix (shape: torch_wheels.schema.json), generated by "
                        "tools/gen_torch_wheels.py from tools/snapshots/pypi_torch_wheels.json and compat.json's "
                        "torch_releases / torch_arch_lists; never edited by hand. index 'pypi': the wheel on PyPI, "
                        "read from its own metadata and torch/version.py; index 'pytorch': a variant of PyTorch's "
                        "own index that compat.json cites (no pins, no Python list read)."),
        "sources": dict(sorted(sources.items(), key=lambda kv: kv[0])),
        "rows": rows,
    }


def _row(version: str, platform: str, variant: str, index: str, cuda: str | None, arch: Mapping[str, Any] | None,
         python: list[str] | None, requires_python: str | None, pins: dict[str, str], cudnn: str | None,
         nccl: str | None, comp: Mapping[str, str], released: str, sources: list[str], wheel: str | None,
         verified: bool = True) -> dict[str, Any]:
    return {
        "torch": version, "platform": platform, "variant": variant, "index": index, "cuda": cuda,
        "sass": list(arch["sass"]) if arch else None, "ptx": list(arch["ptx"]) if arch else None,
        "arch_source": arch["source"] if arch else None,
        "arch_verified": bool(arch["verified"]) if arch else None,
        "python": python, "requires_python": requires_python, "pins": pins, "cudnn": cudnn, "nccl": nccl,
        "torchvision": comp.get("torchvision"), "torchaudio": comp.get("torchaudio"),
        "released": released, "wheel": wheel, "sources": sources, "verified": verified,
    }


def dump(table: Mapping[str, Any]) -> str:
    """The file's text: the head indented, one row a line."""
    head = {k: v for k, v in table.items() if k != "rows"}
    text = json.dumps(head, indent=1, ensure_ascii=False)[:-2]
    rows = ",\n".join("  " + json.dumps(r, ensure_ascii=False) for r in table["rows"])
    return text + ',\n "rows": [\n' + rows + "\n ]\n}\n"


def read_snapshot() -> dict[str, Any]:
    with open(_common.snapshot(SNAPSHOT), encoding="utf-8") as fh:
        return json.load(fh)


def generate() -> str:
    return dump(build(read_snapshot(), _common.read_compat()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the shipped table differs")
    ap.add_argument("--refresh", action="store_true", help="read PyPI again (network), then rewrite")
    args = ap.parse_args(argv)
    if args.refresh:
        with open(_common.snapshot(SNAPSHOT), "w", encoding="utf-8") as fh:
            fh.write(dump_snapshot(refresh()))
    return _common.write_or_check(generate(), path=OUTPUT, check=args.check)


if __name__ == "__main__":
    sys.exit(main())
