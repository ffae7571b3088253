#!/usr/bin/env python3
"""Speed and memory of envdoctor against its floors, as paired ratios measured in one run.

    python bench/speed.py [--runs N] [--before ENVDOCTOR] [--only wall|throughput|memory…] [--suite] [--instructions]

Every figure of issue 12's table. Commands are run round by round, in a rotating order, so a
noisy machine slows all of them alike; each ratio is taken within a round (paired) and printed
as median with its min-max spread. ``--before`` names another installed ``envdoctor``
executable (e.g. one built from main in its own venv): every envdoctor command is then also run
through it in the same rounds, and the after/before ratio is printed too.

Memory is the whole process tree's (the command and every descendant), sampled from /proc every
10 ms in separate, untimed runs: the peak of the summed RSS and of the summed PSS (proportional
set size: shared pages divided among the processes that map them, from smaps_rollup).

Every run must exit 0 or 1 (a finding is fine; 2 or 3 means the measurement is void and the
bench stops). A line says which path was measured: without an NVIDIA GPU the microchecks of a
plain ``check`` are skipped, so ``check --device cpu`` is the microcheck figure.

Throughput (``--only throughput``): the in-process figure reads and judges 200 *distinct* saved
reports (each node's own creation time, memory, interpreter path and scheduler variables, so no
memo of a text already judged can stand in for the work), one after another, after one warm-up
report that pays the imports and the registry (start-up is not a per-report cost). Printed beside
it, for comparison: one report judged again and again (the figure measured before), and judging
alone with the facts read once. ``diagnose DIR`` is the whole process over the same 200 files.

Bars (issue 12; issue 20 tightens two: check --no-micro <= 0.80x import torch, healthcheck <= 1.5x
import pynvml+psutil): check --no-micro <= 1.00x import torch; check --device cpu <= 1.6x check
--no-micro; healthcheck <= 2.0x import pynvml+psutil and <= 30 MiB tree PSS; diagnose >= 2,000
saved reports/s in-process and >= 500 files/s in batch; check with 1,000 LD_LIBRARY_PATH folders
<= 1.15x the same with 10; test suite warm <= 50 s (``--suite``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
#: Deadlines far above any probe's time: on a loaded machine a probe that hits its deadline
#: (exit 3) voids the round; the bench measures speed, not deadlines.
SLACK = ("--timeout", "20")
HC_SLACK = ("--max-seconds", "60")


def interpreter_of(exe: str) -> str:
    """The Python an installed console script runs with (its shebang)."""
    with open(exe, "rb") as fh:
        first = fh.readline().decode().strip()
    return first[2:].split()[0] if first.startswith("#!") else sys.executable


#: Everything a plain healthcheck's parent imports and loads (start-up, the fast path, the probe and
#: check modules, the renderer; no click: envdoctor.pipeline.fast.direct), with no probe run and no
#: child started: its floor on this machine.
HC_IMPORTS = ("import envdoctor.__main__, envdoctor.pipeline.startup, envdoctor.pipeline.fast, envdoctor.output.render\n"
              "import envdoctor.pipeline.judge as j, envdoctor.probes as q\n"
              "q.healthcheck_probes(); j.fast_checks(False)\n")

COMPILE = ("import compileall, os, envdoctor, envdoctor.checks\n"
           "for m in (envdoctor, envdoctor.checks):\n"
           "    compileall.compile_dir(os.path.dirname(m.__file__), quiet=1)\n")


def compile_bytecode(exe: str) -> None:
    """Write the bytecode of the envdoctor ``exe`` runs, as installing its wheel does: a checkout
    run with PYTHONDONTWRITEBYTECODE=1 (set for every child, and in some shells) otherwise
    compiles all its modules from source on every run, a cost no installed envdoctor pays."""
    # Not from this checkout's folder: `-c` would import the envdoctor found there, not exe's.
    subprocess.run([interpreter_of(exe), "-c", COMPILE], check=False, stdout=subprocess.DEVNULL, cwd="/")


def run(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    began = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    wall = time.perf_counter() - began
    if proc.returncode not in (0, 1):
        # Run once more, its output kept, to say why (a probe past its deadline on a loaded machine?).
        again = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        tail = "\n".join((again.stdout + again.stderr).strip().splitlines()[-12:])
        raise SystemExit(f"bench: {' '.join(argv[:4])}… exited {proc.returncode}: the measurement is void; "
                         f"run again it exited {again.returncode}:\n{tail}")
    return wall, proc.returncode


def _tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _mem(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in KiB from smaps_rollup."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return rss, pss


def tree_memory(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Peak summed (RSS, PSS) of the process tree in MiB, sampled every 10 ms."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    peak = [0, 0]
    while proc.poll() is None:
        pids = _tree(proc.pid)
        rss = pss = 0
        for pid in pids:
            r, p = _mem(pid)
            rss, pss = rss + r, pss + p
        peak = [max(peak[0], rss), max(peak[1], pss)]
        time.sleep(0.01)
    return peak[0] / 1024, peak[1] / 1024


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"


def paired(rounds: list[dict[str, float]], a: str, b: str) -> list[float]:
    return [r[a] / r[b] for r in rounds if a in r and b in r and r[b] > 0]


DIAG_SNIPPET = r"""
import os, sys, time
from envdoctor.inputs import load
from envdoctor.registry import load_registry
from envdoctor.pipeline.diagnose import diagnose, select
from envdoctor.report import Report
warm, folder = sys.argv[1], sys.argv[2]
files = sorted(os.path.join(folder, f) for f in os.listdir(folder))
checks = select(load_registry())[0]
def read(path):
    try:
        return load(path, findings=False)
    except TypeError:  # an envdoctor from before the batch path
        return load(path)
def judge(rep):
    Report(facts=rep.facts, findings=tuple(diagnose(rep.facts, checks)), probes=rep.probes, origin="report:x")
judge(read(warm))  # imports, the registry and first-call caches: start-up, not a per-report cost
t = time.perf_counter()
for path in files:  # each a different report, met once: no memo can have seen it
    judge(read(path))
varied = len(files) / (time.perf_counter() - t)
t = time.perf_counter()
for _ in files:  # one report again and again (the old figure)
    judge(read(warm))
same = len(files) / (time.perf_counter() - t)
rep = read(warm)
t = time.perf_counter()
for _ in files:  # judging alone: the facts read once
    judge(rep)
print(varied, same, len(files) / (time.perf_counter() - t))
"""


def vary(report: Path, folder: Path, count: int) -> None:
    """``count`` distinct saved reports, as a fleet's nodes write them: each with its own creation
    time, host memory, interpreter path and scheduler variables (facts quoted in evidence, and
    redacted, so no report repeats another's texts)."""
    import json

    data = json.loads(report.read_text(encoding="utf-8"))
    for i in range(count):
        facts = data["facts"]
        facts.setdefault("env.vars", {"value": {}})
        env = dict(facts["env.vars"].get("value") or {})
        env.update({"SLURM_NODEID": str(i), "SLURM_JOB_ID": str(81_000 + i), "SLURM_NODENAME": f"node{i:04d}"})
        facts["env.vars"] = {**facts["env.vars"], "value": env}
        for key, value in (("host.memory_total", 25_000_000_000 + i * 4096),
                           ("python.executable", f"/shared/envs/node{i:04d}/bin/python")):
            if key in facts:
                facts[key] = {**facts[key], "value": value}
        data["created_at"] = f"2026-12-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}+00:00"
        (folder / f"node{i:04d}.json").write_text(json.dumps(data, indent=2), encoding="utf-8")


def lib_dirs(root: Path, count: int) -> str:
    """``count`` folders each holding an identical copy of a small shared library named
    ``libcudart.so.12`` (libc's ``libdl``: tens of KB, so a thousand copies stay small), joined
    for LD_LIBRARY_PATH: the shape scripted environment setups leave behind."""
    src = next(p for p in ("/lib/x86_64-linux-gnu/libdl.so.2", "/usr/lib/x86_64-linux-gnu/libdl.so.2",
                           "/lib64/libdl.so.2", "/usr/lib/libdl.so.2") if os.path.exists(p))
    dirs = []
    for i in range(count):
        d = root / f"ld{count}" / f"d{i:04d}"
        d.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, d / "libcudart.so.12")
        dirs.append(str(d))
    return os.pathsep.join(dirs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--envdoctor", help="the envdoctor executable to measure (default: next to this Python)")
    ap.add_argument("--before", help="another envdoctor executable measured in the same rounds")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--files", type=int, default=200, help="saved reports for the per-file and batch figures")
    ap.add_argument("--suite", action="store_true", help="also time the test suite once (warm)")
    ap.add_argument("--instructions", action="store_true",
                    help="also count the healthcheck parent's instructions against its floor's (valgrind): a figure "
                         "a loaded machine does not move")
    ap.add_argument("--plugins", choices=("on", "off"), default="on",
                    help="plugin discovery as users run it (default), or off (ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD=1)")
    ap.add_argument("--only", nargs="+", choices=("wall", "throughput", "memory", "healthcheck"),
                    help="measure only these parts (default: all); healthcheck: its wall figure and memory only")
    args = ap.parse_args()

    def want(part: str) -> bool:
        return not args.only or part in args.only

    ed = args.envdoctor or shutil.which("envdoctor", path=os.path.dirname(sys.executable) + os.pathsep
                                        + os.environ.get("PATH", ""))
    if not ed:
        print("envdoctor is not installed next to this interpreter (use --envdoctor)", file=sys.stderr)
        return 2
    python = interpreter_of(ed)
    # Plugin discovery on, as users run it (a venv with a plugin installed measures that plugin too:
    # `--plugins off` turns it off).
    env = {**os.environ, "NO_COLOR": "1"}
    if args.plugins == "off":
        env["ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    builds = {"after": ed, **({"before": args.before} if args.before else {})}
    for exe in builds.values():
        compile_bytecode(exe)
    gpu = any(os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/dxg"))
    print(f"measured: {ed} ({python}); " + ("NVIDIA device nodes present: `check` runs the GPU microchecks"
          if gpu else "no NVIDIA GPU: `check` skips the microchecks; `check --device cpu` runs them on the CPU"))
    print(f"plugin discovery: {args.plugins}")
    print(f"rounds: {args.runs}, interleaved, order rotated each round; ratios paired within a round, "
          "median [min-max]; each envdoctor's bytecode written first, as an installed wheel has it")

    tmp = Path(tempfile.mkdtemp(prefix="envdoctor-bench-"))
    try:
        report = tmp / "report.json"
        subprocess.run([ed, "report", "--json", "--no-micro", "-o", str(report)], env=env, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        folder = tmp / "reports"
        folder.mkdir()
        vary(report, folder, args.files)
        ld10, ld1000 = lib_dirs(tmp, 10), lib_dirs(tmp, 1000)

        commands: dict[str, tuple[list[str], dict[str, str]]] = {
            "import torch": ([python, "-c", "import torch"], env),
            "collect_env": ([python, "-m", "torch.utils.collect_env"], env),
            "import pynvml, psutil": ([python, "-c", "import pynvml, psutil"], env),
            # The healthcheck parent's own floor: what it imports and loads, without a probe or a child.
            "healthcheck's imports": ([python, "-c", HC_IMPORTS], env),
        }
        for label, exe in builds.items():
            commands.update({
                f"{label}: check --no-micro": ([exe, "check", "--no-micro", *SLACK], env),
                f"{label}: check --device cpu": ([exe, "check", "--device", "cpu", *SLACK], env),
                f"{label}: healthcheck": ([exe, "healthcheck", *HC_SLACK], env),
                f"{label}: diagnose FILE": ([exe, "diagnose", str(report), "--json"], env),
                f"{label}: check, 10 LD dirs": ([exe, "check", "--no-micro", *SLACK], {**env, "LD_LIBRARY_PATH": ld10}),
                f"{label}: check, 1000 LD dirs": ([exe, "check", "--no-micro", *SLACK], {**env, "LD_LIBRARY_PATH": ld1000}),
            })
        hc_only = ("import pynvml, psutil", "healthcheck's imports", *(f"{label}: healthcheck" for label in builds))
        names = list(commands) if want("wall") else list(hc_only) if want("healthcheck") else []
        for name in names:  # warm the page cache once
            run(*commands[name])
        rounds: list[dict[str, float]] = []
        for i in range(args.runs if names else 0):
            order = names[i % len(names):] + names[:i % len(names)]
            rounds.append({name: run(*commands[name])[0] for name in order})

        if names:
            print_walls(names, rounds, builds, bool(args.before))
        if want("throughput"):
            throughput(builds, report, folder, args, env)
        if want("memory") or want("healthcheck"):
            memory(builds, env, with_check=want("memory"))
        if args.instructions:
            instructions(builds, python, env)
        if args.suite:
            began = time.perf_counter()
            proc = subprocess.run([python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider"], cwd=HERE,
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            print(f"\ntest suite (warm, this checkout): {time.perf_counter() - began:.1f} s, exit {proc.returncode}"
                  "  (bar: <= 50 s)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def print_walls(names: list[str], rounds: list[dict[str, float]], builds: dict[str, str], before: bool) -> None:
    print(f"\n{'command':<34} {'wall s: median [min-max]':>28}")
    for name in names:
        print(f"{name:<34} {spread([r[name] for r in rounds]):>28}")
    print("\nfigure (paired ratio, median [min-max])                     bar")
    for label in builds:
        p = f"{label}: "
        rows = [
            (f"{p}check --no-micro / import torch", paired(rounds, p + "check --no-micro", "import torch"),
             "<= 1.00; i20 <= 0.80"),
            (f"{p}check --device cpu / check --no-micro",
             paired(rounds, p + "check --device cpu", p + "check --no-micro"), "<= 1.60"),
            (f"{p}healthcheck / import pynvml, psutil", paired(rounds, p + "healthcheck", "import pynvml, psutil"),
             "<= 2.00; i20 <= 1.50"),
            (f"{p}check 1000 LD dirs / 10 LD dirs", paired(rounds, p + "check, 1000 LD dirs", p + "check, 10 LD dirs"),
             "<= 1.15"),
        ]
        for title, values, bar in rows:
            if values:  # a figure whose commands this run did not measure (--only healthcheck) is left out
                print(f"{title:<58} {spread(values):>22}  {bar}")
    if anchor := paired(rounds, "collect_env", "import torch"):
        print(f"{'collect_env / import torch (anchor)':<58} {spread(anchor):>22}")
    if floor := paired(rounds, "healthcheck's imports", "import pynvml, psutil"):
        print(f"{'healthcheck parent imports alone / import pynvml, psutil':<58} {spread(floor):>22}  (its floor)")
    if before:
        for fig in ("check --no-micro", "check --device cpu", "healthcheck", "diagnose FILE", "check, 1000 LD dirs"):
            if values := paired(rounds, "after: " + fig, "before: " + fig):
                print(f"{'after/before ' + fig:<58} {spread(values):>22}")


def throughput(builds: dict[str, str], report: Path, folder: Path, args: argparse.Namespace,
               env: dict[str, str]) -> None:
    """Every build in every round, in a rotating order (paired like the wall figures)."""
    rounds: list[dict[str, float]] = []
    labels = list(builds)
    files = sorted(folder.iterdir())
    for i in range(max(3, args.runs // 2)):
        row: dict[str, float] = {}
        for label in labels[i % len(labels):] + labels[:i % len(labels)]:
            row.update({f"{label}: {k}": v for k, v in throughput_round(builds[label], report, folder, files,
                                                                          env).items()})
        rounds.append(row)
    print(f"\nthroughput ({len(files)} distinct saved reports; median [min-max] of {len(rounds)} rounds)"
          "            bar")
    figures = (("inproc varied", "diagnose in-process, distinct reports/s", ">= 2000"),
               ("inproc same", "diagnose in-process, one report repeated/s", ""),
               ("inproc judge", "diagnose in-process, judging only (read once)/s", ""),
               ("batch", "diagnose DIR (batch), files/s", ">= 500"),
               ("per file", "diagnose FILE, one process per file, files/s", ""),
               ("per file s", "diagnose FILE, one process per file, s each", ""))
    for label in labels:
        for key, title, bar in figures:
            values = [r[f"{label}: {key}"] for r in rounds]
            note = "  (no batch form: exit 2)" if key == "batch" and not max(values) else ""
            print(f"{label + ': ' + title:<58} {spread(values):>22}  {bar}{note}")
    if len(labels) > 1:
        for key, title, _ in figures:
            values = paired(rounds, f"after: {key}", f"before: {key}")
            print(f"{'after/before ' + title:<58} {spread(values):>22}")


def throughput_round(exe: str, report: Path, folder: Path, files: list[Path], env: dict[str, str]) -> dict[str, float]:
    # -I and a cwd outside any checkout: `-c` would otherwise import the envdoctor of the
    # current folder, not the one this build installed.
    out = subprocess.run([interpreter_of(exe), "-I", "-c", DIAG_SNIPPET, str(report), str(folder)], env=env,
                         capture_output=True, text=True, check=False, cwd=report.parent)
    rates = [float(x) for x in out.stdout.split()] if out.returncode == 0 else [0.0, 0.0, 0.0]
    per = files[:20]
    began = time.perf_counter()
    for f in per:
        run([exe, "diagnose", str(f), "--json"], env)
    each = (time.perf_counter() - began) / len(per)
    began = time.perf_counter()
    proc = subprocess.run([exe, "diagnose", str(folder)], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - began
    return {"inproc varied": rates[0], "inproc same": rates[1], "inproc judge": rates[2],
            "batch": len(files) / wall if proc.returncode in (0, 1) else 0.0, "per file": 1 / each, "per file s": each}


def instructions(builds: dict[str, str], python: str, env: dict[str, str]) -> None:
    """Instructions the healthcheck's parent process runs (all its threads, no child: valgrind's
    callgrind does not follow them), against ``import pynvml, psutil``'s. Wall time on a shared
    2-core machine moves by half with the load; this count does not. The child runs beside the
    parent (started first), so on an idle second core the parent's count is what the wall follows."""
    valgrind = shutil.which("valgrind")
    if not valgrind:
        print("\ninstructions: valgrind is not installed (apt-get install valgrind)")
        return

    def count(argv: list[str]) -> int:
        out = subprocess.run([valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv], env=env,
                             capture_output=True, text=True, check=False, cwd="/")
        found = [line for line in out.stderr.splitlines() if "Collected :" in line]
        return int(found[-1].rsplit(":", 1)[1]) if found else 0

    floor = count([python, "-c", "import pynvml, psutil"])
    print(f"\ninstructions (callgrind, the parent process only): import pynvml, psutil {floor / 1e6:.0f} M")
    for label, exe in (("healthcheck's imports", None), *builds.items()):
        n = count([python, "-c", HC_IMPORTS] if exe is None else [exe, "healthcheck", *HC_SLACK])
        name = label if exe is None else f"{label}: healthcheck"
        print(f"{name:<34} {n / 1e6:8.0f} M   {n / floor if floor else 0:.3f}x the floor" +
              ("   (i20 bar on the wall: <= 1.50x)" if exe is not None else ""))


def memory(builds: dict[str, str], env: dict[str, str], with_check: bool = True) -> None:
    print("\nmemory: peak of the whole process tree (sum over the command and its descendants), median of 3")
    for label, exe in builds.items():
        for what, argv in (("healthcheck", [exe, "healthcheck", *HC_SLACK]),
                           ("check --no-micro", [exe, "check", "--no-micro", *SLACK]))[:2 if with_check else 1]:
            samples = [tree_memory(argv, env) for _ in range(3)]
            rss = statistics.median(s[0] for s in samples)
            pss = statistics.median(s[1] for s in samples)
            bar = "  (bar: PSS <= 30 MiB)" if what == "healthcheck" else ""
            print(f"{label}: {what:<18} tree RSS {rss:7.1f} MiB   tree PSS {pss:7.1f} MiB{bar}")


if __name__ == "__main__":
    sys.exit(main())
