"""Facts carried by the messages torch and the CUDA runtime print themselves.

torch words its failures in a few fixed sentences, and those sentences hold facts: the CUDA error
code ``cudaGetDeviceCount()`` returned, the cuDNN torch was compiled against and the one it found.
A live probe meets them as exception texts (``torch.cudnn_version`` failing with "cuDNN version
incompatibility …"), a pasted report as lines next to the collect_env block. Both go through
these functions, so checks judge the same facts from either source.

Sources for the wording (torch/csrc, torch/backends/cudnn/__init__.py, c10/cuda/CUDAFunctions.cpp):
https://github.com/pytorch/pytorch/blob/main/c10/cuda/CUDAFunctions.cpp
https://github.com/pytorch/pytorch/blob/main/torch/backends/cudnn/__init__.py
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from envdoctor.knowledge import compat, errors, versions
from envdoctor.knowledge.versions import cudnn_tuple
from envdoctor.lazyre import lazy_re

__all__ = ["NOT_COMPILED", "cuda_error", "cudnn_incompatibility"]

#: torch's assertion when a CPU-only build is asked for CUDA (torch/cuda/__init__.py, _lazy_init).
NOT_COMPILED = "Torch not compiled with CUDA enabled"

# torch >= 1.8: "Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before
# calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized"
_GET_COUNT_RE = lazy_re(r"Unexpected error from cudaGetDeviceCount\(\).{0,300}?Error (\d+): ([^(]{1,200}?)\s*(?:\(Triggered|$)")
# torch 0.4-1.7: "cuda runtime error (999) : unknown error at /pytorch/aten/src/THC/THCGeneral.cpp:47"
_THC_RE = lazy_re(r"cuda runtime error \((\d+)\)\s?: (.{1,200}?)(?: at \S+|$)")
# "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=50 error=30 : unknown error"
_THC_CHECK_RE = lazy_re(r"THCudaCheck FAIL .{0,300}?error=(\d+) : (.{1,200}?)\s*$")
# c10's special case for cudaErrorUnknown (torch >= 1.6): "CUDA unknown error - this may be due to an
# incorrectly set up environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start."
_UNKNOWN_RE = lazy_re(r"CUDA unknown error - this may be due to an incorrectly set up environment")

# torch >= 1.2: "cuDNN version incompatibility: PyTorch was compiled against (8, 3, 2) but found
# runtime version (8, 0, 3)." torch 1.0/1.1: "cuDNN version mismatch: PyTorch was compiled against
# 7102 but linked against 7005"
_CUDNN_TUPLE_RE = lazy_re(r"cuDNN version incompatibility: PyTorch was compiled\s+against \((\d+), (\d+), (\d+)\) "
                             r"but (?:found runtime version|linked against) \((\d+), (\d+), (\d+)\)")
_CUDNN_INT_RE = lazy_re(r"cuDNN version mismatch: PyTorch was compiled against (\d{4,6}) but linked against (\d{4,6})")

# Which codes stand for cuInit's result, their names and the runtime's own words for them:
# envdoctor/data/errors.json (envdoctor.knowledge.errors).
#: cudaError_t names as CUDA samples print them: "code=35(cudaErrorInsufficientDriver)".
_RUNTIME_NAME_RE = lazy_re(r"\b(cudaError[A-Za-z]+)\b")
#: "failed call to cuInit: CUDA_ERROR_UNKNOWN: unknown error" (XLA/JAX, TensorFlow and others).
_CUINIT_NAME_RE = lazy_re(r"cuInit\b.{0,40}?\b(CUDA_ERROR_[A-Z_]+)")


def cuda_error(text: str) -> dict[str, Any] | None:
    """``{"code", "name", "message"}`` when ``text`` is torch reporting a CUDA error code from
    initialisation that means the same as a cuInit result; else None."""
    code: int | None = None
    message = ""
    for rx in (_GET_COUNT_RE, _THC_RE, _THC_CHECK_RE):
        if m := rx.search(text):
            code, message = int(m.group(1)), m.group(2).strip().rstrip(".\"'`")
            break
    if code == 30 and "unknown error" in message.lower():
        code = 999  # CUDA < 10.1 numbered cudaErrorUnknown 30 ("cuda runtime error (30) : unknown error")
    if code is None and _UNKNOWN_RE.search(text):
        code, message = 999, "unknown error"
    if code is None and (m := _CUINIT_NAME_RE.search(text)):
        names = {name: c for c, name in errors.cuda_init_codes().items()}
        if m.group(1) in names:
            code, message = names[m.group(1)], text[m.end():].strip(" :")[:120] or m.group(1)
            return {"code": code, "name": m.group(1), "message": message}
    if code is None and "cudaError" in text and (m := _RUNTIME_NAME_RE.search(text)):
        code = errors.runtime_names().get(m.group(1))
        message = m.group(1)
    if code is None:
        for words, known in errors.runtime_messages():
            if words.lower() in text.lower():
                code, message = known, words
                break
    init_codes = errors.cuda_init_codes()
    if code is None or code not in init_codes:
        return None
    # CUDA < 10.1 numbered cudaErrorUnknown 30: only trust a code whose words agree.
    if code == 999 and "unknown" not in message.lower():
        return None
    return {"code": code, "name": init_codes[code], "message": message}


def cudnn_incompatibility(text: str) -> tuple[tuple[int, int, int], tuple[int, int, int]] | None:
    """``(compiled, runtime)`` cuDNN versions when ``text`` is torch refusing the cuDNN it found."""
    if m := _CUDNN_TUPLE_RE.search(text):
        g = [int(x) for x in m.groups()]
        return (g[0], g[1], g[2]), (g[3], g[4], g[5])
    if m := _CUDNN_INT_RE.search(text):
        # torch's int encoding: 7102 -> (7, 1, 2), 90100 -> (9, 1, 0)
        compiled, linked = cudnn_tuple(int(m.group(1))), cudnn_tuple(int(m.group(2)))
        return (compiled, linked) if compiled and linked else None
    return None


# ---------------------------------------------------------------------------------------------
# Dynamic-loader errors: one grammar for every wording of "a shared library could not be loaded".
#
# glibc (elf/dl-load.c, elf/dl-lookup.c, elf/dl-version.c, elf/dl-error-skeleton.c; bminor/glibc, glibc-2.35):
#   "<program>: error while loading shared libraries: <object>: <errstring>[: <strerror>]" (no dlerror caller:
#   the program itself failed to start), and dlerror()'s "<object>: <errstring>" that Python's ImportError,
#   ctypes' OSError and every dlopen caller quote, where <errstring> is one of
#   "cannot open shared object file" (+ ": No such file or directory"), "undefined symbol: <sym>[, version <v>]",
#   "version `<v>' not found (required by <object>)", "wrong ELF class: ELFCLASS32|ELFCLASS64",
#   "symbol <sym> version <v> not defined in file <lib> with link time reference".
# Windows (CPython's OSError, torch/__init__.py's _load_dll_libraries, cuDNN's own loader):
#   "[WinError 126] The specified module could not be found. Error loading "<dll>" or one of its dependencies.",
#   "[WinError 127] The specified procedure could not be found", "[WinError 193] %1 is not a valid Win32
#   application", "Could not load library <dll>. Error code 126", "Could not locate <dll>".
# Each is found by its literal phrase, then the object is the token before it and the symbol the token after:
# linear time on any line (no backtracking).
_UNDEFINED = ": undefined symbol: "
_MISSING = ": cannot open shared object file"
_WRONG_CLASS = ": wrong ELF class: "
_VERSION_NOT_FOUND = ": version "
_WHILE_LOADING = ": error while loading shared libraries: "
_SO_RE = lazy_re(r".*\.so(?:\.[\w.]+)?")
_SYMBOL_RE = lazy_re(r"[\w$@]+(?:\.[\w$@]+)*")
_NODE_RE = lazy_re(r", version ([\w+-]+(?:\.[\w+-]+)*)")
_TOKEN_SPLIT_RE = lazy_re(r"[\s'\"(`]")
_VERSION_NOT_FOUND_RE = lazy_re(r"[`'\"]([\w.+@-]{1,80})['`\"] not found \(required by ([^)\s]{1,400})\)")
_ELF_CLASS_RE = lazy_re(r"ELFCLASS(32|64)")
# Windows: CPython's WinError codes, torch's "Error loading", cuDNN's "Could not load library" / "Could not locate".
_WIN_ERROR_RE = lazy_re(r"\[WinError (126|127|193)\]")
_WIN_DLL_RE = lazy_re(r'Error loading\s+"([^"]{1,400}?\.dll)"|Could not (?:load library|locate)\s+"?([\w.\\/:-]{1,300}?\.dll)'
                      # TensorFlow's dso_loader ("Could not load dynamic library 'cudart64_110.dll'; dlerror: … not found")
                      # and ctypes on Python >= 3.8 ("Could not find module 'C:\\…\\nvcuda.dll' (or one of its dependencies)")
                      r"|Could not (?:load dynamic library|find module)\s+'([^']{1,400}?\.dll)'",
                      re.IGNORECASE)
_ANY_WIN_ERROR_RE = lazy_re(r"\[WinError \d+\]")
_WIN_KIND = {"126": "missing-library", "127": "undefined-symbol", "193": "wrong-architecture"}
#: Torch's own objects: a path under torch/ (torch/lib/libtorch_cuda.so, torch/_C.cpython-…so).
_TORCH_PATH_RE = lazy_re(r"(?:^|[/\\])torch[/\\](?:lib[/\\]|_C\b)")
_PACKAGE_PATH_RE = lazy_re(r"[/\\](?:site|dist)-packages[/\\]([A-Za-z0-9_.-]+?)(?:[/\\]|\.cpython|\.abi3|\.so|\.pyd|$)")


def _path_before(text: str, end: int) -> str | None:
    token = _TOKEN_SPLIT_RE.split(text[max(0, end - 400):end])[-1]
    return token if token and _SO_RE.fullmatch(token) else None


# glibc's other wording of a missing versioned symbol: "…/libcublas.so.11: symbol cublasLtHSHMatmulAlgoInit version
# libcublasLt.so.11 not defined in file libcublasLt.so.11 with link time reference".
_NOT_DEFINED = " not defined in file "
_SYMBOL_AT = ": symbol "
_NOT_DEFINED_RE = lazy_re(r"([\w$@.]+),? version ([\w.+-]+) not defined in file ([\w.+-]+)")


def package_of_path(path: str | None) -> str | None:
    """The Python package an object or a source file belongs to: ``…/site-packages/xformers/_C.so`` ->
    ``xformers``; ``…/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so`` -> ``flash_attn_2_cuda``."""
    if not path:
        return None
    m = _PACKAGE_PATH_RE.search(path)
    return m.group(1) if m else None


def needed_by(path: str | None, requester: str | None = None) -> str | None:
    """What needed the object: ``"torch"`` (torch's own libraries or its _C module), ``"extension"`` (a
    compiled module of another Python package), ``"application"`` (a program the loader started itself:
    ``./bin/app: error while loading shared libraries``), or None when the text does not say."""
    if requester:
        base = requester.replace("\\", "/").rsplit("/", 1)[-1]
        return "python" if base.startswith("python") else "application"
    if not path:
        return None
    if _TORCH_PATH_RE.search(path) or compat.library_family(path) == "torch":
        return "torch"
    if package_of_path(path):
        return "extension"
    return None


def _failure(kind: str, path: str, symbol: str | None, node: str | None, provider: str | None,
             requester: str | None = None) -> dict[str, Any]:
    """One loader failure, the same record whichever wording glibc or Windows used. ``family`` is the
    cuda_libraries family of the object that failed (``cudart``, ``cuda`` = the driver's libcuda, ``nvml``);
    ``role`` that family's role (``driver`` | ``toolkit`` | ``torch``); ``cuda_major`` the CUDA major its
    name carries when the family's soname major is CUDA's (libcudart.so.12, cudart64_110.dll)."""
    library = path.replace("\\", "/").rsplit("/", 1)[-1]
    family = family_of(path)
    lib = compat.family_library(family) if family else None
    major = versions.soname_major(library)
    owner = needed_by(path if kind != "missing-library" else None, requester)
    return {"kind": kind, "path": path, "library": library, "family": family,
            "role": lib.role if lib else None, "symbol": symbol, "version_node": node, "provider": provider,
            "requester": requester, "needed_by": owner, "package": package_of_path(path) if kind != "missing-library" else None,
            # Only where the family's number is CUDA's (compat.json): cusolver64_11.dll and libcusolver.so.11 ship
            # with CUDA 12 too, curand64_10.dll with CUDA 11 and 12.
            "cuda_major": major if lib is not None and lib.soname_major_is_cuda else None}


def _occurrences(text: str, literal: str) -> Iterator[tuple[int, str]]:
    """``(where its arguments start, the path token before it)`` for each ``literal`` that has a path
    before it: every loader wording is found by its fixed words, in linear time."""
    pos = text.find(literal)
    while pos >= 0:
        after = pos + len(literal)
        if path := _path_before(text, pos):
            yield after, path
        pos = text.find(literal, after)


def _not_defined(text: str, requester: str | None) -> list[dict[str, Any]]:
    """Found by the literal ": symbol ", the path being the token before it."""
    out: list[dict[str, Any]] = []
    for after, path in _occurrences(text, _SYMBOL_AT):
        if m := _NOT_DEFINED_RE.match(text, after):
            symbol, node = m.group(1), m.group(2)
            out.append(_failure("undefined-symbol", path, symbol, node, family_of(node) or family_of(m.group(3)),
                                requester))
            if len(out) >= 50:
                break
    return out


def family_of(name: str | None) -> str | None:
    """``"libcusparse.so.12"`` -> ``"cusparse"``; a symbol name -> the library that defines it
    (the ``cuda_libraries`` table of compat.json)."""
    return compat.library_family(name)


def _requester(text: str) -> str | None:
    """The program in glibc's "<program>: error while loading shared libraries: …"."""
    pos = text.find(_WHILE_LOADING)
    if pos <= 0:
        return None
    token = _TOKEN_SPLIT_RE.split(text[max(0, pos - 400):pos])[-1]
    return token or None


#: onnxruntime's own Windows wording names the DLL that is really missing after the one it loaded:
#: 'Error loading "…\\onnxruntime_providers_cuda.dll" which depends on "cublasLt64_12.dll" which is missing.'
_WIN_DEPENDS_RE = lazy_re(r'which depends on\s+"([^"]{1,300}?\.dll)"\s+which is missing')


def _windows(text: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    code = _WIN_ERROR_RE.search(text) if "WinError" in text else None
    if code is None and _ANY_WIN_ERROR_RE.search(text):
        return out  # another Windows error ([WinError 1455] the paging file) while loading a DLL: not a loader failure
    if "which depends on" in text:
        for m in _WIN_DEPENDS_RE.finditer(text):
            rec = _failure("missing-library", m.group(1), None, None, family_of(m.group(1)))
            out.append(rec)
        if out:
            return out[:20]
    for m in _WIN_DLL_RE.finditer(text):
        dll = m.group(1) or m.group(2) or m.group(3)
        kind = _WIN_KIND[code.group(1)] if code else "missing-library"
        rec = _failure(kind, dll, None, None, family_of(dll))
        rec["needed_by"] = needed_by(dll) if rec["role"] != "torch" else "torch"
        out.append(rec)
        if len(out) >= 20:
            break
    return out


def loader_errors(text: str) -> list[dict[str, Any]]:
    """Each dynamic-loader failure in ``text``: ``{"kind": "undefined-symbol" | "missing-library" |
    "version-not-found" | "wrong-elf-class" | "wrong-architecture", "path", "library", "family", "role",
    "symbol", "version_node", "provider", "requester", "needed_by", "package", "cuda_major"}``. ``library``
    is the object that failed to load; ``provider`` the family that should have defined the symbol (from its
    version node, else its name) — the copy that is too old or the wrong one."""
    out: list[dict[str, Any]] = []
    requester = _requester(text) if _WHILE_LOADING in text else None
    for after, path in _occurrences(text, _UNDEFINED):
        if len(out) >= 50:
            break
        if sym := _SYMBOL_RE.match(text, after):
            symbol = sym.group(0)
            node_m = _NODE_RE.match(text, sym.end())
            node = node_m.group(1) if node_m else None
            provider = family_of(node) or family_of(symbol.lstrip("_")) or family_of(symbol)
            out.append(_failure("undefined-symbol", path, symbol, node, provider, requester))
    if _NOT_DEFINED in text:
        out.extend(_not_defined(text, requester))
    for _, path in _occurrences(text, _MISSING):
        if len(out) >= 100:
            break
        out.append(_failure("missing-library", path, None, None, family_of(path), requester))
    if _VERSION_NOT_FOUND in text and "not found (required by" in text:
        for after, path in _occurrences(text, _VERSION_NOT_FOUND):
            if len(out) >= 100:
                break
            if m := _VERSION_NOT_FOUND_RE.match(text, after):
                # the object that lacks the version (libstdc++.so.6) and the one that needed it
                rec = _failure("version-not-found", path, None, m.group(1), family_of(path), requester)
                rec["needed_by"] = rec["needed_by"] or needed_by(m.group(2))
                rec["package"] = package_of_path(m.group(2))
                rec["required_by"] = m.group(2)
                out.append(rec)
    for after, path in _occurrences(text, _WRONG_CLASS):
        if _ELF_CLASS_RE.match(text, after):
            out.append(_failure("wrong-elf-class", path, None, None, family_of(path), requester))
        break  # one record: the first such line that names its library
    if ".dll" in text.lower() and not any(r["library"].lower().endswith(".dll") for r in out):
        out.extend(_windows(text))
    return _with_framework(text, out + _link_time(text))


def _with_framework(text: str, out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The failures, a missing library that a framework's own loader reported marked as needed by that framework."""
    framework = _framework(text)
    for rec in out if framework else ():
        if rec["kind"] == "missing-library" and rec.get("needed_by") in (None, "python"):
            rec["needed_by"], rec["package"] = "framework", framework
    return out


# GNU ld (binutils, ld/ldelf.c and ld/ldfile.c, binutils-2_40): a library missing when a program or a library is
# linked, not when it runs: "/usr/bin/ld: warning: libcudart.so.11.0, needed by ./libfoo.so, not found (try using
# -rpath or -rpath-link)" and "/usr/bin/ld: cannot find -lcudart" (the unversioned libcudart.so, a -dev file).
_LD_NEEDED = ", needed by "
_LD_NEEDED_RE = lazy_re(r"([\w.+-]{1,200}\.so(?:\.[\w.]+)?), needed by (\S{1,400}), not found")
_LD_CANNOT_FIND = "cannot find -l"
_LD_CANNOT_FIND_RE = lazy_re(r"cannot find -l([\w.+-]{1,100})")


def _link_time(text: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if _LD_NEEDED not in text and _LD_CANNOT_FIND not in text:
        return out
    for m in _LD_NEEDED_RE.finditer(text) if _LD_NEEDED in text else ():
        rec = _failure("missing-library", m.group(1), None, None, family_of(m.group(1)), m.group(2))
        rec["stage"], rec["needed_by"] = "link", "application"
        out.append(rec)
    for m in _LD_CANNOT_FIND_RE.finditer(text) if _LD_CANNOT_FIND in text else ():
        name = m.group(1)
        library = name if name.startswith("lib") and ".so" in name else f"lib{name}.so"
        rec = _failure("missing-library", library, None, None, family_of(library), None)
        rec["stage"], rec["needed_by"] = "link", "application"
        out.append(rec)
    return out[:20]


#: The frameworks whose own loader words a library failure, by the fixed words of their messages: TensorFlow's
#: (and XLA's) tsl dso_loader "Could not load dynamic library '…'", onnxruntime's "Failed to load library
#: …libonnxruntime_providers_cuda… with error:". What needed the library is then that framework, never torch.
_FRAMEWORK_WORDS: tuple[tuple[str, str], ...] = (
    ("Could not load dynamic library '", "tensorflow"),
    ("onnxruntime_providers_cuda", "onnxruntime"),
    ("onnxruntime_providers_tensorrt", "onnxruntime"),
)


def _framework(text: str) -> str | None:
    return next((name for words, name in _FRAMEWORK_WORDS if words in text), None)


# ---------------------------------------------------------------------------------------------
# torchvision / torchaudio refusing a torch built for another CUDA

#: torchvision/extension.py: "Detected that PyTorch and torchvision were compiled with different CUDA
#: [major ]versions. PyTorch has CUDA Version=11.7 and torchvision has CUDA Version=11.8."
_VISION_CUDA_RE = lazy_re(r"PyTorch has CUDA Version=(\d+\.\d+) and torchvision has CUDA Version=(\d+\.\d+)")
#: torchaudio/_extension: "PyTorch has CUDA version 11.7 whereas TorchAudio has CUDA version 11.6."
_AUDIO_CUDA_RE = lazy_re(r"PyTorch has CUDA version (\d+\.\d+) whereas TorchAudio has CUDA version (\d+\.\d+)")



def loader_failures(texts: Sequence[str], frames: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The loader failures of ``texts`` (:func:`loader_errors`), one per failing object, symbol and kind.
    ``frames`` (text -> package of the traceback frame above it, or of the import that raised it) says
    what needed an object the line itself does not name: ``from torch._C import *`` in torch/__init__.py
    -> ``torch``. The one reading of a live run's error texts and of a pasted text's."""
    seen: set[tuple[Any, ...]] = set()
    out: list[dict[str, Any]] = []
    for text in texts:
        for err in loader_errors(str(text)):
            key = (err["kind"], err["library"], err["symbol"])
            if key in seen:
                continue
            seen.add(key)
            package = (frames or {}).get(str(text).strip())
            if err["needed_by"] is None and package:
                err["package"] = err["package"] or package
                err["needed_by"] = "torch" if package == "torch" else "extension" if "." not in package else None
            elif package and package.isidentifier() and str(err["package"] or "").startswith("_") and \
                    err["needed_by"] == "extension":
                # A private top-level module (old torchaudio's _torch_sox.so) that a package imports in its frame is
                # that package's compiled part.
                err["package"] = package
            out.append(err)
    return out

def companion_cuda(text: str) -> tuple[str, str, str] | None:
    """``(package, torch's CUDA, the package's CUDA)`` when ``text`` is torchvision or torchaudio
    refusing to load next to a torch built for another CUDA."""
    if "PyTorch has CUDA" not in text:
        return None
    if m := _VISION_CUDA_RE.search(text):
        return "torchvision", m.group(1), m.group(2)
    if m := _AUDIO_CUDA_RE.search(text):
        return "torchaudio", m.group(1), m.group(2)
    return None


# ---------------------------------------------------------------------------------------------
# The NVIDIA container runtime refusing an image whose CUDA the host driver cannot run

#: nvidia-container-cli (toolkit >= 1.0): "requirement error: unsatisfied condition: cuda>=12.4, please
#: update your driver to a newer version, or use an earlier cuda container"
_CLI_REQUIRE_RE = lazy_re(r"requirement error: unsatisfied condition: cuda\s*>=\s*(\d+\.\d+)")
#: nvidia-docker 1.0: "Error: unsupported CUDA version: 7.5 < 6.5" (image, driver) and, later,
#: "unsupported CUDA version: driver 8.0 < image 9.0.176"
_V1_REQUIRE_RE = lazy_re(r"unsupported CUDA version: (\d+\.\d+) < (\d+\.\d+)")
_V1_NAMED_RE = lazy_re(r"unsupported CUDA version: driver (\d+\.\d+)\S* < image (\d+\.\d+)")
#: NGC images: "This container was built for NVIDIA Driver Release 535.86 or later, but version
#: 510.47.03 was detected and compatibility mode is UNAVAILABLE."
_NGC_DRIVER_RE = lazy_re(r"built for NVIDIA Driver Release (\d+(?:\.\d+)*) or later, but\s+version "
                            r"(\d+(?:\.\d+)+) was detected")


def container_cuda_requirement(text: str) -> tuple[str, str | None] | None:
    """``(CUDA the image needs, CUDA the driver supports or None)`` when the NVIDIA container
    runtime refused to start a container because the host driver is too old for its image."""
    if m := _CLI_REQUIRE_RE.search(text):
        return m.group(1), None
    if m := _V1_NAMED_RE.search(text):
        return m.group(2), m.group(1)
    if m := _V1_REQUIRE_RE.search(text):
        return m.group(1), m.group(2)
    return None


def container_driver_requirement(text: str) -> tuple[str, str] | None:
    """``(driver the image needs, driver found)`` from an NGC image's start-up check."""
    m = _NGC_DRIVER_RE.search(text)
    return (m.group(1), m.group(2)) if m else None


# torch.utils.cpp_extension's refusal to build when the toolkit's nvcc and torch's CUDA differ
# (_check_cuda_version): "The detected CUDA version (12.1) mismatches the version that was used to compile
# PyTorch (11.8). Please make sure to use the same CUDA versions." — usually wrapped after "compile". torch 2.13
# raises RuntimeError(CUDA_MISMATCH_MESSAGE, toolkit, torch) unformatted, its two strings joined with no space:
# "('The detected CUDA version (%s) mismatches the version that was used to compilePyTorch (%s). Please make sure
# to use the same CUDA versions.', '12.4', '12.1')" (torch/utils/cpp_extension.py, v2.13.0).
_TOOLKIT_MISMATCH_RE = lazy_re(r"The detected CUDA version \((\d+\.\d+)\) mismatches the version that was used to"
                                  r"\s*compile\s*PyTorch \((\d+\.\d+)\)")
_TOOLKIT_MISMATCH_ARGS_RE = lazy_re(r"The detected CUDA version \(%s\) mismatches the version that was used to"
                                       r"\s*compile\s*PyTorch \(%s\)[^'\"]{0,200}['\"],\s*['\"](\d+\.\d+)[^'\"]{0,20}['\"],"
                                       r"\s*['\"](\d+\.\d+)")


def toolkit_mismatch(text: str) -> tuple[str, str] | None:
    """``(the toolkit's CUDA, torch's CUDA)`` from cpp_extension's "The detected CUDA version … mismatches …",
    formatted (torch < 2.6) or printed with its arguments after it (torch 2.13)."""
    if "mismatches the version" not in text:
        return None
    m = _TOOLKIT_MISMATCH_RE.search(text) or _TOOLKIT_MISMATCH_ARGS_RE.search(text)
    return (m.group(1), m.group(2)) if m else None


# The Docker daemon asked for GPUs (`--gpus`, compose's `capabilities: [gpu]`) with no device driver registered
# for them — the NVIDIA Container Toolkit is not installed or not configured for this Docker:
# 'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].'
# (older daemons print no driver name: "could not select device driver with capabilities: [[gpu]]").
_NO_GPU_DRIVER_RE = lazy_re(r'could not select device driver(?:\s+"[^"]*")?\s+with capabilit(?:y|ies):\s*\[\[gpu')


def docker_no_gpu_driver(text: str) -> bool:
    """True for the Docker daemon's refusal of a GPU request it has no device driver for."""
    return "could not select device driver" in text and bool(_NO_GPU_DRIVER_RE.search(text))
