"""cudnn-mismatch and nccl-mismatch: are the cuDNN and NCCL torch loads the ones it was built with?"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from envdoctor import views
from envdoctor.knowledge import catalogue, compat, messages, remedies, versions

from ..kit import Remediation, evidence, fail, ok, skip, warn
from ..model import Facts, Finding
from ..registry import check
from ._common import cudnn_main_missing, library_errors, nccl_versions_differ, outside_wheel
from ._torch import _as_of, _exe, _packages, _torch_dist, torch_build

# ---------------------------------------------------------------------------------------------
# cudnn-mismatch

def _default_variant(version: str | None) -> str:
    """The CUDA variant to reinstall torch from when its own tag is not known: the release's default
    build (the table's PyPI default), never a guessed tag that the release may not have."""
    return compat.release_default_variant(versions.minor_of(version)) or "cu126"


def _pkg_version(pkgs: dict[str, str], stem: str) -> tuple[str, str] | None:
    """The installed ``nvidia-<stem>-cuNN`` (or unsuffixed) distribution and its version."""
    prefix = f"nvidia-{stem}"
    for name in sorted(n for n in pkgs if n.startswith(prefix)):
        if re.fullmatch(rf"nvidia-{stem}(-cu\d+)?", name):
            return name, pkgs[name]
    return None


def _outside_wheel(paths: Iterable[str]) -> list[str]:
    """Mapped libraries that are not a pip wheel's copy (site-packages/nvidia/… or torch/lib)."""
    return [str(p) for p in paths if outside_wheel(str(p))]


@dataclass(frozen=True)
class _Bundled:
    """What cudnn-mismatch and nccl-mismatch both start from: torch's build, the table's row for
    the library it bundles, the installed wheel, what torch reported at run time and what it mapped."""

    build: Any
    row: Mapping[str, Any] | None
    pkg: tuple[str, str] | None
    loaded: list[str]
    foreign: list[str]
    py: str
    variant: str


def _bundled(facts: Facts, family: str) -> _Bundled | None:
    build = torch_build(facts)
    if build is None or not build.cuda:
        return None
    loaded = list((facts.value("torch.loaded_libraries") or {}).get(family, []) or [])
    return _Bundled(build, compat.bundled_libs(build.public, build.variant or ""), _pkg_version(_packages(facts), family),
                    loaded, _outside_wheel(loaded), facts.value("python.executable") or "python",
                    build.variant or versions.variant_for_cuda(build.cuda))


def _cudnn_facts(facts: Facts) -> tuple[tuple[int, int, int] | None, tuple[int, int, int] | None]:
    """(compiled, runtime) cuDNN as torch itself states them: torch.cudnn_build_version and
    torch.cudnn_version, or both from its "cuDNN version incompatibility" error when reading the
    runtime version raised it."""
    compiled = versions.cudnn_tuple(facts.value("torch.cudnn_build_version"))
    runtime = versions.cudnn_tuple(facts.value("torch.cudnn_version"))
    said = views.cudnn_error(facts)
    if runtime is None and said:
        found = messages.cudnn_incompatibility(said)
        if found:
            compiled, runtime = compiled or found[0], found[1]
    return compiled, runtime


def _cudnn_loader_error(facts: Facts, ev: dict[str, Any]) -> Finding | None:
    """A cuDNN sub-library failed to load ("Could not load library libcudnn_cnn_train.so.8 …
    undefined symbol"): two cuDNN copies are mixed, typically a system one shadowing torch's."""
    # A framework's own loader (TensorFlow's dso_loader, onnxruntime) missing cuDNN is loader-library's to judge,
    # with that framework's remedy: torch's cuDNN wheel is not what it loads.
    errs = [e for e in library_errors(facts) if "cudnn" in (e["provider"], e["family"])
            and e.get("needed_by") != "framework" and not cudnn_main_missing(e)]
    if not errs:
        return None
    ev["library_errors"] = [f"{x['path']}: {x['kind']} {x['symbol'] or ''}".strip()[:300] for x in errs]
    foreign = sorted({str(x["path"]).rsplit("/", 1)[0] for x in errs if outside_wheel(x["path"])})
    version, variant = _torch_dist(facts)
    commands = []
    if foreign:
        commands.append(f"echo $LD_LIBRARY_PATH   # remove {', '.join(foreign)} from it, or: unset LD_LIBRARY_PATH")
    else:
        commands.append(remedies.env_unset("LD_LIBRARY_PATH", "or drop the cuDNN/CUDA directories from it"))
    if version:
        commands.append(remedies.torch_install(_exe(facts), version, variant or _default_variant(version)))
    e = errs[0]
    what = (f"{e['library']} could not be loaded: it lacks {e['symbol'][:80]}" + (f" ({e['version_node']})"
                                                                               if e["version_node"] else "")
            if e["kind"] == "undefined-symbol" else f"{e['library']} cannot be found")
    where = f" It was loaded from {', '.join(foreign)}, not from torch's nvidia-cudnn wheel." if foreign else ""
    return fail("cuDNN libraries from two different copies are mixed",
                detail=f"{what}.{where} cuDNN's sub-libraries must all come from one release: a system or toolkit "
                       "cuDNN on LD_LIBRARY_PATH shadows part of the one torch ships.", evidence=ev,
                remedy=Remediation("Let torch load only the cuDNN it ships: take other cuDNN folders off "
                                   "LD_LIBRARY_PATH (or remove the system copy), and reinstall torch if its wheel was "
                                   "replaced.", tuple(commands),
                                   (remedies.CUDNN_SUPPORT_MATRIX,)))


def _cudnn_refused(facts: Facts, ev: dict[str, Any], compiled: tuple[int, int, int],
                   runtime: tuple[int, int, int]) -> Finding:
    exp, obs = ".".join(map(str, compiled)), ".".join(map(str, runtime))
    version, variant = _torch_dist(facts)
    commands = ["echo $LD_LIBRARY_PATH   # remove the cuDNN/CUDA folders from it, or: unset LD_LIBRARY_PATH",
                "ldconfig -p | grep libcudnn   # system copies the loader can find"]
    if version:
        commands.append(remedies.torch_install(_exe(facts), version, variant or _default_variant(version)))
    return fail(f"cuDNN {obs} is loaded; torch was built with cuDNN {exp}",
                detail=f"torch says \"cuDNN version incompatibility: PyTorch was compiled against {compiled} but found "
                       f"runtime version {runtime}\": another cuDNN (usually from LD_LIBRARY_PATH or a system/toolkit "
                       "install) is found before the one torch ships, and torch refuses a different major or an older "
                       "minor.", evidence=ev,
                remedy=Remediation(f"Let torch load the cuDNN it ships ({exp}): take other cuDNN folders off "
                                   f"LD_LIBRARY_PATH, or install cuDNN {exp} where they point.", tuple(commands),
                                   (remedies.CUDNN_SUPPORT_MATRIX,)))


def _halves(args: list[str]) -> tuple[tuple[int, int, int], tuple[int, int, int]] | None:
    """A framework's cuDNN message's two versions, the loaded one first: its arguments split in two halves (XLA's
    ``%d.%d.%d`` twice, JAX's ``{}`` twice: ``8700`` or ``9.1.0``)."""
    if not args or len(args) % 2:
        return None
    half = len(args) // 2
    found = []
    for part in (args[:half], args[half:]):
        text = ".".join(a.strip(" '\".,") for a in part)
        value: Any = int(text) if text.isdigit() else text
        parsed = versions.cudnn_tuple(value)
        if parsed is None:
            return None
        found.append(parsed)
    return found[0], found[1]


def _jax_outdated_cudnn(facts: Facts, ev: dict[str, Any], row: Mapping[str, Any]) -> Finding:
    """JAX's CUDA plugin: "Outdated cuDNN installation found." (the installed cuDNN is older than the minimum this
    jaxlib supports; its next lines name the versions)."""
    ev["text.messages"] = [row["id"]]
    said = remedies.message_remedy(row.get("remedy"), facts.value("python.executable"))
    return fail("The cuDNN JAX loads is older than the one it was built against",
                detail=f"JAX's CUDA plugin says \"{str(row.get('line'))[:300]}\": the cuDNN found first (another "
                       "framework's pinned wheel, a conda or system copy) is older than the minimum this jaxlib "
                       "supports, so JAX falls back to the CPU.", evidence=ev,
                remedy=Remediation(*said) if said else None)


def _framework_cudnn(facts: Facts, ev: dict[str, Any]) -> Finding | None:
    """A framework's own cuDNN check refused the loaded cuDNN (XLA's "Loaded runtime CuDNN library: A but source was
    compiled with: B", JAX's "Found cuDNN version A, but JAX was built against version B"): the versions its message
    wrote are judged here, with that framework's remedy (catalogue row's ``remedy``), never torch's."""
    for row in catalogue.judged_rows(facts.value("text.messages"), "cudnn-mismatch"):
        if row.get("id") == "torch-cudnn-incompatible":
            continue  # torch's own: its facts (torch.cudnn_version, …) are judged below
        if row.get("id") == "jax-outdated-cuda-lib":
            if [str(a).strip() for a in row.get("args") or ()] == ["cuDNN"]:
                return _jax_outdated_cudnn(facts, ev, row)
            continue  # another CUDA library JAX finds too old: known-message names it
        pair = _halves([str(a) for a in row.get("args") or ()])
        if pair is None:
            continue
        loaded, built = (".".join(map(str, v)) for v in pair)
        ev["text.messages"] = [row["id"]]
        # what the same line says it led to ("CUDA backend failed to initialize: Found cuDNN …") is its evidence
        led = [str(r.get("id")) for r in facts.value("text.messages") or ()
               if r.get("role") == "symptom" and r.get("line") == row.get("line")]
        if led:
            ev["symptoms"] = led
        said = remedies.message_remedy(row.get("remedy"), facts.value("python.executable"))
        fix = Remediation(*said) if said else None
        who = str(row.get("emitter") or "the framework")
        return fail(f"cuDNN {loaded} is loaded; {who} was built with cuDNN {built}",
                    detail=f"{who} says \"{str(row.get('line'))[:300]}\": it needs the cuDNN it was built with (the same "
                           "major, an equal or newer minor). Another cuDNN (another framework's pinned wheel, a system "
                           "copy on LD_LIBRARY_PATH) is found first.", evidence=ev, remedy=fix)
    return None


@check("cudnn-mismatch", "The cuDNN torch loads is the one it was built with",
       needs=("torch.version", "torch.cudnn_version"), owns=("library_errors:cudnn",))
def cudnn_mismatch(facts: Facts) -> Finding:
    ev = evidence(facts, "torch.version", "torch.cudnn_version", "torch.cudnn_build_version", "libs.cudnn_copies",
                  "torch.loaded_libraries")
    broken = _cudnn_loader_error(facts, ev)
    if broken is not None:
        return broken
    framework = _framework_cudnn(facts, ev)
    if framework is not None:
        return framework
    b = _bundled(facts, "cudnn")
    if b is None:
        said = _cudnn_facts(facts)
        if said[0] and said[1]:
            # torch's own "cuDNN version incompatibility" with no torch version around it: still proof.
            return _cudnn_refused(facts, ev, *said)  # type: ignore[arg-type]
        return skip("Not a CUDA build of torch (or torch was not read)", evidence=ev)
    build, row, pkg, loaded, foreign, py, variant = b.build, b.row, b.pkg, b.loaded, b.foreign, b.py, b.variant
    compiled, runtime = _cudnn_facts(facts)
    # torch's own compile-time version is proof; the table's row is the fallback.
    expected = compiled or (versions.cudnn_tuple(row["cudnn"]) if row and row.get("cudnn") else None)
    proven = compiled is not None
    ev["expected_cudnn"] = ".".join(map(str, compiled)) if compiled else (row["cudnn"] if row and row.get("cudnn") else None)
    fix = Remediation(
        "Let torch load the cuDNN it ships: remove other cuDNN directories from LD_LIBRARY_PATH and reinstall "
        "torch with its pinned nvidia-cudnn wheel.",
        (remedies.env_unset("LD_LIBRARY_PATH", "or drop the cuDNN/CUDA directories from it"),
         remedies.torch_install(py, build.public, variant)),
        (remedies.CUDNN_SUPPORT_MATRIX,))
    observed, what = (runtime, "torch.backends.cudnn.version()") if runtime else \
        ((versions.cudnn_tuple(pkg[1]), f"the installed {pkg[0]}") if pkg else (None, ""))
    table_row = compat.said(row["source"], bool(row["verified"])) if row else ""
    if observed and expected:
        obs, exp = ".".join(map(str, observed)), ".".join(map(str, expected))
        if observed[0] != expected[0] or observed[1] < expected[1]:
            verdict = fail if proven or (row and row["verified"]) else warn
            origin = "torch says it was compiled against" if proven else \
                f"torch {build.version} ships cuDNN {row['cudnn'] if row else exp} ({table_row}):"
            return verdict(f"cuDNN {obs} is loaded; torch {build.version} was built with cuDNN {exp}",
                           detail=f"{what} is {obs} but {origin} {exp}. "
                                  "torch refuses a different major or an older minor (\"cuDNN version "
                                  f"incompatibility: PyTorch was compiled against {expected[:3]} but found runtime "
                                  f"version {observed[:3]}\")."
                                  + (f" Loaded from outside the wheel: {', '.join(foreign)}." if foreign else "")
                                  + f" {_as_of()}", evidence=ev, remedy=fix)
    if foreign:
        return warn("torch loaded cuDNN from outside its wheel",
                    detail=f"Mapped: {', '.join(foreign)}. A system or LD_LIBRARY_PATH copy shadows the nvidia-cudnn "
                           "wheel torch pins; it works only while its version happens to fit.", evidence=ev, remedy=fix)
    majors = {m.group(1) for p in loaded if (m := re.search(r"libcudnn[a-z_]*\.so\.(\d+)", str(p)))}
    if len(majors) > 1:
        return warn("Two cuDNN majors are loaded in one process", detail=f"Loaded: {', '.join(loaded)}.",
                    evidence=ev, remedy=fix)
    if observed is None:
        if expected is None:
            return skip("cuDNN version not read", detail=compat.not_in_table(f"torch {build.version}"), evidence=ev)
        return skip("cuDNN version not read", detail=f"torch {build.version} ships cuDNN {'.'.join(map(str, expected))}; "
                    "the loaded version was not collected.", evidence=ev)
    obs = ".".join(map(str, observed))
    if expected is None:
        return ok(f"cuDNN {obs}", detail=compat.not_in_table(f"torch {build.version} ({build.variant})") +
                  "; not compared.", evidence=ev)
    return ok(f"cuDNN {obs} fits torch {build.version} (built with {'.'.join(map(str, expected))})",
              detail=f"Table row: {table_row} {_as_of()}", evidence=ev)


# ---------------------------------------------------------------------------------------------
# nccl-mismatch


def _nccl_loader_error(facts: Facts, ev: dict[str, Any]) -> Finding | None:
    """torch (libtorch_cuda.so) needs an NCCL symbol the loaded libnccl lacks, or libnccl is missing."""
    errs = [e for e in library_errors(facts) if "nccl" in (e["provider"], e["family"]) and e.get("needed_by") != "framework"]
    if not errs:
        return None
    e = errs[0]
    ev["library_errors"] = [f"{x['path']}: {x['kind']} {x['symbol'] or ''}".strip() for x in errs]
    pkgs = _packages(facts)
    nccl_wheels = sorted(n for n in pkgs if re.fullmatch(r"nvidia-nccl(-cu\d+)?", n))
    version, variant = _torch_dist(facts)
    cuda = versions.variant_cuda(variant) if variant else None
    major = cuda.split(".")[0] if cuda else None
    keep = f"nvidia-nccl-cu{major}" if major else None  # NCCL wheels keep the -cuNN suffix for CUDA 13 too
    extra = [n for n in nccl_wheels if keep and n != keep]
    commands: list[str] = [remedies.pip(_exe(facts), "list", then="grep -i nccl", note="more than one nvidia-nccl wheel is the usual cause")]
    if extra:
        commands.append(remedies.pip_uninstall(_exe(facts), extra))
    if version:
        commands.append(remedies.torch_install(_exe(facts), version, variant or _default_variant(version)))
    commands.append("echo $LD_LIBRARY_PATH $LD_PRELOAD   # a system libnccl here overrides the wheel's")
    what = (f"{e['library']} needs {e['symbol']}, which the libnccl.so.2 the loader found does not define"
            if e["kind"] == "undefined-symbol" else f"{e['library']} cannot be loaded")
    return fail("torch and the NCCL it loads do not fit" if e["kind"] == "undefined-symbol" else "libnccl cannot be loaded",
                detail=f"{what}: an older NCCL, or another CUDA major's nvidia-nccl wheel, is loaded in place of the "
                       f"one torch pins." + (f" Installed NCCL wheels: {', '.join(f'{n} {pkgs[n]}' for n in nccl_wheels)}."
                                             if nccl_wheels else ""),
                evidence=ev, remedy=Remediation("Keep only the NCCL wheel torch depends on (and no system libnccl on "
                                                "LD_LIBRARY_PATH/LD_PRELOAD), then reinstall torch so pip restores its pin.",
                                                tuple(commands),
                                                (remedies.NCCL_RELEASE_NOTES,)))


def _nccl_versions_mixed(facts: Facts, ev: dict[str, Any], name: str, found: list[str]) -> Finding:
    """One NCCL wheel listed at several versions: the nodes (or environments) pasted together disagree, and
    every rank of a job must run the same NCCL."""
    ev.update(evidence(facts, "nccl.wheel_versions"))
    b = _bundled(facts, "nccl")
    pinned = b.row["nccl"] if b is not None and b.row and b.row.get("nccl") in found else None
    version = pinned or found[0]
    return fail(f"{name} is installed at {len(found)} versions ({', '.join(found)})",
                detail="the package listings pasted together show different NCCL versions; all ranks of a job must "
                       "run one NCCL version, or their bootstrap and collectives misread each other (\"connecting to "
                       "address with family N is neither AF_INET…\", hangs).",
                evidence=ev,
                remedy=Remediation(f"Install the same {name} on every node (the one torch pins), then rerun.",
                                   (remedies.pip(_exe(facts), "list", then="grep -i nccl", note="on every node"),
                                    remedies.pip_install(_exe(facts), f"{name}=={version}", force=True,
                                                         note="torch's pin" if pinned else "the same version on every node")),
                                   (remedies.NCCL_RELEASE_NOTES,)))


@check("nccl-mismatch", "The NCCL torch uses is the one it was built with",
       needs=("torch.version", "torch.nccl_version"), owns=("library_errors:nccl",))
def nccl_mismatch(facts: Facts) -> Finding:
    ev = evidence(facts, "torch.version", "torch.nccl_version", "libs.nccl_copies", "torch.loaded_libraries")
    broken = _nccl_loader_error(facts, ev)
    if broken is not None:
        return broken
    if (mixed := nccl_versions_differ(facts)) is not None:
        return _nccl_versions_mixed(facts, ev, *mixed)
    b = _bundled(facts, "nccl")
    if b is None:
        return skip("Not a CUDA build of torch (or torch was not read)", evidence=ev)
    build, row, pkg, foreign, py, variant = b.build, b.row, b.pkg, b.foreign, b.py, b.variant
    if build.variant and facts.value("host.os") == "Windows":
        return skip("Windows builds of torch do not use NCCL", evidence=ev)
    expected = versions.parse(row["nccl"]) if row and row.get("nccl") else None
    runtime = versions.parse(facts.value("torch.nccl_version"))
    ev["expected_nccl"] = row["nccl"] if row else None
    pin = f"nvidia-nccl-cu{build.cuda.split('.')[0]}"
    pkg_v = versions.parse(pkg[1]) if pkg else None
    fix_cmds = ((remedies.pip_install(py, f"{pin}=={row['nccl']}", force=True),) if row and row.get("nccl") else ()) + \
        (remedies.torch_install(py, build.public, variant),)
    fix = Remediation("Restore the NCCL torch pins (another package or LD_LIBRARY_PATH/LD_PRELOAD replaced it).",
                      fix_cmds, (remedies.NCCL_RELEASE_NOTES,))
    if runtime and pkg_v and (runtime.release[:2] != pkg_v.release[:2]):
        return warn(f"torch uses NCCL {runtime} but {pkg[0]} {pkg[1]} is installed",  # type: ignore[index]
                    detail="torch loaded a different NCCL than the pip wheel (a system libnccl via LD_LIBRARY_PATH "
                           "or LD_PRELOAD?)." + (f" Mapped: {', '.join(foreign)}." if foreign else ""),
                    evidence=ev, remedy=fix)
    observed = runtime or pkg_v
    if observed and expected and observed < expected and observed.release[:2] != expected.release[:2]:
        verdict = fail if row and row["verified"] else warn
        return verdict(f"NCCL {observed} is older than the {expected} torch {build.version} was built with",
                       detail=f"torch {build.version} pins NCCL {expected}"
                              + (f" ({compat.said(row['source'], bool(row['verified']))})" if row else "")
                              + "; an older NCCL lacks symbols it "
                              f"uses (\"undefined symbol: nccl…\" at import) or behaves differently in collectives. "
                              f"{_as_of()}", evidence=ev, remedy=fix)
    if foreign:
        return warn("torch loaded NCCL from outside its wheel", detail=f"Mapped: {', '.join(foreign)}.",
                    evidence=ev, remedy=fix)
    if observed is None:
        return skip("NCCL version not read", evidence=ev)
    if expected is None:
        return ok(f"NCCL {observed}", detail=compat.not_in_table(f"NCCL of torch {build.version}") + "; not compared.",
                  evidence=ev)
    return ok(f"NCCL {observed} fits torch {build.version} (built with {expected})", detail=_as_of(), evidence=ev)
