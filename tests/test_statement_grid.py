"""Issue 22's property: every GPU of the catalogue × every CUDA wheel of the last 8 torch releases in the
arch table, written in every statement shape (with and without prose around) -> the arch verdict
``diagnose`` gives is the one the matrix gives (the GPU's compute capability in the wheel's SASS, or a
PTX it can JIT), and a "no kernels" verdict names a wheel that carries the architecture (or the last
release that did, or the CPU build).

The GPUs and wheels are the tables' own rows, read through ``envdoctor.knowledge.compat``: when the
tables grow (600+ GPUs, every wheel), the grid grows with them. To stay fast, the parser reads each
GPU and each wheel once per shape, the two arch checks judge every (compute capability, wheel) the
grid holds on the facts the parser wrote, and a seeded sample of whole texts goes through the full
``diagnose`` pipeline.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from functools import cache
from typing import Any

import pytest
from envdoctor.checks._torch import gpus as read_gpus
from envdoctor.checks.compat_arch import gpu_eol, torch_arch_support

from envdoctor.knowledge import compat, remedies, versions
from envdoctor.model import Facts, Finding, Remediation, Status
from envdoctor.parsers import parse_text
from envdoctor.pipeline.diagnose import diagnose
from envdoctor.registry import load_registry

from .judging import judge
from .statement_shapes import SHAPES, os_statements, render

RELEASES = 8
_CC_FORMS = ("name", "paren", "sm", "dotted", "tuple")  # how a GPU's compute capability is (or is not) written


@cache
def catalogue() -> tuple[tuple[str, versions.CC], ...]:
    """Every GPU of the catalogue (envdoctor/data/gpus.json, generated) and of the hand-kept datasheet rows
    (compat.json ``gpus``): (product name, its compute capability)."""
    out: dict[str, versions.CC] = {}
    for row in [*compat.data()["gpus"]["rows"], *compat.gpu_products()]:
        cc = versions.parse_cc(row["cc"])
        assert cc is not None, row
        if compat.cc_for_gpu(str(row["name"])) == cc:  # else a name two chips share: below
            out.setdefault(str(row["name"]), cc)
    return tuple(out.items())


@cache
def ambiguous() -> frozenset[str]:
    """Product names that chips of different compute capability share (``GeForce GTX 560``: GF110 sm_20,
    GF114 sm_21; ``GeForce GT 730``: GF108 sm_21, GK208 sm_35): the name alone cannot tell them apart and
    the catalogue says so (no capability), so they are in their own test, not the grid. (A name a
    hand-kept datasheet row claims, ``GeForce GTX 750 Ti``, takes that row's chip.)"""
    return frozenset(str(r["name"]) for r in compat.gpu_products() if compat.cc_for_gpu(str(r["name"])) is None)


def test_a_name_two_chips_share_is_unknown_alone_and_read_with_its_capability() -> None:
    assert len(ambiguous()) < 60  # pre-Pascal rebrands; a flood would mean the catalogue's names broke
    assert len(catalogue()) >= 600
    for name in sorted(ambiguous()):
        alone = read_gpus(parse_text(f"GPU: {name}\nPyTorch: 2.8.0+cu128\n"))
        assert all(g.cc is None for g in alone), (name, alone)  # never a guess between two chips
        if any(ch.isdigit() for ch in name):  # a bare word ("ION") names no product a statement reads
            [said] = read_gpus(parse_text(f"GPU: {name} (compute capability 2.1)\nPyTorch: 2.8.0+cu128\n"))
            assert said.cc == (2, 1), (name, said)


@cache
def wheels() -> tuple[tuple[str, str, str], ...]:
    """Every CUDA wheel (torch minor, variant, platform) of the last RELEASES torch releases in the arch table."""
    rows = compat.data()["torch_arch_lists"]["rows"]
    minors = sorted({r["torch"] for r in rows}, key=lambda m: versions.parse(m) or versions.parse("0"))[-RELEASES:]
    return tuple((r["torch"], r["variant"], r["platform"]) for r in rows
                 if r["torch"] in minors and versions.variant_cuda(r["variant"]))


def torch_text(minor: str) -> str:
    return compat.latest_patch(minor) or f"{minor}.0"


def expected(cc: versions.CC, wheel: tuple[str, str, str]) -> str:
    """The matrix's verdict: "sass", "ptx" (runs through JIT) or "none"."""
    minor, variant, platform = wheel
    arch = compat.arch_list(minor, variant, platform)  # type: ignore[arg-type]
    assert arch is not None, wheel
    sup = compat.runs_on(arch, cc, compat.reach_of(arch, versions.variant_cuda(variant)))
    return ("sass" if sup.how == "sass" else "ptx") if sup.runs else "none"


def verdict(findings: Iterable[Finding]) -> str:
    """The arch verdict of diagnose's findings: torch-arch-support's, with gpu-eol's where it defers."""
    found = list(findings)
    arch = next(f for f in found if f.id == "torch-arch-support")
    eol = [f for f in found if f.id == "gpu-eol"]
    if arch.status is Status.OK:
        return "sass"
    if arch.status is Status.WARN and "PTX JIT" in arch.title:
        return "ptx"
    if arch.status in (Status.FAIL, Status.WARN) and "has no kernels" in arch.title:
        return "none"
    if arch.status is Status.SKIP and "no torch wheel runs on it" in arch.title and \
            any(e.status in (Status.FAIL, Status.WARN) and "No torch wheel runs" in e.title for e in eol):
        return "none"
    return f"unexpected: {arch.status.value}: {arch.title}"


def _remedies(rem: Remediation) -> Iterable[Remediation]:
    yield rem
    for alt in rem.alternatives:
        yield from _remedies(alt)


def remedy_problem(findings: Iterable[Finding], cc: versions.CC, platform: str) -> str | None:
    """None when the "no kernels" finding's remedy installs a wheel that carries ``cc`` (or the last release
    that did, or the CPU build; NVIDIA's JetPack builds for a Jetson); else what is wrong."""
    found = [f for f in findings if f.id in ("torch-arch-support", "gpu-eol")
             and f.status in (Status.FAIL, Status.WARN) and ("no kernels" in f.title or "No torch wheel" in f.title)]
    if not found:
        return "no finding says so"
    last = compat.last_release_for(cc, platform)  # type: ignore[arg-type]
    said = []
    for finding in found:
        for rem in _remedies(finding.remediation):
            if any("jetson" in link for link in rem.links):
                return None
            for version, variant in remedies.torch_targets(remedies.typed(rem.commands)):
                said.append(f"{version}+{variant}")
                if variant == "cpu":
                    return None
                if version and variant and (arch := compat.arch_list(version, variant, platform)) is not None \
                        and compat.runs_on(arch, cc, compat.reach_of(arch, versions.variant_cuda(variant))).runs:
                    return None
                if last is not None and (version, variant) == last:
                    return None
    return f"no remedy installs a wheel for {versions.sm(cc)} (said: {said or 'nothing'})"


def _combos() -> list[tuple[str, bool]]:
    return [(shape, prose) for shape in SHAPES for prose in (False, True)]


def gpu_said(n: int, name: str, cc: versions.CC) -> list[tuple[str, str]]:
    """How the n-th GPU is written: its name alone, or its compute capability too, in one of the forms."""
    form = _CC_FORMS[n % len(_CC_FORMS)]
    text = versions.cc_text(cc)
    if form == "paren":
        return [("gpu", f"{name} (compute capability {text})")]
    if form == "sm":
        return [("gpu", name), ("cc", versions.sm(cc))]
    if form == "dotted":
        return [("gpu", name), ("cc", text)]
    if form == "tuple":
        return [("gpu", name), ("cc", f"({cc[0]}, {cc[1]})")]
    return [("gpu", name)]


@cache
def parsed_gpus() -> tuple[tuple[str, versions.CC, Facts], ...]:
    """Each catalogue GPU written in a shape (round robin over every shape, with and without prose),
    and the facts the parser read from it."""
    combos = _combos()
    out = []
    for n, (name, cc) in enumerate(catalogue()):
        shape, prose = combos[n % len(combos)]
        out.append((name, cc, parse_text(render(shape, gpu_said(n, name, cc), prose))))
    return tuple(out)


@cache
def parsed_wheels() -> dict[tuple[str, str, str], list[tuple[str, bool, Facts]]]:
    """Each wheel's torch version (and its platform) written in every shape, with and without prose."""
    return {wheel: [(shape, prose, parse_text(render(shape, [("torch", f"{torch_text(wheel[0])}+{wheel[1]}"),
                                                             *os_statements(wheel[2])], prose)))
                    for shape, prose in _combos()] for wheel in wheels()}


def test_the_grid_is_the_tables() -> None:
    assert len(catalogue()) >= 100 and len({cc for _, cc in catalogue()}) >= 15
    minors = {w[0] for w in wheels()}
    assert len(minors) == RELEASES and {w[2] for w in wheels()} >= {"linux_x86_64", "windows_x86_64"}


def test_every_shape_reads_every_catalogue_gpu_and_its_compute_capability() -> None:
    wrong = []
    for name, cc, facts in parsed_gpus():
        read = read_gpus(facts)
        if len(read) != 1 or read[0].cc != cc:
            wrong.append((name, versions.sm(cc), [(g.name, g.cc, g.cc_from) for g in read]))
    assert not wrong, f"{len(wrong)} of {len(catalogue())} GPUs misread: {wrong[:10]}"


def test_every_shape_reads_every_wheels_torch_and_platform() -> None:
    wrong = []
    for (minor, variant, platform), said in parsed_wheels().items():
        for shape, prose, facts in said:
            version = facts.value("torch.version")
            cuda = facts.value("torch.cuda_version")
            os_name = "Windows" if platform.startswith("windows") else "Linux"
            plat_ok = platform == "linux_x86_64" or facts.value("host.os") == os_name
            arch_ok = platform != "linux_aarch64" or facts.value("host.arch") == "aarch64"
            if version != f"{torch_text(minor)}+{variant}" or cuda != versions.variant_cuda(variant) \
                    or not plat_ok or not arch_ok:
                wrong.append((shape, prose, minor, variant, platform, version, cuda, facts.value("host.os")))
    assert not wrong, wrong[:10]


def _merged(torch_facts: Facts, gpu_facts: Facts) -> Facts:
    """The facts of a text holding both statements: a statement is one line (or a key and its value),
    so the parser reads each the same whatever else the text says (the sampled texts below hold that)."""
    readings = {k: torch_facts.get(k) for k in torch_facts}
    readings.update({k: gpu_facts.get(k) for k in ("nvml.gpus", "nvml.device_count")})
    return Facts(readings)


def _judged(facts: Facts) -> list[Finding]:
    return [*judge(torch_arch_support, facts), *judge(gpu_eol, facts)]


def test_the_arch_verdict_over_the_whole_grid_is_the_matrix_s() -> None:
    # The verdict of a cell depends on the GPU through what the checks read of it: its compute
    # capability, whether it is an integrated part and whether its row is verified. One GPU of each
    # such kind is judged against every wheel, in every shape the wheel was written in; every GPU of
    # the catalogue is then held to the verdict of its kind.
    kinds: dict[tuple[Any, ...], tuple[str, Facts]] = {}
    for name, cc, facts in parsed_gpus():
        gpu = read_gpus(facts)[0]
        info = compat.gpu_by_name(gpu.name) if gpu.name else None
        kinds.setdefault((gpu.cc, compat.is_integrated(cc, gpu.name), info.verified if info else None), (name, facts))
    # The parser's facts for a wheel are the same in every shape (the test above): each (kind, wheel)
    # cell is judged on the facts of one shape, the shapes taken in turn.
    wrong: list[tuple[Any, ...]] = []
    cells = 0
    for w, (wheel, said) in enumerate(parsed_wheels().items()):
        for k, (kind, (name, gpu_facts)) in enumerate(kinds.items()):
            cc = kind[0]
            want = expected(cc, wheel)
            shape, prose, torch_facts = said[(w + k) % len(said)]
            findings = _judged(_merged(torch_facts, gpu_facts))
            got = verdict(findings)
            problem = remedy_problem(findings, cc, wheel[2]) if want == "none" and got == "none" else None
            if got != want or problem:
                wrong.append((name, versions.sm(cc), wheel, shape, prose, want, got, problem))
        cells += len(catalogue())
    assert cells == len(catalogue()) * len(wheels())
    assert not wrong, f"{len(wrong)} wrong: {wrong[:8]}"


@pytest.mark.parametrize("seed, size", [(22, 24), (2026, 300)], ids=["22-24", "2026-300"])  # the larger is slow
def test_a_seeded_sample_of_whole_texts_through_diagnose(seed: int, size: int) -> None:
    # Whole texts (GPU, torch, platform in one shape, prose or not) through parse_text and the full
    # diagnose pipeline, every check registered: the same verdict and a remedy that exists.
    rng = random.Random(seed)
    registry = load_registry()
    gpus = list(enumerate(catalogue()))
    grid = list(wheels())
    combos = _combos()
    wrong = []
    for _ in range(size):
        n, (name, cc) = rng.choice(gpus)
        wheel = rng.choice(grid)
        shape, prose = rng.choice(combos)
        said = [("torch", f"{torch_text(wheel[0])}+{wheel[1]}"), *gpu_said(n, name, cc), *os_statements(wheel[2])]
        rng.shuffle(said)
        text = render(shape, said, prose)
        findings = diagnose(parse_text(text), registry)
        want, got = expected(cc, wheel), verdict(findings)
        problem = remedy_problem(findings, cc, wheel[2]) if want == "none" == got else None
        if got != want or problem:
            wrong.append((name, wheel, shape, prose, want, got, problem, text))
    assert not wrong, wrong[:3]


def test_prose_alone_states_nothing() -> None:
    from .statement_shapes import PROSE_HEAD, PROSE_TAIL

    with pytest.raises(Exception) as info:
        parse_text(PROSE_HEAD + PROSE_TAIL)
    assert "no environment evidence" in str(info.value)

