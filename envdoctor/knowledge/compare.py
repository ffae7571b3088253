"""What makes two environments "the same": the aspects compared across ranks, nodes and saved
reports, in the order a difference is likely to matter, each with the checks that judge it.

The one home for that list: the cluster check's consistency findings, ``envdoctor diff`` and
``envdoctor fleet`` all ask here. Aspects read facts through a getter (``key -> value or None``),
so a live :class:`~envdoctor.model.Facts` and the raw ``facts`` object of a saved report (read
untrusted, never trusted to have the right types) are compared the same way.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envdoctor.knowledge import versions
from envdoctor.knowledge.launch import PER_RANK_VARS

Getter = Callable[[str], Any]


@dataclass(frozen=True)
class Aspect:
    name: str  # stable id, used in JSON
    label: str  # column header
    area: str  # driver, cuda, torch, cudnn, nccl, gpu, python, packages, env, host
    facts: tuple[str, ...]  # what it reads
    judged_by: tuple[str, ...]  # the checks that judge it on one node
    extract: Callable[[Getter], Any]
    config: bool = True  # part of a node's configuration (fleet groups by these)


def raw_getter(facts: Any) -> Getter:
    """A getter over a saved report's ``facts`` object: the value of a fact that was read, else None."""
    data = facts if isinstance(facts, Mapping) else {}

    def get(key: str) -> Any:
        reading = data.get(key)
        if type(reading) is not dict and not isinstance(reading, Mapping):  # dict first: the common case
            return None
        if reading.get("reason") is not None:
            return None
        return reading.get("value")

    return get


def facts_getter(facts: Any) -> Getter:
    """A getter over :class:`~envdoctor.model.Facts` (values thawed to plain JSON)."""
    from envdoctor.model import thaw

    return lambda key: thaw(facts.value(key))


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, (dict, list, tuple)):
        return None
    return str(value)[:200]


def _first(get: Getter, *keys: str) -> str | None:
    for key in keys:
        text = _text(get(key))
        if text:
            return text
    return None


def _gpus(get: Getter) -> str | None:
    gpus = get("nvml.gpus") or get("torch.devices")
    if not isinstance(gpus, list):
        return None
    counts: Counter[str] = Counter()
    for g in gpus:
        if not isinstance(g, Mapping):
            continue
        memory = g.get("memory_total", g.get("total_memory"))
        size = f" {round(memory / (1 << 30))} GiB" if isinstance(memory, (int, float)) and memory > 0 else ""
        counts[f"{str(g.get('name', '?'))[:80]}{size}"] += 1
    return ", ".join(f"{n}× {name}" for name, n in sorted(counts.items())) or None


def _torch_build(get: Getter) -> str | None:
    cuda = get("torch.cuda_version")
    if get("torch.version") is None:
        return None
    return f"CUDA {cuda}" if isinstance(cuda, str) and cuda else "CPU"


def _cuda_driver(get: Getter) -> str | None:
    return versions.cuda_int_text(get("nvml.cuda_driver_version") or get("cuda.driver_version"))


def _shm(get: Getter) -> str | None:
    size = get("host.shm_size")
    if isinstance(size, (int, float)) and not isinstance(size, bool):
        return f"{size / (1 << 30):.1f} GiB"
    return None


#: Environment variables compared across nodes (their values, when set anywhere).
ENV_PREFIXES = ("NCCL_", "GLOO_", "CUDA_", "TORCH_", "PYTORCH_", "OMP_", "NVIDIA_", "UCX_", "FI_")
_ENV_IGNORED = frozenset({"CUDA_HOME", "CUDA_PATH"}) | PER_RANK_VARS


def env_of(get: Getter) -> dict[str, str]:
    env = get("env.vars")
    if not isinstance(env, Mapping):
        return {}
    from envdoctor.redact import env_value

    # Masked here as every report masks it (a saved report read raw by `fleet` included): the
    # values compared and shown under "this"/"majority" no longer carry their variable's name.
    return {str(k): str(env_value(str(k), v))[:300] for k, v in env.items()
            if str(k).startswith(ENV_PREFIXES) and str(k) not in _ENV_IGNORED}


def packages_of(get: Getter) -> dict[str, str]:
    pkgs = get("python.packages")
    if not isinstance(pkgs, Mapping):
        return {}
    return {str(k)[:100]: str(v)[:100] for k, v in pkgs.items()}


ASPECTS: tuple[Aspect, ...] = (
    Aspect("driver", "driver", "driver", ("nvml.driver_version", "driver.kernel_module_version"),
           ("driver-installed", "driver-version-mismatch", "driver-too-old"),
           lambda g: _first(g, "nvml.driver_version", "driver.kernel_module_version")),
    Aspect("cuda_driver", "driver CUDA", "cuda", ("nvml.cuda_driver_version", "cuda.driver_version"),
           ("driver-too-old", "cuda-forward-compat"), _cuda_driver),
    Aspect("torch", "torch", "torch", ("torch.version",), ("torch-import", "torch-companions"),
           lambda g: _first(g, "torch.version")),
    Aspect("torch_build", "torch build", "torch", ("torch.cuda_version",), ("torch-cpu-build", "driver-too-old"),
           _torch_build),
    Aspect("cudnn", "cuDNN", "cudnn", ("torch.cudnn_version",), ("cudnn-mismatch",),
           lambda g: _first(g, "torch.cudnn_version")),
    Aspect("nccl", "NCCL", "nccl", ("torch.nccl_version",), ("nccl-mismatch",),
           lambda g: _first(g, "torch.nccl_version")),
    Aspect("gpus", "GPUs", "gpu", ("nvml.gpus", "torch.devices"), ("torch-arch-support", "gpu-eol"), _gpus),
    Aspect("python", "Python", "python", ("python.version",), ("python-supported",),
           lambda g: _first(g, "python.version")),
    Aspect("kernel", "kernel", "host", ("host.kernel",), (), lambda g: _first(g, "host.kernel")),
    Aspect("distro", "OS", "host", ("host.distro",), (), lambda g: _first(g, "host.distro")),
    Aspect("glibc", "glibc", "host", ("host.glibc",), (), lambda g: _first(g, "host.glibc")),
    Aspect("container", "container", "host", ("host.container",), ("host-container", "container-gpu"),
           lambda g: _first(g, "host.container") or ("none" if g("host.os") else None)),
    Aspect("shm", "/dev/shm", "host", ("host.shm_size",), ("host-shm-size",), _shm),
)
BY_NAME = {a.name: a for a in ASPECTS}
#: Order of areas when differences are listed (how likely a difference is to matter).
AREA_ORDER = ("driver", "cuda", "torch", "cudnn", "nccl", "gpu", "python", "packages", "env", "host")


def aspect_values(get: Getter) -> dict[str, str | None]:
    """Aspect name -> its value (a short string) or None when the facts do not say."""
    out: dict[str, str | None] = {}
    for aspect in ASPECTS:
        try:
            out[aspect.name] = aspect.extract(get)
        except Exception:  # noqa: BLE001 - hostile report content: the aspect is unknown, never a crash
            out[aspect.name] = None
    return out


def signature(get: Getter) -> dict[str, Any]:
    """A node's configuration: aspects, NCCL/CUDA/torch environment and packages."""
    return {"aspects": aspect_values(get), "env": env_of(get), "packages": packages_of(get)}


def signature_key(sig: Mapping[str, Any]) -> str:
    return json.dumps(sig, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Difference:
    """One way the members of a group disagree: ``values`` maps each value to the members with it."""

    area: str
    name: str  # aspect name, "env:NCCL_X" or "package:torch"
    label: str
    judged_by: tuple[str, ...]
    values: Mapping[str, tuple[str, ...]]  # value ("<unset>" when absent) -> members
    majority: str | None  # the value most members have, None on a tie

    def odd(self) -> dict[str, tuple[str, ...]]:
        """Members whose value is not the majority's."""
        return {v: m for v, m in self.values.items() if v != self.majority}

    def to_dict(self) -> dict[str, Any]:
        return {"area": self.area, "name": self.name, "label": self.label, "judged_by": list(self.judged_by),
                "majority": self.majority, "values": {k: list(v) for k, v in self.values.items()}}


UNSET = "<unset>"


#: How a value one member lacks is shown, per kind of difference.
MISSING_LABEL = {"packages": "not installed", "env": "unset"}


def _difference(area: str, name: str, label: str, judged_by: tuple[str, ...],
                members: Sequence[tuple[str, str | None]]) -> Difference | None:
    groups: dict[str, list[str]] = {}
    absent = MISSING_LABEL.get(area, UNSET)
    for member, value in members:
        groups.setdefault(absent if value is None else value, []).append(member)
    if len(groups) < 2:
        return None
    ranked = sorted(groups.items(), key=lambda kv: -len(kv[1]))
    majority = ranked[0][0] if len(ranked[0][1]) > len(ranked[1][1]) else None
    return Difference(area, name, label, judged_by, {k: tuple(v) for k, v in ranked}, majority)


def differences(members: Sequence[tuple[str, Mapping[str, Any]]], per_rank_env: Iterable[str] = ()) -> list[Difference]:
    """How members (``(name, signature)``) differ, most important area first. Aspects every
    member lacks are not differences; a value one member lacks is ``<unset>``."""
    out: list[Difference] = []
    skip_env = set(per_rank_env)
    for aspect in ASPECTS:
        values = [(m, (sig.get("aspects") or {}).get(aspect.name)) for m, sig in members]
        if all(v is None for _, v in values):
            continue
        diff = _difference(aspect.area, aspect.name, aspect.label, aspect.judged_by, values)
        if diff:
            out.append(diff)
    for kind in ("packages", "env"):
        names = sorted({k for _, sig in members for k in (sig.get(kind) or {})} - (skip_env if kind == "env" else set()))
        for key in names:
            values = [(m, (sig.get(kind) or {}).get(key)) for m, sig in members]
            prefix = "package" if kind == "packages" else "env"
            diff = _difference(kind, f"{prefix}:{key}", key, judged_by(kind, key), values)
            if diff:
                out.append(diff)
    order = {a: i for i, a in enumerate(AREA_ORDER)}
    return sorted(out, key=lambda d: order.get(d.area, len(order)))


def judged_by(kind: str, key: str) -> tuple[str, ...]:
    """The checks that judge one package or environment variable on a node."""
    if kind == "packages":
        return ("torch-companions", "cuda-major-mix") if key.startswith(("torch", "nvidia-", "triton")) else ()
    if key.endswith("_SOCKET_IFNAME"):
        return ("launch-ifname",)
    if key in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        return ("cuda-visible-devices",)
    if key.startswith(("NCCL_", "TORCH_NCCL_")):
        return ("env-vars", "launch-nccl-env")
    return ("env-vars",)


def per_rank_pattern(values: Mapping[str, Sequence[str]], node_of: Mapping[str, Any] | None = None) -> bool:
    """True when, on every node, each member has its own value (CUDA_VISIBLE_DEVICES=0, =1, … one
    GPU per rank): a deliberate per-rank setting, not an inconsistency."""
    if set(values) & {UNSET, *MISSING_LABEL.values()}:
        return False
    seen: set[tuple[Any, str]] = set()
    for value, members in values.items():
        for m in members:
            node = (node_of or {}).get(m, m)
            if (node, value) in seen:
                return False
            seen.add((node, value))
    return True


def member_ranges(members: Iterable[int]) -> str:
    """[0, 1, 2, 5] -> "0-2, 5"."""
    nums = sorted(set(members))
    parts: list[str] = []
    start = prev = None
    for n in nums:
        if start is None:
            start = prev = n
        elif prev is not None and n == prev + 1:
            prev = n
        else:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = n
    if start is not None:
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(parts)
