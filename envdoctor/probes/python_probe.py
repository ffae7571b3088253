"""Probe the target interpreter and its torch, in a child process with a deadline."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from envdoctor.knowledge import versions
from envdoctor.process import childargs
from envdoctor.process.host import ChildResult, Host

from ..model import Reading, Reason, missing, ok
from . import torch_child
from .spec import Options, ProbeSpec

SOURCE = "child:torch_probe"

PYTHON_KEYS = ("python.executable", "python.version", "python.implementation", "python.packages",
               "python.externally_managed")
TORCH_FIELDS = {
    # fact key suffix -> (child field, error field that explains its absence)
    "path": ("path", None),
    "cuda_version": ("cuda_version", None),
    "hip_version": ("hip_version", None),
    "debug": ("debug", None),
    "arch_list": ("arch_list", "arch_list_error"),
    "cudnn_version": ("cudnn_version", "cudnn_error"),
    "cudnn_build_version": ("cudnn_build_version", "cudnn_build_error"),
    "nccl_version": ("nccl_version", "nccl_error"),
    "cuda_available": ("cuda_available", None),
    "cuda_available_messages": ("cuda_available_messages", None),
    "device_count": ("device_count", None),
    "devices": ("devices", None),
    "cuda_init_error": ("cuda_init_error", None),
    "loaded_libraries": ("loaded_libraries", None),
}
#: The texts of torch's own failures, as values, so checks read them as facts (not a reading's detail).
ERROR_KEYS = ("torch.import_error", "torch.cudnn_error")
#: The loader failures in those texts, parsed once here by the loader grammar (checks read the structure).
LOADER_KEY = "torch.loader_failures"
TORCH_KEYS = ("torch.version", *(f"torch.{k}" for k in TORCH_FIELDS), *ERROR_KEYS, LOADER_KEY)
#: Fields the child reports raw (it imports nothing of envdoctor) and the parent decodes.
DECODE: dict[str, Callable[[Any], Any]] = {"nccl_version": versions.nccl_text}


def readings_from_child(result: ChildResult) -> dict[str, Reading]:
    """Turn what the torch child printed (possibly partial) into readings."""
    out = _readings(result)
    out[LOADER_KEY] = _loader_failures(out)
    return out


def _loader_failures(out: Mapping[str, Reading]) -> Reading:
    """The loader failures in torch's import error, its CUDA initialisation error and its CUDA messages."""
    from envdoctor.knowledge.messages import loader_failures  # the torch child cannot import envdoctor

    texts: list[str] = []
    torch_own: list[str] = []  # texts of torch's own import: what failed to load, torch needed
    read = out.get("torch.import_error")
    version = out.get("torch.version")
    if (read is None or not read.ok) and not (version is not None and version.reason is Reason.FAILED):
        why = version.reason if version is not None and version.reason else Reason.SKIPPED
        return missing(why, SOURCE, "torch's error texts were not read")
    for key in ("torch.import_error", "torch.cuda_init_error"):
        reading = out.get(key)
        if reading is not None and reading.ok and reading.value:
            texts.append(str(reading.value))
            if key == "torch.import_error":
                torch_own.append(str(reading.value))
    if version is not None and not version.ok and version.reason is Reason.FAILED and version.detail:
        texts.append(version.detail)  # the import failed: its text
        torch_own.append(version.detail)
    said = out.get("torch.cuda_available_messages")
    if said is not None and said.ok:
        texts.extend(str(t) for t in said.value or ())
    found = loader_failures(texts, {t.strip(): "torch" for t in torch_own})
    return ok(found, SOURCE, "the loader failures in torch's own error texts")


def _python_reading(field: str, value: Any) -> Reading:
    if value is None and field == "externally_managed":  # the child could not tell
        return missing(Reason.FAILED, SOURCE, "the child could not read the EXTERNALLY-MANAGED marker")
    return ok(value, SOURCE)


def _readings(result: ChildResult) -> dict[str, Reading]:
    out: dict[str, Reading] = {}
    failure = None if result.ok else missing(result.reason or Reason.FAILED, SOURCE, result.explain())
    py: Mapping[str, Any] = result.data.get("python") or {}
    for key in PYTHON_KEYS:
        field = key.split(".", 1)[1]
        if field == "packages":
            if "packages" in result.data:
                out[key] = ok(result.data["packages"], SOURCE)
            else:
                out[key] = failure or missing(Reason.FAILED, SOURCE, "child reported no packages")
        elif field in py:
            out[key] = _python_reading(field, py[field])
        else:
            out[key] = failure or missing(Reason.FAILED, SOURCE, "child reported no Python facts")

    torch: Mapping[str, Any] = result.data.get("torch") or {}
    if torch.get("installed") is False:
        out["torch.version"] = missing(Reason.ABSENT, SOURCE, f"torch is not installed for {py.get('executable', 'the target interpreter')}")
        for key in TORCH_KEYS[1:]:
            out[key] = missing(Reason.SKIPPED, SOURCE, "torch is not installed")
        return out
    if torch.get("import_error"):
        out["torch.version"] = missing(Reason.FAILED, SOURCE, torch["import_error"])
        for key in TORCH_KEYS[1:]:
            out[key] = missing(Reason.SKIPPED, SOURCE, "import torch failed")
        out["torch.import_error"] = ok(str(torch["import_error"]), SOURCE)
        return out
    if "version" in torch:
        out["torch.version"] = ok(torch["version"], SOURCE)
    else:
        out["torch.version"] = failure or missing(Reason.FAILED, SOURCE, "child reported no torch facts")
    for suffix, (field, err_field) in TORCH_FIELDS.items():
        key = f"torch.{suffix}"
        if field in torch:
            out[key] = ok(DECODE[field](torch[field]) if field in DECODE else torch[field], SOURCE)
        elif err_field and torch.get(err_field):
            out[key] = missing(Reason.FAILED, SOURCE, torch[err_field])
        elif suffix == "cuda_init_error":
            out[key] = failure or ok(None, SOURCE)
        elif suffix == "loaded_libraries" and failure is None:
            out[key] = missing(Reason.SKIPPED, SOURCE, "memory map not read")
        else:
            out[key] = failure or missing(Reason.FAILED, SOURCE, f"child did not report {field}")
    imported = "version" in torch
    out["torch.import_error"] = ok(None, SOURCE) if imported else (failure or missing(
        Reason.FAILED, SOURCE, "child did not report whether torch imports"))
    out["torch.cudnn_error"] = ok(torch.get("cudnn_error") or None, SOURCE) if imported else out["torch.import_error"]
    return out


NOISE_KEY = "torch.import_noise_bytes"
TARGET_KEY = "python.target"


def _target(host: Host, options: Options) -> Reading:
    """Which interpreter was examined and why (chosen by :mod:`envdoctor.process.target` before probing)."""
    return ok({"path": options.python or host.python,
               "chosen_by": options.python_chosen_by or "envdoctor's own interpreter"}, "options")


def probe_python(host: Host, options: Options) -> dict[str, Reading]:
    # `check --distributed` hands in its rank child, which runs this same script after its own
    # `import torch`: one import per rank instead of two (Options.torch_probe).
    # With the microchecks planned, one child imports torch for both (probes/torch_child.py): the
    # readings are complete at the end of its facts phase, the microchecks running on after it.
    shared = options.torch_probe
    deadline = PROBE.deadline(options)
    if shared is not None:
        result = shared(deadline)
    elif (one := torch_child.start(host, options)) is not None:
        result = one.first(childargs.FACTS_PHASE, deadline)
    else:
        result = host.run_child(childargs.TORCH_SCRIPT, childargs.torch_args(), timeout=deadline,
                                python=options.python)
    if result.status == "absent":
        reading = missing(Reason.ABSENT, SOURCE, result.detail)
        return {**{k: reading for k in (*PYTHON_KEYS, *TORCH_KEYS, NOISE_KEY)}, TARGET_KEY: _target(host, options)}
    out = readings_from_child(result)
    out[TARGET_KEY] = _target(host, options)
    # What `import torch` (and whatever it loads) printed besides the child's records: a flood
    # is reported as one, never mistaken for a failed import.
    out[NOISE_KEY] = ok(result.noise, SOURCE)
    return out


# torch import alone takes 1-3 s warm and can take 20+ s on a cold network filesystem.
PROBE = ProbeSpec("python", probe_python, PYTHON_KEYS + TORCH_KEYS + (NOISE_KEY, TARGET_KEY), scale=torch_child.FACTS_SCALE,
                  critical=True)
PROBES = [PROBE]
