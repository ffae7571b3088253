"""Library resolution: conflicting copies of CUDA libraries, and CUDA libraries torch cannot resolve.

Judges the ``libs.*`` facts (copies on disk, loader choice, ``ldd``) together with
``torch.loaded_libraries`` (what the torch process really mapped). Version agreement between
torch and cuDNN/NCCL is judged elsewhere (``cudnn-mismatch``, ``nccl-mismatch``).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from envdoctor.knowledge import compat, remedies

from ..kit import Remediation, error, evidence, fail, ok, skip, warn
from ..model import Facts, Finding, Reason, Status
from ..registry import CheckResult, check, owner_of
from ._common import library_errors, outside_wheel, torch_variant

#: Families whose copies the libraries probe inventories (libs.<family>_copies).
COPY_FAMILIES = ("cudart", "cudnn", "nccl", "cublas")
#: ``torch.loaded_libraries`` families judged here; libcuda/NVML belong to the driver, where a
#: second copy is a forward-compatibility question (cuda-forward-compat), not a conflict.
MAPPED_FAMILIES = ("cudart", "cublas", "cublasLt", "cudnn", "nccl", "nvJitLink", "nvrtc", "cusparse", "cufft",
                   "curand", "cusolver", "cupti", "nvshmem")
#: Which inventoried family tells whether a wheel copy of a mapped family exists.
WHEEL_EVIDENCE = {"cudart": "cudart", "cudnn": "cudnn", "nccl": "nccl", "cublas": "cublas", "cublasLt": "cublas"}

# Which pip wheel ships which CUDA library, its -cuNN naming and its site-packages folder: the
# cuda_libraries table of compat.json (envdoctor.knowledge.compat.cuda_library, wheel_name).
#: Libraries that come with the NVIDIA driver, never from pip.
_DRIVER_LIBS = ("libcuda.so", "libnvidia-ml.so")

CUDA_WHEELS_DOC = remedies.CUDA_WHEELS_DOC
GET_STARTED = remedies.PYTORCH_GET_STARTED


def _copies(facts: Facts, family: str) -> list[Mapping[str, Any]]:
    return [c for c in (facts.value(f"libs.{family}_copies") or ()) if isinstance(c, Mapping)]


def _inventoried(facts: Facts, family: str) -> bool:
    """Whether the copies of ``family`` were read: a list (empty: none found), each copy with its path."""
    value = facts.value(f"libs.{family}_copies")
    return isinstance(value, (list, tuple)) and all(isinstance(c, Mapping) and c.get("path") for c in value)


def _wheel_dirs(facts: Facts) -> list[str]:
    dirs = [str(d).rstrip("/") for d in facts.value("libs.wheel_dirs") or ()]
    torch_path = facts.value("torch.path")
    if torch_path and not dirs:
        dirs.append(os.path.join(str(torch_path), "lib"))
    return dirs


def _under(path: str, dirs: Iterable[str]) -> bool:
    d = os.path.dirname(path)
    return any(d == w or d.startswith(w + "/") for w in dirs)


def _is_wheel_copy(copy: Mapping[str, Any], wheel_dirs: Sequence[str]) -> bool:
    return _under(str(copy.get("path") or ""), wheel_dirs)


def _ld_entries(facts: Facts) -> list[str]:
    entries = facts.value("libs.ld_library_path")
    if entries is None:
        raw = (facts.value("env.vars") or {}).get("LD_LIBRARY_PATH") or ""
        entries = raw.split(":") if raw and raw != "<redacted>" else []
    return [str(e) for e in entries]


def _major_minor(version: Any) -> tuple[str, ...] | None:
    if not version:
        return None
    parts = re.findall(r"\d+", str(version))
    return tuple(parts[:2]) if len(parts) >= 2 else None


def _differ(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool | None:
    """Whether two copies are different versions (major.minor); None when one is unknown."""
    va, vb = _major_minor(a.get("version")), _major_minor(b.get("version"))
    if va is None or vb is None:
        return None
    return va != vb


def _describe(copy: Mapping[str, Any]) -> str:
    version = copy.get("version") or "unknown version"
    return f"{copy.get('path')} ({version})"


def _find_copy(facts: Facts, path: str) -> Mapping[str, Any] | None:
    for family in COPY_FAMILIES:
        for c in _copies(facts, family):
            if c.get("path") == path or path in (c.get("names") or ()):
                return c
    return None


def _choice_summary(facts: Facts) -> Any:
    reading = facts.get("libs.loader_choice")
    if not reading.ok:
        return reading.describe()
    return {str(s): (i.get("file") or i.get("error") or i.get("reason")) if isinstance(i, Mapping) else i
            for s, i in (reading.value or {}).items()}


def _copies_summary(facts: Facts) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for family in COPY_FAMILIES:
        reading = facts.get(f"libs.{family}_copies")
        if reading.ok:
            out[family] = [f"{_describe(c)} [{c.get('origin')}]" for c in _copies(facts, family)]
        else:
            out[family] = reading.describe()
    return out


def _ldd_summary(facts: Facts) -> Any:
    reading = facts.get("libs.ldd")
    if not reading.ok:
        return reading.describe()
    out = []
    for e in reading.value or ():
        item: dict[str, Any] = {"file": e.get("file"), "role": e.get("role")}
        if e.get("reason"):
            item["problem"] = f"{e.get('reason')}: {e.get('detail', '')}"
        item["not_found"] = list(e.get("not_found") or ())
        cuda = {k: v for k, v in (e.get("resolved") or {}).items() if re.match(_CUDA_SONAME, k)}
        if cuda:
            item["cuda"] = cuda
        out.append(item)
    return out


_CUDA_SONAME = r"^lib(cudart|cublas|cudnn|nccl|nvJitLink|nvrtc|cusparse|cufft|curand|cusolver|cupti|cuda|nvshmem|cufile)"


def _wheel_ships(soname: str, wheel_dirs: Sequence[str]) -> bool:
    """True when one of the wheel folders is where the pip wheel of ``soname`` puts it: its own
    ``nvidia/<dir>/lib`` (CUDA 12), or the folder CUDA 13 toolkit wheels share (``nvidia/cu13/lib``)."""
    lib = compat.wheel_library(soname)
    if lib is None or lib.wheel_dir is None:
        return False
    folders = tuple(f"/nvidia/{d}/lib" for d in (lib.wheel_dir, *compat.shared_wheel_dirs()))
    return any(w.endswith(folders) for w in wheel_dirs)


def _ld_remedy(entries: Sequence[str], remove: Sequence[str]) -> str:
    kept = [e for e in entries if e and e not in remove]  # an empty entry (a stray colon) is the current folder
    if not kept:
        return remedies.env_unset("LD_LIBRARY_PATH")
    return remedies.env_set("LD_LIBRARY_PATH", shlex.quote(":".join(kept)))




def _symbol_minimum(symbol: str) -> str | None:
    """``__nvJitLinkComplete_12_4`` -> ``"12.4"``: nvJitLink versions its symbols by toolkit release."""
    m = re.search(r"_(\d{2})_(\d{1,2})$", symbol)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _loader_conflict(facts: Facts, ev: dict[str, Any]) -> Finding | None:
    """A fail when torch (or a CUDA library it loads) hit an undefined symbol that another CUDA
    library should define: the copy of that library the loader found is older or foreign."""
    # Loader errors of a family another check owns (it knows their pins) are left to it.
    errs = [e for e in library_errors(facts) if e["kind"] == "undefined-symbol" and e["provider"]
            and e["provider"] != "torch" and not owner_of(f"library_errors:{e['provider']}")
            and not owner_of(f"library_errors:{e['family']}")]
    if not errs:
        return None
    ev["library_errors"] = [f"{e['path']}: undefined symbol {e['symbol']}" + (f" ({e['version_node']})"
                                                                             if e["version_node"] else "")
                            for e in errs]
    py = facts.value("python.executable") or "python"
    notes: list[str] = []
    commands: list[str] = []
    entries = _ld_entries(facts)
    if entries:
        commands.append(remedies.env_unset("LD_LIBRARY_PATH", "it holds " + ", ".join(entries[:3])))
    else:
        commands.append("echo $LD_LIBRARY_PATH   # drop CUDA toolkit folders (/usr/local/cuda*/lib64) from it")
    for e in errs:
        provider, node = e["provider"], e["version_node"]
        lib = node or f"lib{provider}"
        minimum = _symbol_minimum(e["symbol"])
        notes.append(f"{e['library']} needs {e['symbol']} from {lib}" + (f" (CUDA {minimum} or newer)" if minimum else "")
                     + f", and the {lib} the loader found lacks it")
        commands.append(f"ldd {e['path']} | grep -i {provider}   # which copy it resolves to")
        major = re.search(r"\.so\.(\d+)", node or "") or re.search(r"\.so\.(\d+)", e["library"])
        wheel = compat.family_wheel(provider)
        if wheel and major:
            name = compat.wheel_name(wheel, major.group(1))
            spec = f"'{name}>={minimum}'" if minimum else name
            commands.append(remedies.pip_install(py, spec, upgrade=True))
    foreign = [e["path"] for e in errs if outside_wheel(e["path"])]
    env_lib = _env_lib_note(errs, commands)
    return fail("A CUDA library torch loads comes from the wrong copy (undefined symbol)",
                detail="; ".join(notes) + ". The usual cause is a system CUDA toolkit on LD_LIBRARY_PATH that "
                "shadows the nvidia-* wheels torch depends on, or one nvidia-* wheel left older than the others."
                + (f" Loaded from outside the wheels: {', '.join(foreign)}." if foreign else "") + env_lib,
                evidence=ev, remedy=Remediation("Let torch load the CUDA libraries from its own nvidia-* wheels: take "
                                                "toolkit folders off LD_LIBRARY_PATH, and bring the wheel that "
                                                "provides the symbol up to date.", tuple(commands),
                                                ("https://github.com/pytorch/pytorch/issues/140797",)))


# torch's libraries search "$ORIGIN/../../../../" too: from <prefix>/lib/pythonX.Y/site-packages/torch/lib that is
# <prefix>/lib, the environment's own library folder, where conda's cudatoolkit (and other conda CUDA packages) put
# their copies of libcublas, libcusparse, ….
_ENV_LIB = "torch/lib/../../../../"


def _env_lib_note(errs: Sequence[Mapping[str, Any]], commands: list[str]) -> str:
    """When the wrong copy sits in the environment's own lib/ folder: say so, and add conda's commands."""
    if not any(_ENV_LIB in str(e["path"]) for e in errs):
        return ""
    commands.extend(("conda list | grep -i -E 'cudatoolkit|cuda-|cublas|cusparse'   # the env's own CUDA libraries",
                     remedies.conda_remove("cudatoolkit", "or install the cudatoolkit of torch's CUDA version")))
    return (" The copy the loader found is in the environment's own lib/ folder (torch/lib/../../../../), where a "
            "conda cudatoolkit of another CUDA version installs its libraries.")


@dataclass
class _Conflicts:
    """What library-conflicts found so far: the problems, how bad, and what to take off the search path."""

    facts: Facts
    wheel_dirs: list[str]
    entries: list[str]  # LD_LIBRARY_PATH entries
    problems: list[str] = field(default_factory=list)
    status: Status = Status.OK
    remove: list[str] = field(default_factory=list)  # LD_LIBRARY_PATH entries to drop
    system_dirs: list[str] = field(default_factory=list)  # loader-cache folders to drop

    def worsen(self, new: Status) -> None:
        order = (Status.OK, Status.WARN, Status.FAIL)
        if order.index(new) > order.index(self.status):
            self.status = new

    def blame(self, directory: str) -> None:
        """Name what put ``directory`` on the search path: an LD_LIBRARY_PATH entry, else the loader cache."""
        for e in self.entries:
            if e and os.path.normpath(e) == directory:
                if e not in self.remove:
                    self.remove.append(e)
                return
        for family in COPY_FAMILIES:
            for c in _copies(self.facts, family):
                if os.path.dirname(str(c.get("path"))) == directory and c.get("ld_library_path_entry"):
                    if c["ld_library_path_entry"] not in self.remove:
                        self.remove.append(str(c["ld_library_path_entry"]))
                    return
        if directory not in self.system_dirs:
            self.system_dirs.append(directory)


def _judge_mapped(c: _Conflicts, loaded: Mapping[str, Any]) -> None:
    """What the torch process mapped: a family from several folders, or from outside the wheel."""
    for family in MAPPED_FAMILIES:
        paths = [str(p) for p in loaded.get(family) or ()]
        if not paths:
            continue
        dirs = list(dict.fromkeys(os.path.dirname(p) for p in paths))
        outside = [d for d in dirs if not _under(os.path.join(d, "x"), c.wheel_dirs)]
        if len(dirs) > 1:
            c.worsen(Status.FAIL)
            c.problems.append(f"{family} is mapped from {len(dirs)} folders in the same torch process "
                              f"({', '.join(dirs)}): two copies of one CUDA library in a process break in "
                              "ways that look random (undefined symbols, wrong results, crashes)")
            for d in outside:
                c.blame(d)
            continue
        wheel_family = WHEEL_EVIDENCE.get(family)
        wheel_copies = ([w for w in _copies(c.facts, wheel_family) if _is_wheel_copy(w, c.wheel_dirs)]
                        if wheel_family else [])
        if outside and wheel_copies:
            found = _find_copy(c.facts, paths[0]) or {"path": paths[0]}
            differs = _differ(found, wheel_copies[0])
            c.worsen(Status.FAIL if differs else Status.WARN)
            c.problems.append(f"torch loaded {family} from {_describe(found)} although the wheel ships "
                              f"{_describe(wheel_copies[0])}" + (" — a different version" if differs else ""))
            c.blame(dirs[0])


def _judge_shadowing(c: _Conflicts, choice: Mapping[str, Any]) -> None:
    """LD_LIBRARY_PATH copies with the same soname as the wheel's: they win over torch's RUNPATH."""
    for family in COPY_FAMILIES:
        copies = _copies(c.facts, family)
        wheel = {x.get("soname"): x for x in copies if _is_wheel_copy(x, c.wheel_dirs) and x.get("soname")}
        for x in copies:
            entry = x.get("ld_library_path_entry")
            if not entry or _is_wheel_copy(x, c.wheel_dirs) or x.get("soname") not in wheel:
                continue
            w = wheel[x.get("soname")]
            picked = (choice.get(str(x.get("soname"))) or {}).get("file") == x.get("path")
            differs = _differ(x, w)
            if entry in c.remove:
                continue  # already reported from the memory map
            c.worsen(Status.FAIL if differs and picked else Status.WARN)
            c.problems.append(f"LD_LIBRARY_PATH entry {entry} holds {_describe(x)}, which shadows the wheel's "
                              f"{_describe(w)} for {x.get('soname')}"
                              + (" and the loader picks it" if picked else "")
                              + (" — a different version" if differs else ""))
            c.remove.append(str(entry))


def _judge_ldd(c: _Conflicts) -> None:
    """What ldd resolves for torch's CUDA libraries, transitive ones included: a library taken from an
    LD_LIBRARY_PATH folder while torch's wheels ship it (failure mode: libcusparse from the wheel bound
    to an old libnvJitLink in /usr/local/cuda-12.x, "undefined symbol __nvJitLinkAddData_12_1",
    pytorch/pytorch#111469)."""
    torch_version = c.facts.get("torch.version")
    # Live, torch having imported says the shadowing did not bite (yet); a paste that does not say
    # whether torch imports was posted because something failed, as cudart-resolution judges it.
    import_failed = torch_version.reason is Reason.FAILED or torch_version.reason is Reason.NOT_IN_REPORT
    for e in (c.facts.value("libs.ldd") or ()):
        if not isinstance(e, Mapping) or e.get("role") not in ("libtorch_cuda", "torch._C", "nvidia-wheel"):
            continue
        wheel_dirs = c.wheel_dirs or _sibling_wheel_dirs(str(e.get("file")), e.get("resolved") or {})
        for name, path in (e.get("resolved") or {}).items():
            if not re.match(_CUDA_SONAME, name) or name.startswith("libcuda.so") or _under(str(path), wheel_dirs):
                continue
            entry = next((x for x in c.entries if x and os.path.normpath(x) == os.path.dirname(str(path))), None)
            if entry is None or entry in c.remove or not _wheel_ships(name, wheel_dirs):
                continue
            c.worsen(Status.FAIL if import_failed else Status.WARN)
            c.problems.append(f"ldd resolves {name} for {os.path.basename(str(e.get('file')))} to {path} from "
                              f"LD_LIBRARY_PATH entry {entry} instead of torch's nvidia wheel")
            c.remove.append(entry)


def _sibling_wheel_dirs(file: str, resolved: Mapping[str, Any]) -> list[str]:
    """For an ldd of a pip CUDA wheel's library (``…/site-packages/nvidia/cusparse/lib/…``) when the
    wheel folders were not inventoried (a paste): the folders the wheels of its CUDA dependencies
    install into next to it (``…/site-packages/nvidia/nvjitlink/lib``), which the wheel's RUNPATH
    ($ORIGIN/../../nvjitlink/lib) names, and the folder itself."""
    m = re.match(r"^(.*/(?:site|dist)-packages/nvidia)/[^/]+/lib/", os.path.normpath(file) + "/")
    if m is None:
        return []
    dirs = [os.path.dirname(os.path.normpath(file))]
    for name in resolved:
        lib = compat.wheel_library(name)
        if lib is not None and lib.wheel_dir:
            dirs.append(f"{m.group(1)}/{lib.wheel_dir}/lib")
    return dirs


def _conflicts_finding(c: _Conflicts, ev: dict[str, Any]) -> Finding:
    commands: list[str] = []
    text = []
    if c.remove:
        commands.append(_ld_remedy(c.entries, c.remove))
        text.append(f"Remove {', '.join(c.remove)} from LD_LIBRARY_PATH (and from the shell profile, module file or "
                    "Dockerfile ENV that sets it); pip's CUDA wheels need no LD_LIBRARY_PATH.")
    for d in c.system_dirs:
        commands.append(f"grep -rl {shlex.quote(d)} /etc/ld.so.conf /etc/ld.so.conf.d/")
        text.append(f"{d} comes from the loader cache: delete the line naming it from the file grep prints, then "
                    f"run `{remedies.ldconfig()}`.")
    if c.system_dirs:
        commands.append(remedies.ldconfig())
    commands.append("envdoctor check --only library-conflicts")
    failing = c.status is Status.FAIL
    title = "Conflicting copies of CUDA libraries" if failing else "A stray CUDA library copy can shadow torch's"
    return (fail if failing else warn)(title, detail="; ".join(c.problems) + ".", evidence=ev,
                                       remedy=Remediation(" ".join(text), tuple(commands), (CUDA_WHEELS_DOC,)))


@check("library-conflicts", "One copy of each CUDA library, the one torch was built with",
       needs=("libs.cudart_copies", "libs.cudnn_copies", "libs.nccl_copies"))
def library_conflicts(facts: Facts) -> CheckResult:
    ev = evidence(facts, "libs.ld_library_path", "libs.wheel_dirs")
    # What the loader said (an "undefined symbol" naming another CUDA library) is judged when the
    # copies themselves say nothing more precise (a pasted report, or no ldd/maps evidence).
    conflict = _loader_conflict(facts, dict(ev))
    ev["libs.loader_choice"] = _choice_summary(facts)
    ev["copies"] = _copies_summary(facts)
    mapped = facts.get("torch.loaded_libraries")
    ev["torch.loaded_libraries"] = ({k: v for k, v in mapped.value.items() if k in MAPPED_FAMILIES}
                                    if mapped.ok and isinstance(mapped.value, Mapping) else mapped.describe())
    have_copies = any(_inventoried(facts, f) for f in COPY_FAMILIES)
    loaded = facts.value("torch.loaded_libraries") or {}
    # A pasted ldd of a CUDA wheel's own library is evidence of its own, with no copies inventoried (the
    # libraries probe never writes that role).
    pasted_wheel_ldd = any(isinstance(e, Mapping) and e.get("role") == "nvidia-wheel" for e in facts.value("libs.ldd") or ())
    if not have_copies and not loaded and not pasted_wheel_ldd:
        if conflict is not None:
            return conflict
        return skip("CUDA library copies were not examined",
                    detail=facts.get("libs.cudart_copies").describe(), evidence=ev)
    c = _Conflicts(facts, _wheel_dirs(facts), _ld_entries(facts))
    if isinstance(loaded, Mapping):
        _judge_mapped(c, loaded)
    _judge_shadowing(c, facts.value("libs.loader_choice") or {})
    _judge_ldd(c)
    if c.status is Status.OK and conflict is not None:
        return conflict
    if c.status is Status.OK:
        summary = [f"{family}: " + ", ".join(_describe(x) for x in found)
                   for family in COPY_FAMILIES if (found := _copies(facts, family))]
        # What was judged first: the inventories read, else torch's mapped libraries or the pasted ldd.
        read = [f"libs.{f}_copies" for f in COPY_FAMILIES if _inventoried(facts, f)]
        decided = read or ["torch.loaded_libraries" if loaded else "libs.ldd"]
        unread = [f for f in COPY_FAMILIES if not _inventoried(facts, f)]
        gaps = f" Not examined: the {', '.join(unread)} copies." if unread and read else ""
        return ok("No conflicting CUDA library copies",
                  detail=("; ".join(summary) or "No CUDA library copies found.") + gaps,
                  evidence={**evidence(facts, *decided), **ev})
    return _conflicts_finding(c, ev)


def package_for(soname: str, facts: Facts) -> str | None:
    """The pip requirement that ships ``soname`` for this torch (``nvidia-cuda-runtime-cu12==12.6.77``)."""
    lib = compat.wheel_library(soname)
    base = lib.wheel if lib else None
    if lib is None or base is None:
        return None
    pins: Mapping[str, str] = facts.value("libs.torch_requires") or {}
    for name, version in pins.items():
        if name == base or re.fullmatch(re.escape(base) + r"-cu\d+", name):
            return f"{name}=={version}"
    cuda = facts.value("torch.cuda_version")
    major = str(cuda).split(".")[0] if cuda else None
    if major is None and lib.soname_major_is_cuda:
        major = soname.rsplit(".so.", 1)[-1].split(".")[0] if ".so." in soname else None
    if not major or not major.isdigit():
        return None
    return compat.wheel_name(base, major)


def _unresolved_torch_libs(facts: Facts, torch_libs: list[Mapping[str, Any]], py: str,
                           ev: dict[str, Any]) -> Finding | None:
    """torch's own CUDA libraries name sonames ldd cannot find."""
    missing_by_file = {str(e.get("file")): list(e.get("not_found") or ()) for e in torch_libs if e.get("not_found")}
    if not missing_by_file:
        return None
    sonames = list(dict.fromkeys(s for names in missing_by_file.values() for s in names))
    driver = [s for s in sonames if s.startswith(_DRIVER_LIBS)]
    cuda = [s for s in sonames if s not in driver]
    import_failed = facts.get("torch.version").reason is Reason.FAILED
    packages = [p for p in (package_for(s, facts) for s in cuda) if p]
    commands = []
    if packages:
        commands.append(remedies.pip_install(py, list(dict.fromkeys(packages)), quote=True))
    version = facts.value("torch.version")
    variant = torch_variant(facts)
    if version and variant and variant != "cpu":
        commands.append(remedies.torch_install(py, str(version).split("+")[0], variant))
    detail = "; ".join(f"{os.path.basename(f)}: {', '.join(n)} => not found" for f, n in missing_by_file.items())
    text = ("Install the CUDA wheels torch was built against (first command), or reinstall torch from its index "
            "so pip brings the matching nvidia-* packages (second).")
    if driver:
        text += (f" {', '.join(driver)} comes with the NVIDIA driver, not from pip: install the driver "
                 "(see the driver-installed finding).")
    if import_failed or not facts.get("torch.version").ok:
        return fail(f"torch cannot resolve {', '.join(sonames)}", detail=detail + ".", evidence=ev,
                    remedy=Remediation(text, tuple(commands), (GET_STARTED,)))
    return warn(f"ldd cannot resolve {', '.join(sonames)} for torch",
                detail=detail + ". torch still imports because it preloads its nvidia-* wheels from "
                "site-packages, but anything that loads libtorch_cuda.so without torch's Python preload "
                "(C++/libtorch programs, extensions loaded first) fails with \"cannot open shared object file\".",
                evidence=ev, remedy=Remediation(text, tuple(commands), (GET_STARTED,)))


def _unresolved_extensions(facts: Facts, ldd: list[Mapping[str, Any]], py: str, ev: dict[str, Any]) -> Finding | None:
    """An extension wheel built for another CUDA major (libcudart.so.11.0 next to a cu12 torch) or
    against another torch (libc10_cuda.so from a different release): it fails at import."""
    ext_missing = {str(e.get("role")).split(":", 1)[1]: (str(e.get("file")), list(e.get("not_found") or ()))
                   for e in ldd if str(e.get("role", "")).startswith("extension:") and e.get("not_found")}
    if not ext_missing:
        return None
    version = facts.value("torch.version")
    variant = torch_variant(facts)
    commands = []
    for pkg in ext_missing:
        index = variant if pkg in ("torchvision", "torchaudio") and variant else None
        commands.append(remedies.pip_install(py, pkg, force=True, no_deps=True, variant=index))
    detail = "; ".join(f"{pkg} ({os.path.basename(f)}): {', '.join(n)} => not found"
                       for pkg, (f, n) in ext_missing.items())
    return warn(f"{', '.join(ext_missing)} cannot resolve {len({s for _, n in ext_missing.values() for s in n})} "
                "of its libraries", detail=detail + f". The extension was built for another CUDA or torch than "
                f"torch {version or '(not read)'}: importing it fails with \"cannot open shared object file\" "
                "or \"undefined symbol\".", evidence=ev,
                remedy=Remediation("Reinstall each extension built for this torch and CUDA (torchvision/"
                                   "torchaudio from torch's own index; others from a wheel matching "
                                   f"torch {version or ''} and its CUDA, or rebuilt from source).",
                                   tuple(commands), (GET_STARTED,)))


def _broken_runtimes(facts: Facts, ldd: list[Mapping[str, Any]], choice: Mapping[str, Any]) -> list[str]:
    """CUDA runtime copies that exist but do not load (or hang or crash the loader)."""
    broken = []
    for soname, item in sorted(choice.items()):
        if not isinstance(item, Mapping) or item.get("family") != "cudart":
            continue
        if item.get("reason") in ("crashed", "timeout"):
            broken.append(f"loading {soname} {item.get('reason')}: {item.get('detail', '')}")
        elif item.get("error") and item.get("predicted"):
            broken.append(f"{soname} exists at {item.get('predicted')} but does not load: {item.get('error')}")
    for c in _copies(facts, "cudart"):
        if c.get("load") in ("crashed", "timeout"):
            broken.append(f"loading {c.get('path')} {c.get('load')}: {c.get('load_detail', '')}")
        elif c.get("load") == "failed":
            broken.append(f"{c.get('path')} does not load: {c.get('load_detail', '')}")
    for e in ldd:
        if e.get("role") == "libcudart" and e.get("not_found"):
            broken.append(f"{e.get('file')} needs {', '.join(e['not_found'])} (not found)")
    return broken


def _broken_runtime_finding(facts: Facts, broken: list[str], choice: Mapping[str, Any], py: str,
                            ev: dict[str, Any]) -> Finding:
    bad = [c for c in _copies(facts, "cudart") if c.get("load") in ("crashed", "timeout", "failed")]
    entries = _ld_entries(facts)
    drop = [str(c["ld_library_path_entry"]) for c in bad if c.get("ld_library_path_entry")]
    commands = [_ld_remedy(entries, drop)] if drop else []
    for c in bad:
        if c.get("package") and not c.get("ld_library_path_entry"):
            spec = f"{c['package']}=={c['package_version']}" if c.get("package_version") else str(c["package"])
            commands.append(remedies.pip_install(py, spec, force=True, no_deps=True, quote=True))
        elif not c.get("ld_library_path_entry"):
            # Not ours to delete blindly: show which package owns the file, then reinstall that.
            commands.append(f"dpkg -S {shlex.quote(str(c.get('path')))} || rpm -qf {shlex.quote(str(c.get('path')))}")
    if not commands:
        # Only the loader's choice failed: show what it resolves so the broken file can be named.
        commands = [f"{py} -c \"import ctypes; ctypes.CDLL('{s}')\"" for s, item in sorted(choice.items())
                    if isinstance(item, Mapping) and item.get("family") == "cudart"
                    and (item.get("error") or item.get("reason"))]
        commands.append("ldconfig -p | grep libcudart")
    return warn("A CUDA runtime copy does not load", detail="; ".join(broken) + ".", evidence=ev,
                remedy=Remediation("Take the broken copy off the loader's path (LD_LIBRARY_PATH), or reinstall "
                                   "the package that owns it.", tuple(commands), (CUDA_WHEELS_DOC,)))


def _runtime_found(choice: Mapping[str, Any], runtime: list[Mapping[str, Any]], ev: dict[str, Any]) -> Finding:
    parts = []
    for soname, item in sorted(choice.items()):
        if isinstance(item, Mapping) and item.get("family") == "cudart" and item.get("file"):
            parts.append(f"{soname} => {item['file']} (CUDA runtime {item.get('version') or 'version unknown'}, "
                         f"via {item.get('via') or 'search'})")
    first = runtime[0]
    title = (f"CUDA runtime {first.get('version') or '(version unknown)'} found: {first.get('file')}"
             + (f" (and {len(runtime) - 1} more)" if len(runtime) > 1 else ""))
    return ok(title, detail="; ".join(parts), evidence=ev)


@check("cudart-resolution", "torch's CUDA libraries resolve (ldd) and the CUDA runtime loads",
       needs=("libs.ldd", "libs.loader_choice"))
def cudart_resolution(facts: Facts) -> CheckResult:
    # What ldd and the loader showed decides; torch's build is context.
    ev: dict[str, Any] = {"libs.ldd": _ldd_summary(facts), "libs.loader_choice": _choice_summary(facts),
                          **evidence(facts, "torch.version", "torch.cuda_version")}
    ldd = [e for e in (facts.value("libs.ldd") or ()) if isinstance(e, Mapping)]
    choice: Mapping[str, Any] = facts.value("libs.loader_choice") or {}
    py = facts.value("python.executable") or "python"
    torch_libs = [e for e in ldd if e.get("role") in ("libtorch_cuda", "torch._C")]
    stuck = [e for e in ldd if e.get("reason") in ("timeout", "crashed")]
    if stuck:
        return error("ldd did not finish", detail="; ".join(f"ldd {e.get('file')}: {e.get('reason')} "
                                                         f"({e.get('detail', '')})" for e in stuck),
                     evidence=ev, remedy=Remediation("Run the command by hand to see where it stops.",
                                                     tuple(f"ldd {shlex.quote(str(e.get('file')))}" for e in stuck)))
    found = _unresolved_torch_libs(facts, torch_libs, py, ev) or _unresolved_extensions(facts, ldd, py, ev)
    if found is not None:
        return found
    broken = _broken_runtimes(facts, ldd, choice)
    if broken:
        return _broken_runtime_finding(facts, broken, choice, py, ev)
    resolved = [f"{os.path.basename(str(e.get('file')))}: {name} => {path}"
                for e in torch_libs for name, path in (e.get("resolved") or {}).items() if name.startswith("libcudart")]
    if resolved:
        unlisted = [os.path.basename(str(e.get("file"))) for e in torch_libs
                    if not isinstance(e.get("not_found"), (list, tuple))]
        return ok("torch's CUDA libraries resolve", detail="; ".join(resolved) + (
            f". What ldd could not find was not read for {', '.join(unlisted)}." if unlisted else ""), evidence=ev)
    runtime = [item for item in choice.values() if isinstance(item, Mapping) and item.get("family") == "cudart"
               and item.get("file")]
    if runtime:
        return _runtime_found(choice, runtime, ev)
    if torch_libs and all(isinstance(e.get("resolved"), Mapping) for e in torch_libs):
        # ldd listed what torch's libraries need and none is a CUDA library (a listing not read says nothing).
        return ok("torch's libraries resolve", detail="No CUDA library in torch's dependencies (a CPU build).",
                  evidence=ev)
    return skip("No CUDA runtime found to resolve", detail="No libcudart copy and no torch CUDA library were found.",
                evidence=ev)
