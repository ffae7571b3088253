"""Regenerate the ``sass`` / ``ptx`` of compat.json's ``torch_arch_lists`` rows that cite a PyTorch build
script, from the script lines kept in ``tools/snapshots/pytorch_build_arch_lists.txt``, offline.

Each ``== script <source id> <linux|windows>`` block holds the lines of one script version that set
``TORCH_CUDA_ARCH_LIST`` (Linux ``.ci/manywheel/build_cuda.sh``: a base list, a ``case`` per CUDA version,
``${TORCH_CUDA_ARCH_LIST}`` or ``$TORCH_CUDA_ARCH_LIST`` for the base, a ``case`` label may be a shell pattern
(``10.*)``, ``11.[123])``: pytorch/builder's ``manywheel/build.sh``), the aarch64 ``remove_archs`` filter and its ``11.0;`` insert;
Windows ``cuda_config.bat``: ``if "%CUDA_VER%"=="126"`` then ``set "CUDA_ARCH_LIST=…"``). ``X.Y+PTX``
is SASS and PTX for X.Y (Windows builds carry no PTX: the list has no ``+PTX``). Rows citing a script
for a CUDA version the script does not handle are an error; rows citing anything else are left alone.

    python tools/gen_torch_arch.py            # rewrite those rows in envdoctor/data/compat.json
    python tools/gen_torch_arch.py --check    # exit 1 when the shipped table differs (the test runs this)

Refresh (needs a pytorch/pytorch clone; never in tests): see the snapshot's header.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import re
import sys
from collections.abc import Mapping
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script from anywhere

from tools import _common

SNAPSHOT = "pytorch_build_arch_lists.txt"
_HEADER_RE = re.compile(r"^== script (\S+) (linux|windows)\s*$")
_CASE_RE = re.compile(r"^\s*(\d+\.[0-9*\[\]]+)\)")  # 12.8) or a shell pattern: 10.*) 11.[123])
_ASSIGN_RE = re.compile(r'TORCH_CUDA_ARCH_LIST="([^"]*(?:"[^"]*"[^"]*)*?)"(?:\s|;|$)')
_AARCH64_INSERT_RE = re.compile(r'\$\(\[\[ "\$ARCH" == "aarch64" \]\] && echo "([^"]*)" \|\| echo ""\)')
_REMOVE_RE = re.compile(r'remove_archs "\$arch_list" ((?:"[0-9.]+"\s*)+)')
_WIN_IF_RE = re.compile(r'"%CUDA_VER%"=="(\d{3})"')
_WIN_SET_RE = re.compile(r'set "CUDA_ARCH_LIST=([0-9.;+PTX]+)"')


class Lists(dict[tuple[str, str], tuple[list[str], list[str]]]):
    """(cuda, platform) -> (sass, ptx). A key's cuda is the script's ``case`` label, which may be a shell
    pattern (``10.*``): a CUDA version is looked up as the ``case`` statement matches it, first label first."""

    def _label(self, key: object) -> tuple[str, str] | None:
        if not (isinstance(key, tuple) and len(key) == 2):
            return None
        cuda, platform = key
        return next((k for k in self.keys() if k[1] == platform and fnmatch.fnmatchcase(str(cuda), k[0])), None)

    def __contains__(self, key: object) -> bool:
        return self._label(key) is not None

    def get(self, key: tuple[str, str], default: Any = None) -> Any:  # type: ignore[override]
        return self[key] if key in self else default

    def __getitem__(self, key: tuple[str, str]) -> tuple[list[str], list[str]]:
        label = self._label(key)
        if label is None:
            raise KeyError(key)
        return dict.__getitem__(self, label)


def _split(value: str) -> tuple[list[str], list[str]]:
    sass, ptx = [], []
    for item in (i for i in value.split(";") if i):
        cc, _, plus = item.partition("+")
        sass.append(cc)
        if plus == "PTX":
            ptx.append(cc)
    return sass, ptx


def _linux(lines: list[str]) -> Lists:
    base = ""
    raw: dict[str, str] = {}
    removed: list[str] = []
    cuda: str | None = None
    for line in lines:
        if m := _REMOVE_RE.search(line):
            removed = re.findall(r'"([0-9.]+)"', m.group(1))
            continue
        if m := _CASE_RE.match(line):
            cuda = m.group(1)
        if m := re.search(r'TORCH_CUDA_ARCH_LIST="(.*)"', line.split(" ;;")[0].split(" #")[0]):
            value = m.group(1)
            if cuda is None:
                base = value
            else:
                raw[cuda] = value.replace("${TORCH_CUDA_ARCH_LIST}", base).replace("$TORCH_CUDA_ARCH_LIST", base)
    out = Lists()
    # A script version without the aarch64 filter says nothing about aarch64 wheels.
    platforms = ("linux_x86_64", "linux_aarch64") if removed else ("linux_x86_64",)
    for cuda, value in raw.items():
        for platform in platforms:
            insert = _AARCH64_INSERT_RE.search(value)
            text = _AARCH64_INSERT_RE.sub(insert.group(1) if insert and platform == "linux_aarch64" else "", value)
            if platform == "linux_aarch64":
                for arch in removed:
                    text = text.replace(f"{arch};", "")
            out[(cuda, platform)] = _split(text)
    return out


def _windows(lines: list[str]) -> Lists:
    out = Lists()
    cuda: str | None = None
    for line in lines:
        if m := _WIN_IF_RE.search(line):
            code = m.group(1)
            cuda = f"{code[:2]}.{code[2:]}"
        elif (m := _WIN_SET_RE.search(line)) and cuda:
            out[(cuda, "windows_x86_64")] = _split(m.group(1))
    return out


def read_snapshot(text: str) -> dict[str, Lists]:
    """source id -> its script's lists, from the snapshot text."""
    blocks: dict[str, tuple[str, list[str]]] = {}
    current: str | None = None
    for line in text.splitlines():
        if m := _HEADER_RE.match(line):
            current = m.group(1)
            blocks[current] = (m.group(2), [])
        elif current and not line.startswith("#"):
            blocks[current][1].append(line)
    return {sid: (_linux(lines) if kind == "linux" else _windows(lines)) for sid, (kind, lines) in blocks.items()}


def _cuda(variant: str) -> str:
    digits = variant.removeprefix("cu")
    return f"{digits[:-1]}.{digits[-1]}"


def regenerate(table: Mapping[str, Any], scripts: Mapping[str, Lists]) -> dict[str, Any]:
    out = dict(table)
    arch = dict(table["torch_arch_lists"])
    rows = []
    for row in arch["rows"]:
        lists = scripts.get(row["source"])
        if lists is not None:
            key = (_cuda(row["variant"]), row["platform"])
            if key not in lists:
                raise SystemExit(f"torch_arch_lists {row['torch']} {row['platform']} {row['variant']} cites "
                                 f"{row['source']}, whose lines do not handle CUDA {key[0]} on {key[1]}")
            sass, ptx = lists[key]
            row = {**row, "sass": sass, "ptx": ptx}
        rows.append(row)
    arch["rows"] = rows
    out["torch_arch_lists"] = arch
    return out


def generate(table: Mapping[str, Any]) -> str:
    with open(_common.snapshot(SNAPSHOT), encoding="utf-8") as fh:
        scripts = read_snapshot(fh.read())
    return _common.dump_compat(regenerate(table, scripts))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the shipped table differs")
    args = ap.parse_args(argv)
    return _common.write_or_check(generate(_common.read_compat()), check=args.check)


if __name__ == "__main__":
    sys.exit(main())
