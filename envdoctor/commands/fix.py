"""``envdoctor fix``: plan -> snapshot -> apply -> verify -> roll back, inside the Python environment only.

1. **Examine** the target with the run pipeline (:mod:`envdoctor.pipeline.collect` -> :mod:`~.judge`, the
   same discovery and checks as ``check``) and **plan** (:mod:`envdoctor.pipeline.fixplan`): the typed
   remedies of the failing findings that act inside the environment, each with the finding it answers,
   its exact command, interpreter and installer; the rest printed for the user (driver, toolkit,
   container, system: "needs root"), never run. Nothing changes without ``--yes``.
2. **Snapshot** into ``<prefix>/.envdoctor-fix/<time>/``: ``pip freeze --all`` (``freeze.txt``), the plan,
   and the environment's installed files (its site-packages and scripts folders) as hard links
   (``tree/``: no copy of the data; a file pip replaces is unlinked and written anew, so the linked
   one keeps the old bytes), copied where a link cannot be made. That is what a reinstall needs, with
   no index and no wheel cache.
3. **Apply** with the target's own installer (its ``python -m pip``; ``uv pip`` in a uv-managed venv);
   installs that do not name torch run with a constraints file pinning the installed CUDA torch. An
   externally-managed interpreter (PEP 668) is refused: create a venv.
4. **Verify**: the checks run again, live, on the target; a step whose finding does not pass failed.
5. **Roll back** on a failed step, a failed verification, Ctrl-C or SIGTERM: the folders are put back as
   the snapshot holds them, and the freeze compared byte for byte with ``freeze.txt``.

Exit codes: 0 fixed and verified; 1 nothing to fix, not applied (no ``--yes``), refused, or not all fixed
(rolled back); 2 usage; 3 could not complete (no installer, a snapshot or a rollback that failed);
130/143 interrupted (rolled back).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from envdoctor.knowledge import remedies
from envdoctor.pipeline.fixplan import Environment, FixPlan, plan_fix, requirement_name
from envdoctor.pipeline.plan import Plan
from envdoctor.process import lifecycle
from envdoctor.process.lifecycle import ExitCode

SCHEMA_VERSION = 1
#: Where the snapshots go, inside the environment (hard links need the same file system).
SNAPSHOTS = ".envdoctor-fix"
#: Seconds one installer command may take (a torch wheel is 2-3 GB).
INSTALL_TIMEOUT = 3600.0
_INSPECT = r"""
import json, os, sys, sysconfig, importlib.util
paths = sysconfig.get_paths()
cfg = os.path.join(sys.prefix, "pyvenv.cfg")
uv = False
if os.path.isfile(cfg):
    with open(cfg) as fh:
        uv = any(line.split("=")[0].strip() == "uv" for line in fh)
venv = sys.prefix != getattr(sys, "base_prefix", sys.prefix)
marker = os.path.join(paths.get("stdlib", ""), "EXTERNALLY-MANAGED")
sys.stdout.write(json.dumps({"prefix": sys.prefix, "venv": venv, "uv": uv,
    "externally_managed": (not venv) and os.path.isfile(marker),
    "conda": os.path.isdir(os.path.join(sys.prefix, "conda-meta")),
    "pip": importlib.util.find_spec("pip") is not None,
    "dirs": sorted({paths["purelib"], paths["platlib"], paths["scripts"]})}))
"""


class FixError(Exception):
    """Fix cannot go on; ``str()`` is the line shown (exit 3)."""


class Interrupted(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


# -- the target --------------------------------------------------------------------------------
def inspect_target(python: str) -> dict[str, Any]:
    try:
        out = subprocess.run([python, "-E", "-s", "-c", _INSPECT], capture_output=True, timeout=60, text=True)
        return dict(json.loads(out.stdout))
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        raise FixError(f"{python} did not say where its packages live ({exc})") from None


def conda_owned(prefix: str) -> tuple[str, ...]:
    """The packages conda installed into ``prefix`` (conda-meta/<name>-<version>-<build>.json)."""
    names = []
    for meta in sorted(Path(prefix, "conda-meta").glob("*.json")):
        try:
            names.append(requirement_name(str(json.loads(meta.read_text()).get("name") or "")))
        except (OSError, ValueError):
            continue
    return tuple(n for n in names if n)


def conda_manager(prefix: str) -> str | None:
    """The conda environment's own manager: ``$CONDA_EXE`` (set by ``conda activate``), the base
    installation's conda beside ``prefix`` (``BASE/envs/NAME`` -> ``BASE/bin/conda``; the base env's
    own ``bin/conda``), else mamba, micromamba or conda on PATH."""
    candidates = [os.environ.get("CONDA_EXE") or "", os.path.join(prefix, "..", "..", "bin", "conda"),
                  os.path.join(prefix, "bin", "conda")]
    for exe in candidates:
        if exe and os.path.isfile(exe) and os.access(exe, os.X_OK):
            return os.path.abspath(exe)
    return next((found for name in ("mamba", "micromamba", "conda") if (found := shutil.which(name))), None)


def conda_snapshot(exe: str, prefix: str, folder: Path) -> None:
    """``conda list -p PREFIX --explicit`` (the exact package URLs: ``conda create -p NEW --file`` it to
    re-create the env) and ``--json`` into the snapshot folder."""
    for flag, name in (("--explicit", "conda-explicit.txt"), ("--json", "conda-list.json")):
        try:
            out = subprocess.run([exe, "list", "-p", prefix, flag], capture_output=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise FixError(f"{exe} list {flag} failed: {exc}; nothing was changed") from None
        if out.returncode:
            raise FixError(f"{exe} list {flag} exited {out.returncode}: "
                           f"{out.stderr.decode('utf-8', 'replace').strip()[-300:]}; nothing was changed")
        (folder / name).write_bytes(out.stdout)


def _uv() -> str | None:
    """uv on PATH, or installed beside envdoctor (its own venv's bin)."""
    beside = os.path.join(os.path.dirname(sys.executable), "uv")
    return shutil.which("uv") or (beside if os.access(beside, os.X_OK) else None)


def _child_env() -> dict[str, str]:
    return {**os.environ, "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def freeze_argv(env: Environment) -> list[str]:
    if env.installer == "uv":
        return [_uv() or "uv", "pip", "freeze", "--python", env.python]
    return [env.python, "-m", "pip", "freeze", "--all"]


def freeze(env: Environment) -> bytes:
    try:
        out = subprocess.run(freeze_argv(env), capture_output=True, timeout=300, env=_child_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FixError(f"cannot list the installed packages: {exc}") from None
    if out.returncode:
        raise FixError("cannot list the installed packages: " + out.stderr.decode("utf-8", "replace").strip()[-300:])
    return out.stdout


# -- the snapshot of the installed files ---------------------------------------------------------
def _link_or_copy(src: str, dst: str) -> None:
    if os.path.islink(src):
        os.symlink(os.readlink(src), dst)
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def take_tree(folders: list[str], tree: Path) -> None:
    """Each folder's files hard-linked (or copied) under ``tree`` (named by its index)."""
    for i, folder in enumerate(folders):
        dest = tree / str(i)
        dest.mkdir(parents=True)
        in_place = os.path.basename(folder) == "conda-meta"  # conda appends to conda-meta/history: copied
        if not os.path.isdir(folder):
            continue
        for root, dirs, files in os.walk(folder):
            rel = os.path.relpath(root, folder)
            here = dest / rel if rel != "." else dest
            for d in dirs:
                full = os.path.join(root, d)
                if os.path.islink(full):
                    os.symlink(os.readlink(full), here / d)
                else:
                    (here / d).mkdir()
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
            for name in files:
                if in_place:
                    shutil.copy2(os.path.join(root, name), str(here / name), follow_symlinks=False)
                else:
                    _link_or_copy(os.path.join(root, name), str(here / name))


def _same(a: str, b: str) -> bool:
    try:
        if os.path.islink(a) or os.path.islink(b):
            return os.path.islink(a) and os.path.islink(b) and os.readlink(a) == os.readlink(b)
        sa, sb = os.stat(a), os.stat(b)
        return (sa.st_ino, sa.st_dev) == (sb.st_ino, sb.st_dev)
    except OSError:
        return False


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def restore_tree(folders: list[str], tree: Path) -> int:
    """Put every folder back as ``tree`` holds it; returns the entries changed back."""
    changed = 0
    for i, folder in enumerate(folders):
        src = tree / str(i)
        os.makedirs(folder, exist_ok=True)
        for root, dirs, files in os.walk(folder, topdown=True):
            rel = os.path.relpath(root, folder)
            kept = src / rel if rel != "." else src
            for name in list(dirs) + files:
                live, snap = os.path.join(root, name), str(kept / name)
                if not os.path.lexists(snap) or os.path.isdir(snap) != (os.path.isdir(live) and not os.path.islink(live)):
                    _remove(live)
                    changed += 1
            dirs[:] = [d for d in dirs if os.path.isdir(os.path.join(root, d)) and not os.path.islink(os.path.join(root, d))]
        for root, dirs, files in os.walk(str(src)):
            rel = os.path.relpath(root, str(src))
            live_root = os.path.join(folder, rel) if rel != "." else folder
            for d in dirs:
                snap_dir, live = os.path.join(root, d), os.path.join(live_root, d)
                if os.path.islink(snap_dir):
                    if not _same(snap_dir, live):
                        _remove(live)
                        os.symlink(os.readlink(snap_dir), live)
                        changed += 1
                elif not os.path.isdir(live):
                    os.mkdir(live)
                    changed += 1
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
            for name in files:
                snap_file, live = os.path.join(root, name), os.path.join(live_root, name)
                if not _same(snap_file, live):
                    _remove(live)
                    _link_or_copy(snap_file, live)
                    changed += 1
    return changed


# -- signals -----------------------------------------------------------------------------------
class Guard:
    """Ctrl-C, SIGTERM and SIGHUP while fix changes the environment: the running installer's group is
    killed and :class:`Interrupted` raised, so the rollback runs; during the rollback they only wait."""

    def __init__(self) -> None:
        self.child: subprocess.Popen[bytes] | None = None
        self.signum: int | None = None
        self.holding = False
        self._saved: dict[signal.Signals, Any] = {}

    def _on(self, signum: int, frame: Any) -> None:
        self.signum = self.signum or int(signum)
        if self.child is not None:
            lifecycle.end_group(self.child)
        if not self.holding:
            raise Interrupted(signum)

    @contextmanager
    def installed(self) -> Iterator[Guard]:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                self._saved[sig] = signal.signal(sig, self._on)
            except (OSError, ValueError):
                pass
        try:
            yield self
        finally:
            for sig, old in self._saved.items():
                try:
                    signal.signal(sig, old)
                except (OSError, ValueError):
                    pass

    @contextmanager
    def hold(self) -> Iterator[None]:
        self.holding = True
        try:
            yield
        finally:
            self.holding = False

    def run(self, argv: list[str], log: Path) -> int:
        """Run one installer command in its own process group (its output to ``log``); its exit code."""
        with open(log, "ab") as out:
            out.write(("$ " + " ".join(argv) + "\n").encode())
            out.flush()
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    env=_child_env(), **lifecycle.own_group())
            lifecycle.register(proc)
            self.child = proc
            try:
                return proc.wait(timeout=INSTALL_TIMEOUT)
            except subprocess.TimeoutExpired:
                lifecycle.end_group(proc)
                proc.wait()
                return -9
            finally:
                self.child = None
                lifecycle.release(proc)


# -- the run -----------------------------------------------------------------------------------
def examine(plan: Plan) -> Any:
    """The Report of ``plan``'s target, from the one run pipeline (as ``check`` builds it)."""
    from envdoctor.pipeline.collect import collect
    from envdoctor.pipeline.judge import judge
    from envdoctor.process.host import Host
    from envdoctor.registry import RegistryError

    facts, runs = collect(plan, Host(python=plan.python), progress=False)
    try:
        return judge(facts, runs, "live", plan)
    except RegistryError as exc:
        raise FixError(str(exc)) from None


_WORST = {"skip": 0, "ok": 1, "warn": 2, "error": 3, "fail": 4}


def worst_statuses(findings: Any) -> dict[str, str]:
    """Each check id's worst status among its findings (a check may give one per GPU)."""
    worst: dict[str, str] = {}
    for f in findings:
        status = f.status.value
        if _WORST.get(status, 0) >= _WORST.get(worst.get(f.id, "skip"), 0):
            worst[f.id] = status
    return worst


def _torch_of(report: Any) -> str | None:
    value = report.facts.value("torch.version")
    return str(value) if value else None


def _local(version: str | None) -> str:
    return (version or "").partition("+")[2]


class Outcome:
    """What fix did, said as it happens: each line reaches ``live`` at once (the plan and the snapshot's
    folder are on the screen before the first step runs, so a kill -9 mid-install leaves the user what
    ``--restore`` needs), and is kept for ``--json``."""

    def __init__(self, live: Callable[[str], None] | None = None) -> None:
        self.status = "planned"
        self.steps: list[dict[str, Any]] = []
        self.verified: dict[str, str] = {}
        #: Each check's worst status before the fix: a check that passed (or warned) before and fails
        #: after is a failed verification too, not only an answered finding that still fails.
        self.before: dict[str, str] = {}
        self.restored: dict[str, Any] | None = None
        self.lines: list[str] = []
        self.code: int = ExitCode.FAIL
        self.live = live

    def say(self, line: str) -> None:
        self.lines.append(line)
        if self.live is not None:
            from envdoctor.redact import redact_text

            self.live(redact_text(line))


def build_environment(python: str, info: dict[str, Any], torch: str | None, torch_index: str | None) -> Environment:
    installer = "uv" if info.get("uv") else "pip"
    return Environment(python=python, prefix=str(info.get("prefix") or ""), installer=installer,
                       conda=bool(info.get("conda")),
                       conda_owned=conda_owned(str(info["prefix"])) if info.get("conda") else (),
                       conda_exe=conda_manager(str(info["prefix"])) if info.get("conda") else None,
                       externally_managed=bool(info.get("externally_managed")), torch=torch, torch_index=torch_index)


def run_fix(plan: Plan, *, yes: bool, as_json: bool, torch_index: str | None,
            echo: Callable[[str], None] = print) -> int:
    """``envdoctor fix``: the exit code (module docstring)."""
    # The terminal gets each line as it is said; --json prints the document at the end (its lines on stderr live).
    out = Outcome(live=(lambda line: print(line, file=sys.stderr, flush=True)) if as_json else echo)
    doc: dict[str, Any] = {"kind": "envdoctor-fix", "schema_version": SCHEMA_VERSION,
                           "target": {"python": plan.python, "chosen_by": plan.python_chosen_by}}
    try:
        code = _fix(plan, yes, torch_index, out, doc)
    except FixError as exc:
        out.status, code = "incomplete", int(ExitCode.INCOMPLETE)
        out.say(f"envdoctor fix: could not complete: {exc}")
    doc["outcome"] = {"status": out.status, "exit_code": code, "steps": out.steps, "verified": out.verified,
                      "restored": out.restored}
    from envdoctor.redact import redact_tree

    if as_json:
        echo(json.dumps(redact_tree(doc), indent=2, ensure_ascii=False))
    return code


def restore_snapshot(folder: str, echo: Callable[[str], None] = print) -> int:
    """``envdoctor fix --restore DIR``: put an environment back as a snapshot holds it (after envdoctor
    itself was killed mid-fix, or to undo a fix that was verified); exit 0 when the freeze is identical."""
    where = Path(folder)
    try:
        target = json.loads((where / "target.json").read_text())
        folders = [f for f in (where / "folders.txt").read_text().splitlines() if f]
        original = (where / "freeze.txt").read_bytes()
        if not isinstance(target, dict) or not all(isinstance(target.get(k), str) for k in ("python", "prefix",
                                                                                              "installer")):
            raise ValueError("target.json does not name the interpreter, its prefix and its installer")
    except (OSError, ValueError) as exc:
        echo(f"envdoctor fix: {folder} is not a snapshot fix wrote (no target.json, folders.txt, freeze.txt): {exc}")
        return int(ExitCode.USAGE)
    if not (where / "tree").is_dir():
        echo(f"envdoctor fix: {folder} keeps no installed files (tree/ is removed after a verified fix); "
             f"reinstall from {where / 'freeze.txt'}: {target['python']} -m pip install -r {where / 'freeze.txt'}")
        return int(ExitCode.INCOMPLETE)
    env = Environment(python=str(target["python"]), prefix=str(target["prefix"]), installer=str(target["installer"]))
    out = Outcome(live=echo)
    guard = Guard()
    with guard.installed(), guard.hold():
        identical = _rollback(env, folders, where, original, out)
    return int(ExitCode.OK) if identical else int(ExitCode.INCOMPLETE)


def _print_plan(fp: FixPlan, env: Environment, out: Outcome) -> None:
    titles = dict(fp.titles)
    if fp.steps:
        conda = f", conda environment{f' (its conda: {env.conda_exe})' if _conda_steps(fp) else ''}" if env.conda else ""
        out.say(f"Plan for {env.python} (installer: {env.installer}{conda}):")
        for n, s in enumerate(fp.steps, 1):
            answers = ", ".join(f"{i} ({titles.get(i, '')})" for i in s.findings)
            out.say(f"  {n}. answers {answers}")
            out.say(f"     run:     {s.command.render()}")
            out.say(f"     changes: {s.changes}")
    for m in fp.manual:
        mark = "needs root" if m.needs_root else "yours to run"
        out.say(f"  not run ({mark}): {m.finding}: {m.title}; {m.why}")
        for c in m.commands:
            out.say(f"     {c}")


def _fix(plan: Plan, yes: bool, torch_index: str | None, out: Outcome, doc: dict[str, Any]) -> int:
    python = plan.python or sys.executable
    info = inspect_target(python)
    before = examine(plan)
    torch = _torch_of(before)
    env = build_environment(python, info, torch, torch_index)
    doc["target"].update({"prefix": env.prefix, "installer": env.installer, "conda": env.conda, "torch": torch,
                          "conda_exe": env.conda_exe})
    fp = plan_fix(before.findings, env)
    out.before = worst_statuses(before.findings)
    if fp.steps and "+cu" in (torch or ""):
        # The constraints file is named now, so the plan shows it; it is written with the snapshot.
        fp = plan_fix(before.findings, env.replace(constraints=str(_snapshot_dir(env) / "constraints.txt")))
    doc["plan"] = fp.as_dict()
    _print_plan(fp, env, out)
    if env.externally_managed and (fp.steps or fp.manual):
        # Its remedies already install into a new venv (remedies.into_venv), printed as the user's steps.
        out.status = "refused"
        from envdoctor.knowledge.remedies import NEW_VENV, VenvCreate

        out.say(f"Refused: {python} is an externally managed interpreter (PEP 668: the distribution's packages). "
                f"Create a venv ({VenvCreate(python).words()}) and run the steps above, which install into "
                f"{NEW_VENV}; then run fix again with --python {NEW_VENV}. envdoctor never uses "
                "--break-system-packages.")
        return int(ExitCode.FAIL)
    if not fp.steps:
        out.status = "nothing-to-fix"
        out.say("Nothing for fix to change in this Python environment"
                + (" (the steps above are yours to run)." if fp.manual else "."))
        return int(ExitCode.FAIL)
    if env.installer == "uv" and _uv() is None:
        raise FixError(f"{env.prefix} is a uv-managed venv and uv is not on PATH: install uv "
                       "(https://docs.astral.sh/uv/getting-started/installation/) and run fix again")
    if env.installer == "pip" and not info.get("pip"):
        raise FixError(f"{python} has no pip: {python} -m ensurepip, then run fix again")
    if not yes:
        out.status = "planned"
        out.say("Nothing was changed: run again with --yes to apply this plan.")
        return int(ExitCode.FAIL)
    folders = [str(d) for d in info.get("dirs") or []]
    if _conda_steps(fp):
        # conda records what it installed in conda-meta/: restored with the files, so conda's view
        # after a rollback is the one before (conda-explicit.txt is kept for re-creating the env).
        folders.append(os.path.join(env.prefix, "conda-meta"))
    return _apply(plan, fp, env, folders, out, doc)


_STAMP: list[str] = []


def _snapshot_dir(env: Environment) -> Path:
    if not _STAMP:
        _STAMP.append(time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{os.getpid()}")
    return Path(env.prefix) / SNAPSHOTS / _STAMP[0]


def _apply(plan: Plan, fp: FixPlan, env: Environment, folders: list[str], out: Outcome, doc: dict[str, Any]) -> int:
    folder = _snapshot_dir(env)
    guard = Guard()
    original: Any = None
    incomplete = False  # a step or the verification broke (not a failed step): exit 3 after the rollback
    with guard.installed():
        try:
            with guard.hold():
                original = _snapshot(env, fp, folders, folder, doc)
            if guard.signum:  # a signal while the snapshot was written: nothing has changed yet
                raise Interrupted(guard.signum)
            out.say(f"Snapshot: {folder} (freeze.txt: pip freeze --all; tree/: the installed files, hard-linked"
                    + ("; conda-explicit.txt, conda-list.json: conda list --explicit/--json, conda-meta/ copied"
                       if _conda_steps(fp) else "") + ")")
            failed = _run_steps(fp, env, guard, folder, out)
            if failed is None:
                failed = _verify(plan, fp, env, out)
        except Interrupted as exc:
            failed = f"interrupted by {signal.Signals(exc.signum).name}"
        except Exception as exc:
            if original is None:
                raise  # nothing changed yet: the caller's one line
            failed, incomplete = f"could not finish: {exc}", True
        with guard.hold():
            if failed is None:
                out.status = "fixed"
                shutil.rmtree(folder / "tree", ignore_errors=True)
                out.say(f"Fixed and verified: {', '.join(fp.answered)} pass. The freeze before is kept in "
                        f"{folder / 'freeze.txt'}.")
                _write(folder / "outcome.json", {"status": "fixed", "steps": out.steps, "verified": out.verified})
                return int(ExitCode.OK)
            out.say(f"Rolling back: {failed}.")
            identical = _rollback(env, folders, folder, original, out)
            out.status = "rolled-back" if identical else "rollback-failed"
            _write(folder / "outcome.json", {"status": out.status, "why": failed, "restored": out.restored})
        if guard.signum and identical:
            return int(lifecycle.SIGNALS.get(signal.Signals(guard.signum), 128 + guard.signum))
        return int(ExitCode.FAIL) if identical and not incomplete else int(ExitCode.INCOMPLETE)


def _write(path: Path, data: Any) -> None:
    try:
        path.write_text(json.dumps(data, indent=2) + "\n")
    except OSError:
        pass


def _snapshot(env: Environment, fp: FixPlan, folders: list[str], folder: Path, doc: dict[str, Any]) -> bytes:
    try:
        folder.mkdir(parents=True)
        original = freeze(env)
        (folder / "freeze.txt").write_bytes(original)
        if env.conda:
            (folder / "conda-owned.txt").write_text("".join(n + "\n" for n in env.conda_owned))
        if _conda_steps(fp):
            assert env.conda_exe is not None
            conda_snapshot(env.conda_exe, env.prefix, folder)
        if env.constraints:
            Path(env.constraints).write_text(f"torch=={env.torch}\n")
        elif fp.steps and "+cu" in (env.torch or ""):
            (folder / "constraints.txt").write_text(f"torch=={env.torch}\n")
        _write(folder / "plan.json", doc.get("plan"))
        (folder / "folders.txt").write_text("".join(f + "\n" for f in folders))
        _write(folder / "target.json", {"python": env.python, "installer": env.installer, "prefix": env.prefix})
        take_tree(folders, folder / "tree")
    except OSError as exc:
        shutil.rmtree(folder / "tree", ignore_errors=True)
        raise FixError(f"cannot write the snapshot in {folder}: {exc.strerror or exc}; nothing was changed") from None
    doc["snapshot"] = str(folder)
    return original


def _conda_steps(fp: FixPlan) -> bool:
    return any(isinstance(s.command, remedies.CondaEnvInstall) for s in fp.steps)


def _run_steps(fp: FixPlan, env: Environment, guard: Guard, folder: Path, out: Outcome) -> str | None:
    log = folder / "installer.log"
    for n, step in enumerate(fp.steps, 1):
        argv = step.command.argv()  # type: ignore[attr-defined]
        if argv[0] == "uv":
            argv[0] = _uv() or "uv"
        out.say(f"Step {n}: {step.command.render()}")
        began = time.monotonic()
        rc = guard.run(argv, log)
        record = {"step": n, "findings": list(step.findings), "command": step.command.render(), "exit_code": rc,
                  "seconds": round(time.monotonic() - began, 2)}
        out.steps.append(record)
        if rc != 0:
            record["result"] = "failed"
            return f"step {n} failed (the installer exited {rc}; its output is in {log})"
        record["result"] = "done"
    return None


def _verify(plan: Plan, fp: FixPlan, env: Environment, out: Outcome) -> str | None:
    after = examine(plan)
    bad = []
    for fid in fp.answered:
        statuses = [f.status.value for f in after.findings if f.id == fid]
        status = "ok" if statuses and all(s == "ok" for s in statuses) else (statuses[0] if statuses else "absent")
        out.verified[fid] = status
        if status != "ok":
            bad.append(f"{fid} is {status}")
    worse = worst_statuses(after.findings)
    for fid, was in out.before.items():
        if was in ("ok", "warn") and worse.get(fid) in ("fail", "error") and fid not in fp.answered:
            bad.append(f"{fid} was {was} before and is {worse[fid]} now")
    torch_after = _torch_of(after)
    if "+cu" in (env.torch or "") and torch_after != env.torch:
        wanted = {getattr(s.command, "variant", None) for s in fp.steps
                  if any(requirement_name(p) == "torch" for p in getattr(s.command, "packages", ()))}
        if not wanted or _local(torch_after) not in wanted:
            bad.append(f"the CUDA torch {env.torch} became {torch_after or 'nothing'}")
    if bad:
        return "verification failed: " + "; ".join(bad)
    out.say("Verified: " + ", ".join(f"{k} ok" for k in out.verified))
    return None


def _rollback(env: Environment, folders: list[str], folder: Path, original: bytes, out: Outcome) -> bool:
    try:
        current = freeze(env)
    except FixError:
        current = b""
    try:
        changed = restore_tree(folders, folder / "tree")
    except OSError as exc:
        out.restored = {"identical": False, "error": str(exc)}
        out.say(f"Rollback failed: {exc}; the snapshot is in {folder}.")
        return False
    try:
        now = freeze(env)
    except FixError as exc:
        out.restored = {"identical": False, "files_restored": changed, "error": str(exc)}
        out.say(f"Rollback incomplete: {exc}; the snapshot is kept in {folder}.")
        return False
    identical = now == original
    gone = sorted(set(current.decode().splitlines()) - set(original.decode().splitlines()))
    back = sorted(set(original.decode().splitlines()) - set(current.decode().splitlines()))
    out.restored = {"identical": identical, "files_restored": changed, "removed": gone, "reinstalled": back}
    if identical:
        out.say(f"Restored: pip freeze --all is byte-identical to {folder / 'freeze.txt'}"
                + (f" (put back: {', '.join(back)}; removed: {', '.join(gone)})" if back or gone else "") + ".")
    else:
        out.say(f"Rollback incomplete: pip freeze --all differs from {folder / 'freeze.txt'}; the snapshot is kept there.")
    return identical
