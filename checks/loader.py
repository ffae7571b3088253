"""The dynamic loader: a shared library that could not be loaded, judged from the structured failures the
parsers and the python probe read with the loader grammar (``torch.loader_failures``).

What is missing (its cuda_libraries family and role) and what needed it (torch, a torch extension, an
application binary, inside a container or not) decide the remedy: the driver's libcuda/libnvidia-ml in a
container -> the container runtime (``--gpus``); a CUDA runtime library for a binary -> the toolkit or the
matching nvidia-* wheel; torch's own CUDA library -> torch's wheel; a torch extension's undefined c10/at
symbol -> rebuild or reinstall that extension for the installed torch. Families another check owns (cuDNN,
NCCL: they know their pins) and CUDA-library symbol clashes (library-conflicts) are left to those checks.
"""

from __future__ import annotations

from typing import Any

from envdoctor import views
from envdoctor.knowledge import compat, remedies, versions

from ..kit import Remediation, evidence, fail, ok, skip
from ..model import Facts, Reason
from ..registry import CheckResult, check, owner_of
from ._common import cudnn_main_missing, framework_version

#: Extensions whose symbol errors torch-companions judges (it pairs them with torch).
_COMPANIONS = ("torchvision", "torchaudio")


def _what(err: dict[str, Any]) -> str:
    title = compat.family_title(err.get("family"))
    return f"{title} ({err['library']})" if title else str(err["library"])


def _mine(err: dict[str, Any]) -> bool:
    """The failures this check judges: not a family another check owns, not a CUDA-library symbol clash."""
    family, provider = err.get("family"), err.get("provider")
    if err.get("needed_by") == "framework" and err["kind"] == "missing-library":
        return True  # another framework's loader: its remedy, whichever check owns the family for torch
    if cudnn_main_missing(err):
        return True  # cuDNN itself is not there: nothing to mix, the loader cannot find it
    if family and owner_of(f"library_errors:{family}") or provider and owner_of(f"library_errors:{provider}"):
        return False
    if err["kind"] == "undefined-symbol":
        # torch's symbols missing from an extension (or torch's own objects missing them): the ABI of torch.
        return provider == "torch" and str(err.get("package") or "") not in _COMPANIONS
    return True


def _torch_reinstall(facts: Facts, python: str | None) -> str:
    version = facts.value("torch.version") if facts.get("torch.version").ok else None
    return remedies.torch_install(python, str(version) if version else None, views.torch_variant(facts))


def _driver_missing(facts: Facts, err: dict[str, Any], python: str | None) -> Remediation:
    container = facts.value("host.container") if facts.get("host.container").ok else None
    if container:
        return Remediation(f"{err['library']} is the NVIDIA driver's, and a container gets it from the host through "
                           "the NVIDIA container runtime: start the container with its GPUs (and install the "
                           "NVIDIA Container Toolkit on the host if --gpus is refused).", remedies.container_gpus(),
                           (remedies.CONTAINER_TOOLKIT_INSTALL,))
    if facts.value("host.wsl"):
        return Remediation(f"On WSL 2, {err['library']} comes from the Windows NVIDIA driver (/usr/lib/wsl/lib): "
                           "install or update the driver on Windows, not inside Linux.",
                           ("ls -l /usr/lib/wsl/lib/libcuda*   # what the Windows driver provides",
                            remedies.env_set("LD_LIBRARY_PATH", "/usr/lib/wsl/lib:$LD_LIBRARY_PATH",
                                             "where WSL 2 mounts the driver's libcuda")),
                           (remedies.WSL_CUDA_GUIDE,))
    return Remediation(f"{err['library']} comes with the NVIDIA driver, never from pip: install the driver (or, if it "
                       "is installed, repair it so its user-space libraries are in the loader's path).",
                       (remedies.ubuntu_drivers_install("or the driver from NVIDIA's page"),
                        remedies.find_library(err["library"])), (remedies.DRIVER_DOWNLOAD,))


def _toolkit_missing(facts: Facts, err: dict[str, Any], python: str | None) -> Remediation:
    family, major = err.get("family"), err.get("cuda_major")
    lib = compat.family_library(family) if family else None
    wheel = compat.wheel_name(lib.wheel, major) if lib and lib.wheel and major and major >= 11 else None
    needed = err.get("needed_by")
    if needed in ("application", "python") or err.get("requester"):
        cuda = versions.soname_cuda(err["library"])
        commands = list(remedies.cuda_runtime_for_binary(major, cuda))
        if wheel and lib and lib.wheel_dir:
            commands += [remedies.pip_install(python, wheel),
                         remedies.wheel_lib_path(python, compat.wheel_lib_dir(lib, major) or lib.wheel_dir)]
        prog = err.get("requester") or "the program"
        return Remediation(f"{prog} was built against CUDA {cuda or major or '?'} and needs {err['library']}: install "
                           "that CUDA toolkit's runtime libraries" + (f", or the {wheel} wheel" if wheel else "")
                           + ", and put their folder on LD_LIBRARY_PATH.", tuple(commands), (remedies.CUDA_ARCHIVE,))
    if needed == "extension" and err.get("package") and err["package"] != "torch":
        return Remediation(f"{err['package']} was built against a CUDA whose {err['library']} is not installed: "
                           "reinstall it built for the installed torch's CUDA"
                           + (f", or install {wheel}" if wheel else "") + ".",
                           (remedies.extension_rebuild(python, err["package"]),
                            *((remedies.pip_install(python, wheel),) if wheel else ())), ())
    if facts.get("torch.version").reason is Reason.NOT_IN_REPORT and needed is None:
        # Nothing in the text is torch's: the program that needs the library is not shown, so no torch remedy.
        commands = [remedies.find_library(err["library"])]
        if wheel:
            commands.append(remedies.pip_install(python, wheel))
        return Remediation(f"Install the {err['library']} the program was built for (its CUDA's libraries"
                           + (f", or the {wheel} wheel" if wheel else "") + ") and put its folder on LD_LIBRARY_PATH; "
                           "if the program is torch, reinstall torch with its dependencies instead.", tuple(commands),
                           (remedies.CUDNN_ARCHIVE if family == "cudnn" else remedies.CUDA_ARCHIVE,))
    # torch (or a Python program whose caller the text does not show): torch's wheel brings its CUDA libraries.
    commands = [_torch_reinstall(facts, python)]
    if wheel:
        commands.append(remedies.pip_install(python, wheel))
    return Remediation(f"torch's CUDA wheels bring {err['library']} as an nvidia-* dependency: reinstall torch with "
                       "its dependencies" + (f" (or install {wheel})" if wheel else "") + ", and take LD_LIBRARY_PATH "
                       "entries that point at another CUDA off it.", tuple(commands), (remedies.PYTORCH_GET_STARTED,))


def _tensorflow(facts: Facts, err: dict[str, Any], python: str | None) -> Remediation:
    windows = str(err["library"]).lower().endswith(".dll") or facts.value("host.os") == "Windows"
    text, commands, links = remedies.tensorflow_gpu(python, windows, framework_version(facts, "tensorflow"))
    return Remediation(f"TensorFlow cannot load {err['library']}. {text}", commands, links)


def _onnxruntime(facts: Facts, err: dict[str, Any], python: str | None) -> Remediation:
    family, major = err.get("family"), err.get("cuda_major")
    lib = compat.family_library(family) if family else None
    wheel = compat.wheel_name(lib.wheel, major) if lib and lib.wheel and major and major >= 11 else None
    return Remediation(f"onnxruntime-gpu's CUDA provider needs {err['library']}, of the CUDA (and cuDNN) major that "
                       "onnxruntime-gpu release was built for: install that CUDA's libraries"
                       + (f" (the {wheel} wheel)" if wheel else "") + ", or the onnxruntime-gpu build for the CUDA "
                       "this machine has.", tuple(c for c in (
                           remedies.pip_install(python, wheel) if wheel else None,
                           "python -c \"import onnxruntime as o; print(o.__version__, o.get_available_providers())\"")
                           if c is not None), (remedies.ONNXRUNTIME_CUDA,))


#: What needed a library when a framework's own loader said so (envdoctor.knowledge.messages): its own remedy.
_FRAMEWORKS = {"tensorflow": _tensorflow, "onnxruntime": _onnxruntime}


def _only_framework(facts: Facts) -> str | None:
    """The one framework with its own CUDA loader the text names (its version, an install line), when nothing in
    the text is torch's: what a library error whose caller the line does not name belongs to."""
    if facts.get("torch.version").reason is not Reason.NOT_IN_REPORT:
        return None
    said = facts.value("text.frameworks") if facts.get("text.frameworks").ok else None
    named = {{"onnxruntime-gpu": "onnxruntime"}.get(str(k), str(k)) for k in said or ()} & set(_FRAMEWORKS)
    return next(iter(named)) if len(named) == 1 else None


def _link_missing(err: dict[str, Any], ev: dict[str, Any]) -> Any:
    """GNU ld could not find a library while a program or a library was being built (not run)."""
    library, family = str(err["library"]), err.get("family")
    needed = f", needed by {err['requester']}" if err.get("requester") else ""
    stubs = family == "cuda"
    what = ("the driver's libcuda.so: a build links against the CUDA toolkit's stub copy in lib64/stubs (the real one "
            "comes with the driver at run time)" if stubs else
            f"{library}: the CUDA toolkit's (or the library's -dev package's) unversioned copy, in a folder the linker "
            "searches")
    return fail(f"The linker cannot find {_what(err)}{needed}",
                detail=f"GNU ld could not find {library} while linking{needed}: nothing is wrong at run time yet; the "
                       "build cannot finish.", evidence=ev,
                remedy=Remediation(f"Give the linker {what}: pass its folder with -L, or put it on LIBRARY_PATH.",
                                   remedies.link_library(library, stubs), (remedies.CUDA_ARCHIVE,)))


def _one(facts: Facts, err: dict[str, Any], ev: dict[str, Any]) -> Any:
    python = facts.value("python.executable")
    kind, role, what = err["kind"], err.get("role"), _what(err)
    where = f" (needed by {err['requester']})" if err.get("requester") else (
        f" (needed by {err['package']})" if err.get("package") and err.get("needed_by") == "extension" else "")
    if kind == "undefined-symbol":
        pkg = err.get("package") or err["library"]
        return fail(f"{pkg} was built against another torch (undefined symbol {str(err['symbol'])[:60]})",
                    detail=f"{err['path']} needs {err['symbol']}, a symbol of torch's C++ library (c10/ATen), and the "
                           "installed torch does not define it: the extension was compiled for a different torch "
                           "release or build.", evidence=ev,
                    remedy=Remediation(f"Rebuild or reinstall {pkg} for the installed torch (a wheel built for that "
                                       "torch release, or from source against it).",
                                       (remedies.extension_rebuild(python, str(err.get("package") or pkg)),), ()))
    if kind == "version-not-found":
        return fail(f"{err['library']} is too old: version {err['version_node']} not found",
                    detail=f"{err.get('required_by') or 'A library'} needs {err['version_node']} from {err['library']}, "
                           f"and the {err['library']} the loader found predates it (an older system copy found first).",
                    evidence=ev,
                    remedy=Remediation("Let the loader find a copy new enough: the environment's own (conda's "
                                       "lib folder first on LD_LIBRARY_PATH) or a newer system package.",
                                       (remedies.glibcxx_versions(err["path"]), remedies.find_library(err["library"])),
                                       ()))
    if kind in ("wrong-elf-class", "wrong-architecture"):
        return fail(f"{what} is built for another architecture",
                    detail=f"The loader found {err['path']}, but it is a 32-bit (or other-architecture) build: a "
                           "folder of another architecture's libraries is searched first.", evidence=ev,
                    remedy=Remediation("Take the folder holding the wrong build off LD_LIBRARY_PATH (or the loader "
                                       "cache), so the 64-bit copy is found.",
                                       (remedies.find_library(err["library"]),), ()))
    if err.get("stage") == "link":
        return _link_missing(err, ev)
    if role == "driver":
        remedy = _driver_missing(facts, err, python)
    elif err.get("needed_by") == "framework" and err.get("package") in _FRAMEWORKS:
        remedy = _FRAMEWORKS[str(err["package"])](facts, err, python)
    elif err.get("needed_by") is None and (framework := _only_framework(facts)) is not None:
        remedy = _FRAMEWORKS[framework](facts, err, python)
    elif role in ("toolkit", "torch") and err.get("family"):
        remedy = _toolkit_missing(facts, err, python) if role == "toolkit" else Remediation(
            "torch's own library is missing: its installation is broken; reinstall torch.",
            (_torch_reinstall(facts, python),), (remedies.PYTORCH_GET_STARTED,))
    elif str(err["library"]).lower().endswith(".dll"):
        remedy = Remediation(f"Install what provides {err['library']} (zlibwapi.dll: the zlib cuDNN 8 needs on Windows), "
                             "and put the folder that holds it on PATH.", remedies.windows_library(err["library"]), ())
    else:
        remedy = Remediation(f"Install the package that provides {err['library']}, or put the folder that holds it "
                             "on LD_LIBRARY_PATH.", (remedies.system_library(err["library"]),
                                                     remedies.find_library(err["library"])), ())
    return fail(f"{'T' + what[1:] if what.startswith('the ') else what} cannot be found{where}",
                detail=f"The dynamic loader could not open {err['library']}: \"{err['library']}: cannot open shared "
                       "object file\" (or Windows' \"The specified module could not be found\"). Nothing that needs it "
                       "can start.", evidence=ev, remedy=remedy)


@check("loader-library", "Every shared library the GPU stack needs is found", needs=("torch.loader_failures",))
def loader_library(facts: Facts) -> CheckResult:
    reading = facts.get("torch.loader_failures")
    ev = evidence(facts, "torch.loader_failures", "host.container")
    if not reading.ok:
        return skip("No loader failure was read", detail=reading.describe(), evidence=ev)
    from ._common import library_errors

    if not reading.value:
        return ok("No shared library failed to load", evidence=ev)
    mine = [e for e in library_errors(facts) if _mine(e)]
    if not mine:
        return skip("No loader failure this check judges" if reading.value else "The text shows no loader failure",
                    evidence=ev)
    return [_one(facts, err, ev) for err in mine[:5]]
