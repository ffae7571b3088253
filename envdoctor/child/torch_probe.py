"""Child: facts about the target interpreter and its torch (stdlib + torch only).

Run as ``python torch_probe.py '{"maps": true}'``. Imports torch exactly once; everything that can
hang (CUDA initialisation) is announced with ``stage`` first, so a hang says where it hung.

With ``"micro": {...}`` (the arguments of ``micro.py``) the microchecks follow in this process,
on the torch already imported: the facts end with the record ``{"_phase": "torch"}`` (the parent's
python probe is complete there), the microchecks' records follow, then the final one. A torch that
does not import is reported to both (``fatal`` is the microchecks' record of it).
"""

import os as _os
import sys as _sys

# The script's own folder holds _edchild and its siblings; PYTHONSAFEPATH=1 (or -P, -I) leaves it
# off sys.path, and the child must still start (never a "No module named '_edchild'").
_HERE = _os.path.dirname(_os.path.abspath(__file__))
if _HERE not in _sys.path[:1]:
    _sys.path.insert(0, _HERE)

import os
import platform
import re
import sys
import warnings

from _edchild import args, done, emit, error_text, exit_now, mapped_files, stage

# Distributions worth reporting (normalised names); plus every nvidia-* / cuda-* wheel.
RELEVANT = {
    "torch", "torchvision", "torchaudio", "triton", "pytorch-triton", "xformers", "flash-attn",
    "flash-attn-3", "vllm", "transformers", "accelerate", "deepspeed", "jax", "jaxlib", "cupy",
    "pynvml", "nvidia-ml-py", "numpy", "tensorflow", "onnxruntime-gpu", "bitsandbytes", "apex",
    "torch-tensorrt", "tensorrt", "sglang", "peft", "lightning", "pytorch-lightning", "timm",
    "gpu-envdoctor",
}
_PREFIXES = ("nvidia-", "cuda-", "cupy-", "jax-cuda", "jaxlib-cuda", "torch-")

# Library families read from /proc/self/maps after CUDA init: which copy was really loaded.
FAMILIES = {
    "cudart": r"libcudart\.so", "cublas": r"libcublas\.so", "cublasLt": r"libcublasLt\.so",
    "cudnn": r"libcudnn[a-z_]*\.so", "nccl": r"libnccl\.so", "nvJitLink": r"libnvJitLink\.so",
    "nvrtc": r"libnvrtc\.so", "cusparse": r"libcusparse\.so", "cufft": r"libcufft\.so",
    "curand": r"libcurand\.so", "cusolver": r"libcusolver\.so", "libcuda": r"libcuda\.so",
    "nvml": r"libnvidia-ml\.so", "cupti": r"libcupti\.so", "nvshmem": r"libnvshmem",
}


def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def packages():
    """Relevant installed distributions -> version, from the metadata folder names on sys.path.

    ``name-version.dist-info`` names carry both (PEP 427 escapes '-' in the name), so listing the
    folders is enough; parsing every METADATA file (importlib.metadata) costs ~1 ms per
    distribution, which is most of a second in a large conda environment."""
    found = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for folder in names:
            if folder.endswith(".dist-info"):
                name, _, version = folder[:-10].rpartition("-")
            elif folder.endswith(".egg-info"):
                name, _, rest = folder[:-9].partition("-")
                version = rest.split("-")[0]
            else:
                continue
            name = _norm(name)
            if name and version and (name in RELEVANT or name.startswith(_PREFIXES)):
                found.setdefault(name, version)
    return found


def loaded_libraries():
    """Family -> sorted mapped paths, from this process's memory map."""
    try:
        paths = mapped_files()
    except OSError as exc:
        return {"_error": str(exc)}
    out = {}
    for family, pattern in FAMILIES.items():
        rx = re.compile(r"(^|/)" + pattern)
        hits = sorted(p for p in paths if rx.search(p) and not p.endswith(" (deleted)"))
        if family == "cublas":
            hits = [p for p in hits if "cublasLt" not in p]
        if hits:
            out[family] = hits
    return out


def _failed(opts, record):
    """The final record when torch does not import (or is not installed)."""
    if isinstance(opts.get("micro"), dict):
        error = record.get("import_error") or "ModuleNotFoundError: No module named 'torch'"
        done(torch=record, fatal={"stage": "import torch", "error": error})
    else:
        done(torch=record)


def externally_managed():
    """PEP 668: the distribution manages this interpreter's packages (``EXTERNALLY-MANAGED`` in its
    stdlib folder) and pip refuses to install into it; never inside a venv. None: not read."""
    try:
        import sysconfig

        if sys.prefix != getattr(sys, "base_prefix", sys.prefix):
            return False  # a virtual environment: the marker does not apply (PEP 668)
        stdlib = sysconfig.get_path("stdlib")
        return bool(stdlib) and os.path.isfile(os.path.join(stdlib, "EXTERNALLY-MANAGED"))
    except Exception:
        return None


def main():
    opts = args()
    emit(python={
        "executable": sys.executable,
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "prefix": sys.prefix,
        "externally_managed": externally_managed(),
    })
    stage("packages")
    emit(packages=packages())

    stage("import torch")
    try:
        import torch
    except ModuleNotFoundError as exc:
        if exc.name == "torch":
            _failed(opts, {"installed": False})
            return
        _failed(opts, {"installed": True, "import_error": error_text(exc)})
        return
    except BaseException as exc:  # a broken torch raises anything (OSError for a missing .so)
        _failed(opts, {"installed": True, "import_error": error_text(exc)})
        return

    info = {
        "installed": True,
        "version": getattr(torch, "__version__", None),
        "path": os.path.dirname(getattr(torch, "__file__", "") or ""),
        "cuda_version": getattr(torch.version, "cuda", None),
        "hip_version": getattr(torch.version, "hip", None),
        "debug": bool(getattr(torch.version, "debug", False)),
        "git_version": getattr(torch.version, "git_version", None),
    }
    try:
        info["arch_list"] = list(torch.cuda.get_arch_list())
    except Exception as exc:
        info["arch_list_error"] = error_text(exc)
    try:
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        info["cudnn_version"] = cudnn
    except Exception as exc:  # "cuDNN version incompatibility: …" is itself the answer
        info["cudnn_error"] = error_text(exc)
    try:
        # What torch was compiled against; torch compares it with the loaded cuDNN on first use.
        compiled = torch._C._cudnn.getCompileVersion() if hasattr(torch._C, "_cudnn") else None
        info["cudnn_build_version"] = ".".join(str(p) for p in compiled) if compiled else None
    except Exception as exc:
        info["cudnn_build_error"] = error_text(exc)
    try:
        # As torch returns it: (2, 21, 5), (2, 21, 5, "suffix"), or an int (2708) from older torch.
        # The parent decodes it (envdoctor.knowledge.versions.nccl_text); this script stays stdlib-only.
        nccl = torch.cuda.nccl.version() if info["cuda_version"] else None
        info["nccl_version"] = list(nccl) if isinstance(nccl, tuple) else nccl
    except Exception as exc:
        info["nccl_error"] = error_text(exc)
    emit(torch=info)

    stage("torch.cuda.is_available")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            available = bool(torch.cuda.is_available())
        except Exception as exc:
            available = False
            caught.append(warnings.WarningMessage(error_text(exc), RuntimeError, "", 0))
    messages = [str(w.message).strip() for w in caught]
    info.update({"cuda_available": available, "cuda_available_messages": messages})
    emit(torch=info)

    devices = []
    if available:
        stage("torch.cuda.device_count")
        count = torch.cuda.device_count()
        info["device_count"] = count
        for i in range(count):
            stage("torch.cuda.get_device_properties(%d)" % i)
            try:
                props = torch.cuda.get_device_properties(i)
                devices.append({
                    "index": i, "name": props.name, "capability": [props.major, props.minor],
                    "total_memory": int(props.total_memory),
                    "multi_processor_count": int(getattr(props, "multi_processor_count", 0)),
                    "uuid": str(getattr(props, "uuid", "") or "") or None,
                })
            except Exception as exc:
                devices.append({"index": i, "error": error_text(exc)})
        if opts.get("init_cuda", True) and count:
            stage("torch.cuda.init")
            try:
                torch.zeros(1, device="cuda")
                torch.cuda.synchronize()
            except Exception as exc:
                info["cuda_init_error"] = error_text(exc)
    else:
        info["device_count"] = 0
    info["devices"] = devices
    if opts.get("maps", True):
        info["loaded_libraries"] = loaded_libraries()
    finish(opts, info, torch)


def finish(opts, info, torch):
    """The facts' last record; then the microchecks, when asked for, on the torch imported here."""
    micro_opts = opts.get("micro")
    if not isinstance(micro_opts, dict):
        done(torch=info)
        return
    emit(torch=info, _phase="torch")
    import micro

    micro.run(micro_opts, torch)


if __name__ == "__main__":
    main()
    exit_now()
