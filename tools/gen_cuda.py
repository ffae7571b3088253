"""Generate ``envdoctor/data/cuda.json`` (the CUDA table) from its snapshot, offline.

One row per CUDA toolkit release (GA and each update the driver table lists, 7.0 to 13.x): the minimum
driver on Linux and Windows (the "toolkit driver" of NVIDIA's "CUDA Toolkit and Corresponding Driver
Versions" table), the minor-version-compatibility floor of its major (NVIDIA's compatibility guide), the
architectures its minor added and dropped, and the cuDNN / NCCL builds seen for it.

Inputs:

* ``tools/snapshots/cuda_toolkits.txt`` -- the upstream lines, verbatim, in one block per source:
  ``meson_cuda_*`` (Meson's ``mesonbuild/modules/cuda.py`` at a commit: its copy of NVIDIA's driver
  table, ``_CudaVersion('12.8.1', '572.61', '570.124.06')`` = CUDA, Windows, Linux, and its per-architecture
  CUDA ranges, ``'8.6':  _IsaDef('11.1', None, True)`` = first CUDA, first CUDA without it);
  ``nv_cuda_mvc_page`` (NVIDIA's minor-version-compatibility table, one row a line).
* ``envdoctor/data/compat.json`` ``cudnn_cuda`` (NVIDIA's cuDNN support matrices) and
  ``envdoctor/data/torch_wheels.json`` (the cuDNN / NCCL pins of torch's PyPI wheels built with each CUDA).

    python tools/gen_cuda.py            # rewrite envdoctor/data/cuda.json
    python tools/gen_cuda.py --check    # exit 1 when the shipped table differs (the test runs this)

Refresh (network; never in tests): take ``mesonbuild/modules/cuda.py`` at Meson's newest commit (``git show
<commit>:mesonbuild/modules/cuda.py`` in a clone), paste its ``_CudaVersion(`` and ``_IsaDef(`` lines under a new
``== source meson_cuda_<commit>`` header with the repo, path and commit, and copy NVIDIA's compatibility
table rows from https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html under
``nv_cuda_mvc_page``; then run this script and commit the snapshot with the table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Mapping
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script from anywhere

from tools import _common

SNAPSHOT = "cuda_toolkits.txt"
OUTPUT = os.path.join(_common.ROOT, "envdoctor", "data", "cuda.json")
WHEELS = os.path.join(_common.ROOT, "envdoctor", "data", "torch_wheels.json")
_HEADER_RE = re.compile(r"^== source (\S+)\s*$")
_DRIVER_RE = re.compile(r"_CudaVersion\('([0-9.]+)',\s*'([^']*)',\s*'([^']*)'\)")
_ISA_RE = re.compile(r"'([0-9]+\.[0-9]+[af]?)':\s*_IsaDef\(\s*'([0-9.]+)',\s*(?:'([0-9.]+)'|None)")
_MVC_RE = re.compile(r"^CUDA (\d+)\.x \| >= (\d+)")
_PRE11_RE = re.compile(r"^CUDA (\d+\.\d+) \| >= ?([0-9.]+) \| >= ?([0-9.]+)")


def _vkey(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def read_snapshot(text: str) -> dict[str, dict[str, Any]]:
    """source id -> {"lines": [...], "url": first URL of its header comments, "date": YYYY-MM-DD or None}."""
    blocks: dict[str, dict[str, Any]] = {}
    current: str | None = None
    for line in text.splitlines():
        if m := _HEADER_RE.match(line):
            current = m.group(1)
            blocks[current] = {"lines": [], "url": None, "date": None, "repo": None}
        elif current is None:
            continue
        elif line.startswith("#"):
            block = blocks[current]
            if block["url"] is None and (u := re.search(r"https://\S+", line)):
                block["url"] = u.group(0).rstrip(").,")
            if block["date"] is None and (d := re.search(r"\b(\d{4}-\d{2}-\d{2})\b", line)):
                block["date"] = d.group(1)
            if block["repo"] is None and (r := re.search(r"repo (\S+), path (\S+), commit ([0-9a-f]{40})", line)):
                block["repo"] = {"repo": r.group(1), "path": r.group(2).rstrip(","), "commit": r.group(3)}
        elif line.strip():
            blocks[current]["lines"].append(line)
    return blocks


def _drivers(lines: list[str]) -> list[tuple[str, str | None, str | None]]:
    out = []
    for line in lines:
        if m := _DRIVER_RE.search(line):
            windows = None if m.group(2) == "unknown" else m.group(2)
            linux = None if m.group(3) == "unknown" else m.group(3)
            out.append((m.group(1), linux, windows))
    return sorted(out, key=lambda r: _vkey(r[0]))


def _isas(lines: list[str]) -> list[tuple[str, str, str | None]]:
    return [(m.group(1), m.group(2), m.group(3)) for line in lines if (m := _ISA_RE.search(line))]


def _mvc(lines: list[str]) -> tuple[dict[int, int], dict[str, tuple[str, str]]]:
    floors: dict[int, int] = {}
    pre11: dict[str, tuple[str, str]] = {}
    for line in lines:
        if m := _MVC_RE.match(line):
            floors[int(m.group(1))] = int(m.group(2))
        elif m := _PRE11_RE.match(line):
            pre11[m.group(1)] = (m.group(2), m.group(3))
    return floors, pre11


def _in_range(minor: str, text: str) -> bool:
    """``"12.4"`` in ``"12.0-12.6"`` / ``"11.8"``."""
    lo, _, hi = text.partition("-")
    return _vkey(lo) <= _vkey(minor) <= _vkey(hi or lo)


def build(blocks: Mapping[str, Mapping[str, Any]], compat: Mapping[str, Any], wheels: Mapping[str, Any]) -> dict[str, Any]:
    meson_id = next(sid for sid in blocks if sid.startswith("meson_cuda_"))
    meson = blocks[meson_id]
    mvc = blocks["nv_cuda_mvc_page"]
    drivers = _drivers(meson["lines"])
    isas = _isas(meson["lines"])
    floors, pre11 = _mvc(mvc["lines"])
    minors = sorted({_minor(v) for v, _, _ in drivers}, key=_vkey)
    cudnn_rows = compat["cudnn_cuda"]["rows"]
    rows = []
    seen_minor: set[str] = set()
    for version, linux, windows in drivers:
        minor = _minor(version)
        ga = minor not in seen_minor
        seen_minor.add(minor)
        major = int(minor.split(".")[0])
        prev = minors[minors.index(minor) - 1] if minors.index(minor) else None
        # an architecture is added by the first listed minor at or above its first CUDA, and dropped by the
        # first listed minor at or above the first CUDA without it (the table skips minors NVIDIA never shipped)
        archs = [a for a, lo, hi in isas if ga and _vkey(lo) <= _vkey(minor) and (hi is None or _vkey(minor) < _vkey(hi))]
        added = [a for a, lo, _ in isas if ga and prev is not None and _vkey(prev) < _vkey(lo) <= _vkey(minor)]
        dropped = [a for a, _, hi in isas if ga and prev is not None and hi and _vkey(prev) < _vkey(hi) <= _vkey(minor)]
        cudnn: list[dict[str, str]] = []
        for r in cudnn_rows:
            entry = {"cudnn": r["cudnn"], "source": r["source"]}
            if r["cuda_major"] == major and _in_range(minor, str(r["cuda"])) and entry not in cudnn:
                cudnn.append(entry)
        built = [w for w in wheels["rows"] if w["index"] == "pypi" and w["cuda"] == minor]
        torch_cudnn = sorted({w["cudnn"] for w in built if w["cudnn"]}, key=_vkey)
        torch_nccl = sorted({w["nccl"] for w in built if w["nccl"]}, key=_vkey)
        sources = [meson_id]
        if major >= 11 and major in floors:
            sources.append("nv_cuda_mvc_page")
        sources += sorted({c["source"] for c in cudnn})
        sources += sorted({w["sources"][0] for w in built}, key=_vkey)
        row = {
            "cuda": version, "minor": minor, "first_of_minor": ga, "linux": linux, "windows": windows,
            "mvc": major >= 11 and major in floors,
            "mvc_floor_branch": floors.get(major) if major >= 11 else None,
            "archs": archs, "archs_added": added, "archs_dropped": dropped,
            "cudnn": cudnn, "torch_cudnn": torch_cudnn, "torch_nccl": torch_nccl,
            "sources": sources, "verified": False,
        }
        if minor in pre11:  # NVIDIA's own page gives the pre-11 minimums: it confirms the copy's GA row
            nv_linux, nv_windows = pre11[minor]
            if ga and (nv_linux, nv_windows) == (linux, windows):
                row["verified"] = True
                row["sources"].insert(1, "nv_cuda_mvc_page")
        rows.append(row)
    m_repo = meson["repo"]
    return {
        "schema_version": 1,
        "as_of": meson["date"],
        "newest_cuda": drivers[-1][0],
        "description": ("The CUDA table (shape: cuda.schema.json), generated by tools/gen_cuda.py from "
                        "tools/snapshots/cuda_toolkits.txt, compat.json's cudnn_cuda and torch_wheels.json; never "
                        "edited by hand. linux/windows: the toolkit's minimum driver (null where the copy says "
                        "'unknown': NVIDIA's 13.x table has no Windows column); mvc_floor_branch: the driver branch "
                        "minor-version compatibility needs for the major; archs: per minor (its first row), the "
                        "architectures (sm_XY targets) it compiles for; archs_added/dropped: those it first / no "
                        "longer compiles for, against the minor listed before it; cudnn: the cuDNN "
                        "releases whose support matrix lists the minor; torch_cudnn/torch_nccl: the pins of torch's "
                        "PyPI wheels built with it. verified: NVIDIA's own page confirms the row (else the row rests "
                        "on Meson's copy of NVIDIA's table)."),
        "sources": {
            meson_id: {"said": "from Meson's copy of NVIDIA's CUDA driver table",
                       "url": f"https://github.com/{m_repo['repo']}/blob/{m_repo['commit']}/{m_repo['path']}",
                       "date": meson["date"], "kind": "secondary copy of a vendor table",
                       "note": "mesonbuild/modules/cuda.py: '_DRIVER_TABLE_VERSION' (copied from NVIDIA's CUDA release "
                               "notes, #id7) and '_MICROISA_RANGES_DEF' (from Wikipedia's CUDA GPU table)."},
            "nv_cuda_mvc_page": {"said": "from NVIDIA's CUDA compatibility guide", "url": mvc["url"],
                                 "date": mvc["date"], "kind": "vendor page (primary)",
                                 "note": "Tables 1 and 2 of 'Minor Version Compatibility'."},
        },
        "rows": rows,
    }


def dump(table: Mapping[str, Any]) -> str:
    head = {k: v for k, v in table.items() if k != "rows"}
    text = json.dumps(head, indent=1, ensure_ascii=False)[:-2]
    rows = ",\n".join("  " + json.dumps(r, ensure_ascii=False) for r in table["rows"])
    return text + ',\n "rows": [\n' + rows + "\n ]\n}\n"


def generate() -> str:
    with open(_common.snapshot(SNAPSHOT), encoding="utf-8") as fh:
        blocks = read_snapshot(fh.read())
    with open(WHEELS, encoding="utf-8") as fh:
        wheels = json.load(fh)
    return dump(build(blocks, _common.read_compat(), wheels))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the shipped table differs")
    args = ap.parse_args(argv)
    return _common.write_or_check(generate(), path=OUTPUT, check=args.check)


if __name__ == "__main__":
    sys.exit(main())
