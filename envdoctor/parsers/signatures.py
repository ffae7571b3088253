"""Evidence in text: the sentences torch, the CUDA runtime, the dynamic loader, the kernel and the
NVIDIA container runtime print, each a signature (a matcher and what it writes), in one table.

Users paste these lines next to a collect_env report, an nvidia-smi table, or alone. Every text
``diagnose`` reads goes through :func:`scan_messages`, which runs :data:`LINE_SIGNATURES` over
each line and :data:`PASTE_SIGNATURES` over the paste joined into one line (chat windows and issue
forms re-wrap sentences anywhere), then writes the facts; :func:`has_messages` asks the same table
whether a paste holds any fact-carrying sentence at all. A signature's flags say what a match
means beyond its own fact: ``message`` (the line is one of torch's CUDA messages, kept in
``torch.cuda_available_messages``), ``evidence`` (alone it makes the paste a report) and ``final``
(the line is nothing else).

The wording of each sentence and its source is documented where it is matched: here for torch's
initialisation warnings, :mod:`envdoctor.knowledge.messages` for CUDA error codes, cuDNN, loader errors,
torchvision/torchaudio and the container runtime.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from envdoctor.knowledge import catalogue, messages
from envdoctor.knowledge.versions import cc_text, cuda_to_int, cudnn_to_int, dotted

from ..lazyre import lazy_re
from ..model import Reading, Reason, missing, ok
from ..redact import redact_text
from . import errorlines
from . import evidence as _evidence
from .containers import NGC_NO_DRIVER, RUNTIME_HOOK, container_evidence

__all__ = ["LINE_SIGNATURES", "NGC_NO_DRIVER", "PASTE_SIGNATURES", "SOURCE", "LineSignature", "PasteSignature", "Scan",
           "has_messages", "loader_failures", "scan_messages"]

# Pasted facts have always named their source "collect_env", whichever report the sentence sat in.
SOURCE = "collect_env"

CC = tuple[int, int]
Triple = tuple[int, int, int]

# Messages torch itself prints while initialising CUDA. They carry facts (the GPU's capability,
# the wheel's arch list, the driver's CUDA API version) that users often paste with the report.
_CAP_TAIL_RE = lazy_re(r" with CUDA capability sm_(\d{2,})\w* is not compatible with the current PyTorch installation")
_ARCH_LIST_RE = lazy_re(r"current PyTorch install supports CUDA capabilities((?:\s+(?:sm|compute)_\d+\w*)+)")
_OLD_GPU_RE = lazy_re(r"Found GPU\s*(\d+) (.{1,100}?) which is of cuda capability (\d+)\.(\d+)")
# torch >= 2.11 words both cases as one block: "Found GPU0 Tesla V100-PCIE-32GB which is of compute
# capability (CC) 7.0." then one line per code CC it was built for: "- 7.5 which supports hardware CC >=7.5,<8.0"
_CC_GPU_RE = lazy_re(r"Found GPU\s*(\d+) (.{1,100}?) which is of compute capability \(CC\) (\d+)\.(\d+)")
_CODE_CC_RE = lazy_re(r"^-\s*(\d+)\.(\d+) which supports hardware CC")
# The kernel's refusal when libnvidia/libcuda and the loaded module differ (dmesg, journal):
# "NVRM: API mismatch: the client has the version 367.44, but NVRM: this kernel module has the version 367.35."
_NVRM_MISMATCH_RE = lazy_re(r"API mismatch: the client has the version (\d+(?:\.\d+)+),? but\s+(?:\S*\s*NVRM:\s*)?"
                               r"this kernel module has the version (\d+(?:\.\d+)+)")
_NVRM_WORDS = "API mismatch: the client has the version"
_NO_DRIVER = "Found no NVIDIA driver on your system"
#: The start-up banner of NVIDIA's container images (NGC, nvidia/cuda) when no driver reached them.
_NGC_DRIVER_WORDS = "NVIDIA Driver Release"
_TOO_OLD_RE = lazy_re(r"NVIDIA driver on your system is too old\s*\(found version (\d{4,6})\)")
# torch's wording of a CUDA or cuDNN error whose code or versions messages.py may not read.
_CUDA_ERROR_WORDS_RE = lazy_re(r"cuda runtime error \(\d+\)|THCudaCheck FAIL"
                                  r"|cuDNN version (?:incompatibility|mismatch)")
# The sentence splitting a quoted warning's GPU name from what precedes it.
_NAME_CUT_RE = lazy_re(r"\.\s|:\s|[`\"']")
#: A paste joined into one line is read this far for the re-wrapped sentences that need no other word.
_JOINED_LIMIT = 200_000


@dataclass
class Scan:
    """What the signatures found in one paste, before it becomes facts."""

    messages: list[str] = field(default_factory=list)
    capabilities: dict[str, CC] = field(default_factory=dict)
    arch_list: list[str] | None = None
    code_ccs: list[str] = field(default_factory=list)
    driver_api: int | None = None
    cuda_init: dict[str, Any] | None = None
    cudnn: tuple[Triple, Triple] | None = None
    library_errors: list[str] = field(default_factory=list)
    companion: dict[str, str] = field(default_factory=dict)
    torch_cuda_said: str | None = None
    requirement: tuple[str, str | None] | None = None
    driver_req: tuple[str, str] | None = None
    ngc_no_driver: bool = False
    evidence: dict[str, Any] = field(default_factory=dict)  # what envdoctor/parsers/evidence.py's sentences say
    catalogued: list[dict[str, Any]] = field(default_factory=list)  # the catalogue rows the lines are instances of
    captured: dict[str, tuple[str, str]] = field(default_factory=dict)  # fact key -> (value, row id): a row's `writes`
    explained: set[str] = field(default_factory=set)  # lines some signature or catalogue row read


@dataclass(frozen=True)
class LineSignature:
    """A sentence on one line: ``find`` returns what it says (falsy when the line is not it), ``write``
    records that in the :class:`Scan`."""

    name: str
    find: Callable[[str], Any]
    write: Callable[[Scan, str, Any], None] | None = None
    message: bool = False  # the line is one of torch's CUDA messages
    evidence: bool = False  # alone, it makes the paste a report
    final: bool = False  # the line says nothing else: later signatures do not look at it


@dataclass(frozen=True)
class PasteSignature:
    """A sentence read once more from the paste joined into one line, after every line was read."""

    name: str
    read: Callable[[Sequence[str], Scan, dict[str, Reading]], None]
    evidence: Callable[[str], bool] | None = None  # on the whole paste joined: it makes the paste a report


def _gpu_name(text: str) -> str:
    """The GPU name out of a warning quoted in prose ("`UserWarning: NVIDIA RTX A6000")."""
    return re.sub(r"^.*?UserWarning:\s*", "", text.strip()).strip("`'\" ")


def _name_before(text: str, start: int) -> str:
    """The GPU name preceding a capability phrase at ``start``, back to the previous sentence or quote."""
    return _gpu_name(_NAME_CUT_RE.split(text[max(0, start - 80):start])[-1])


def _sm_cc(digits: str) -> CC:
    """``"120"`` (from ``sm_120``) -> ``(12, 0)``; the caller's pattern takes two digits at least."""
    return int(digits[:-1]), int(digits[-1])


def capability_warning(text: str) -> tuple[str, CC] | None:
    """(GPU name, capability) from "<name> with CUDA capability sm_120 is not compatible with the
    current PyTorch installation", anchored on the phrase (linear time on any line)."""
    if " with CUDA capability sm_" not in text:
        return None
    m = _CAP_TAIL_RE.search(text)
    if m is None:
        return None
    name = _name_before(text, m.start())
    return (name, _sm_cc(m.group(1))) if name else None


# -- writers ------------------------------------------------------------------------------------------
def _library_error(scan: Scan, text: str, _: list[dict[str, Any]]) -> None:
    if RUNTIME_HOOK in text:
        # The NVIDIA container runtime's hook (on the host, before the container starts) failed to dlopen the
        # driver's library: no process in the container loaded anything (container.runtime_library_error).
        return
    if text not in scan.library_errors:
        scan.library_errors.append(text)


def _ngc_banner(scan: Scan, _text: str, _found: bool) -> None:
    scan.ngc_no_driver = True


def _code_cc(scan: Scan, _: str, m: re.Match[str]) -> None:
    if (sm := f"sm_{m.group(1)}{m.group(2)}") not in scan.code_ccs:
        scan.code_ccs.append(sm)


def _cuda_init(scan: Scan, _: str, found: dict[str, Any]) -> None:
    scan.cuda_init = scan.cuda_init or found


def _cudnn(scan: Scan, _: str, found: tuple[Triple, Triple]) -> None:
    scan.cudnn = scan.cudnn or found


def _requirement(scan: Scan, _: str, found: tuple[str, str | None]) -> None:
    scan.requirement = scan.requirement or found


def _driver_requirement(scan: Scan, _: str, found: tuple[str, str]) -> None:
    scan.driver_req = scan.driver_req or found


def _companion(scan: Scan, _: str, found: tuple[str, str, str]) -> None:
    scan.companion[found[0]] = found[2]
    scan.torch_cuda_said = scan.torch_cuda_said or found[1]


def _capability(scan: Scan, _: str, found: tuple[str, CC]) -> None:
    scan.capabilities[found[0]] = found[1]


def _found_gpu(scan: Scan, _: str, m: re.Match[str]) -> None:
    scan.capabilities[_gpu_name(m.group(2))] = (int(m.group(3)), int(m.group(4)))


def _too_old(scan: Scan, _: str, m: re.Match[str]) -> None:
    scan.driver_api = int(m.group(1))


def _arch_list(scan: Scan, _: str, m: re.Match[str]) -> None:
    scan.arch_list = m.group(1).split()


def _words(words: str) -> Callable[[str], bool]:
    return lambda text: words in text


_VERSION_WORD_RE = lazy_re(r"\d+(?:\.\d+)*(?:[+.-][\w.+-]{1,40})?")

#: A paste repeating one message (every rank, a loop) records it this many times at most.
_MAX_CATALOGUED = 50


def _catalogued(scan: Scan, text: str, found: list[tuple[catalogue.Message, re.Match[str]]]) -> None:
    """Record each catalogue row the line is an instance of (once per row and line)."""
    line = redact_text(text.strip()[:500])
    for row, m in found:
        if len(scan.catalogued) >= _MAX_CATALOGUED:
            return
        if not any(c["id"] == row.id and c["line"] == line for c in scan.catalogued):
            scan.catalogued.append({"id": row.id, "cause": row.cause, "severity": row.severity,
                                    "judged_by": row.judged_by, "remedy": row.remedy, "emitter": row.emitter,
                                    "verified": row.verified, "role": row.role, "line": line,
                                    "args": [redact_text(str(g).strip()[:200]) for g in m.groups()]})
        for key, value in row.written(m).items():
            scan.captured.setdefault(key, (redact_text(value[:200]), row.id))


def _captured_value(key: str, text: str) -> Any:
    """A row's argument as the fact's value: a CUDA version for an int CUDA key ("12.2" -> 12020), a number for
    another int key, the text for a string key; None when it does not read as that."""
    from envdoctor.knowledge.factkeys import lookup

    spec = lookup(key)
    if spec is None or key.endswith("version") and not _VERSION_WORD_RE.fullmatch(text):
        return None  # a version key takes a version ("NOT_FOUND: was unable to find libcuda.so" is none)
    if spec.type.startswith("int"):
        if key.startswith("cuda.") or key.endswith("cuda_driver_version"):
            return cuda_to_int(text) if "." in text else (int(text) if text.isdigit() else None)
        return int(text) if text.isdigit() else None
    return text


def _write_captured(scan: Scan, out: dict[str, Reading]) -> None:
    """The facts the catalogue rows' arguments carry (their ``writes``), where nothing read them already."""
    for key, (text, row_id) in scan.captured.items():
        if key in out and out[key].ok:
            continue
        value = _captured_value(key, text)
        if value is not None:
            out[key] = ok(value, SOURCE, f"from the words of the message the catalogue calls {row_id}")


#: Every sentence read from a single line, in the order they are tried.
LINE_SIGNATURES: tuple[LineSignature, ...] = (
    LineSignature("loader-error", messages.loader_errors, _library_error, evidence=True),
    LineSignature("ngc-no-driver", _words(NGC_NO_DRIVER), _ngc_banner, evidence=True),
    LineSignature("nvrm-api-mismatch", _words(_NVRM_WORDS), evidence=True),  # its facts: PASTE_SIGNATURES
    # torch >= 2.11's "- 7.5 which supports hardware CC >=7.5,<8.0": one code CC, nothing else.
    LineSignature("code-cc", _CODE_CC_RE.match, _code_cc, final=True),
    LineSignature("cuda-error", messages.cuda_error, _cuda_init, message=True, evidence=True),
    LineSignature("cudnn-incompatibility", messages.cudnn_incompatibility, _cudnn, message=True, evidence=True),
    LineSignature("container-cuda-requirement", messages.container_cuda_requirement, _requirement, message=True,
                  evidence=True),
    LineSignature("container-driver-requirement", messages.container_driver_requirement, _driver_requirement,
                  message=True, evidence=True),
    LineSignature("companion-cuda", messages.companion_cuda, _companion, message=True, evidence=True),
    LineSignature("capability-phrase", _CAP_TAIL_RE.search, message=True),
    LineSignature("capability-warning", capability_warning, _capability, message=True, evidence=True),
    LineSignature("found-gpu", lambda text: _OLD_GPU_RE.search(text) or _CC_GPU_RE.search(text), _found_gpu,
                  message=True, evidence=True),
    LineSignature("driver-too-old", _TOO_OLD_RE.search, _too_old, message=True, evidence=True),
    LineSignature("arch-list", _ARCH_LIST_RE.search, _arch_list),
    LineSignature("no-driver", _words(_NO_DRIVER), message=True, evidence=True),
    LineSignature("cuda-initialization", lazy_re(r"CUDA initialization: .+").search, message=True),
    LineSignature("not-compiled-with-cuda", _words("Torch not compiled with CUDA enabled"), message=True),
    LineSignature("no-kernel-image", _words("no kernel image is available for execution on the device"), message=True),
    LineSignature("gpu-too-old", _words("PyTorch no longer supports this GPU because it is too old"), message=True),
    LineSignature("cuda-error-words", _CUDA_ERROR_WORDS_RE.search, message=True),
    # System tools, launchers, NCCL, DataLoader workers, cpp_extension and Windows loaders.
    *(LineSignature(name, find, write, evidence=True) for name, find, write in _evidence.SIGNATURES),
    # The message catalogue: every row of envdoctor/data/messages.json and every code string of errors.json, each
    # a pattern built from its emitter's format string (envdoctor/knowledge/catalogue.py); alone, a row makes the paste a report.
    LineSignature("catalogue", catalogue.match_line, _catalogued, evidence=True),
)


# -- sentences re-wrapped across lines ---------------------------------------------------------------------
def _joined(lines: Sequence[str], *words: str) -> str:
    """The paste (only the lines holding one of ``words``, when given) joined into one line."""
    return " ".join(line.strip() for line in lines if line.strip() and (not words or any(w in line for w in words)))


def _rewrapped_capability(lines: Sequence[str], scan: Scan, _: dict[str, Reading]) -> None:
    if scan.capabilities and scan.arch_list:
        return
    joined = _joined(lines)
    for m in _CAP_TAIL_RE.finditer(joined):
        if name := _name_before(joined, m.start()):
            scan.capabilities.setdefault(name, _sm_cc(m.group(1)))
            scan.messages.append(f"{name}{m.group(0)}")
    if not scan.arch_list and (arch := _ARCH_LIST_RE.search(joined)):
        scan.arch_list = arch.group(1).split()


def _nvrm_mismatch(lines: Sequence[str], _: Scan, out: dict[str, Reading]) -> None:
    nvrm = _NVRM_MISMATCH_RE.search(_joined(lines, "NVRM", "kernel module"))
    if nvrm and "driver.kernel_module_version" not in out:
        why = "from the kernel's 'NVRM: API mismatch' message"
        out["driver.userspace_version"] = ok(nvrm.group(1), SOURCE, why)
        out["driver.kernel_module_version"] = ok(nvrm.group(2), SOURCE, why)


def _rewrapped_driver_requirement(lines: Sequence[str], scan: Scan, _: dict[str, Reading]) -> None:
    if scan.driver_req is None and any(_NGC_DRIVER_WORDS in line for line in lines):
        scan.driver_req = messages.container_driver_requirement(_joined(lines, _NGC_DRIVER_WORDS, "was detected"))


def _rewrapped_companion(lines: Sequence[str], scan: Scan, _: dict[str, Reading]) -> None:
    # torchvision's sentence re-wrapped by a notebook.
    if scan.companion:
        return
    if found := messages.companion_cuda(_joined(lines, "CUDA", "torchvision", "TorchAudio")):
        scan.companion[found[0]] = found[2]
        scan.torch_cuda_said = found[1]
        scan.messages.append(f"PyTorch has CUDA {found[1]}; {found[0]} has CUDA {found[2]}")


#: Sentences read again from the joined paste, in this order, after every line was read.
PASTE_SIGNATURES: tuple[PasteSignature, ...] = (
    PasteSignature("capability-warning", _rewrapped_capability,
                   lambda joined: bool(_CAP_TAIL_RE.search(joined) and _ARCH_LIST_RE.search(joined))),
    PasteSignature("nvrm-api-mismatch", _nvrm_mismatch),
    PasteSignature("container-driver-requirement", _rewrapped_driver_requirement,
                   lambda joined: messages.container_driver_requirement(joined[:_JOINED_LIMIT]) is not None),
    PasteSignature("companion-cuda", _rewrapped_companion,
                   lambda joined: messages.companion_cuda(joined[:_JOINED_LIMIT]) is not None),
)


def _scan_line(text: str, scan: Scan) -> None:
    is_message = False
    for sig in LINE_SIGNATURES:
        found = sig.find(text)
        if not found:
            continue
        scan.explained.add(text)
        if sig.write is not None:
            sig.write(scan, text, found)
        is_message = is_message or sig.message
        if sig.final:
            break
    if is_message and text not in scan.messages:
        scan.messages.append(text)


def scan_messages(lines: Sequence[str], out: dict[str, Reading], explained: Iterable[str] = ()) -> None:
    """Facts from the sentences anywhere in the paste (torch's arch list and capabilities, the
    driver's CUDA version from 'driver too old', CUDA error codes, cuDNN versions, loader errors,
    container-runtime requirements), written into ``out``. ``explained``: lines a format's parser already
    read into facts (nvidia-smi's failure lines), which are no unexplained errors."""
    scan = Scan()
    scan.explained.update(explained)
    # A line repeated (every rank printing the same warning, a log looping) says nothing new.
    for line in dict.fromkeys(line.strip() for line in lines):
        _scan_line(line, scan)
    for sig in PASTE_SIGNATURES:
        sig.read(lines, scan, out)
    _write_container(scan, out)
    _write_companion(scan, out)
    _write_captured(scan, out)
    if not scan.library_errors:
        _rewrapped_dll_errors(lines, scan)
    if scan.library_errors:
        out["torch.library_errors"] = ok(scan.library_errors, SOURCE, "loader errors pasted with the report")
        out["torch.loader_failures"] = ok(loader_failures(scan.library_errors, errorlines.frame_packages(list(lines))),
                                          SOURCE, "the loader errors the text holds, read by the loader grammar")
    _write_text(lines, scan, out)
    _write_init(scan, out)
    _write_versions(scan, out)
    if "torch.cuda_available" in out or scan.messages:
        out["torch.cuda_available_messages"] = ok(scan.messages, SOURCE)
    _write_devices(scan, out)
    _write_compute_modes(lines, out)
    _evidence.rewrapped(list(lines), scan.evidence)
    _container_worker_shm(lines, scan)
    _evidence.write(scan.evidence, out)


def _rewrapped_dll_errors(lines: Sequence[str], scan: Scan) -> None:
    """Windows' 'Error loading "…\\x.dll" or one of its dependencies.' (torch/__init__.py's wording) wrapped by a
    logger over up to three lines (rich's handler: its "file.py:NN" column on the first): the joined sentence is
    the loader's error."""
    for i, raw in enumerate(lines):
        if "Error loading" not in raw or "dependencies" in raw or len(raw) > 400:
            continue
        parts = [x for x in lines[i:i + 3] if x.strip()]
        joined = " ".join(_evidence.unwrapped_line(x) for x in parts)
        end = joined.find("dependencies")
        if end > 0 and loader_errors_of(joined[:end + len("dependencies.")]):
            _library_error(scan, joined[:end + len("dependencies.")], [])
            scan.explained.update(x.strip() for x in parts)
            return


#: nvidia-smi's table prints each GPU's compute mode at the end of the GPU's second row, under "Compute M.", in its
#: short words (nvidia-smi's own abbreviations of nvmlComputeMode_t: "Default", "E. Thread", "Prohibited",
#: "E. Process"); ``nvidia-smi -q`` prints the long ones ("Exclusive_Process"), which its parser reads.
_TABLE_COMPUTE_MODE_RE = lazy_re(r"\|\s*\d+%\s+(Default|E\. Process|E\. Thread|Prohibited|Exclusive_Process|"
                                 r"Exclusive_Thread)\s*\|\s*$")
_TABLE_COMPUTE_MODES = {"default": 0, "e. thread": 1, "exclusive_thread": 1, "prohibited": 2, "e. process": 3,
                        "exclusive_process": 3}


def _write_compute_modes(lines: Sequence[str], out: dict[str, Reading]) -> None:
    """The compute modes of nvidia-smi's table (in GPU order) into the GPUs the table's parser read, where it did not
    read one: "E. Process" is Exclusive_Process, which a second CUDA process finds "busy or unavailable"."""
    modes = [_TABLE_COMPUTE_MODES[m.group(1).lower()] for line in lines
             if (m := _TABLE_COMPUTE_MODE_RE.search(line.rstrip()))]
    reading = out.get("nvml.gpus")
    if not modes or reading is None or not reading.ok or not isinstance(reading.value, (list, tuple)):
        return
    gpus = [dict(g) for g in reading.value]
    if len(gpus) != len(modes) or all(g.get("compute_mode") is not None for g in gpus):
        return
    for gpu, mode in zip(gpus, modes, strict=True):
        if gpu.get("compute_mode") is None:
            gpu["compute_mode"] = mode
    out["nvml.gpus"] = ok(gpus, reading.source, reading.detail)


#: The words that give a container more shared memory than its runtime's default: Docker's and Podman's
#: ``--shm-size`` / ``--ipc=host``, compose's ``shm_size:`` / ``ipc: host``, a pod's memory-backed /dev/shm.
_SHM_GIVEN_RE = lazy_re(r"--shm-size|--ipc[= ]host|\bshm_size\s*:|\bipc\s*:\s*['\"]?host|medium:\s*['\"]?Memory|"
                        r"mountPath:\s*['\"]?/dev/shm", re.IGNORECASE)
#: The causes of the rows that say a DataLoader worker died without saying why.
_WORKER_DIED = ("dataloader-worker-killed",)
_BYTES_OF_DEFAULT_SHM = 64 * 1024 * 1024


def _container_worker_shm(lines: Sequence[str], scan: Scan) -> None:
    """A DataLoader worker that died (killed, exited unexpectedly) in a container the text shows started without
    ``--shm-size`` / ``--ipc=host``: the container's /dev/shm is its runtime's default, 64 MB (Docker's ``docker run
    --shm-size`` reference, remedies.DOCKER_SHM_SIZE: the size of /dev/shm, 64MB by default), which DataLoader workers outgrow. The worker's line is
    then the shared-memory failure ``dataloader-shm`` judges (``torch.shm_errors``); outside a container, or with
    the flags (or a larger ``df -h /dev/shm``) shown, it stays what it says."""
    if scan.evidence.get("torch.shm_errors"):
        return
    died = [str(row["line"]) for row in scan.catalogued if row.get("cause") in _WORKER_DIED]
    if not died or any(_SHM_GIVEN_RE.search(line) for line in lines):
        return
    shm = (scan.evidence.get("tools") or {}).get("host.shm_size")
    if isinstance(shm, int) and shm > _BYTES_OF_DEFAULT_SHM:
        return
    if container_evidence(list(lines)) is None:
        return
    scan.evidence["torch.shm_errors"] = list(dict.fromkeys(died))[:50]


# -- the facts ------------------------------------------------------------------------------------------------
def loader_errors_of(text: str) -> list[dict[str, Any]]:
    return messages.loader_errors(text)


def loader_failures(texts: Sequence[str], frames: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """:func:`envdoctor.knowledge.messages.loader_failures` (the live probe reads torch's errors the same way)."""
    return messages.loader_failures(texts, frames)

def _write_text(lines: Sequence[str], scan: Scan, out: dict[str, Reading]) -> None:
    """The catalogue rows found (``text.messages``) and the error lines nothing explained (``text.error_lines``)."""
    if scan.catalogued:
        out["text.messages"] = ok(scan.catalogued, SOURCE, "the catalogue's messages (envdoctor/data/messages.json) "
                                  "the text holds")
    unexplained = [{"line": redact_text(e.line[:500]), "package": e.package, "rank": e.rank}
                   for e in errorlines.error_lines(list(lines)) if e.line not in scan.explained][:50]
    if unexplained:
        out["text.error_lines"] = ok(unexplained, SOURCE, "lines reporting an error that no signature or catalogue "
                                     "row explains, worst first")


def _write_container(scan: Scan, out: dict[str, Reading]) -> None:
    if scan.driver_req is not None:
        why = "from the container image's start-up driver check"
        out["container.driver_requirement"] = ok(scan.driver_req[0], SOURCE, why)
        if "nvml.driver_version" not in out or not out["nvml.driver_version"].ok:
            out["nvml.driver_version"] = ok(scan.driver_req[1], SOURCE, why)
    if scan.requirement is not None:
        why = "from the NVIDIA container runtime's requirement error"
        out["container.cuda_requirement"] = ok(scan.requirement[0], SOURCE, why)
        if scan.requirement[1] and scan.driver_api is None:
            scan.driver_api = cuda_to_int(scan.requirement[1])


def _write_companion(scan: Scan, out: dict[str, Reading]) -> None:
    if not scan.companion:
        return
    why = "from torchvision's / torchaudio's own CUDA-version check"
    out["torch.companion_cuda"] = ok(scan.companion, SOURCE, why)
    cuda = out.get("torch.cuda_version")
    if scan.torch_cuda_said and (cuda is None or not cuda.ok):
        out["torch.cuda_version"] = ok(scan.torch_cuda_said, SOURCE, why)


def _write_init(scan: Scan, out: dict[str, Reading]) -> None:
    if "cuda.init" in out:
        return
    if scan.cuda_init is not None:
        # What cudaGetDeviceCount() returned, as torch worded it: the same code cuInit gave.
        out["cuda.init"] = ok(scan.cuda_init, SOURCE, "error code from torch's CUDA initialisation message")
    elif scan.ngc_no_driver:
        out["cuda.init"] = missing(Reason.ABSENT, SOURCE, f"the container image says \"{NGC_NO_DRIVER}\"")
    elif any(_NO_DRIVER in t for t in scan.messages):
        # torch's "Found no NVIDIA driver on your system": cudaGetDeviceCount found no libcuda at all.
        out["cuda.init"] = missing(Reason.ABSENT, SOURCE, f"torch: \"{_NO_DRIVER}\" (no libcuda.so.1)")


def _write_versions(scan: Scan, out: dict[str, Reading]) -> None:
    if scan.cudnn is not None:
        compiled, runtime = scan.cudnn
        why = "from torch's cuDNN incompatibility error"
        out["torch.cudnn_version"] = ok(cudnn_to_int(runtime), SOURCE, why)
        out["torch.cudnn_build_version"] = ok(dotted(compiled), SOURCE, why)
    # The code CCs torch >= 2.11 lists are its get_arch_list() sm_ entries.
    arch_list = scan.arch_list or scan.code_ccs
    if arch_list:
        out["torch.arch_list"] = ok(arch_list, SOURCE, "from torch's capability warning")
    if scan.driver_api is not None:
        out["cuda.driver_version"] = ok(scan.driver_api, SOURCE, "from torch's 'driver too old' message")


def _write_devices(scan: Scan, out: dict[str, Reading]) -> None:
    if not scan.capabilities:
        return
    if not any(out.get(k) is not None and out[k].ok for k in ("torch.devices", "nvml.gpus")):
        # Only torch's warning names the GPUs: it is torch describing its own devices.
        out["torch.devices"] = ok([{"index": i, "name": name, "capability": list(cc)}
                                   for i, (name, cc) in enumerate(scan.capabilities.items())], SOURCE,
                                  "from torch's capability warning")
        return
    for key, field_name in (("torch.devices", "capability"), ("nvml.gpus", "compute_capability")):
        reading = out.get(key)
        if reading is None or not reading.ok:
            continue
        updated = []
        for dev in reading.value:
            dev = dict(dev)
            cap = _match_capability(str(dev.get("name", "")), scan.capabilities)
            if cap is not None:
                dev[field_name] = list(cap) if key == "torch.devices" else cc_text(cap)
            updated.append(dev)
        out[key] = ok(updated, reading.source, reading.detail)


def _match_capability(name: str, capabilities: dict[str, CC]) -> CC | None:
    for warned, cap in capabilities.items():
        if warned.endswith(name) or name.endswith(warned):
            return cap
    return None


def has_messages(lines: Sequence[str]) -> bool:
    """True when a line (or the paste re-joined) is a sentence that carries a fact on its own: such
    a paste is a small report even without collect_env or nvidia-smi around it."""
    evidence = [sig for sig in LINE_SIGNATURES if sig.evidence]
    if any(sig.find(line.strip()) for line in lines for sig in evidence):
        return True
    joined = _joined(lines)
    return any(sig.evidence(joined) for sig in PASTE_SIGNATURES if sig.evidence is not None)
