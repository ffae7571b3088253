#!/usr/bin/env python3
"""A stand-in ``conda`` for the ``envdoctor fix`` tests: it implements exactly the subcommands fix
calls, nothing more, and is NOT conda (no solver, no channels, no package cache).

  conda install -p PREFIX -y SPEC... [-c CHANNEL...]
      ``pytorch=X`` with ``pytorch-cuda=A.B`` (PyTorch's channel) or ``pytorch=X=*cuda*`` with
      ``cuda-version=A.B`` (conda-forge) installs the local wheel ``torch==X+cuAB`` from
      ``$CONDA_STANDIN_CHANNEL/cuAB`` with the env's own pip (``cpuonly``/``*cpu*``: ``cpu``); any
      other name ``N`` or ``N=V`` the newest (or that) wheel of N in the same folder. Each package's
      conda-meta/<name>-<version>-<build>.json is replaced and conda-meta/history appended, as conda does.
  conda list -p PREFIX --explicit | --json
      conda-meta as conda prints it (an @EXPLICIT list of URLs; a JSON list of name/version/build).

Every call is appended (argv as JSON, one line) to ``$CONDA_STANDIN_LOG``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def _log(argv: list[str]) -> None:
    if os.environ.get("CONDA_STANDIN_LOG"):
        with open(os.environ["CONDA_STANDIN_LOG"], "a") as fh:
            fh.write(json.dumps(argv) + "\n")


def _metas(prefix: Path) -> list[dict]:
    out = []
    for meta in sorted((prefix / "conda-meta").glob("*.json")):
        out.append(json.loads(meta.read_text()))
    return out


def _list(prefix: Path, flag: str) -> int:
    metas = _metas(prefix)
    if flag == "--json":
        print(json.dumps([{"name": m["name"], "version": m.get("version", ""), "build_string": m.get("build", ""),
                           "channel": m.get("channel", "standin")} for m in metas], indent=1))
    else:
        print("# platform: linux-64\n@EXPLICIT")
        for m in metas:
            print(f"file:///standin/{m.get('channel', 'standin')}/{m['name']}-{m.get('version', '')}-{m.get('build', '')}.conda")
    return 0


def _install(prefix: Path, specs: list[str], channels: list[str]) -> int:
    channel = Path(os.environ["CONDA_STANDIN_CHANNEL"])
    cuda = next((s.split("=", 1)[1] for s in specs if s.startswith(("pytorch-cuda=", "cuda-version="))), None)
    variant = f"cu{cuda.replace('.', '')}" if cuda else "cpu"
    wheels: list[str] = []
    records: list[tuple[str, str, str]] = []
    for spec in specs:
        name, _, rest = spec.partition("=")
        if name in ("pytorch-cuda", "cuda-version", "cpuonly"):
            records.append((name, cuda or "1.0", "0"))
            continue
        version = rest.split("=", 1)[0] if rest and not rest.startswith("*") else ""
        pip_name = "torch" if name == "pytorch" else name
        wheels.append(f"{pip_name}=={version}+{variant}" if version and pip_name == "torch" else
                      (f"{pip_name}=={version}" if version else pip_name))
        records.append((name, version or "?", f"py_{variant}_0"))
    python = prefix / "bin" / "python"
    proc = subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--find-links", str(channel / variant),
                           "--force-reinstall", "--no-deps", *wheels], capture_output=True, text=True)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    if proc.returncode:
        print("PackagesNotFoundError: the stand-in channel has no such package", file=sys.stderr)
        return 1
    meta = prefix / "conda-meta"
    for name, version, build in records:
        for old in meta.glob(f"{name}-*.json"):
            if json.loads(old.read_text()).get("name") == name:
                old.unlink()
        if version == "?":  # the version pip chose
            show = subprocess.run([str(python), "-m", "pip", "show", "torch" if name == "pytorch" else name],
                                  capture_output=True, text=True).stdout
            version = next((ln.split(":", 1)[1].strip().split("+")[0] for ln in show.splitlines()
                            if ln.startswith("Version:")), "0")
        (meta / f"{name}-{version}-{build}.json").write_text(json.dumps(
            {"name": name, "version": version, "build": build, "channel": channels[0] if channels else "standin"}))
    with open(meta / "history", "a") as fh:
        fh.write(f"==> standin <==\n# cmd: conda install {' '.join(specs)}\n")
    return 0


def main(argv: list[str]) -> int:
    _log(argv)
    if len(argv) >= 4 and argv[0] == "list" and argv[1] == "-p" and argv[3] in ("--explicit", "--json"):
        return _list(Path(argv[2]), argv[3])
    if len(argv) >= 4 and argv[0] == "install" and argv[1] == "-p" and argv[3] == "-y":
        specs, channels, rest = [], [], argv[4:]
        while rest:
            a = rest.pop(0)
            if a == "-c" and rest:
                channels.append(rest.pop(0))
            else:
                specs.append(a)
        return _install(Path(argv[2]), specs, channels)
    print(f"conda stand-in: not a subcommand envdoctor fix calls: {argv}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
