"""Generate ``envdoctor/data/tensorflow.json`` (TensorFlow's tested GPU builds) from its snapshot, offline.

One row per TensorFlow release and platform in TensorFlow's own "Tested build configurations" GPU tables
(tensorflow.org/install/source#gpu for Linux, tensorflow.org/install/source_windows#gpu for native Windows):
the package name, the Python versions, and the CUDA and cuDNN the release was built and tested with.

Input: ``tools/snapshots/tensorflow_tested_builds.txt`` -- the ``<tr>`` rows of the two tables, verbatim, in one
block per source (``== source ID`` then ``repo``, ``path``, ``commit`` and ``date`` lines).

    python tools/gen_tensorflow.py            # rewrite envdoctor/data/tensorflow.json
    python tools/gen_tensorflow.py --check    # exit 1 when the shipped table differs (the test runs this)

Refresh (network; never in tests): in a clone of tensorflow/docs at its newest commit, replace each block's rows
with the rows of ``site/en/install/source.md``'s "#### GPU" table and ``source_windows.md``'s "### GPU" table, and
its commit and date lines (``git log -1 --format=%cs``); then run this script and commit the snapshot with the table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script from anywhere

from tools import _common

SNAPSHOT = "tensorflow_tested_builds.txt"
OUTPUT = os.path.join(_common.ROOT, "envdoctor", "data", "tensorflow.json")
_HEADER_RE = re.compile(r"^== source (\S+)\s*$")
_FIELD_RE = re.compile(r"^(repo|path|commit|date) (\S+)\s*$")
_CELL_RE = re.compile(r"<td>(.*?)</td>")
_NAME_RE = re.compile(r"^(tensorflow(?:_gpu)?)-(\d+\.\d+\.\d+)$")
_PLATFORMS = {"tf_tested_builds_linux": "linux", "tf_tested_builds_windows": "windows"}
_SAID = {"linux": "from TensorFlow's tested build configurations for Linux",
         "windows": "from TensorFlow's tested build configurations for Windows"}
_PAGES = {"linux": "https://www.tensorflow.org/install/source#gpu",
          "windows": "https://www.tensorflow.org/install/source_windows#gpu"}


def read_snapshot(text: str) -> tuple[dict[str, dict[str, str]], list[dict[str, Any]]]:
    """The snapshot's sources and its rows, in the tables' order (newest release first)."""
    sources: dict[str, dict[str, str]] = {}
    rows: list[dict[str, Any]] = []
    current: str | None = None
    for line in text.splitlines():
        if line.startswith("#") and current is None or not line.strip():
            continue
        if m := _HEADER_RE.match(line):
            current = m.group(1)
            if current not in _PLATFORMS:
                raise ValueError(f"unknown source block {current!r}")
            sources[current] = {}
            continue
        if current is None:
            raise ValueError(f"a line before the first source block: {line!r}")
        if m := _FIELD_RE.match(line):
            sources[current][m.group(1)] = m.group(2)
            continue
        cells = _CELL_RE.findall(line)
        if not cells:
            if "<th>" in line:
                if [c.strip() for c in re.findall(r"<th>(.*?)</th>", line)][-2:] != ["cuDNN", "CUDA"]:
                    raise ValueError(f"the table's last columns are no longer cuDNN, CUDA: {line!r}")
                continue
            raise ValueError(f"not a table row: {line!r}")
        name = _NAME_RE.match(cells[0].strip())
        if name is None or len(cells) != 6:
            raise ValueError(f"unexpected row: {line!r}")
        release = name.group(2)
        rows.append({"tensorflow": ".".join(release.split(".")[:2]), "release": release, "package": name.group(1),
                     "platform": _PLATFORMS[current], "python": cells[1].strip(), "cudnn": cells[4].strip(),
                     "cuda": cells[5].strip(), "source": current})
    return sources, rows


def generate(snapshot_text: str | None = None) -> str:
    if snapshot_text is None:
        with open(_common.snapshot(SNAPSHOT), encoding="utf-8") as fh:
            snapshot_text = fh.read()
    raw_sources, rows = read_snapshot(snapshot_text)
    sources = {}
    for sid, src in raw_sources.items():
        missing = {"repo", "path", "commit", "date"} - set(src)
        if missing:
            raise ValueError(f"source {sid} lacks {sorted(missing)}")
        platform = _PLATFORMS[sid]
        sources[sid] = {"said": _SAID[platform], "url": f"https://github.com/{src['repo']}/blob/{src['commit']}/"
                        f"{src['path']}", "page": _PAGES[platform], "date": src["date"],
                        "kind": "vendor documentation (primary)",
                        "note": "TensorFlow's 'Tested build configurations' GPU table: each release's Python, "
                                "compiler, Bazel, cuDNN and CUDA."}
    table = {"schema_version": 1, "as_of": max(s["date"] for s in sources.values()),
             "newest_tensorflow": max((r["release"] for r in rows), key=lambda v: tuple(map(int, v.split(".")))),
             "description": "The CUDA and cuDNN each TensorFlow release was built and tested with, on Linux and on "
                            "native Windows (which has GPU builds up to 2.10 only), from TensorFlow's own tested "
                            "build configurations. Generated by tools/gen_tensorflow.py; do not edit.",
             "sources": sources, "rows": rows}
    return json.dumps(table, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the shipped table differs")
    args = parser.parse_args(argv)
    return _common.write_or_check(generate(), OUTPUT, args.check)


if __name__ == "__main__":
    sys.exit(main())
