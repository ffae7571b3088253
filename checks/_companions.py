"""torch-companions' verdict: do torchvision/torchaudio match the installed torch (release pins, CUDA
variant tags, nightlies)? Shared by torch-companions (checks/compat_packages.py) and torch-cpu-build
(checks/torch_build.py), which answers a CPU torch with mismatched companions with one CUDA install."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from packaging.version import Version

from envdoctor.knowledge import compat, versions

from ..model import Facts
from ._torch import TorchBuild, _packages, torch_build


def _tag(version: str) -> str | None:
    return version.split("+", 1)[1] if "+" in version else None


def _tag_major(tag: str | None) -> str | None:
    if tag is None:
        return None
    if tag == "cpu":
        return "cpu"
    cuda = versions.variant_cuda(tag)
    return cuda.split(".")[0] if cuda else tag


def _beyond_table(minor: str | None) -> bool:
    """True for a torch release newer than every release the table knows."""
    newest = compat.newest_release()
    v, n = versions.parse(minor or ""), versions.parse(newest or "")
    return bool(v and n and v > n)


def _nightly_date(version: str) -> date | None:
    """The build date of a nightly (``2.5.0.dev20240720+cu124`` -> 2024-07-20), else None."""
    m = re.search(r"\.dev(\d{4})(\d{2})(\d{2})", str(version))
    if not m:
        return None
    try:
        return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return None


@dataclass
class _Verdict:
    """What torch-companions found so far: problems (severe ones fail), notes, and the companions judged."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    judged: list[str] = field(default_factory=list)
    severe: bool = False

    def problem(self, text: str, severe: bool = False) -> None:
        self.problems.append(text)
        self.severe = self.severe or severe


@dataclass(frozen=True)
class _Pair:
    """One companion next to the installed torch."""

    name: str
    ver: str
    build: TorchBuild
    torch_minor: str | None
    row: Mapping[str, Any] | None  # the table's companions row for this torch

    @property
    def expected(self) -> str | None:
        return self.row.get(self.name) if self.row else None


def _judge_nightly(p: _Pair, v: _Verdict, torch_night: date | None, night: date | None) -> None:
    """Nightlies pair by build date, not by the release table (their version numbers run ahead)."""
    if torch_night and night and abs((torch_night - night).days) > 1:
        v.problem(f"{p.name} {p.ver} is a nightly of {night}, torch {p.build.version} one of {torch_night}: "
                  "nightlies must come from the same day")
    elif not (torch_night and night):
        v.notes.append(f"{p.name} {p.ver} and torch {p.build.version}: a nightly next to a release, not judged")
    else:
        v.judged.append(p.name)


def _judge_stable_abi(p: _Pair, v: _Verdict, tv: Version) -> None:
    """Built against torch's stable ABI: any torch at or above its own release works."""
    if tv >= Version(versions.minor_of(p.ver) or compat.stable_abi_from(p.name) or "0"):
        v.judged.append(p.name)
        v.notes.append(f"{p.name} {p.ver} uses torch's stable ABI (works with torch ≥ {versions.minor_of(p.ver)})")
    else:
        v.problem(f"{p.name} {p.ver} needs torch ≥ {versions.minor_of(p.ver)}, not {p.build.public}", severe=True)


def _judge_unknown_release(p: _Pair, v: _Verdict, pv: Version | None) -> None:
    """A companion release the table does not pair with any torch."""
    if p.expected and p.row and p.row.get("verified") and versions.minor_of(p.ver) != p.expected and pv is not None:
        # The table knows what this torch pairs with; a release the table lacks is not it. An
        # older one is a plain mismatch; a newer one is beyond the table, so it only warns.
        newer = pv > (versions.parse(p.expected) or pv)
        v.problem(f"{p.name} {p.ver} is not the {p.name} built for torch {p.torch_minor} "
                  f"(torch {p.torch_minor} pairs with {p.name} {p.expected})"
                  + (f"; {compat.not_in_table(f'{p.name} {p.ver}')}" if newer else ""), severe=not newer)
    else:
        v.notes.append(compat.not_in_table(f"{p.name} {p.ver}"))


def _judge_other_torch(p: _Pair, v: _Verdict, built_for: str) -> None:
    """A companion built for another torch release than the installed one."""
    if p.row is None and _beyond_table(p.torch_minor):
        # torch newer than the table: which companion pairs with it is not known yet.
        v.problem(f"{p.name} {p.ver} is built for torch {built_for}, and "
                  + compat.not_in_table(f"torch {p.build.public}"))
    elif p.name == "torchaudio" and p.row and p.row.get("torchaudio") is None:
        v.notes.append(f"no torchaudio release is pinned to torch {p.torch_minor} (PyPI as of {compat.as_of()}); "
                       f"{p.name} {p.ver} not judged")
    else:
        v.problem(f"{p.name} {p.ver} is built for torch {built_for}, not {p.build.public}"
                  + (f" (torch {p.torch_minor} pairs with {p.name} {p.expected})" if p.expected else ""), severe=True)


def _judge_release(p: _Pair, v: _Verdict, torch_night: date | None) -> str | None:
    """Whether the companion's release pairs with torch's; returns the torch minor it is built for."""
    built_for = compat.companion_torch(p.name, p.ver)
    abi_from = compat.stable_abi_from(p.name)
    pv, tv = versions.parse(p.ver), versions.parse(p.torch_minor or "")
    night = _nightly_date(p.ver)
    if torch_night or night:
        _judge_nightly(p, v, torch_night, night)
    elif abi_from and pv is not None and tv is not None and pv >= Version(abi_from):
        _judge_stable_abi(p, v, tv)
    elif built_for is None:
        _judge_unknown_release(p, v, pv)
    elif built_for != p.torch_minor:
        _judge_other_torch(p, v, built_for)
    else:
        v.judged.append(p.name)
    return built_for


def _judge_variant(facts: Facts, p: _Pair, v: _Verdict, built_for: str | None) -> None:
    """Whether the companion's CUDA variant (its local tag, or PyPI's build for the platform) is torch's."""
    tag, torch_tag = _tag(p.ver), _tag(p.build.version)
    if tag and torch_tag and tag != torch_tag:
        if _tag_major(tag) != _tag_major(torch_tag):
            v.problem(f"{p.name} {p.ver} is a {tag} build but torch is {torch_tag}", severe=True)
        else:
            v.problem(f"{p.name} {p.ver} is a {tag} build, torch is {torch_tag} (same CUDA major)")
    elif tag is None and torch_tag and p.name in v.judged:
        # An untagged companion came from PyPI, whose build depends on the platform: Linux wheels
        # are the release's default CUDA variant, Windows and macOS wheels are CPU builds.
        os_name = facts.value("host.os")
        pypi = {"Windows": "cpu", "Darwin": "cpu"}.get(str(os_name)) if os_name else None
        if os_name == "Linux":
            pypi = compat.release_default_variant(built_for or p.torch_minor)
        if pypi and _tag_major(pypi) != _tag_major(torch_tag):
            v.problem(f"{p.name} {p.ver} is PyPI's {os_name} build ({pypi}) but torch is {torch_tag}", severe=True)
        elif pypi is None and os_name is None and (torch_tag == "cpu" or torch_tag.startswith("cu")):
            v.problem(f"{p.name} {p.ver} carries no variant tag: it came from PyPI, where Linux wheels are "
                      f"CUDA builds and Windows/macOS wheels CPU builds, while torch is {torch_tag} — the "
                      "platform is not in the report, so check `pip show " + p.name + "` and reinstall it from "
                      "torch's index")


def _verdict(facts: Facts, build: TorchBuild, pkgs: Mapping[str, str], present: Sequence[str]) -> _Verdict:
    v = _Verdict()
    row = compat.companions(build.public)
    torch_night = _nightly_date(build.version)
    for name in present:
        pair = _Pair(name, pkgs[name], build, versions.minor_of(build.public), row)
        built_for = _judge_release(pair, v, torch_night)
        _judge_variant(facts, pair, v, built_for)
    return v


def mismatched_companions(facts: Facts) -> tuple[str, ...]:
    """The installed torchvision/torchaudio when torch-companions finds they do not match torch (its
    verdict, not a refusal or a missing symbol); () otherwise."""
    build = torch_build(facts)
    pkgs = _packages(facts)
    present = [p for p in ("torchvision", "torchaudio") if p in pkgs]
    if build is None or not present:
        return ()
    return tuple(present) if _verdict(facts, build, pkgs, present).problems else ()
