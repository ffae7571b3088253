"""Generate ``envdoctor/data/errors.json``'s code lists from the CUDA runtime's own strings, offline.

Every ``cudaError_t`` the runtime defines, with ``cudaGetErrorName`` and ``cudaGetErrorString`` as the
runtime itself answers them, and every ``CUresult`` name of ``cuda.h``, come from one snapshot:

* ``tools/snapshots/cuda_errors.tsv`` -- ``table<TAB>code<TAB>name<TAB>message`` lines (``cudart``: the
  runtime's own answers; ``cuda``: the enum names of ``cuda.h``, no message: cuGetErrorString needs the
  driver's libcuda), under ``#`` lines naming the toolkit, the files and how they were read.

envdoctor's own reading of a code (``title``, ``meaning``, ``as_cuinit``, ``recognise``, ``reason``,
``printed_as``) stays in errors.json, the one home of that judgement: this script keeps it, adds the codes
the file does not list yet, and records a wording the snapshot's runtime prints that differs from the one
errors.json keeps (an older runtime's) under ``other_messages``, so both are recognised.

    python tools/gen_errors.py            # rewrite envdoctor/data/errors.json
    python tools/gen_errors.py --check    # exit 1 when the shipped table differs (the test runs this)

Refresh (a machine with a CUDA toolkit; never in tests)::

    python tools/gen_errors.py --refresh /usr/local/cuda   # rewrites the snapshot from that toolkit
    python tools/gen_errors.py                             # then the table; commit both
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script from anywhere

from tools import _common

SNAPSHOT = _common.snapshot("cuda_errors.tsv")
ERRORS = os.path.join(_common.ROOT, "envdoctor", "data", "errors.json")
#: Not errors: success, and the runtime's base of its API-failure range.
NOT_ERRORS = {"cudaSuccess", "CUDA_SUCCESS", "cudaErrorApiFailureBase"}
#: The snapshot's ``table`` column -> errors.json's table.
TABLES = {"cudart": "cuda_runtime", "cuda": "cuda_driver"}
_RUNTIME_ENUM = re.compile(r"enum\s+__device_builtin__\s+cudaError\s*\{(.*?)\};", re.S)
_DRIVER_ENUM = re.compile(r"typedef\s+enum\s+cudaError_enum\s*\{(.*?)\}\s*CUresult\s*;", re.S)
_MEMBER = re.compile(r"^\s*(\w+)\s*=\s*(\d+)\s*,?", re.M)


def read_snapshot(path: str = SNAPSHOT) -> tuple[list[str], dict[str, dict[int, tuple[str, str | None]]]]:
    """(the ``#`` header lines, table -> code -> (name, message or None))."""
    header: list[str] = []
    tables: dict[str, dict[int, tuple[str, str | None]]] = {name: {} for name in TABLES.values()}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            if line.startswith("#"):
                header.append(line)
                continue
            table, code, name, message = line.split("\t")
            tables[TABLES[table]][int(code)] = (name, message or None)
    return header, tables


def build(current: dict[str, Any], tables: dict[str, dict[int, tuple[str, str | None]]]) -> dict[str, Any]:
    """``current`` (errors.json) with every code of the snapshot, envdoctor's readings kept."""
    out = json.loads(json.dumps(current))
    for table, codes in tables.items():
        kept: dict[str, Any] = out[table]["codes"]
        merged: dict[str, Any] = {}
        for code in sorted({*map(int, kept), *codes}):
            entry = dict(kept.get(str(code), {}))
            if code in codes:
                name, message = codes[code]
                if entry.get("name") not in (None, name):
                    raise ValueError(f"{table} {code}: errors.json names it {entry['name']}, the snapshot {name}")
                entry = {"name": name, **{k: v for k, v in entry.items() if k != "name"}}
                if message and not entry.get("message"):
                    entry = {"name": name, "message": message, **{k: v for k, v in entry.items() if k != "name"}}
                elif message and entry.get("message") != message:
                    others = [m for m in entry.get("other_messages", []) if m != message]
                    entry["other_messages"] = [*others, message]
            merged[str(code)] = entry
        out[table]["codes"] = merged
    return out


def refresh(cuda_home: str, path: str = SNAPSHOT) -> None:
    """Read the runtime's own answers for every cudaError_t of ``driver_types.h`` and the CUresult names of
    ``cuda.h`` from the toolkit at ``cuda_home``; rewrite the snapshot."""
    include = os.path.join(cuda_home, "include")
    with open(os.path.join(include, "driver_types.h"), encoding="utf-8") as fh:
        runtime = _RUNTIME_ENUM.search(fh.read())
    with open(os.path.join(include, "cuda.h"), encoding="utf-8") as fh:
        driver = _DRIVER_ENUM.search(fh.read())
    if runtime is None or driver is None:
        raise SystemExit("the toolkit's driver_types.h / cuda.h enums were not found")
    found = [os.path.join(folder, name) for folder in (os.path.join(cuda_home, "lib64"), os.path.join(cuda_home, "lib"))
             if os.path.isdir(folder) for name in sorted(os.listdir(folder)) if re.fullmatch(r"libcudart\.so\.\d+", name)]
    if not found:
        raise SystemExit(f"no libcudart.so.<major> under {cuda_home}/lib64 or lib")
    lib = found[0]
    cudart = ctypes.CDLL(lib)
    cudart.cudaGetErrorName.restype = ctypes.c_char_p
    cudart.cudaGetErrorString.restype = ctypes.c_char_p
    version = ctypes.c_int()
    cudart.cudaRuntimeGetVersion(ctypes.byref(version))
    major, minor = version.value // 1000, version.value % 1000 // 10
    lines = [f"# CUDA {major}.{minor} runtime ({os.path.basename(lib)}): cudaGetErrorName / cudaGetErrorString for every",
             "# cudaError_t of include/driver_types.h (enum cudaError); the CUresult names of include/cuda.h",
             "# (enum cudaError_enum). Read by `python tools/gen_errors.py --refresh CUDA_HOME`.",
             "# https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html"]
    for name, code in _MEMBER.findall(runtime.group(1)):
        said = cudart.cudaGetErrorName(int(code)).decode()
        if said != name or name in NOT_ERRORS:  # a deprecated alias of a code the enum names again
            continue
        lines.append(f"cudart\t{code}\t{name}\t{cudart.cudaGetErrorString(int(code)).decode()}")
    seen: set[str] = set()
    for name, code in _DRIVER_ENUM_MEMBERS(driver.group(1)):
        if code not in seen and name not in NOT_ERRORS:
            seen.add(code)
            lines.append(f"cuda\t{code}\t{name}\t")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


def _DRIVER_ENUM_MEMBERS(body: str) -> list[tuple[str, str]]:
    return [(n, c) for n, c in _MEMBER.findall(body) if n.startswith("CUDA_ERROR_") or n == "CUDA_SUCCESS"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the shipped table; write nothing")
    ap.add_argument("--refresh", metavar="CUDA_HOME", help="rewrite the snapshot from an installed CUDA toolkit")
    args = ap.parse_args(argv)
    if args.refresh:
        refresh(args.refresh)
    _header, tables = read_snapshot()
    current = _common.read_compat(ERRORS)
    text = _common.dump_compat(build(current, tables))
    return _common.write_or_check(text, ERRORS, check=args.check)


if __name__ == "__main__":
    raise SystemExit(main())
