"""torch-companions, cuda-major-mix and python-supported: do the Python packages around torch fit it?"""

from __future__ import annotations

import re
from typing import Any

from packaging.version import Version

from envdoctor import views
from envdoctor.knowledge import catalogue, compat, remedies, versions

from ..kit import Remediation, evidence, fail, ok, skip, warn
from ..model import Facts, Finding
from ..registry import check
from ._common import library_errors, torch_variant
from ._companions import _verdict
from ._torch import (
    GET_STARTED,
    PREVIOUS,
    TorchBuild,
    _as_of,
    _exe,
    _packages,
    _torch_dist,
    pip_found_no_torch,
    torch_build,
)
from .torch_build import cuda_reinstall, wants_cuda_build

# ---------------------------------------------------------------------------------------------
# torch-companions

def _companion_extension_broken(facts: Facts, ev: dict[str, Any]) -> Finding | None:
    """torchvision's/torchaudio's C++ extension misses a torch symbol: built against another torch."""
    errs = [e for e in library_errors(facts) if e["kind"] == "undefined-symbol"
            and any(f"/{n}/" in str(e["path"]) or str(e["library"]).startswith(f"lib{n}") or e.get("package") == n
                    for n in ("torchvision", "torchaudio"))]
    if not errs:
        return None
    e = errs[0]
    name = "torchaudio" if "torchaudio" in str(e["path"]) or e.get("package") == "torchaudio" else "torchvision"
    version, variant = _torch_dist(facts)
    pkgs = _packages(facts)
    ev["library_errors"] = [f"{x['path']}: undefined symbol {x['symbol']}" for x in errs]
    cmd = remedies.torch_install(_exe(facts), version, variant, (name,))
    have = f" (installed: torch {pkgs.get('torch', '?')}, {name} {pkgs[name]})" if name in pkgs else ""
    return fail(f"{name} was built against another torch", detail=f"{e['library']} lacks {e['symbol'][:90]}, a symbol of "
                f"the installed torch: its C++ extension was compiled for a different torch release{have}. {_as_of()}",
                evidence=ev, remedy=Remediation(f"Install torch and {name} together so pip picks the {name} release "
                                                "built for that torch.", (cmd,), (PREVIOUS,)))


def _companion_no_cuda_kernels(facts: Facts, ev: dict[str, Any]) -> Finding | None:
    """torch's dispatcher found no CUDA kernel for a torchvision/torchaudio operator ("Could not run
    'torchvision::nms' with arguments from the 'CUDA' backend"): that package's compiled part has none, being a CPU
    build or one built for another torch, which registered nothing for torch's CUDA."""
    said = facts.value("text.messages") if facts.get("text.messages").ok else ()
    rows = [r for r in catalogue.judged_rows(said, "torch-companions") if (
        r.get("id") == "torch-op-no-kernel" and len(r.get("args") or ()) >= 2 and "CUDA" in str(r["args"][1])
        or r.get("id") == "torch-op-missing" and r.get("args"))
        and str(r["args"][0]).strip("`'\" ").split("::")[0] in ("torchvision", "torchaudio")]
    if not rows:
        return None
    op = str(rows[0]["args"][0]).strip("`'\" ")
    name = op.split("::")[0]
    version, variant = _torch_dist(facts)
    pkgs = _packages(facts)
    have = f" (installed: torch {pkgs.get('torch', '?')}, {name} {pkgs[name]})" if name in pkgs else ""
    ev["text.messages"] = [r.get("id") for r in rows]
    cmd = remedies.torch_install(_exe(facts), version, variant, (name,))
    if rows[0].get("id") == "torch-op-missing":
        return fail(f"{name}'s operators are not registered: its compiled part did not load",
                    detail=f"torch has no operator {op}: {name}'s C++ extension, which registers it, did not load "
                           f"(built for another torch, or a wheel without it){have}. {_as_of()}",
                    evidence=ev, remedy=Remediation(f"Install torch and {name} together from one index, so pip picks "
                                                    f"the {name} build made for that torch.", (cmd,), (PREVIOUS,)))
    backend = str(rows[0]["args"][1])
    return fail(f"{name} has no CUDA kernels for the installed torch",
                detail=f"torch's dispatcher found no '{backend}' kernel for {op}: {name}'s compiled operators registered "
                       f"none, because {name} is a CPU build or was built for another torch{have}. {_as_of()}",
                evidence=ev, remedy=Remediation(f"Install torch and {name} together from one index, so pip picks the "
                                                f"{name} build made for that torch and its CUDA.", (cmd,), (PREVIOUS,)))


def _companion_refused(facts: Facts, ev: dict[str, Any]) -> Finding | None:
    """torchvision/torchaudio said themselves that torch was built for another CUDA."""
    said = dict(facts.value("torch.companion_cuda") or {})
    torch_cuda = facts.value("torch.cuda_version")
    if not said or not torch_cuda:
        return None
    ev["torch.companion_cuda"] = said
    wrong = {name: cuda for name, cuda in said.items() if str(cuda) != str(torch_cuda)}
    if not wrong:
        return None
    version, variant = _torch_dist(facts)
    variant = variant or versions.variant_for_cuda(str(torch_cuda))
    names = " ".join(sorted(wrong))
    # torch itself goes into the same command: pip then resolves companions that pair with it.
    cmd = remedies.torch_install(_exe(facts), version, variant, sorted(wrong))
    listing = ", ".join(f"{n} is built for CUDA {c}" for n, c in sorted(wrong.items()))
    return fail(f"{names.replace(' ', '/')} and torch are built for different CUDA versions",
                detail=f"torch is built for CUDA {torch_cuda}; {listing} — the library refuses to load (\"Detected that "
                       "PyTorch and … were compiled with different CUDA versions\"). Each domain library must come from "
                       f"the same variant index as torch. {_as_of()}",
                evidence=ev, remedy=Remediation(f"Reinstall torch and {names} together from one index ({variant}), so "
                                                "pip picks releases and builds that pair.", (cmd,), (PREVIOUS,)))


@check("torch-companions", "torchvision/torchaudio match the installed torch", needs=("python.packages", "torch.version"))
def torch_companions(facts: Facts) -> Finding | list[Finding]:
    ev = evidence(facts, "torch.version", "python.packages")
    refused = _companion_refused(facts, ev) or _companion_extension_broken(facts, ev) or _companion_no_cuda_kernels(facts, ev)
    if refused is not None:
        return refused
    build = torch_build(facts)
    pkgs = _packages(facts)
    present = [p for p in ("torchvision", "torchaudio") if p in pkgs]
    if build is None:
        return skip("torch was not read", evidence=ev)
    if not present:
        return skip("No torchvision/torchaudio installed", evidence=ev)
    v = _verdict(facts, build, pkgs, present)
    if v.problems:
        make = fail if v.severe else warn
        detail = ("; ".join(v.problems) + ". Each domain library pins one torch release and is compiled for "
                  "its CUDA variant: a mismatch fails at import (\"undefined symbol\", \"operator torchvision::nms does "
                  f"not exist\", \"compiled with different CUDA major versions\"). {_as_of()}")
        if wants_cuda_build(facts):
            # torch itself is the CPU build where a CUDA one is wanted (torch-cpu-build): the companions
            # come with the CUDA torch, in torch-cpu-build's own commands, never from the CPU index.
            rem = cuda_reinstall(facts)
            return make("torchvision/torchaudio do not match torch", detail=detail, evidence=ev,
                        remedy=Remediation(rem.text, rem.commands, (*rem.links, PREVIOUS)))
        cmd = remedies.torch_install(_exe(facts), build.public, build.variant or "cpu", present)
        return make("torchvision/torchaudio do not match torch", detail=detail,
                    evidence=ev, remedy=Remediation("Reinstall them together from torch's index (pip picks the "
                                                    "companions whose pin matches).", (cmd,), (PREVIOUS,)))
    if not v.judged:
        return skip(f"{', '.join(f'{p} {pkgs[p]}' for p in present)} not judged against torch {build.version}",
                    detail="; ".join(v.notes), evidence=ev)
    return ok(f"{', '.join(f'{p} {pkgs[p]}' for p in v.judged)} match torch {build.version}",
              detail="; ".join(v.notes), evidence=ev)


# ---------------------------------------------------------------------------------------------
# cuda-major-mix

def _package_cuda_major(name: str, ver: str) -> str | None:
    if "cu" not in name:  # every pattern below names CUDA; a 600,000-package list is mostly other names
        return None
    for rx in (r"nvidia-.+-cu(\d+)", r"cupy-cuda(\d+)x", r"jax-cuda(\d+)-(?:plugin|pjrt)", r"jaxlib-cuda(\d+)"):
        m = re.fullmatch(rx, name)
        if m:
            return m.group(1)
    m = re.fullmatch(r"cupy-cuda(\d\d)\d", name)  # cupy-cuda117, cupy-cuda102
    if m:
        return str(int(m.group(1)))
    if name in ("cuda-toolkit", "nvidia-cuda-runtime", "cuda-bindings", "cuda-python"):
        v = versions.parse(ver)
        return str(v.release[0]) if v else None
    return None


@check("cuda-major-mix", "Installed CUDA packages target one CUDA major", needs=("python.packages",))
def cuda_major_mix(facts: Facts) -> Finding:
    ev = evidence(facts, "python.packages", "torch.cuda_version")
    pkgs = _packages(facts)
    if not pkgs:
        return skip("No package list was read", evidence=ev)
    by_major: dict[str, list[str]] = {}
    for name, ver in sorted((n, v) for n, v in pkgs.items() if "cu" in n):  # the only names it can judge
        major = _package_cuda_major(name, ver)
        if major:
            by_major.setdefault(major, []).append(name)
    build = torch_build(facts)
    torch_major = build.cuda.split(".")[0] if build and build.cuda else None
    if len(by_major) <= 1 and (torch_major is None or not by_major or torch_major in by_major):
        return ok("CUDA packages target one CUDA major" if by_major else "No CUDA packages besides torch",
                  detail=", ".join(f"CUDA {m}: {len(v)} package(s)" for m, v in by_major.items()), evidence=ev)
    keep = torch_major or max(by_major, key=lambda m: len(by_major[m]))
    others = {m: v for m, v in by_major.items() if m != keep}
    listing = "; ".join(f"CUDA {m}: {', '.join(v)}" for m, v in sorted(others.items()))
    commands: list[str] = []
    leftovers: list[str] = []
    for _major, names in sorted(others.items()):
        for n in names:
            if n.startswith("cupy-cuda"):
                commands.append(remedies.pip_replace(_exe(facts), n, f"cupy-cuda{keep}x"))
            elif n.startswith(("jax-cuda", "jaxlib-cuda")):
                commands.append(remedies.pip_replace(_exe(facts), n, f"'jax[cuda{keep}]'", upgrade=True))
            else:
                leftovers.append(n)
    if leftovers:
        commands.insert(0, remedies.pip(_exe(facts), "show " + " ".join(leftovers), note="Required-by: what still needs them"))
        commands.insert(1, remedies.pip_uninstall(_exe(facts), leftovers))
    who = f"torch is built for CUDA {torch_major}" if torch_major else f"most CUDA packages target CUDA {keep}"
    return warn(f"CUDA packages for another major next to CUDA {keep}",
                detail=f"{who}, but these target another CUDA major: {listing}. Two majors of the same library "
                       "(libcublas.so.12 and .so.13, libcudnn from -cu12 and -cu13) can be loaded into one process, and "
                       "a package built for the other major needs its own runtime and a driver for it.",
                evidence=ev, remedy=Remediation("Keep one CUDA major: remove leftovers, or install the variants built "
                                                f"for CUDA {keep}.", tuple(commands)))


# ---------------------------------------------------------------------------------------------
# python-supported

def _pip_no_torch_despite_wheels(facts: Facts, ev: dict[str, Any], pym: str, every: list[str], line: str) -> Finding:
    """pip saw no torch for a Python that torch releases do ship wheels for: at the ticket's time none did yet, or
    this pip / interpreter cannot take them (a pip too old for the wheels' platform tags, a 32-bit Python)."""
    first = min(every, key=Version)
    released = compat.releases()[first].get("released") or ""
    ev["text.messages"] = sorted({str(r.get("id")) for r in catalogue.judged_rows(
        facts.value("text.messages") if facts.get("text.messages").ok else (), "python-supported")})
    py = facts.value("python.executable") or "python"
    return fail(f"pip found no torch for Python {pym}, though torch ships wheels for it from {first} on",
                detail=f"pip says \"{line[:200]}\". torch's first wheels for Python {pym} are torch "
                       f"{first}{f' (released {released})' if released else ''}: before "
                       "that no torch could be installed on it; since then, pip finds none when it is too old for the "
                       "wheels' platform tags, the Python is a 32-bit build, or the index it asks has no torch. "
                       f"{_as_of()}", evidence=ev,
                remedy=Remediation("Upgrade pip, check the interpreter is a 64-bit CPython, then install torch again "
                                   "(or use a Python torch shipped wheels for at the time).",
                                   (remedies.pip(facts.value("python.executable"), "install -U pip"),
                                    f"{py} -c \"import struct, sys; print(sys.version, struct.calcsize('P') * 8, 'bit')\"",
                                    remedies.pip_install(facts.value("python.executable"), "torch")),
                                   (remedies.PYTORCH_GET_STARTED,)))


@check("python-supported", "The Python version is supported by the torch release", needs=("python.version", "torch.version"),
       judges_failures=False)
def python_supported(facts: Facts) -> Finding:
    ev = evidence(facts, "python.version", "torch.version")
    py = facts.value("python.version")
    if not py or versions.minor_of(py) is None:
        return skip("Python version not read", evidence=ev)
    pym = versions.minor_of(py)
    build = torch_build(facts)
    torch_reading = facts.get("torch.version")
    # "Current" is compat.current_release(), as gpu-eol says it: a newer release whose row is not
    # confirmed counts only when no current one has wheels for this Python.
    current = versions.parse(compat.current_release() or "")
    every = [m for m in compat.releases_newest_first() if pym in compat.releases()[m]["python"]]
    good = [m for m in every if current is None or (versions.parse(m) or current) <= current] or every
    if build is None:
        dist = _packages(facts).get("torch")
        if torch_reading.reason is not None and torch_reading.reason.value == "failed" and versions.parse(dist):
            build = TorchBuild(str(dist), str(dist).split("+", 1)[0], torch_variant(facts), None)
        elif (refused := pip_found_no_torch(facts)) is not None or (
                torch_reading.reason is not None and torch_reading.reason.value in ("absent", "failed")):
            if good and isinstance(refused, str):
                return _pip_no_torch_despite_wheels(facts, ev, str(pym), every, refused)
            if good:
                return ok(f"torch wheels exist for Python {pym} (newest: torch {compat.latest_patch(good[0])})",
                          detail=_as_of(), evidence=ev)
            newest = compat.current_release()
            pys = compat.releases()[newest]["python"] if newest else []
            return (fail if refused is not None else warn)(f"No torch wheel in the table supports Python {pym}",
                        detail=f"torch {newest} has wheels for Python {', '.join(pys)}; `{remedies.pip_install(None, 'torch')}` answers "
                               f"\"No matching distribution found for torch\". {compat.not_in_table(f'Python {pym}')}.",
                        evidence=ev, remedy=Remediation(f"Use Python {pys[-1] if pys else '3.12'} (e.g. a venv or "
                                                        "conda env) for torch.", ()))
        else:
            return skip("torch was not read", evidence=ev)
    ans = compat.python_supported(build.public, py)
    if ans.value is None:
        return ok(f"Python {pym}", detail=ans.note + "; not judged.", evidence=ev)
    if ans.value:
        return ok(f"torch {build.public} ships wheels for Python {pym}", detail=_as_of(), evidence=ev)
    minor = versions.minor_of(build.public) or ""
    pys = compat.releases()[minor]["python"]
    cur = Version(minor)
    newer = sorted((m for m in good if Version(m) >= cur), key=Version)
    older = sorted((m for m in good if Version(m) < cur), key=Version, reverse=True)
    near = (newer + older)[0] if (newer or older) else None
    variant = build.variant if build.variant and build.variant in compat.release_variants(near or "", views.platform_of(facts)) else None
    commands: tuple[str, ...] = ()
    if near:
        patch = compat.latest_patch(near)
        commands = (remedies.torch_install(_exe(facts), patch, variant, force=False),)
    text = "" if near else f"Use Python {pys[-1]} for torch {minor}."
    # Either another torch for this Python, or another Python for this torch.
    ways = (Remediation(f"Install torch {near}, which has wheels for Python {pym}.", commands),
            Remediation(f"Use Python {pys[-1]} (e.g. a venv or conda env) for torch {minor}.")) if near else ()
    detail = (f"torch {build.public} ships wheels for Python {', '.join(pys)} only; this is Python {py}. "
              f"{_as_of()}")
    if torch_reading.ok:
        return warn(f"Python {pym} is not supported by torch {build.public}",
                    detail=detail + " It imports, so it came from a source build or another channel; expect "
                    "untested combinations.", evidence=ev,
                    remedy=Remediation(text, () if near else commands, (GET_STARTED,), ways))
    return fail(f"Python {pym} is not supported by torch {build.public}", detail=detail, evidence=ev,
                remedy=Remediation(text, () if near else commands, (GET_STARTED,), ways))
