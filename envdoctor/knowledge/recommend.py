"""The recommendation engine: the nearest torch build (release and CUDA variant) that runs on these
GPUs, this driver and this Python, from the compatibility table; and the command that installs it.

Pure: it takes versions and compute capabilities, never Facts, so a check asks it with what the
facts say, and a test asks it directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from packaging.version import Version

from envdoctor.knowledge import remedies
from envdoctor.knowledge.compat import (
    ArchList,
    Platform,
    arch_list,
    as_of,
    current_release,
    driver_runs,
    known_patch,
    latest_patch,
    min_driver,
    reach_of,
    release_default_variant,
    release_variants,
    releases,
    releases_newest_first,
    runs_on,
    said,
    source,
)
from envdoctor.knowledge.versions import CC, cuda_from_int, cuda_major, cuda_to_int, minor_of, variant_cuda
from envdoctor.knowledge.versions import parse as version
from envdoctor.model import Source


@dataclass(frozen=True)
class Recommendation:
    torch: str  # exact patch, e.g. "2.7.1"
    variant: str
    reason: str
    verified: bool
    source: str = ""
    driver_note: str = ""
    extras: tuple[str, ...] = field(default_factory=tuple)

    @property
    def index_url(self) -> str:
        return remedies.index_url(self.variant)

    def sources(self) -> tuple[Source, ...]:
        """The table row behind it, for the remedy's JSON (the words are in ``reason``)."""
        return (source(self.source, self.verified),) if self.source else ()

    def command(self, python: str | None = None) -> str:
        """The install command, run by ``python``'s pip when the target interpreter is known."""
        return remedies.torch_install(python, self.torch, self.variant, self.extras)


def recommend(ccs: Sequence[CC], driver_cuda_int: int | None = None, python: str | None = None,
              platform: Platform = "linux_x86_64", current: str | None = None,
              exclude: Iterable[tuple[str, str]] = (), extras: Sequence[str] = ()) -> Recommendation | None:
    """The nearest torch release + CUDA variant whose wheels run on every GPU in ``ccs``, on this
    driver and Python. "Nearest" = the installed release if a variant of it works, else the closest
    newer release, else the closest older one (the smallest change that fixes the problem); without
    an installed release, the newest. Within a release: the highest CUDA the driver runs natively."""
    excluded = set(exclude)
    cur = version(current) if current else None
    order = sorted(releases(), key=lambda m: version(m) or Version("0"))
    if cur is not None:
        cur_minor = Version(f"{cur.release[0]}.{cur.release[1] if len(cur.release) > 1 else 0}")
        newer = [m for m in order if (version(m) or Version("0")) >= cur_minor]
        older = [m for m in order if (version(m) or Version("0")) < cur_minor][::-1]
        candidates = newer + older
    else:
        candidates = order[::-1]
        if driver_cuda_int is None:
            # Neither the installed release nor the driver is known: the newest release built
            # for the lowest CUDA major that runs these GPUs asks the least of a driver nobody read.
            def lowest_cuda(minor: str) -> int:
                codes = [cuda_to_int(variant_cuda(v) or "") or 0 for v in release_variants(minor, platform)
                         if variant_cuda(v) and (a := arch_list(minor, v, platform)) is not None
                         and all(runs_on(a, cc, reach_of(a, variant_cuda(v))).runs for cc in ccs)
                         and (latest_patch(minor) or minor, v) not in excluded and (minor, v) not in excluded]
                return min(codes) if codes else 1 << 30
            # By CUDA major only, and no lower than 12 (drivers since 2022 run it): the newest release
            # within that, never an old release for the sake of a lower minor or an older major.
            candidates = sorted(candidates, key=lambda m: max(cuda_major(lowest_cuda(m)), 12))
    for minor in candidates:
        row = releases()[minor]
        if python and minor_of(python) not in row["python"]:
            continue
        best: tuple[tuple[bool, int], str, ArchList, str] | None = None
        for variant in release_variants(minor, platform):
            cuda = variant_cuda(variant)
            if cuda is None:
                continue
            patch = latest_patch(minor) or minor
            if (patch, variant) in excluded or (minor, variant) in excluded:
                continue
            code = cuda_to_int(cuda) or 0
            how = driver_runs(cuda, driver_cuda_int)
            if how is None:
                continue
            arch = arch_list(minor, variant, platform)
            if arch is None or not all(runs_on(arch, cc, reach_of(arch, cuda)).runs for cc in ccs):
                continue
            # Unknown driver: the lowest CUDA that works asks the least of it.
            rank = (how == "native", code) if how != "unknown" else (True, -code)
            if best is None or rank > best[0]:
                best = (rank, variant, arch, how)
        if best is not None:
            patch = latest_patch(minor) or minor
            _, variant, arch, runs = best
            why = (f"torch {patch}+{variant} carries {arch.describe()}"
                   + ("" if arch.verified else f" ({said(arch.source, False)})"))
            note = ""
            if driver_cuda_int is None:
                need = min_driver(variant_cuda(variant) or "")
                floor = need.minimum or need.floor
                note = (f"needs a driver for CUDA {variant_cuda(variant)}" + (f" (≥ {floor} on Linux)" if floor else "")
                        + "; the driver was not read: nvidia-smi's 'CUDA Version' must be at least that")
            else:
                have = cuda_from_int(driver_cuda_int)
                note = (f"your driver supports CUDA {have}" if runs == "native" else
                        f"your driver supports CUDA {have}; CUDA {variant_cuda(variant)} runs on it through "
                        "minor-version compatibility")
            return Recommendation(patch, variant, why, arch.verified, arch.source, note, tuple(extras))
    return None


def cpu_build(current: str | None, python: str | None, platform: Platform = "linux_x86_64") -> str | None:
    """The torch release to pin for a CPU-only machine: the installed one when the table lists it (a
    reinstall changes nothing else), else the latest patch of the current release that has a CPU wheel
    for ``python``, else an older one; None when none fits (the command is then unpinned)."""
    if (pin := known_patch(current)) is not None:
        return pin
    newest = current_release()
    for minor in releases_newest_first():
        if newest and (version(minor) or Version("0")) > (version(newest) or Version("0")):
            continue
        row = releases()[minor]
        if python and minor_of(python) not in row["python"]:
            continue
        if "cpu" in release_variants(minor, platform):
            return latest_patch(minor)
    return None


def variant_for_driver(cap: int | None, plat: Platform = "linux_x86_64") -> tuple[str, str]:
    """The newest CUDA wheel variant of the newest release that a driver supporting CUDA ``cap`` (the
    API encoding, None when no driver was read) runs natively, and why."""
    newest = current_release()
    variants = [v for v in release_variants(newest, plat) if variant_cuda(v)] if newest else []
    if cap is None:
        pick = release_default_variant(newest) or (variants[-1] if variants else "cu128")
        return pick, ("No NVIDIA driver was read, so the variant cannot be matched to it; "
                      f"{pick} is the default CUDA build of torch {newest} (table as of {as_of()}).")
    have = cuda_from_int(cap)
    fits = [v for v in variants if cuda_to_int(variant_cuda(v) or "") <= cap]  # type: ignore[operator]
    if fits:
        pick = max(fits, key=lambda v: cuda_to_int(variant_cuda(v) or "0") or 0)
        return pick, f"Your driver supports CUDA {have}, so {pick} wheels run on it."
    for minor in releases_newest_first():
        older = [v for v in release_variants(minor, plat) if variant_cuda(v) and
                 (cuda_to_int(variant_cuda(v) or "") or 0) <= cap]
        if older:
            pick = max(older, key=lambda v: cuda_to_int(variant_cuda(v) or "0") or 0)
            return pick, (f"Your driver supports only CUDA {have}; the newest build for it is {pick} "
                          f"(torch {minor}); or upgrade the driver.")
    return "cu118", f"Your driver supports only CUDA {have}, older than any wheel in the table; upgrade the driver."
