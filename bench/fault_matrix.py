#!/usr/bin/env python3
"""The fault matrix: envdoctor run as a user runs it, against everything that goes wrong.

    python bench/fault_matrix.py [--family F] [--jobs N] [--list]

Families: NVML init and per-GPU error codes, hung/crashing/huge NVML, cuInit codes, broken torch
packages (raises, hangs, prints, segfaults, os._exit, spawns a child holding stdout), hung /
crashing / flooding tools on PATH, hostile and huge report files, output streams (full, closed,
broken pipe, -o onto devices and FIFOs), options (NaN, inf, bad --python), signals at several
points, concurrent writers. Every scenario runs with canary secrets planted (environment values,
paths, the working directory) and every output is searched for them.

One line per scenario: verdict, exit code, seconds, family/name, why; then a summary. A verdict
is PASS when the run ended within its limit, with an expected exit code, no traceback, no leaked
canary, and the scenario's own condition held. Exit status: 0 when every scenario passed.
The fast part runs in the tests (tests/test_fault_matrix.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.faults import (  # noqa: E402
    AT_SLASH,
    AWS,
    GH,
    GLUED,
    HF,
    HF_API,
    JWT,
    PROXY_PASSWORD,
    SK,
    TF_VAR,
    TORCH_VARIANTS,
    URL_USER,
    Outcome,
    alive,
    canary_env,
    fake_torch,
    leaked,
    pidfile,
    run_cli,
)


# -- scenarios -----------------------------------------------------------------------------------
@dataclass
class Scenario:
    family: str
    name: str
    args: list[str]
    expect: frozenset[int] = frozenset({0, 1, 3})
    limit: float = 30.0
    env: dict[str, str] = field(default_factory=dict)
    torch: str | None = "healthy"  # fake torch variant on PYTHONPATH (None: the real one)
    nvml: dict[str, object] | None = None  # fake NVML config (None: no NVML library)
    cuda: dict[str, object] | None = None
    tools: dict[str, str] = field(default_factory=dict)  # fake executables first on PATH
    files: dict[str, bytes] = field(default_factory=dict)  # written under the run folder
    stdin: bytes | None = None
    stdout: str = "pipe"  # pipe | full | closed | gone
    close_stdin: bool = False
    signal_at: tuple[str, int] | None = None  # ("start"|"pid"|seconds, signum)
    check: Callable[[Outcome, Path], str] | None = None  # "" when fine, else why not
    fast: bool = False  # part of the test suite's run
    concurrent: int = 0  # run this many copies at once
    limits: dict[str, int] = field(default_factory=dict)  # resource limits (RLIMIT_<name>: soft and hard)
    cwd_gone: bool = False  # started in a working directory deleted before envdoctor runs
    listener: bool = False  # MASTER_PORT: a port where something accepts connections and never answers
    burn: int = 0  # CPU-burning loops running beside envdoctor for the scenario's length
    free_port: bool = False  # MASTER_PORT: a loopback port nobody listens on (rank 0 hosts the store there)

    @property
    def id(self) -> str:
        return f"{self.family}/{self.name}"


@dataclass
class Result:
    scenario: Scenario
    rc: int | None
    seconds: float
    ok: bool
    why: str


def _contains(*needles: str) -> Callable[[Outcome, Path], str]:
    def check(out: Outcome, folder: Path) -> str:
        missing = [n for n in needles if n not in out.text]
        return f"output lacks {missing}" if missing else ""
    return check


def _no_stderr(out: Outcome, folder: Path) -> str:
    return f"stderr is not empty: {out.stderr[:200]!r}" if out.stderr.strip() else ""


def _one_line_stderr(prefix: str) -> Callable[[Outcome, Path], str]:
    def check(out: Outcome, folder: Path) -> str:
        lines = out.stderr.decode("utf-8", "replace").strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith(prefix):
            return f"stderr is not one {prefix!r} line: {lines[:3]}"
        return ""
    return check


def _lacks(*needles: str) -> Callable[[Outcome, Path], str]:
    def check(out: Outcome, folder: Path) -> str:
        found = [n for n in needles if n in out.text]
        return f"output holds {found}" if found else ""
    return check


def _children_gone(out: Outcome, folder: Path) -> str:
    for pid_file in folder.glob("**/pid"):
        pid = int(pid_file.read_text() or 0)
        for _ in range(40):
            if not alive(pid):
                break
            time.sleep(0.05)
        if alive(pid):
            return f"child {pid} outlived envdoctor"
    return ""


def _at_most_lines(n: int) -> Callable[[Outcome, Path], str]:
    def check(out: Outcome, folder: Path) -> str:
        lines = out.stdout.count(b"\n")
        return f"{lines} lines on stdout (more than {n}: a row per rank?)" if lines > n else ""
    return check


def _all(*checks: Callable[[Outcome, Path], str]) -> Callable[[Outcome, Path], str]:
    def check(out: Outcome, folder: Path) -> str:
        for c in checks:
            why = c(out, folder)
            if why:
                return why
        return ""
    return check


NVML_CODES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 25, 26, 27, 28, 29,
              999, 42)
GPU_CALLS = ("nvmlDeviceGetHandleByIndex", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetEccMode", "nvmlDeviceGetName",
             "nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetPciInfo", "nvmlDeviceGetRemappedRows",
             "nvmlDeviceGetTemperature", "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetMigMode")
CUDA_CODES = (1, 2, 3, 34, 35, 46, 100, 101, 200, 304, 801, 802, 804, 999)


def _report(facts: dict[str, object], **extra: object) -> bytes:
    return json.dumps({"schema_version": 1, "facts": facts, **extra}).encode()


HEALTHY_FACTS = {"torch.version": {"value": "2.6.0+cu126"}, "python.version": {"value": "3.12.1"},
                 "nvml.driver_version": {"value": "570.124.06"}}


def _hostile_files() -> dict[str, bytes]:
    deep = "[" * 500 + "]" * 500
    gpu = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-x", "compute_capability": "9.0",
           "memory_total": 85 << 30, "memory_used": 1 << 20, "missing": {}}
    return {
        "empty": b"",
        "whitespace": b"   \n\t\n",
        "binary": b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 16,
        "invalid-utf8": b"PyTorch version: 2.6.0\xff\xfe\xfa\nCUDA used to build PyTorch: 12.6\n",
        "utf16-report": b"\xff\xfe" + _report(HEALTHY_FACTS).decode().encode("utf-16-le"),
        "utf16-bomless-paste": "PyTorch version: 2.6.0+cu126\nCUDA used to build PyTorch: 12.6\n".encode("utf-16-le"),
        "utf32-report": b"\xff\xfe\x00\x00" + _report(HEALTHY_FACTS).decode().encode("utf-32-le"),
        "truncated-json": _report(HEALTHY_FACTS)[:-7],
        "json-array": b"[1, 2, 3]",
        "json-string": b'"hello"',
        "json-nan": b'{"schema_version": 1, "facts": {"torch.version": {"value": NaN}}}',
        "json-huge-number": b'{"schema_version": 1, "facts": {"nvml.device_count": {"value": 1e999}}}',
        "schema-bool": b'{"schema_version": true, "facts": {}}',
        "schema-future": b'{"schema_version": 99, "facts": {}}',
        "schema-zero": b'{"schema_version": 0, "facts": {}}',
        "facts-list": b'{"schema_version": 1, "facts": []}',
        "fact-not-object": b'{"schema_version": 1, "facts": {"torch.version": "2.6"}}',
        "fact-bad-reason": b'{"schema_version": 1, "facts": {"torch.version": {"value": null, "reason": "because"}}}',
        "deep-nesting": ('{"schema_version": 1, "facts": {"torch.version": {"value": ' + deep + '}}}').encode(),
        "very-deep-nesting": ('{"schema_version": 1, "facts": {"x": {"value": ' + "[" * 100000 + "]" * 100000 + "}}}").encode(),
        "wrong-types": _report({"nvml.gpus": {"value": "not a list"}, "torch.devices": {"value": 7},
                                "torch.arch_list": {"value": {"a": 1}}, "nvml.device_count": {"value": "two"},
                                "nvml.init": {"value": [1, 2]}, "torch.version": {"value": ["2.6"]}}),
        "gpu-entries-wrong": _report({"nvml.gpus": {"value": [1, "x", None, {"index": "zero"}, {"name": {"a": 1}}]}}),
        "findings-garbage": _report(HEALTHY_FACTS, findings=[{"id": "x", "status": "bogus"}]),
        "probes-garbage": _report(HEALTHY_FACTS, probes=[{"name": "x"}]),
        "huge-string": _report({"torch.version": {"value": "2.6.0" + "x" * (8 << 20)}}),
        "control-chars": _report({"torch.version": {"value": "2.6.0\x1b[2J\x9b31m\u202e"},
                                  "nvml.gpus": {"value": [{"index": 0, "name": "\x1b]0;pwned\x07GPU"}]}}),
        "markup": _report({"torch.version": {"value": "[bold red]2.6[/]"},
                           "nvml.gpus": {"value": [{"index": 0, "name": "[link=file:///etc/passwd]x[/link]"}]}}),
        "secrets-in-report": _report({
            "torch.version": {"value": None, "reason": "failed",
                              "detail": f"ImportError: https://alice:{PROXY_PASSWORD}@proxy:3128 token {HF}"},
            "python.executable": {"value": f"/home/a/{GH}/bin/python"},
            "env.vars": {"value": {"LD_LIBRARY_PATH": f"/x/{AWS}", "HF_TOKEN": HF, "TORCH_HOME": f"/t/{JWT}"}},
            # a token glued to a word by "_" (issue 26): an InfiniBand device name built from it
            "torch.cuda_available_messages": {"value": [f"no device at /sys/class/infiniband/mlx5_{GLUED}/device"]}}),
        # Secrets no pattern knows: values of variables envdoctor does not judge, a URL user part,
        # a URL password with "@" and "/" (issue 26, item 10).
        "secrets-in-env": _report({
            "torch.version": {"value": None, "reason": "failed",
                              "detail": f"OSError: https://{URL_USER}@hf.example/m via http://u:{AT_SLASH}@proxy:3128"},
            "env.vars": {"value": {"TF_VAR_db_pass": TF_VAR, "HF_API": HF_API, "NVIDIA_API_KEY": f"nvapi-{TF_VAR}",
                                   "HF_ENDPOINT": f"https://{URL_USER}@hf.example",
                                   "LD_LIBRARY_PATH": f"/usr/lib:https://bob:{AT_SLASH}@p.example/l",
                                   "CUDA_VISIBLE_DEVICES": "0"}}}),
        "secrets-in-paste": (f"PyTorch version: 2.6.0+cu126\nCUDA used to build PyTorch: 12.6\n"
                             f"Python platform: Linux /home/{GH}\nOSError: https://u:{PROXY_PASSWORD}@h/ {SK}\n").encode(),
        "gpus-20000": _report({**HEALTHY_FACTS, "nvml.gpus": {"value": [dict(gpu, index=i) for i in range(20000)]},
                               "nvml.device_count": {"value": 20000}}),
        "gpus-over-limit": _report({"nvml.gpus": {"value": [{"index": i} for i in range(40000)]}}),
        "findings-over-limit": _report(HEALTHY_FACTS, findings=[{"id": "x", "status": "ok"}] * 20000),
        "paste-4m-empty-lines": b"PyTorch version: 2.6.0\n" + b"\n" * 4_000_000,
        "paste-150k-gpu-lines": b"PyTorch version: 2.6.0+cu126\nCUDA used to build PyTorch: 12.6\nGPU models and "
                                b"configuration:\n" + b"".join(b"GPU %d: NVIDIA H100 80GB HBM3\n" % i for i in range(150000)),
        "paste-one-long-line": b"PyTorch version: 2.6.0 " + b"a" * (20 << 20) + b"\n",
        "paste-nvidia-smi-garbage": b"+-----+\n| NVIDIA-SMI 570.124.06  Driver Version: \xff\xff  CUDA Version: 99.99 |\n" * 1000,
        "nothing-recognised": b"hello world\nthis is not a report\n",
        "over-64mib": b"",  # made sparse at run time
    }


def scenarios() -> list[Scenario]:
    out: list[Scenario] = []
    add = out.append
    hc = ["healthcheck", "--max-seconds", "4"]
    # NVML init codes
    for code in NVML_CODES:
        add(Scenario("nvml-init", f"code-{code}", hc, frozenset({0, 1}), 8, nvml={"init": code}, fast=code == 18))
    # per-GPU NVML errors
    for fn in GPU_CALLS:
        for code in (3, 15, 999):
            add(Scenario("nvml-gpu", f"{fn}-{code}", hc, frozenset({0, 1}), 8,
                         nvml={"count": 2, f"gpu0.rc.{fn}": code}, fast=(fn, code) == ("nvmlDeviceGetMemoryInfo", 15)))
    add(Scenario("nvml", "init-hang", hc, frozenset({1}), 6, nvml={"init_hang": 1}, check=_contains("hung"), fast=True))
    add(Scenario("nvml", "init-crash", hc, frozenset({1}), 8, nvml={"init_crash": 1}))
    add(Scenario("nvml", "init-exits-0", ["check", "--no-micro", "-v"], frozenset({1, 3}), 20, nvml={"init_exit": 1},
                 check=_contains("before finishing")))  # libnvidia-ml calling _exit(0) inside nvmlInit (issue 26, 11)
    add(Scenario("nvml", "shutdown-hang", ["check", "--no-micro", "-v"], frozenset({0, 1}), 20,
                 nvml={"count": 2, "shutdown_hang": 1}, check=_contains("nvmlShutdown hung")))
    add(Scenario("nvml", "128-gpus", ["report", "--no-micro"], frozenset({0, 1, 3}), 30, nvml={"count": 128},
                 check=lambda o, f: "" if o.stdout.count(b'"uuid"') >= 128 else "not every GPU reported"))
    add(Scenario("nvml", "1024-gpus", hc, frozenset({0, 1}), 10, nvml={"count": 1024}))
    add(Scenario("nvml", "healthy-8", ["check", "--no-micro"], frozenset({0, 1}), 20, nvml={"count": 8}))
    # cuInit codes
    for code in CUDA_CODES:
        add(Scenario("cuda-init", f"code-{code}", hc, frozenset({0, 1}), 8, nvml={"count": 1}, cuda={"init": code},
                     fast=code == 802))
    add(Scenario("cuda-init", "hang", hc, frozenset({1}), 6, nvml={"count": 1}, cuda={"init_hang": 1}))
    add(Scenario("cuda-init", "crash", hc, frozenset({1}), 8, nvml={"count": 1}, cuda={"init_crash": 1}))
    # broken torch packages
    expected = {"healthy": {0, 1}, "prints-50mb-then-ok": {0, 1}, "prints-50mb-lines-then-ok": {0, 1}}
    for variant in TORCH_VARIANTS:
        checks: list[Callable[[Outcome, Path], str]] = [_children_gone]
        if variant.startswith("prints-50mb"):
            checks.append(_contains("imports, but printed"))
        if variant == "secret-in-error":
            checks.append(_contains("<redacted>"))
        # The floods must finish to be judged: 50 MB through a pipe can take more than 1 s on a loaded
        # machine (seen at load 9: exit 3, the deadline doing its job), so they get a deadline of 15 s.
        deadline = "15" if variant.startswith("prints-50mb") else "1"
        add(Scenario("torch", variant, ["check", "--no-micro", "--timeout", deadline],
                     frozenset(expected.get(variant, {0, 1, 3})), 25, torch=variant, check=_all(*checks),
                     fast=variant in ("segfaults", "prints-50mb-then-ok", "secret-in-error")))
    # issue 26, item 11: 50 MB of binary garbage at `import torch`, under two CPU-burning loops, at
    # --timeout 1: whether it finishes or not, the run ends at the probes' deadlines (wall clock),
    # never the minute a loaded machine once took
    add(Scenario("torch", "prints-50mb-binary-timeout-1-under-load", ["check", "--no-micro", "--timeout", "1"],
                 frozenset({0, 1, 3}), 40, torch="prints-50mb-binary-then-ok", burn=2, check=_children_gone,
                 fast=True))  # run by tests/test_fault_matrix.py
    # tools on PATH
    tools = {
        "dmesg-hangs": {"dmesg": "exec sleep 60"},
        "dmesg-floods": {"dmesg": "exec head -c 60000000 /dev/zero | tr '\\0' 'x'"},
        "dmesg-xid-with-secrets": {"dmesg": f"echo 'NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=python {HF}, GPU has "
                                            f"fallen off the bus.'"},
        "dmesg-crashes": {"dmesg": "kill -SEGV $$"},
        "ldconfig-hangs": {"ldconfig": "exec sleep 60"},
        "ldconfig-floods": {"ldconfig": "exec yes 'libcuda.so.1 (libc6,x86-64) => /usr/lib/libcuda.so.1'"},
        "ldd-hangs": {"ldd": "exec sleep 60"},
        "ldd-garbage": {"ldd": "printf '\\377\\376 garbage\\n\\x1b[2J'"},
        "nvcc-hangs": {"nvcc": "exec sleep 60"},
        "nvcc-secret": {"nvcc": f"echo 'Cuda compilation tools, release 12.6, V12.6.77 https://u:{PROXY_PASSWORD}@x'"},
        "nvidia-smi-hangs": {"nvidia-smi": "exec sleep 60"},
        "tool-spawns-holder": {"dmesg": "(sleep 30 &) ; echo ok"},
    }
    for name, t in tools.items():
        add(Scenario("tools", name, ["check", "--no-micro", "--timeout", "1"], frozenset({0, 1, 3}), 25, tools=t,
                     fast=name == "ldconfig-floods"))
    # hostile report files
    for name in _hostile_files():
        ok_codes = {0, 1, 3} if name in ("utf16-report", "utf16-bomless-paste", "utf32-report", "invalid-utf8",
                                        "control-chars", "markup", "secrets-in-report", "secrets-in-paste", "secrets-in-env", "gpus-20000",
                                        "wrong-types", "gpu-entries-wrong", "findings-garbage", "huge-string",
                                        "paste-nvidia-smi-garbage") else {1, 2, 3}
        for fmt in (["-v"], ["--json"], ["--markdown"]) if name in ("secrets-in-report", "secrets-in-paste",
                                                                     "secrets-in-env", "control-chars") else ([],):
            check = None
            if name == "control-chars":
                def check(o, f):
                    return "raw control character in output" if any(
                                    c in o.stdout.decode("utf-8", "replace") for c in ("\x1b", "\x9b", "\u202e", "\x07")) else ""
            if name in ("json-nan", "json-huge-number"):
                ok_codes = {0, 1}  # read with that value missing, the rest of the report kept (issue 26, item 8)
            if name == "findings-garbage":
                # Read, not refused: a saved report is judged again from its facts, so its old findings
                # are never the verdict; garbage among them is one warning (issue 26, the matrix's own
                # expectation of exit 2 contradicted the re-judging it also asserts)
                ok_codes = {0, 1}
                check = _contains("saved findings are not envdoctor findings; ignored")
            if name in ("fact-bad-reason", "probes-garbage", "paste-150k-gpu-lines",
                        "paste-one-long-line"):
                ok_codes = {2}  # refused with one line: not an envdoctor report / larger than a paste can be
            add(Scenario("report-file", name + ("" if not fmt else fmt[0].replace("-", "_")),
                         ["diagnose", "{files}/" + name, *fmt], frozenset(ok_codes), 20, files={name: b""}, check=check,
                         fast=name in ("utf16-report", "findings-garbage")))
    # secrets no name or shape pattern knows, in every command that shows an environment (issue 26, item 10);
    # canary_env plants them in every scenario's environment too
    secret_files = {"secrets-in-env": b"", "secrets-in-report": b""}
    for name, args in (("check-v", ["check", "--no-micro", "-v"]), ("report-json", ["report", "--no-micro"]),
                       ("report-markdown", ["report", "--no-micro", "--markdown"]),
                       ("report-o", ["report", "--no-micro", "-o", "{files}/out.json"]),
                       ("diff", ["diff", "{files}/secrets-in-env", "{files}/secrets-in-report"]),
                       ("diff-json", ["diff", "{files}/secrets-in-env", "{files}/secrets-in-report", "--json"]),
                       ("fleet-json", ["fleet", "{files}/secrets-in-env", "{files}/secrets-in-report", "--json"]),
                       ("fleet", ["fleet", "{files}"]), ("diagnose-dir", ["diagnose", "{files}", "--json"])):
        add(Scenario("secrets", name, args, frozenset({0, 1, 2, 3}), 25, torch="secret-in-error", files=secret_files,
                     check=_contains("<redacted>") if not name.startswith("fleet") else None,
                     fast=name in ("check-v", "fleet-json")))
    add(Scenario("report-file", "fifo", ["diagnose", "{files}/fifo"], frozenset({2}), 10, files={"fifo": b"FIFO"}))
    add(Scenario("report-file", "directory", ["diagnose", "{files}"], frozenset({2}), 10))
    add(Scenario("report-file", "dev-zero", ["diagnose", "/dev/zero"], frozenset({2}), 10))
    add(Scenario("report-file", "missing", ["diagnose", "{files}/nope"], frozenset({2}), 10))
    add(Scenario("report-file", "symlink-loop", ["diagnose", "{files}/loop"], frozenset({2}), 10, files={"loop": b"LOOP"}))
    add(Scenario("report-file", "stdin-report", ["diagnose", "-"], frozenset({0, 1}), 10, stdin=_report(HEALTHY_FACTS)))
    add(Scenario("report-file", "stdin-closed", ["diagnose", "-"], frozenset({2}), 10, close_stdin=True))
    # output streams
    report_file = {"r.json": _report(HEALTHY_FACTS)}
    for mode in ("full", "closed", "gone"):
        for args in (["list"], ["list", "--json"], ["diagnose", "{files}/r.json"], ["diagnose", "{files}/r.json", "--json"],
                     ["diagnose", "{files}/r.json", "--markdown"], ["check", "--no-micro"], ["report", "--no-micro"]):
            # A full or closed stdout is a failure (exit 3, one line); a reader that went away
            # (`| head -1`) is a quiet exit 141, as git and coreutils give.
            add(Scenario("output", f"{mode}-{'-'.join(a for a in args if not a.startswith('{'))}", args,
                         frozenset({141} if mode == "gone" else {3}), 25, files=report_file, stdout=mode,
                         check=_no_stderr if mode == "gone" else _contains("envdoctor: error: cannot write to standard output"),
                         fast=(mode, args) == ("gone", ["diagnose", "{files}/r.json"])))
        add(Scenario("output", f"{mode}-healthcheck", hc, frozenset({0, 1}), 8, stdout=mode))
    for target, files in (("fifo", {"fifo": b"FIFO"}), ("link-to-devnull", {"link-to-devnull": b"LINK:/dev/null"}),
                          ("link-to-fifo", {"fifo": b"FIFO", "link-to-fifo": b"LINK:fifo"}), ("dir", {"dir": b"DIR"})):
        add(Scenario("output", f"-o-{target}", ["report", "--no-micro", "-o", "{files}/" + target], frozenset({2}), 25,
                     files=files, fast=target == "link-to-devnull"))
    add(Scenario("output", "-o-link-to-file", ["report", "--no-micro", "-o", "{files}/link"], frozenset({0, 1}), 25,
                 files={"real.json": b"old", "link": b"LINK:real.json"},
                 check=lambda o, f: "" if (f / "files/link").is_symlink() and (f / "files/real.json").read_bytes().startswith(b"{")
                 else "the link was replaced or the file not written"))
    # -o writes (issue 26, item 6)
    long_name = "r" * 245 + ".json"
    add(Scenario("output", "-o-250-character-name", ["report", "--no-micro", "-o", "{files}/" + long_name],
                 frozenset({0, 1}), 25, check=lambda o, f: "" if (f / "files" / long_name).is_file() else "not written"))
    add(Scenario("output", "-o-keeps-mode", ["report", "--no-micro", "-o", "{files}/shared.json"], frozenset({0, 1}),
                 25, files={"shared.json": b"MODE664"}, check=lambda o, f: "" if (
                     (f / "files/shared.json").stat().st_mode & 0o777) == 0o664 else "the file's mode was not kept"))
    add(Scenario("output", "-o-dev-stdout", ["report", "--no-micro", "-o", "/dev/stdout"], frozenset({0, 1}), 25,
                 check=lambda o, f: "" if o.stdout.startswith(b"{") else "no report on standard output", fast=True))
    add(Scenario("output", "-o-distributed-missing-dir", ["check", "--distributed", "-o", "/nonexistent/dir/c.json"],
                 frozenset({2}), 15, env={"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                                          "MASTER_PORT": "1"},
                 check=_one_line_stderr("envdoctor: error: cannot write /nonexistent/dir/c.json")))
    add(Scenario("output", "-o-distributed-fifo", ["check", "--distributed", "-o", "{files}/fifo"], frozenset({2}), 15,
                 files={"fifo": b"FIFO"}, env={"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
                                                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}, check=_children_gone))
    add(Scenario("output", "-o-missing-dir", ["report", "--no-micro", "-o", "{files}/no/such/dir/r.json"], frozenset({2}), 25))
    # options
    for name, args in (("timeout-nan", ["check", "--timeout", "nan"]), ("timeout-inf", ["check", "--timeout", "inf"]),
                       ("timeout-neg", ["check", "--timeout", "-1"]), ("timeout-zero", ["report", "--timeout", "0"]),
                       ("timeout-text", ["check", "--timeout", "soon"]), ("max-seconds-nan", ["healthcheck", "--max-seconds", "nan"]),
                       ("max-seconds-inf", ["healthcheck", "--max-seconds", "inf"]),
                       ("python-missing", ["check", "--python", "/nonexistent/python3"]),
                       ("python-not-on-path", ["check", "--python", "no-such-python"]),
                       ("python-dir", ["check", "--python", "/tmp"]),
                       ("python-not-executable", ["check", "--python", "{files}/plain"]),
                       ("healthcheck-python-missing", ["healthcheck", "--micro", "--python", "/nope/python"]),
                       ("device-bogus", ["check", "--device", "gpu7"]), ("unknown-option", ["check", "--frobnicate"]),
                       ("unknown-command", ["frobnicate"]), ("fail-on-bogus", ["check", "--fail-on", "maybe"])):
        add(Scenario("options", name, args, frozenset({2}), 15, files={"plain": b"not a program"},
                     fast=name == "timeout-nan"))
    add(Scenario("options", "unknown-only-id", ["check", "--no-micro", "--only", "no-such-check"], frozenset({2}), 20))
    # signals
    hung = {"torch": "hangs", "nvml": {"init_hang": 1}}
    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)):
        name = signal.Signals(sig).name
        add(Scenario("signals", f"{name}-mid-probe", ["check", "--no-micro", "--timeout", "30"], frozenset({code}), 15,
                     torch=hung["torch"], nvml=hung["nvml"], signal_at=("pid", sig),
                     check=_all(_one_line_stderr("envdoctor: interrupted"), _children_gone), fast=sig == signal.SIGINT))
        add(Scenario("signals", f"{name}-at-start", ["check", "--no-micro"], frozenset({code, 0, 1, -sig}), 15,
                     signal_at=("0.15", sig)))
        add(Scenario("signals", f"{name}-report-mid-probe", ["report", "--no-micro", "--timeout", "30"], frozenset({code}), 15,
                     torch="spawns-daemon-then-hangs", signal_at=("pid", sig), check=_children_gone))
        add(Scenario("signals", f"{name}-healthcheck", ["healthcheck", "--max-seconds", "10"], frozenset({code}), 15,
                     nvml=hung["nvml"], signal_at=("1.0", sig)))
        add(Scenario("signals", f"{name}-diagnose-big", ["diagnose", "{files}/gpus-20000"], frozenset({code, 0, 1}), 15,
                     files={"gpus-20000": b""}, signal_at=("0.5", sig)))
    # starved of file descriptors / processes, and children that cannot start (issue 26, items 1-2):
    # could-not-run is `error` (exit 3), never a fail of what was examined
    never_a_fail = _lacks("fail: torch-import", "fail   torch-import", "No GPU could be counted", "_edchild")
    add(Scenario("starved", "nofile-8-check", ["check", "--no-micro", "-v"], frozenset({3}), 30, limits={"NOFILE": 8},
                 check=never_a_fail, fast=True))
    add(Scenario("starved", "nofile-12-check", ["check", "--no-micro", "-v"], frozenset({0, 1, 3}), 30,
                 limits={"NOFILE": 12}, check=never_a_fail))
    add(Scenario("starved", "as-400mb-check", ["check", "--no-micro"], frozenset({0, 1, 3}), 40,
                 limits={"AS": 400_000 << 10}))
    add(Scenario("starved", "nofile-12-fleet-300", ["fleet", "{files}"], frozenset({0}), 40, limits={"NOFILE": 12},
                 files={f"r{i:03}.json": _report(HEALTHY_FACTS) for i in range(300)}))
    for args, name in ((["check", "--no-micro"], "check"), (["report", "--no-micro"], "report"),
                       (["healthcheck", "--max-seconds", "8", "--expect-gpus", "2"], "healthcheck")):
        add(Scenario("starved", f"pythonsafepath-{name}", args, frozenset({0, 1}), 30, env={"PYTHONSAFEPATH": "1"},
                     nvml={"count": 2}, check=never_a_fail if name != "report" else lambda o, f: "" if o.stdout.count(
                         b'"uuid"') >= 2 else "the 2 GPUs were not listed", fast=name == "healthcheck"))
    # fleet, diff and diagnose of a folder (issue 26, item 8)
    schemas = {f"schema-{n}.json": f'{{"schema_version": {v}, "facts": {{}}}}'.encode()
               for n, v in (("2", "2"), ("99", "99"), ("true", "true"), ("0", "0"))}
    add(Scenario("folder", "fleet-counts-only-readable-schemas", ["fleet", "{files}", "--json"], frozenset({1}), 20,
                 files={**schemas, "good.json": _report(HEALTHY_FACTS)},
                 check=lambda o, f: "" if json.loads(o.stdout)["reports"] == 1 else "a report of another schema counted",
                 fast=True))
    evil = "bad\x1b]0;pwned\x07\x1b[2Jname.json"
    no_raw = _lacks("\x1b", "\x07")
    add(Scenario("folder", "diagnose-dir-control-chars", ["diagnose", "{files}"], frozenset({0, 1, 2}), 20,
                 files={evil: _report(HEALTHY_FACTS)}, check=no_raw))
    add(Scenario("folder", "diff-control-chars", ["diff", "{files}/" + evil, "{files}/nope.json"], frozenset({2}), 20,
                 files={evil: b"not json {"}, check=no_raw))
    add(Scenario("folder", "fleet-control-chars", ["fleet", "{files}"], frozenset({2}), 20,
                 files={evil: b"\x00\x01binary"}, check=no_raw))
    add(Scenario("folder", "diagnose-empty-dir", ["diagnose", "{files}"], frozenset({2}), 20,
                 check=_one_line_stderr("envdoctor: error: no reports in")))
    add(Scenario("folder", "fleet-empty-dir", ["fleet", "{files}"], frozenset({2}), 20,
                 check=_one_line_stderr("envdoctor: error: no reports in")))
    add(Scenario("folder", "diagnose-random-1mb", ["diagnose", "{files}/random"], frozenset({2}), 20,
                 files={"random": os.urandom(1 << 20)}, check=_one_line_stderr("envdoctor: error: ")))
    # encodings and widths (issue 26, items 4-5): output degrades, never fails; JSON stays valid
    def _json_stdout(o: Outcome, f: Path) -> str:
        try:
            json.loads(o.stdout.decode("utf-8"))
        except ValueError as exc:
            return f"stdout is not valid UTF-8 JSON: {exc}"
        return ""
    for name, env in (("ascii", {"PYTHONIOENCODING": "ascii"}), ("latin-1", {"PYTHONIOENCODING": "latin-1"}),
                      ("c-locale", {"LC_ALL": "C", "PYTHONUTF8": "0"})):
        add(Scenario("encoding", f"{name}-check", ["check", "--no-micro"], frozenset({0, 1}), 25, env=env,
                     check=_contains("Summary:"), fast=name == "ascii"))
        add(Scenario("encoding", f"{name}-report-json", ["report", "--no-micro"], frozenset({0, 1}), 25, env=env,
                     check=_json_stdout))
    for var in ("SLURM_JOB_NAME", "PATH", "LD_LIBRARY_PATH"):
        extra = {"PATH": os.environ.get("PATH", "/usr/bin:/bin") + ":/opt/caf\udce9"} if var == "PATH" else {
            var: "/opt/caf\udce9\udcff"}
        add(Scenario("encoding", f"not-utf8-{var}", ["report", "--no-micro"], frozenset({0, 1, 3}), 25, env=extra,
                     check=_json_stdout))
        add(Scenario("encoding", f"not-utf8-{var}-o", ["report", "--no-micro", "-o", "{files}/r.json"],
                     frozenset({0, 1, 3}), 25, env=extra, check=lambda o, f: "" if json.loads(
                         (f / "files/r.json").read_bytes().decode("utf-8")) else "no report"))
    for args in (["check", "--no-micro"], ["diagnose", "{files}/r.json"]):
        add(Scenario("width", f"columns-0-{args[0]}", args, frozenset({0, 1}), 25, env={"COLUMNS": "0"},
                     files=report_file, check=_contains("Summary"), fast=args[0] == "diagnose"))
    # children and their messages (issue 26, item 11): --python validation within the run's deadline
    add(Scenario("children", "python-hangs-ignoring-sigterm", ["check", "--no-micro", "--timeout", "1", "--python",
                                                                "{files}/python"], frozenset({2}), 6,
                 files={"python": b"EXE:trap '' TERM; sleep 60"}, check=_contains("did not answer within 1 s"), fast=True))
    add(Scenario("children", "python-prints-50mb", ["check", "--no-micro", "--python", "{files}/python"], frozenset({2}),
                 15, files={"python": b"EXE:head -c 50000000 /dev/zero; exit 0"}, check=_contains("not a Python interpreter")))
    add(Scenario("children", "python-not-executable", ["check", "--no-micro", "--python", "{files}/plain"],
                 frozenset({2}), 10, files={"plain": b"x"}, check=_contains("not executable")))
    # the distributed edges (issue 26, item 7); the real torch, Gloo on 127.0.0.1
    launch = {"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"}
    add(Scenario("distributed", "store-listener-never-answers", ["check", "--distributed", "--init-timeout", "3"],
                 frozenset({1}), 60, torch=None, env={**launch, "RANK": "1", "LOCAL_RANK": "1"}, listener=True,
                 check=_contains("did not answer within --init-timeout 3 s"), fast=True))
    add(Scenario("distributed", "rank0-agent-store-never-answers", ["check", "--distributed", "--init-timeout", "3"],
                 frozenset({1}), 60, torch=None, listener=True,
                 env={**launch, "RANK": "0", "LOCAL_RANK": "0", "TORCHELASTIC_USE_AGENT_STORE": "True"},
                 check=_contains("could not reach the rendezvous store")))
    # WORLD_SIZE=100000 with one rank started: within --init-timeout, one summary for the ranks that
    # never arrived (not 100,000 rows, not 100,000 store reads), and SIGTERM in the wait answered at
    # once with the signal's exit code and "Stopped early: SIGTERM" (issue 26, item 7)
    alone = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "100000", "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}
    add(Scenario("distributed", "world-100000-one-rank", ["check", "--distributed", "--init-timeout", "3",
                                                          "--timeout", "8"], frozenset({1}), 60, torch=None,
                 env=alone, free_port=True, check=_all(_contains("99,983 more rank(s) never arrived, no row each"),
                                                       _at_most_lines(80))))
    add(Scenario("distributed", "world-100000-sigterm-in-wait", ["check", "--distributed", "--init-timeout", "300",
                                                                 "--timeout", "8"], frozenset({143}), 60, torch=None,
                 env=alone, free_port=True, signal_at=("15", signal.SIGTERM),
                 check=_all(_contains("Stopped early: SIGTERM, while 99999 of 100000"), _lacks("never arrived within"))))
    # PYTHONWARNINGS=error: no "Exception ignored … ResourceWarning" (every child pipe is closed; item 9)
    for name, args in (("check", ["check", "--no-micro"]), ("healthcheck", hc), ("exec", ["exec", "--", "true"]),
                       ("report", ["report", "--no-micro"])):
        add(Scenario("warnings", f"pythonwarnings-error-{name}", args, frozenset({0, 1, 3, 78}), 25,
                     env={"PYTHONWARNINGS": "error"}, nvml={"count": 1}, fast=name == "healthcheck"))
    # OS errors before probing, and exec's environment (issue 26, items 3 and 9)
    add(Scenario("preflight", "cwd-deleted-check", ["check", "--no-micro"], frozenset({0, 1}), 30, cwd_gone=True,
                 check=_lacks("⁉ error", "error:"), fast=True))
    add(Scenario("preflight", "cwd-deleted-report-o", ["report", "--no-micro", "-o", "r.json"], frozenset({2}), 30,
                 cwd_gone=True, check=_one_line_stderr("envdoctor: error: cannot write r.json")))
    add(Scenario("preflight", "exec-empty-command", ["exec", "--", ""], frozenset({127}), 20,
                 check=_contains("envdoctor exec: '': command not found")))
    add(Scenario("preflight", "exec-env-no-coercion", ["exec", "--", "sh", "-c", "echo LC_CTYPE=${LC_CTYPE-unset}"],
                 frozenset({0}), 20, env={"LC_ALL": "", "LANG": "C", "LC_CTYPE": "C"},
                 check=_contains("LC_CTYPE=C\n")))
    # concurrent writers
    add(Scenario("concurrency", "4-writers-one-file", ["report", "--no-micro", "-o", "{files}/shared.json"],
                 frozenset({0, 1}), 40, concurrent=4,
                 check=lambda o, f: "" if json.loads((f / "files/shared.json").read_text())["schema_version"] == 1
                 and not list((f / "files").glob(".*.tmp")) else "torn or leftover file"))
    add(Scenario("concurrency", "3-checks-at-once", ["check", "--no-micro"], frozenset({0, 1}), 40, concurrent=3))
    return out


# -- running -------------------------------------------------------------------------------------
def _prepare(s: Scenario, folder: Path) -> tuple[list[str], dict[str, str]]:
    from tests.conftest import compile_shared, make_exe

    files = folder / "files"
    files.mkdir(parents=True, exist_ok=True)
    hostile = _hostile_files()
    for name, content in s.files.items():
        path = files / name
        if content == b"FIFO":
            os.mkfifo(path)
        elif content.startswith(b"EXE:"):
            path.write_bytes(b"#!/bin/sh\n" + content[4:] + b"\n")
            path.chmod(0o755)
        elif content == b"MODE664":
            path.write_bytes(b"old")
            path.chmod(0o664)
        elif content == b"DIR":
            path.mkdir()
        elif content == b"LOOP":
            path.symlink_to(path)
        elif content.startswith(b"LINK:"):
            path.symlink_to(content[5:].decode())
        elif name == "over-64mib":
            with open(path, "wb") as fh:
                fh.truncate(65 << 20)
        elif not content and name in hostile:
            path.write_bytes(hostile[name])
        else:
            path.write_bytes(content)
    env = canary_env(folder)
    lib_dirs = [env["LD_LIBRARY_PATH"]]
    fakes = ROOT / "tests" / "fakes"
    if s.nvml is not None:
        compile_shared(fakes / "fake_nvml.c", folder / "nvml", "libnvidia-ml.so.1", soname="libnvidia-ml.so.1")
        (folder / "nvml.cfg").write_text("".join(f"{k}={v}\n" for k, v in s.nvml.items()))
        env["FAKE_NVML_CONFIG"] = str(folder / "nvml.cfg")
        lib_dirs.insert(0, str(folder / "nvml"))
    if s.cuda is not None:
        compile_shared(fakes / "fake_cuda.c", folder / "cuda", "libcuda.so.1", soname="libcuda.so.1")
        (folder / "cuda.cfg").write_text("".join(f"{k}={v}\n" for k, v in s.cuda.items()))
        env["FAKE_CUDA_CONFIG"] = str(folder / "cuda.cfg")
        lib_dirs.insert(0, str(folder / "cuda"))
    env["LD_LIBRARY_PATH"] = os.pathsep.join(lib_dirs)
    path = os.environ.get("PATH", "/usr/bin:/bin")
    if s.tools:
        for name, script in s.tools.items():
            make_exe(folder / "bin", name, script)
        path = str(folder / "bin") + os.pathsep + path
    env["PATH"] = path
    pythonpath = [f"/opt/{GH}/site"]
    if s.torch is not None:
        pythonpath.insert(0, str(fake_torch(folder, s.torch)))
    env["PYTHONPATH"] = os.pathsep.join(pythonpath)
    env.update(s.env)
    args = [a.replace("{files}", str(files)) for a in s.args]
    return args, env


def _run_once(s: Scenario, folder: Path, args: list[str], env: dict[str, str]) -> Outcome:
    cwd = folder / f"work-{SK}"
    cwd.mkdir(exist_ok=True)
    preexec = None
    stdout = None
    if s.cwd_gone:
        cwd = folder / f"gone-{SK}"
        cwd.mkdir(exist_ok=True)

        def preexec() -> None:
            os.rmdir(os.getcwd())  # in the child, after Popen's chdir: envdoctor starts in a deleted folder
    if s.limits:
        def preexec() -> None:
            import resource

            for name, value in s.limits.items():
                resource.setrlimit(getattr(resource, f"RLIMIT_{name}"), (value, value))
    if s.stdout == "closed":
        preexec = lambda: os.close(1)  # noqa: E731
        stdout = subprocess.DEVNULL
    elif s.close_stdin:
        preexec = lambda: os.close(0)  # noqa: E731
    signal_after = None
    if s.signal_at:
        when, signum = s.signal_at
        if when == "pid":
            pid_file = pidfile(folder / f"torch-{s.torch}")
            signal_after = (lambda: pid_file.exists(), signum)
        else:
            signal_after = (float(when), signum)
    if s.burn:
        burners = [subprocess.Popen(["timeout", str(int(s.limit) + 5), "sh", "-c", "while :; do :; done"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(s.burn)]
        try:
            return run_cli(args, env=env, stdin=s.stdin, timeout=s.limit, preexec=preexec, cwd=str(cwd),
                           stdout=stdout, signal_after=signal_after)
        finally:
            for b in burners:
                b.terminate()  # timeout(1) passes SIGTERM on to its loop
                b.wait()
    if s.free_port:
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            env = {**env, "MASTER_PORT": str(probe.getsockname()[1])}
    if s.listener:
        import socket

        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(64)  # accepted by the kernel, never answered
        env = {**env, "MASTER_PORT": str(server.getsockname()[1])}
        try:
            return run_cli(args, env=env, stdin=s.stdin, timeout=s.limit, cwd=str(cwd))
        finally:
            server.close()
    if s.stdout == "full":
        with open("/dev/full", "wb") as full:
            return run_cli(args, env=env, stdin=s.stdin, timeout=s.limit, preexec=preexec, cwd=str(cwd),
                           stdout=full.fileno(), signal_after=signal_after)
    if s.stdout == "gone":
        return _run_reader_gone(args, env, s.limit, str(cwd))
    return run_cli(args, env=env, stdin=s.stdin, timeout=s.limit, preexec=preexec, cwd=str(cwd), stdout=stdout,
                   signal_after=signal_after)


def _run_reader_gone(args: list[str], env: dict[str, str], limit: float, cwd: str) -> Outcome:
    from tests.faults import cli_env

    began = time.monotonic()
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader left before the first byte (`| head -0`)
    proc = subprocess.Popen([sys.executable, "-m", "envdoctor", *args], stdout=write_end, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=cli_env(env), cwd=cwd)
    os.close(write_end)
    try:
        _, err = proc.communicate(timeout=limit)
        timed_out = False
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        timed_out = True
    return Outcome(proc.returncode, b"", err or b"", time.monotonic() - began, timed_out)


def run_scenario(s: Scenario, base: Path) -> Result:
    folder = Path(tempfile.mkdtemp(prefix=f"{s.family}-", dir=base))
    try:
        args, env = _prepare(s, folder)
    except Exception as exc:  # noqa: BLE001 - a broken scenario is a failed row, not a crashed matrix
        return Result(s, None, 0.0, False, f"setup failed: {type(exc).__name__}: {exc}")
    if s.concurrent:
        with ThreadPoolExecutor(s.concurrent) as pool:
            outs = list(pool.map(lambda _: _run_once(s, folder, args, env), range(s.concurrent)))
    else:
        outs = [_run_once(s, folder, args, env)]
    seconds = max(o.seconds for o in outs)
    for out in outs:
        why = _judge(s, out, folder)
        if why:
            return Result(s, out.rc, seconds, False, why)
    return Result(s, outs[0].rc, seconds, True, "")


def _judge(s: Scenario, out: Outcome, folder: Path) -> str:
    text = out.text
    if out.timed_out:
        return f"HANG: no exit within {s.limit:g} s"
    if "Traceback" in text or "Exception ignored" in text:
        return "traceback: " + text[text.find("Traceback"):][:200].replace("\n", " | ")
    inputs = set(_hostile_files())  # planted on purpose; everything else there was written by envdoctor
    written = "".join(p.read_text("utf-8", "replace") for p in (folder / "files").glob("*")
                      if p.is_file() and not p.is_symlink() and p.stat().st_size < (64 << 20) and p.name not in inputs)
    found = leaked(text + written)
    if found:
        return f"LEAK: {found}"
    if out.rc not in s.expect:
        last = out.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        return f"exit {out.rc}, expected {sorted(s.expect)}: {last[0][:160]}"
    if s.check is not None:
        return s.check(out, folder)
    return ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", action="append", help="only these families (repeatable)")
    ap.add_argument("--fast", action="store_true", help="only the scenarios the tests run")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    chosen = [s for s in scenarios() if (not args.family or s.family in args.family) and (not args.fast or s.fast)]
    if args.list:
        for s in chosen:
            print(s.id)
        return 0
    began = time.monotonic()
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix=f"envdoctor-faults-{GH}-") as base:
        serial = [s for s in chosen if s.concurrent or s.signal_at]
        parallel = [s for s in chosen if s not in serial]
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            for r in pool.map(lambda s: run_scenario(s, Path(base)), parallel):
                results.append(r)
                _print(r)
        for s in serial:
            r = run_scenario(s, Path(base))
            results.append(r)
            _print(r)
    failed = [r for r in results if not r.ok]
    families = sorted({r.scenario.family for r in results})
    print(f"\n{len(results)} scenarios in {len(families)} families, {len(results) - len(failed)} passed, "
          f"{len(failed)} failed; hangs {sum('HANG' in r.why for r in failed)}, tracebacks "
          f"{sum(r.why.startswith('traceback') for r in failed)}, leaks {sum('LEAK' in r.why for r in failed)}; "
          f"slowest {max((r.seconds for r in results), default=0):.1f} s; total {time.monotonic() - began:.0f} s")
    for fam in families:
        rs = [r for r in results if r.scenario.family == fam]
        print(f"  {fam:12} {sum(r.ok for r in rs):3}/{len(rs)}")
    return 1 if failed else 0


def _print(r: Result) -> None:
    rc = "-" if r.rc is None else str(r.rc)
    print(f"{'PASS' if r.ok else 'FAIL'}  rc={rc:>3}  {r.seconds:6.2f}s  {r.scenario.id}" + (f"  {r.why}" if r.why else ""),
          flush=True)


if __name__ == "__main__":
    sys.exit(main())
