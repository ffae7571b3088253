"""The shapes people write version statements in, as one renderer per shape (shared by the statement
tests and the property test over the GPU × wheel grid).

A statement set is a list of ``(role, value)``: ``torch`` (a version), ``gpu`` (a product name),
``cc`` (a compute capability as written: ``6.1``, ``sm_61``, ``(6, 1)``), ``driver``, ``os``, ``arch``.
Each shape writes every role with a key people use for it (the aliases vary from shape to shape)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from envdoctor.knowledge import versions

Statements = Sequence[tuple[str, str]]

#: Keys people write, per role; a shape takes the n-th (mod the list) so every alias is written somewhere.
KEYS: dict[str, tuple[str, ...]] = {
    "torch": ("PyTorch", "torch", "Pytorch Version", "torch version", "PyTorch version", "torch.__version__"),
    "gpu": ("GPU", "Device", "GPU Model", "GPU Name", "GPU type", "Graphics card"),
    "cc": ("Compute capability", "CUDA capability", "capability", "compute_cap"),
    "driver": ("Driver", "Driver Version", "NVIDIA driver", "nvidia driver version"),
    "cuda": ("CUDA", "CUDA Version", "torch.version.cuda", "CUDA used to build PyTorch", "cuda runtime"),
    "os": ("OS", "Operating system", "Platform"),
    "arch": ("Architecture", "Machine", "arch"),
}

PROSE_HEAD = ("Hi! After updating, training crashes on my GPU and I am not sure whether the driver is the problem.\n"
              "The GPU works fine in games and nvidia-smi shows it. Here is my environment:\n\n")
PROSE_TAIL = "\n\nI already tried reinstalling torch twice. Any idea what the driver or the GPU needs?\n"


def _key(role: str, n: int) -> str:
    keys = KEYS[role]
    return keys[n % len(keys)]


def _lines(fmt: str, n: int) -> Callable[[Statements], str]:
    def render(said: Statements) -> str:
        return "\n".join(fmt.format(k=_key(role, n + i), v=value) for i, (role, value) in enumerate(said)) + "\n"
    return render


def _table(said: Statements) -> str:
    rows = "".join(f"| {_key(role, 1 + i)} | {value} |\n" for i, (role, value) in enumerate(said))
    return "| Component | Version |\n|---|---|\n" + rows


def _next_line(said: Statements) -> str:
    # ComfyUI's "System Information" panel, copied: each key on its line, the value on the next; its device
    # is "cuda:0 NAME : cudaMallocAsync" under "Name".
    out = []
    for role, value in said:
        if role == "gpu":
            out += ["Devices", "Name", f"cuda:0 {value} : cudaMallocAsync", "Type", "cuda"]
        else:
            out += [{"torch": "Pytorch Version", "os": "OS"}.get(role, _key(role, 0)), value]
    return "\n".join(out) + "\n"


def _nested(said: Statements) -> dict[str, object]:
    top: dict[str, object] = {}
    for role, value in said:
        if role == "torch":
            top.setdefault("torch", {})["version"] = value  # type: ignore[index]
        elif role == "gpu":
            top.setdefault("gpu", {})["name"] = value  # type: ignore[index]
        elif role == "cc":
            top.setdefault("gpu", {})["compute_capability"] = value  # type: ignore[index]
        else:
            top[_key(role, 0).lower()] = value
    return top


def _yaml(said: Statements) -> str:
    out: list[str] = []
    for key, value in _nested(said).items():
        if isinstance(value, dict):
            out.append(f"{key}:")
            out += [f"  {k}: \"{v}\"" for k, v in value.items()]
        else:
            out.append(f"{key}: {value}")
    return "\n".join(out) + "\n"


def _toml(said: Statements) -> str:
    nested = _nested(said)
    flat = [f"{k} = \"{v}\"" for k, v in nested.items() if not isinstance(v, dict)]
    sections = [f"[{k}]\n" + "\n".join(f"{kk} = \"{vv}\"" for kk, vv in v.items())
                for k, v in nested.items() if isinstance(v, dict)]
    return "\n".join(flat) + "\n\n" + "\n\n".join(sections) + "\n"


def _json_line(said: Statements) -> str:
    return json.dumps(_nested(said)) + "\n"


def _json_pretty(said: Statements) -> str:
    return json.dumps({_key(role, 2 + i).lower(): value for i, (role, value) in enumerate(said)}, indent=2) + "\n"


_REPL = {"torch": "torch.__version__", "gpu": "torch.cuda.get_device_name(0)", "cc": "torch.cuda.get_device_capability(0)",
         "cuda": "torch.version.cuda", "os": "platform.system()", "arch": "platform.machine()"}


def _repl(said: Statements) -> str:
    out = [">>> import torch, platform"]
    for role, value in said:
        if role in _REPL:
            cc = versions.parse_cc(value.strip("()").replace(", ", ".")) if role == "cc" else None
            echo = f"({cc[0]}, {cc[1]})" if cc else repr(value)
            out += [f">>> {_REPL[role]}", echo]
        else:
            out += [f">>> # {_key(role, 0)}: {value}"]  # a comment line: still a statement
    return "\n".join(out) + "\n"


def _comfy_log(said: Statements) -> str:
    stamp = "2024-10-19 01:10:47,703 - root - INFO - "
    out = []
    for role, value in said:
        if role == "torch":
            out.append(f"{stamp}pytorch version: {value}")
        elif role == "gpu":
            out.append(f"{stamp}Device: cuda:0 {value} : cudaMallocAsync")
        else:
            out.append(f"** {_key(role, 1)}: {value}")
    return "\n".join(out) + "\n"


def _lightning(said: Statements) -> str:
    # Lightning's collect_env_details: sections of "- key: value", a list's items under "- GPU:".
    out = ["* CUDA:"]
    for role, value in said:
        if role == "gpu":
            out += ["\t- GPU:", f"\t\t- {value}"]
    out.append("* Lightning:")
    out += [f"\t- {_key(role, 1)}: {value}" for role, value in said if role != "gpu"]
    return "\n".join(out) + "\n"


#: shape name -> renderer. Each is a shape of the issue's list (`key: value`, `key = value`, `**key:** value`,
#: `- key: value`, `* **key**: value`, `| key | value |`, `key<TAB>value`, key then value on the next line,
#: YAML, JSON, TOML, REPL pairs), plus the ComfyUI start-up log and Lightning's environment block.
SHAPES: dict[str, Callable[[Statements], str]] = {
    "colon": _lines("{k}: {v}", 0),
    "equals": _lines("{k} = {v}", 1),
    "bold": _lines("**{k}:** {v}", 2),
    "dash": _lines("- {k}: {v}", 3),
    "dash-bold": _lines("- **{k}:** {v}", 0),
    "star-bold": _lines("* **{k}**: {v}", 4),
    "table": _table,
    "tab": _lines("{k}\t{v}", 5),
    "next-line": _next_line,
    "yaml": _yaml,
    "json": _json_line,
    "json-pretty": _json_pretty,
    "toml": _toml,
    "repl": _repl,
    "comfy-log": _comfy_log,
    "lightning": _lightning,
}


def render(shape: str, said: Statements, prose: bool) -> str:
    text = SHAPES[shape](said)
    return f"{PROSE_HEAD}{text}{PROSE_TAIL}" if prose else text


def os_statements(platform: str) -> list[tuple[str, str]]:
    """What a text says of the platform a wheel is for (nothing for Linux x86_64, the default)."""
    return {"windows_x86_64": [("os", "Windows 11")], "linux_aarch64": [("os", "Ubuntu 24.04"), ("arch", "aarch64")]
            }.get(platform, [])
