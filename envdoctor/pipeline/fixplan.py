"""The plan of ``envdoctor fix``: the typed remedies of a judged Report's failing findings, sorted into
the steps fix runs inside the Python environment and the ones it only prints.

Pure: a Report (the one the run pipeline built, :mod:`.judge`) and the target's :class:`Environment` in,
a :class:`FixPlan` out. A step is the remedy's own typed command (:mod:`envdoctor.knowledge.remedies`),
given the target's installer, the index to read and the constraints that keep the installed CUDA
torch: the printed remedy, the planned step and the applied command are one object.

A finding is fixed here only when every command of its remedy acts inside the target environment
(a pip install or uninstall by the target's interpreter) or only reads it (``pip list``, ``pip show``);
one command outside (a driver, the toolkit, a container, a shell variable, a placeholder to choose)
makes the whole finding a step the user runs, marked "needs root" when it does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from envdoctor.knowledge import remedies
from envdoctor.model import Finding, Status
from envdoctor.record import Record, field

#: The findings fix answers: failures and warnings (an error is envdoctor's own, a skip unknown).
ANSWERED = (Status.FAIL, Status.WARN)
_READ_ONLY = re.compile(r"(list|show|freeze|check)\b")
_PLACEHOLDER = re.compile(r"<[^<>]+>|…")


class Environment(Record):
    """What fix knows of the target before it plans: its interpreter, prefix and installer."""

    python: str
    prefix: str
    installer: str = "pip"  # pip, uv (a uv-managed venv)
    conda: bool = False  # a conda environment (conda-meta/): packages conda owns are not pip's to change
    conda_owned: tuple[str, ...] = ()  # normalised names of the packages conda installed
    conda_exe: str | None = None  # the env's own conda, mamba or micromamba (None: conda's packages are printed)
    externally_managed: bool = False  # PEP 668: the distribution's interpreter, not a venv
    torch: str | None = None  # the installed torch's version (``2.5.1+cu121``)
    torch_index: str | None = None  # ``--torch-index``: the base of the variant indexes (URL or folder)
    constraints: str | None = None  # the constraints file pinning the installed CUDA torch


class Step(Record):
    """One command fix runs: ``command`` is the typed remedy command, given the target's installer."""

    findings: tuple[str, ...]
    command: remedies.Command
    changes: str

    def as_dict(self) -> dict[str, object]:
        argv = getattr(self.command, "argv", None)
        return {"findings": list(self.findings), "command": self.command.render(), "argv": argv() if argv else None,
                "installer": getattr(self.command, "installer", None) or getattr(self.command, "exe", None),
                "interpreter": getattr(self.command, "python", None),
                "changes": self.changes}


class Manual(Record):
    """A finding fix does not change: its commands, printed for the user to run."""

    finding: str
    title: str
    commands: tuple[str, ...]
    why: str
    needs_root: bool = field(default=False, kw_only=True)

    def as_dict(self) -> dict[str, object]:
        return {"finding": self.finding, "title": self.title, "commands": list(self.commands), "why": self.why,
                "needs_root": self.needs_root}


class FixPlan(Record):
    steps: tuple[Step, ...]
    manual: tuple[Manual, ...]
    answered: tuple[str, ...]  # the ids of the findings the steps answer (verified after)
    titles: tuple[tuple[str, str], ...] = ()  # (id, title) of every answered finding

    def as_dict(self) -> dict[str, object]:
        return {"steps": [s.as_dict() for s in self.steps], "manual": [m.as_dict() for m in self.manual],
                "answers": list(self.answered)}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """The distribution a requirement names: ``torch==2.5.1`` -> ``torch``, ``'jax[cuda12]'`` -> ``jax``."""
    return _norm(re.split(r"[\[<>=!~;@ ]", requirement.strip("'\""), maxsplit=1)[0])


def _needs_root(command: remedies.Command, text: str) -> bool:
    if isinstance(command, (remedies.AptInstall, remedies.DriverInstall, remedies.GpuReset)):
        return True
    return "sudo " in text


def _changes(command: remedies.Command) -> str:
    if isinstance(command, remedies.PipUninstall):
        return "removes " + ", ".join(command.packages)
    if isinstance(command, remedies.PipInstall):
        what = ", ".join(p.strip("'\"") for p in command.packages)
        source = command.index or (remedies.index_url(command.variant) if command.variant else "")
        where = f" from {source}" if source else ""
        how = " (reinstalled)" if command.force_reinstall else " (upgraded)" if command.upgrade else ""
        kept = f"; keeps the installed torch (constraints {command.constraints})" if command.constraints else ""
        return f"installs {what}{where}{how}{kept}"
    if isinstance(command, remedies.CondaEnvInstall):
        return (f"installs {', '.join(command.specs)} from {', '.join(command.channels)} with "
                f"{command.exe.rsplit('/', 1)[-1]} into {command.prefix} (conda installed them; the solver may "
                "change their dependencies too)")
    return ""


def _classify(line: str, env: Environment) -> tuple[str, list[remedies.Command]]:
    """("run", commands) | ("read", []) | ("manual", []) | ("root", []) for one printed command line."""
    command = line.command if isinstance(line, remedies.Line) else None
    text = str(line)
    if command is None:
        return ("root" if "sudo " in text else "manual"), []
    runs: list[remedies.Command] = []
    for part in command.steps():
        words = part.words()
        if isinstance(part, (remedies.PipInstall, remedies.PipUninstall)) and part.python == env.python:
            if _PLACEHOLDER.search(words):
                return "manual", []
            runs.append(part)
        elif isinstance(part, remedies.Pip) and part.python == env.python and _READ_ONLY.match(part.args):
            continue
        else:
            return ("root" if _needs_root(part, words) else "manual"), []
    return ("run" if runs else "read"), runs


def _for_target(command: remedies.Command, env: Environment) -> remedies.Command:
    """The remedy's command as fix runs it on ``env``: its installer, the index, the constraints."""
    if isinstance(command, remedies.PipUninstall):
        return command.replace(installer=env.installer)
    assert isinstance(command, remedies.PipInstall)
    index = None
    if command.variant and env.torch_index:
        base = env.torch_index.rstrip("/")
        index = f"{base}/{command.variant}"
    names_torch = any(requirement_name(p) == "torch" for p in command.packages)
    constraints = env.constraints if env.constraints and not names_torch else None
    return command.replace(installer=env.installer, index=index, constraints=constraints)


def _conda_owned(command: remedies.Command, env: Environment) -> list[str]:
    if not env.conda or not isinstance(command, (remedies.PipInstall, remedies.PipUninstall)):
        return []
    return [n for n in (requirement_name(p) for p in command.packages)
            if n in env.conda_owned or remedies.conda_name(n) in env.conda_owned]


def _with_conda(runs: list[remedies.Command], env: Environment) -> list[remedies.Command] | None:
    """A remedy's pip commands as the env's conda runs them: each install becomes a conda install of
    the same packages (remedies.conda_env_install); an uninstall of packages a later install puts back
    is left to conda, which replaces a build in place. None when a command has no conda form."""
    assert env.conda_exe is not None
    out: list[remedies.Command] = []
    for i, c in enumerate(runs):
        if isinstance(c, remedies.PipUninstall):
            later = {requirement_name(p) for r in runs[i + 1:] if isinstance(r, remedies.PipInstall) for p in r.packages}
            if not {requirement_name(p) for p in c.packages} <= later:
                return None
            continue
        if not isinstance(c, remedies.PipInstall) or c.no_deps or c.upgrade:
            return None
        out.append(remedies.conda_env_install(env.conda_exe, env.prefix, c))
    return out


def plan_fix(findings: Iterable[Finding], env: Environment) -> FixPlan:
    """The steps for the failing findings whose remedies act inside ``env``; the others printed."""
    steps: list[Step] = []
    manual: list[Manual] = []
    answered: list[str] = []
    titles: list[tuple[str, str]] = []
    for f in findings:
        if f.status not in ANSWERED:
            continue
        rem = f.remediation
        commands = tuple(rem.commands)
        if not commands:
            why = "its remedy offers a choice of ways: pick one" if rem.alternatives else "no command to run"
            manual.append(Manual(f.id, f.title, tuple(str(c) for a in rem.alternatives for c in a.commands), why))
            continue
        kinds = [_classify(c, env) for c in commands]
        if any(k in ("manual", "root") for k, _ in kinds):
            root = any(k == "root" for k, _ in kinds)
            why = "acts outside the Python environment (needs root)" if root else "acts outside the Python environment"
            manual.append(Manual(f.id, f.title, tuple(str(c) for c in commands), why, needs_root=root))
            continue
        runs = [c for _, cs in kinds for c in cs]
        if not runs:
            continue
        owned = [n for c in runs for n in _conda_owned(c, env)]
        conda_runs = _with_conda(runs, env) if owned and env.conda_exe else None
        if owned and conda_runs is None:
            how = ("with conda, not pip (no conda, mamba or micromamba of this environment was found)"
                   if not env.conda_exe else "with conda, not pip")
            manual.append(Manual(f.id, f.title, tuple(str(c) for c in commands),
                                 f"conda installed {', '.join(sorted(set(owned)))} in this environment: change it {how}"))
            continue
        answered.append(f.id)
        titles.append((f.id, f.title))
        for c in conda_runs if conda_runs is not None else runs:
            target = c if conda_runs is not None else _for_target(c, env)
            same = next((i for i, s in enumerate(steps) if s.command == target), None)
            if same is not None:
                if f.id not in steps[same].findings:
                    steps[same] = Step((*steps[same].findings, f.id), target, steps[same].changes)
                continue
            steps.append(Step((f.id,), target, _changes(target)))
    return FixPlan(tuple(steps), tuple(manual), tuple(answered), tuple(titles))
