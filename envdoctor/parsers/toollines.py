"""The lines known tools print about the environment they found, and the command lines that set it.

Each tool's line is matched on the fixed words of its own format string (never one ticket's wording):

* llama.cpp / ggml (ggml-org/llama.cpp, ggml/src/ggml-cuda/ggml-cuda.cu, ``ggml_cuda_init``):
  ``"%s: found %d " GGML_CUDA_NAME " devices:"`` and ``"  Device %d: %s, compute capability %d.%d, VMM: %s"``
  (later releases append ``", VRAM: %zu MiB"``).
* Ollama (ollama/ollama, discover/types.go ``LogDetails`` and discover/gpu.go): the slog line
  ``msg="inference compute" id=… library=cuda compute=8.6 driver=12.4 name="…" total="24.0 GiB"`` (newer
  releases: ``name=CUDA0 description="NVIDIA …"``; ``library=cpu`` when it found no GPU). ``driver`` is the CUDA
  version the driver supports (cuDriverGetVersion), ``compute`` the compute capability.
* TensorFlow (tensorflow/tensorflow, tensorflow/core/common_runtime/gpu/gpu_device.cc, ``BaseGPUDeviceFactory``
  and ``GetShortDeviceDescription``): ``Created device <name> with <N> MB memory:  -> device: %d, name: %s, pci
  bus id: %s, compute capability: %d.%d`` (also in ``physical_device_desc: "device: 0, name: …"``).
* ComfyUI (comfyanonymous/ComfyUI, comfy/model_management.py): ``"Total VRAM {:0.0f} MB, total RAM {:0.0f}
  MB"`` and ``"pytorch version: {}"`` (its ``Device: cuda:0 NAME : cudaMallocAsync`` line is a statement,
  :mod:`envdoctor.parsers.statements`).
* AUTOMATIC1111's web UI footer (AUTOMATIC1111/stable-diffusion-webui, modules/ui.py ``versions_html``):
  ``version: … • python: … • torch: … • xformers: … • gradio: … • checkpoint: …``.
* vLLM (vllm-project/vllm, vllm/engine/llm_engine.py and vllm/v1/engine/core.py): ``Initializing an LLM engine
  (v%s) with config`` / ``Initializing a V1 LLM engine (v%s) with config``; vllm/entrypoints/openai/api_server.py:
  ``vLLM API server version %s``.
* ``conda info`` (conda/conda, conda/cli/main_info.py): ``conda version : X``, ``python version : 3.11.5.final.0``
  and the virtual package ``__cuda=12.2=0`` (conda/plugins/virtual_packages/cuda.py: the CUDA version the driver
  supports).
* ``kubectl describe node`` (kubernetes/kubectl, pkg/describe/describe.go): the ``Capacity:`` and
  ``Allocatable:`` blocks, one ``nvidia.com/gpu:  N`` row each (the NVIDIA device plugin's resource name).
* ``lspci`` without ``-nn`` (pciutils): an NVIDIA display controller on the bus, kept as a tool line.
* ``wsl -l -v`` (microsoft/WSL): the ``NAME STATE VERSION`` table, the default distribution marked ``*``.
* TensorFlow's ``tf.config.list_physical_devices('GPU')`` and what it returned (``[]``), its GPU guide's ``Num GPUs
  Available: N``; pip's ``X V does not provide the extra 'E'`` (pypa/pip's resolver).
* A Compose file's ``services:`` block: whether a service asks for GPUs (``deploy.resources.reservations.devices``
  with ``driver: nvidia`` / ``capabilities: [gpu]``, ``gpus:``, ``runtime: nvidia``).
* ``pip show NAME`` (pypa/pip, src/pip/_internal/commands/show.py): ``Name: %s`` then ``Version: %s``.
* Issue forms and ``jax.print_environment_info()`` (jax-ml/jax, jax/_src/environment_info.py: ``jax:    X``,
  ``jaxlib: X``) stating the version of a framework other than torch: ``TensorFlow version: 2.15.0``.
* Container runs: ``docker|podman|nvidia-docker run …`` (kept as a tool line; parsers/__init__.py reads whether
  it asks for GPUs).
* Command lines: ``VAR=value command`` and ``export VAR=value`` / ``set VAR=value`` / ``docker run -e VAR=value``
  for the variables that change the GPU stack (CUDA_*, NCCL_*, NVIDIA_*, TORCH_*, PYTORCH_*, …), kept as
  ``text.env_assignments``: what the text says was set, never the whole environment (a variable it does not show
  is unknown, not unset, so ``env.vars`` is not written from it).

What is read is evidence: every tool line found is kept in ``text.tools`` (tool, the line), and the facts a
line states (the GPUs, the driver's CUDA version, torch's version) fill only facts no report or statement read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from envdoctor.knowledge.versions import cuda_to_int, local_tag, variant_cuda

from ..lazyre import lazy_re
from ..model import Reading, ok
from ..redact import redact_text
from ._util import not_read
from .statements import gpu_value

SOURCE = "tool log"
KEYS = ("text.tools", "text.frameworks", "text.env_assignments", "text.node_gpus", "text.wsl_distros", "text.tensorflow_gpus",
        "text.pip_missing_extras", "text.compose_gpus", "nvml.gpus", "nvml.device_count",
        "cuda.driver_version", "torch.version", "torch.cuda_version", "python.version", "torch.cuda_available")

#: A text is read this far for tool lines (their lines are short, a log repeats them).
_MAX_LINE = 2000

_GGML_FOUND_RE = lazy_re(r"\bfound (\d{1,2}) (?:CUDA|ROCm|MUSA) devices?:")
_GGML_DEVICE_RE = lazy_re(r"^\s*Device (\d{1,2}): (.{2,120}?)(?:\(\d+(?:\.\d+)?M\))?, compute capability (\d{1,2})\.(\d)"
                          r"(?:, VMM: (?:yes|no))?")
_OLLAMA_RE = lazy_re(r'msg="inference compute"')
# From a word's start only: tried inside a long word it was quadratic (400 KB of one Ollama line: 7.8 s).
_SLOG_PAIR_RE = lazy_re(r'(?<!\w)(\w+)=(?:"([^"]*)"|(\S*))')
_TF_DEVICE_RE = lazy_re(r"device: (\d{1,2}), name: (.{2,120}?), pci bus id: ([0-9a-fA-F:.]+), "
                        r"compute capability: (\d{1,2})\.(\d)")
_COMFY_VRAM_RE = lazy_re(r"\bTotal VRAM (\d+) MB, total RAM (\d+) MB")
_A1111_RE = lazy_re(r"\bversion:\s*\S+\s*•\s*python:\s*(\S+)\s*•\s*torch:\s*(\S+)(?:\s*•\s*xformers:\s*(\S+))?")
_VLLM_RE = lazy_re(r"Initializing an? (?:V1 )?LLM engine \(v(\d+\.\d+[\w.+-]*)\) with config"
                   r"|vLLM API server version (\d+\.\d+[\w.+-]*)")
_CONDA_RE = lazy_re(r"^\s*(conda version|python version|virtual packages)\s*:\s*(\S.*)$")
_CONDA_CUDA_RE = lazy_re(r"__cuda=(\d+\.\d+)")
_CONDA_PY_RE = lazy_re(r"^(\d+\.\d+\.\d+)")
_NODE_BLOCK_RE = lazy_re(r"^\s*(Capacity|Allocatable):\s*$")
_LSPCI_RE = lazy_re(r"(?:^|\s)[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]\s+(?:VGA compatible|3D|Display) controller:\s*"
                    r"NVIDIA Corporation\b", re.IGNORECASE)
_PIP_NAME_RE = lazy_re(r"^Name: ([A-Za-z0-9][\w.-]{0,80})\s*$")
_PIP_VERSION_RE = lazy_re(r"^Version: (\d+(?:\.\d+)+[\w.+-]*)\s*$")
_BLOCK_HEADER_RE = lazy_re(r"^\s*[A-Z][\w ]{1,40}:\s*$")
_NODE_GPU_RE = lazy_re(r"^\s*nvidia\.com/gpu:\s+(\d+)\s*$")
# A framework's version in an issue form or jax.print_environment_info(): "TensorFlow version: 2.15.0",
# "- JAX version: 0.4.23", "jaxlib: 0.4.23", "xformers: 0.0.23.post1".
_FRAMEWORKS = {"tensorflow": "tensorflow", "tensorflow-gpu": "tensorflow", "tf": "tensorflow", "jax": "jax",
               "jaxlib": "jaxlib", "xformers": "xformers", "vllm": "vllm", "flash-attn": "flash-attn",
               "flash_attn": "flash-attn", "bitsandbytes": "bitsandbytes", "triton": "triton", "ollama": "ollama",
               "keras": "keras", "onnxruntime-gpu": "onnxruntime-gpu", "onnxruntime": "onnxruntime",
               "tensorrt": "tensorrt", "paddlepaddle": "paddlepaddle", "paddle": "paddlepaddle", "mxnet": "mxnet"}
_PIP_INSTALL_RE = lazy_re(r"\bpip3?\s+install\s+(.{1,300})")
_PINNED_RE = lazy_re(r"(?<![\w.-])([A-Za-z][\w.-]{1,40})==(\d+\.\d+(?:\.\d+)?[\w.+-]*)")
_FRAMEWORK_RE = lazy_re(r"^[\s>*+•|#-]*(?:\*\*)?(TensorFlow(?:-gpu)?|tf|JAX|jaxlib|xformers|vLLM|flash[-_]attn|"
                        r"bitsandbytes|triton|Ollama|Keras|onnxruntime(?:-gpu)?|TensorRT|PaddlePaddle|Paddle|MXNet)"
                        r"(?:\s+version)?(?:\*\*)?\s*(?::|==|=|\|)\s*(?:\*\*)?\s*v?(\d+\.\d+(?:\.\d+)?[\w.+-]*)\s*\|?\s*$",
                        re.IGNORECASE)
#: The variables a command line may set that change what the GPU stack does (the host probe's watch list names
#: the same families); anything else (a token, a path of the user's) is not kept.
_ENV_NAME_RE = lazy_re(r"^(?:CUDA_\w+|NCCL_\w+|NVIDIA_\w+|TORCH_\w+|PYTORCH_\w+|CUBLAS_\w+|CUDNN_\w+|"
                       r"LD_LIBRARY_PATH|LD_PRELOAD|OMP_NUM_THREADS|XLA_\w+|TF_\w+|JAX_\w+|HIP_VISIBLE_DEVICES|"
                       r"ROCR_VISIBLE_DEVICES|OLLAMA_\w+|GGML_\w+|VLLM_\w+|HF_HUB_\w+|LOCAL_RANK|RANK|WORLD_SIZE|"
                       r"MASTER_ADDR|MASTER_PORT|GLOO_\w+|UCX_\w+|FI_\w+|NVTE_\w+|MIOPEN_\w+|HSA_\w+)$")
_ASSIGN_RE = lazy_re(r"(?:^|\s)(?:export\s+|set\s+|\$env:|-e\s+|--env[=\s]+)?([A-Z][A-Z0-9_]{1,60})=(\"[^\"]*\"|'[^']*'|\S*)")
# A variable whose name is its stack's own (NCCL's switches, CUDA's and the NVIDIA runtime's device lists) set in a
# sentence or a quoted command ("Run 'CUDA_VISIBLE_DEVICES=5 python3 train.py'"), or in Python (os.environ["X"] = "1").
_STACK_NAMES = r"NCCL_[A-Z][A-Z0-9_]{1,40}|CUDA_VISIBLE_DEVICES|CUDA_DEVICE_ORDER|NVIDIA_VISIBLE_DEVICES"
_NCCL_ASSIGN_RE = lazy_re(rf"(?<![\w$])({_STACK_NAMES})=(\"[^\"]*\"|'[^']*'|[\w.,:-]+)")
_ENVIRON_ASSIGN_RE = lazy_re(rf"os\.environ\[\s*([\"'])({_STACK_NAMES})\1\s*\]\s*=\s*([\"'])([\w.,:-]*)\3")
# A command line whose only output is torch.cuda.is_available(): `python -c "import torch;
# print(torch.cuda.is_available())"` (also inside `docker run … python -c …`); the next line is what it printed.
_PRINTS_AVAILABLE_RE = lazy_re(r"^(?:\S*[$#>]\s+)?(?:sudo\s+)?\S*(?:python[\d.]*|docker|podman)(?:\.exe)?\s.*"
                               r"print\(\s*torch\.cuda\.is_available\(\)\s*\)")
_WSL_HEADER_RE = lazy_re(r"^\s*NAME\s+STATE\s+VERSION\s*$")
_WSL_ROW_RE = lazy_re(r"^\s*(\*)?\s*([\w.-]{1,60})\s+(Running|Stopped|Installing|Uninstalling|Converting)\s+([12])\s*$")
# TensorFlow's GPU list (tensorflow/python/framework/config.py ``list_physical_devices``): the call, then "[]" or
# "[PhysicalDevice(name='/physical_device:GPU:0', device_type='GPU')]"; TensorFlow's GPU guide prints
# "Num GPUs Available: " and its length.
_TF_LIST_GPUS_RE = lazy_re(r"list_physical_devices\(\s*(?:device_type\s*=\s*)?['\"]GPU['\"]\s*\)")
_TF_NUM_GPUS_RE = lazy_re(r"^\s*Num GPUs Available:?\s*(\d{1,2})\s*$")
# pip's resolver (pypa/pip, src/pip/_internal/resolution/resolvelib; tests/functional/test_install_extras.py):
# "%s %s does not provide the extra
# '%s'" when the wheel it picked has no such extra (tensorflow[and-cuda] on Windows).
_PIP_EXTRA_RE = lazy_re(r"\b([A-Za-z0-9][\w.-]{0,80}) (\d+(?:\.\d+)+[\w.+-]*) does not provide the extra '([\w.-]{1,40})'")
_COMPOSE_SERVICES_RE = lazy_re(r"^services:\s*$")
# A YAML line as a paste keeps it (its indentation may be gone): "key:", "key: value", "- item", "- key: value".
_YAML_LINE_RE = lazy_re(r"^(?:-\s+)?[\w.\-/\"']{1,80}\s*:(?:\s.*)?$|^-\s+\S")
_COMPOSE_GPU_RE = lazy_re(r"^\s*(?:-\s*)?(?:runtime:\s*nvidia\b|driver:\s*nvidia\b|gpus:|capabilities:.*\bgpu\b|"
                          r"-?\s*gpu\s*$|.*NVIDIA_VISIBLE_DEVICES|.*nvidia\.com/gpu)")
_CONTAINER_RUN_RE = lazy_re(r"^(?:\S*[$#>]\s+)?(?:sudo\s+)?(docker|podman|nvidia-docker)\s+(?:container\s+)?(?:run|create)\b")
_COMMAND_START_RE = lazy_re(r"^(?:\([^)]*\)\s*)?(?:PS\s+)?(?:\S*[$#>]\s+)?(?:sudo\s+)?(?:export\s|set\s|\$env:|[A-Z][A-Z0-9_]{1,60}=|"
                            r"(?:docker|podman|nvidia-docker)\s+(?:run|create)\b)")


def _gpu(name: str, index: int, cc: str | None) -> dict[str, Any] | None:
    """A GPU record as collect_env writes it, when ``name`` is a product the catalogue knows."""
    said = gpu_value(name.strip().strip('"'))
    if said is None:
        return None
    record: dict[str, Any] = {"index": index, "name": said[0]}
    if cc:
        record["compute_capability"] = cc
    return record


def _slog(line: str) -> dict[str, str]:
    return {m.group(1): m.group(2) if m.group(2) is not None else m.group(3) for m in _SLOG_PAIR_RE.finditer(line)}


def _value_of(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


class _Found:
    def __init__(self) -> None:
        self.tools: list[dict[str, str]] = []
        self.gpus: dict[int, dict[str, Any]] = {}
        self.gpu_lines: list[str] = []
        self.device_count: tuple[int, str] | None = None
        self.driver_cuda: tuple[str, str] | None = None
        self.torch: tuple[str, str] | None = None
        self.python: tuple[str, str] | None = None
        self.frameworks: dict[str, str] = {}
        self.env: dict[str, str] = {}
        self.node: dict[str, int] = {}
        self.cuda_available: tuple[bool, str] | None = None
        self.wsl: list[dict[str, Any]] = []
        self.tf_gpus: tuple[int, str] | None = None
        self.compose: list[Any] | None = None  # [asks for GPUs, the line that says so]
        self.ollama_ids: list[str] = []  # the GPUs Ollama's "inference compute" lines named, in order
        self.missing_extras: list[dict[str, str]] = []

    def tool(self, name: str, line: str) -> None:
        entry = {"tool": name, "line": redact_text(line.strip()[:300])}
        if entry not in self.tools and len(self.tools) < 50:
            self.tools.append(entry)

    def gpu(self, record: dict[str, Any] | None, line: str, tool: str) -> None:
        if record is not None and record["index"] not in self.gpus:
            self.gpus[record["index"]] = record
            self.gpu_lines.append(f"{tool}'s start-up line {line.strip()[:160]!r}")


def _where(line: str) -> str:
    return line.strip()[:160]


def _ggml(line: str, found: _Found, _block: list[str | None]) -> bool:
    if "found" in line and (m := _GGML_FOUND_RE.search(line)):
        found.tool("llama.cpp", line)
        found.device_count = found.device_count or (int(m.group(1)), _where(line))
        return True
    if "compute capability" in line and (m := _GGML_DEVICE_RE.match(line)):
        found.tool("llama.cpp", line)
        found.gpu(_gpu(m.group(2), int(m.group(1)), f"{m.group(3)}.{m.group(4)}"), line, "llama.cpp")
        return True
    return False


def _tensorflow(line: str, found: _Found, _block: list[str | None]) -> bool:
    if "compute capability" in line and (m := _TF_DEVICE_RE.search(line)):
        found.tool("tensorflow", line)
        found.gpu(_gpu(m.group(2), int(m.group(1)), f"{m.group(4)}.{m.group(5)}"), line, "tensorflow")
        return True
    return False


def _ollama(line: str, found: _Found, _block: list[str | None]) -> bool:
    if "inference compute" not in line or not _OLLAMA_RE.search(line):
        return False
    found.tool("ollama", line)
    pairs = _slog(line)
    if pairs.get("library", "").lower() == "cuda":  # "cpu" when it found no GPU: the line says only that
        name = pairs.get("description") or pairs.get("name") or ""
        cc = pairs.get("compute") or ""
        # Ollama prints the line again at each start (its "time=" differs): one GPU per id, not one per line.
        gpu_id = pairs.get("id") or name
        if gpu_id not in found.ollama_ids:
            found.ollama_ids.append(gpu_id)
            found.gpu(_gpu(name, len(found.ollama_ids) - 1, cc if re.fullmatch(r"\d{1,2}\.\d", cc) else None), line,
                      "ollama")
        driver = pairs.get("driver", "")
        if re.fullmatch(r"\d{1,2}\.\d", driver) and driver != "0.0":
            found.driver_cuda = found.driver_cuda or (driver, _where(line))
    return True


def _comfyui(line: str, found: _Found, _block: list[str | None]) -> bool:
    if "Total VRAM" in line and _COMFY_VRAM_RE.search(line):
        found.tool("comfyui", line)
        return True
    return False


def _a1111(line: str, found: _Found, _block: list[str | None]) -> bool:
    if "•" not in line or not (m := _A1111_RE.search(line)):
        return False
    found.tool("stable-diffusion-webui", line)
    if re.fullmatch(r"\d+\.\d+\.\d+", m.group(1)):
        found.python = found.python or (m.group(1), _where(line))
    if re.match(r"\d+\.\d+", m.group(2)):
        found.torch = found.torch or (m.group(2), _where(line))
    if m.group(3) and re.match(r"\d+\.\d+", m.group(3)):
        found.frameworks.setdefault("xformers", m.group(3))
    return True


def _vllm(line: str, found: _Found, _block: list[str | None]) -> bool:
    if ("vLLM" in line or "LLM engine" in line) and (m := _VLLM_RE.search(line)):
        found.tool("vllm", line)
        found.frameworks.setdefault("vllm", m.group(1) or m.group(2))
        return True
    return False


def _conda_info(line: str, found: _Found, block: list[str | None]) -> bool:
    if " : " in line and (m := _CONDA_RE.match(line)):
        found.tool("conda info", line)
        block[0] = "conda" if m.group(1) == "virtual packages" else None
        if m.group(1) == "python version" and (py := _CONDA_PY_RE.match(m.group(2))):
            found.python = found.python or (py.group(1), _where(line))
        elif m.group(1) == "virtual packages" and (cu := _CONDA_CUDA_RE.search(m.group(2))):
            found.driver_cuda = found.driver_cuda or (cu.group(1), _where(line))
        return True
    if block[0] == "conda" and "__cuda=" in line and (cu := _CONDA_CUDA_RE.search(line)):
        found.driver_cuda = found.driver_cuda or (cu.group(1), _where(line))
        return True
    return False


def _kubectl_node(line: str, found: _Found, block: list[str | None]) -> bool:
    if m := _NODE_BLOCK_RE.match(line):
        block[0] = m.group(1).lower()
        return True
    if block[0] not in ("capacity", "allocatable"):
        return False
    if "nvidia.com/gpu" in line and (m := _NODE_GPU_RE.match(line)):
        found.tool("kubectl describe node", line)
        found.node.setdefault(str(block[0]), int(m.group(1)))
        return True
    if _BLOCK_HEADER_RE.match(line):
        block[0] = None  # the next block ("System Info:", "Allocated resources:")
    return False


def _pip_show(line: str, found: _Found, block: list[str | None]) -> bool:
    """`pip show NAME` (pypa/pip, src/pip/_internal/commands/show.py): "Name: %s" then "Version: %s"."""
    if line.startswith("Name: ") and (m := _PIP_NAME_RE.match(line)):
        block[0] = f"pip:{m.group(1).lower().replace('_', '-')}"
        return True
    if not (block[0] or "").startswith("pip:") or not line.startswith("Version: "):
        return False
    name, block[0] = str(block[0])[4:], None
    if (m := _PIP_VERSION_RE.match(line)) is None:
        return True
    found.tool("pip show", line)
    if name == "torch":
        found.torch = found.torch or (m.group(1), f"pip show torch: {_where(line)}")
    elif name in _FRAMEWORKS:
        found.frameworks.setdefault(_FRAMEWORKS[name], m.group(1))
    return True


def _wsl_list(line: str, found: _Found, block: list[str | None]) -> bool:
    """`wsl -l -v` / `wsl --list --verbose` (microsoft/WSL): a ``NAME  STATE  VERSION`` header, then one row per
    distribution, the default one marked ``*``: ``* Ubuntu-22.04    Running    1``."""
    if "NAME" in line and "VERSION" in line and _WSL_HEADER_RE.match(line):
        block[0] = "wsl"
        return True
    if block[0] != "wsl":
        return False
    if (m := _WSL_ROW_RE.match(line)) is None:
        block[0] = None
        return False
    found.tool("wsl -l -v", line)
    if len(found.wsl) < 16:
        found.wsl.append({"name": m.group(2), "state": m.group(3), "version": int(m.group(4)),
                          "default": bool(m.group(1))})
    return True


def _compose(line: str, found: _Found, block: list[str | None]) -> bool:
    """A Compose file's ``services:`` block (the Compose specification, compose-spec/compose-spec spec.md): whether
    a service asks for GPUs, by ``deploy.resources.reservations.devices`` (``driver: nvidia``, ``capabilities:
    [gpu]``), ``gpus:`` (Compose 2.30+), ``runtime: nvidia`` or an ``NVIDIA_VISIBLE_DEVICES`` it sets."""
    if _COMPOSE_SERVICES_RE.match(line):
        block[0] = "compose"
        found.compose = found.compose or [False, _where(line)]
        return True
    if block[0] != "compose":
        return False
    if line.lstrip().startswith("#"):
        return True  # a YAML comment inside the file
    if not _YAML_LINE_RE.match(line.strip()):
        block[0] = None  # a line that is no YAML (a shell prompt, a log line): the file ended
        return False
    if _COMPOSE_GPU_RE.search(line) and found.compose is not None:
        found.compose = [True, _where(line)]
    return True


def _lspci(line: str, found: _Found, _block: list[str | None]) -> bool:
    """`lspci` without ``-nn`` (pciutils, lspci.c ``show_terse``: "<slot> <class>: <vendor> <device>"): an NVIDIA
    display controller on the bus. Its name is the PCI database's chip name, not a product the driver reports,
    so it is kept as a tool line only (with ``-nn`` the id names the product: parsers/evidence.py)."""
    if "NVIDIA Corporation" in line and _LSPCI_RE.search(line) and "[10de:" not in line:
        found.tool("lspci", line)
        return True
    return False


def _framework(line: str, found: _Found, _block: list[str | None]) -> bool:
    if (m := _FRAMEWORK_RE.match(line)) is not None:
        found.frameworks.setdefault(_FRAMEWORKS[m.group(1).lower()], m.group(2))
        return True
    if "install" in line and (pip := _PIP_INSTALL_RE.search(line)) is not None and \
            not re.search(r"(?<![\w.-])torch(?![\w.-])", pip.group(1)):  # a line installing torch too: whose is unsaid
        # "pip install onnxruntime-gpu==1.5.1": the framework release the reporter installed (a pin only).
        for p in _PINNED_RE.finditer(pip.group(1)):
            if (name := p.group(1).lower()) in _FRAMEWORKS:
                found.frameworks.setdefault(_FRAMEWORKS[name], p.group(2))
    return False


def _command(line: str, found: _Found, _block: list[str | None]) -> bool:
    if (m := _CONTAINER_RUN_RE.match(line.strip())) is not None:
        found.tool(m.group(1), line)  # the container runtime's command: its -e variables below
    if "=" in line and _COMMAND_START_RE.match(line.strip()):
        _assignments(line, found)
        return True
    if "=" in line and ("NCCL_" in line or "_DEVICE" in line):
        # "With NCCL_P2P_DISABLE=1 it runs": a variable a sentence says was set (the names are NCCL's, CUDA's and the
        # NVIDIA runtime's own, so a sentence naming one means that variable).
        for a in _NCCL_ASSIGN_RE.finditer(line):
            if len(found.env) < 64:
                found.env.setdefault(a.group(1), redact_text(_value_of(a.group(2))[:200]))
        for e in _ENVIRON_ASSIGN_RE.finditer(line):
            if len(found.env) < 64:
                found.env.setdefault(e.group(2), redact_text(e.group(4)[:200]))
    return m is not None


#: Each tool's reader, tried in this order on every line until one reads it.
_READERS = (_ggml, _tensorflow, _ollama, _comfyui, _a1111, _vllm, _conda_info, _kubectl_node, _wsl_list, _compose,
            _pip_show, _lspci, _framework, _command)


def _read_line(line: str, found: _Found, block: list[str | None]) -> None:
    for reader in _READERS:
        if reader(line, found, block):
            return


def _assignments(line: str, found: _Found) -> None:
    """``VAR=value cmd``, ``export VAR=value``, ``docker run -e VAR=value …``: the GPU stack's variables set."""
    for m in _ASSIGN_RE.finditer(line):
        name, value = m.group(1), _value_of(m.group(2))
        if any(c in value for c in "$%`"):
            continue  # a shell expands it when the command runs: its value is unknown here
        if _ENV_NAME_RE.match(name) and len(found.env) < 64:
            found.env.setdefault(name, redact_text(value[:200]))


def _answer(line: str, found: _Found, pending: dict[str, str]) -> None:
    """The line right after a command whose output is its answer (what ``print(torch.cuda.is_available())`` or
    ``tf.config.list_physical_devices('GPU')`` returned), and the commands that ask; pip's missing extra."""
    shown = line.strip()
    if shown and (asked := pending.pop("available", None)) is not None and shown in ("True", "False"):
        found.cuda_available = found.cuda_available or (shown == "True", _where(asked))
    if shown and (listed := pending.pop("tf", None)) is not None and (shown == "[]" or shown.startswith("[PhysicalDevice(")):
        # "[]", or one PhysicalDevice per GPU.
        found.tf_gpus = found.tf_gpus or (shown.count("device_type='GPU'"), _where(listed))
    if "is_available()" in line and _PRINTS_AVAILABLE_RE.search(line):
        pending["available"] = line
    if "list_physical_devices" in line and _TF_LIST_GPUS_RE.search(line):
        pending["tf"] = line
    elif "Num GPUs Available" in line and (m := _TF_NUM_GPUS_RE.search(line)) is not None:
        found.tf_gpus = found.tf_gpus or (int(m.group(1)), _where(line))
    if "does not provide the extra" in line and (m := _PIP_EXTRA_RE.search(line)) is not None:
        entry = {"package": m.group(1).lower(), "version": m.group(2), "extra": m.group(3)}
        if entry not in found.missing_extras and len(found.missing_extras) < 16:
            found.missing_extras.append(entry)
        if entry["package"] in _FRAMEWORKS:
            found.frameworks.setdefault(_FRAMEWORKS[entry["package"]], entry["version"])


def read(lines: Sequence[str]) -> _Found:
    found = _Found()
    block: list[str | None] = [None]
    seen: set[str] = set()
    pending: dict[str, str] = {}
    for raw in lines:
        line = raw.rstrip()
        if len(line) > _MAX_LINE or (line in seen and block[0] is None):
            continue  # a repeated line says nothing new, except inside a block (Allocatable repeats Capacity's rows)
        seen.add(line)
        _answer(line, found, pending)
        if line.strip():
            _read_line(line, found, block)
        elif block[0] != "compose":  # a Compose file has blank lines between its services
            block[0] = None
    return found



# A traceback frame's or a log's path inside an interpreter's packages: ".../lib/python3.8/site-packages/torch/…"
# (POSIX: lib/pythonX.Y), "C:\\…\\Python310\\lib\\site-packages\\…" (Windows: PythonXY): the interpreter's X.Y.
_SITE_PACKAGES_RE = lazy_re(r"[/\\]python(3\.\d{1,2})[/\\](?:site|dist)-packages[/\\]|[/\\]Python3(\d{1,2})[/\\]lib[/\\]"
                            r"site-packages[/\\]", re.IGNORECASE)


def _python_of_paths(lines: Sequence[str]) -> tuple[str, str] | None:
    """(X.Y, the line) when every interpreter path in the text names one Python, else None."""
    said: dict[str, str] = {}
    for line in lines:
        if "-packages" not in line or len(line) > _MAX_LINE:
            continue
        for m in _SITE_PACKAGES_RE.finditer(line):
            said.setdefault(m.group(1) or f"3.{m.group(2)}", line.strip()[:160])
    return next(iter(said.items())) if len(said) == 1 else None


def parse(lines: Sequence[str], readings: dict[str, Reading]) -> None:
    """Write what the tools' lines and the command lines say into ``readings`` (only facts not read already)."""
    found = read(lines)
    if not_read(readings, "python.version") and (python := _python_of_paths(lines)) is not None:
        readings["python.version"] = ok(python[0], SOURCE, f"the interpreter's folder in a path: {python[1]!r}")
    if found.tools:
        readings["text.tools"] = ok(found.tools, SOURCE, "the start-up lines of known tools the text holds")
    if found.frameworks:
        stated = readings.get("text.frameworks")
        earlier = dict(stated.value) if stated is not None and stated.ok and stated.value else {}
        readings["text.frameworks"] = ok({**earlier, **found.frameworks}, SOURCE, "versions of frameworks other than torch, as "
                                         "the text states them")
    if found.env:
        readings["text.env_assignments"] = ok(found.env, SOURCE, "variables a command line in the text sets (what "
                                              "the text does not show is unknown, not unset)")
    if found.node:
        readings["text.node_gpus"] = ok(found.node, SOURCE, "`kubectl describe node`: nvidia.com/gpu in its "
                                        "Capacity / Allocatable blocks")
    if found.gpus and not_read(readings, "nvml.gpus"):
        gpus = [found.gpus[i] for i in sorted(found.gpus)]
        why = "; ".join(found.gpu_lines[:4])
        readings["nvml.gpus"] = ok(gpus, SOURCE, why)
        if not_read(readings, "nvml.device_count"):
            count = found.device_count[0] if found.device_count and found.device_count[0] >= len(gpus) else len(gpus)
            readings["nvml.device_count"] = ok(count, SOURCE, why)
    if found.driver_cuda and not_read(readings, "cuda.driver_version") and \
            (api := cuda_to_int(found.driver_cuda[0])) is not None:
        readings["cuda.driver_version"] = ok(api, SOURCE, f"the CUDA version the driver supports, from "
                                             f"{found.driver_cuda[1]!r}")
    if found.torch and not_read(readings, "torch.version"):
        readings["torch.version"] = ok(found.torch[0], SOURCE, f"from {found.torch[1]!r}")
    torch = readings.get("torch.version")
    if torch is not None and torch.ok and torch.value and not_read(readings, "torch.cuda_version"):
        # torch's own version tag says what torch.version.cuda is ("2.3.1+cu118", "2.2.0+cpu"), whoever read it.
        tag = local_tag(str(torch.value).split(" ")[0])
        if tag == "cpu" or variant_cuda(tag):
            readings["torch.cuda_version"] = ok(variant_cuda(tag), SOURCE, f"torch's version tag ({torch.value})")
    _write_answers(found, readings)
    if found.python and not_read(readings, "python.version"):
        readings["python.version"] = ok(found.python[0], SOURCE, f"from {found.python[1]!r}")


def _write_answers(found: _Found, readings: dict[str, Reading]) -> None:
    """`wsl -l -v`'s rows, TensorFlow's GPU list, pip's missing extras, a printed torch.cuda.is_available()."""
    if found.wsl:
        readings["text.wsl_distros"] = ok(found.wsl, SOURCE, "`wsl -l -v`: the WSL distributions and their WSL version")
    if found.tf_gpus is not None:
        readings["text.tensorflow_gpus"] = ok(found.tf_gpus[0], SOURCE, f"TensorFlow's GPU list, {found.tf_gpus[1]!r}")
    if found.missing_extras:
        readings["text.pip_missing_extras"] = ok(found.missing_extras, SOURCE, "pip's \"does not provide the extra\"")
    if found.compose is not None:
        readings["text.compose_gpus"] = ok(bool(found.compose[0]), SOURCE, "a Compose file's services " + (
            f"ask for GPUs ({found.compose[1]!r})" if found.compose[0] else "ask for no GPU (no deploy.resources."
            "reservations.devices, gpus: or runtime: nvidia)"))
    if found.cuda_available is not None and not_read(readings, "torch.cuda_available"):
        readings["torch.cuda_available"] = ok(found.cuda_available[0], SOURCE, f"printed by {found.cuda_available[1]!r}")


__all__ = ["KEYS", "SOURCE", "parse", "read"]
