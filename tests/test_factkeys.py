"""The fact-key registry (envdoctor/knowledge/factkeys.py) is the contract: probes, parsers and checks are
validated against it when defined, a real run and every corpus paste write only keys it lists with
values of the types it names, and docs/FACTS.md's tables are generated from it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from envdoctor.knowledge import factkeys
from envdoctor.model import Facts, Reading, ok
from envdoctor.parsers import PARSERS, ParseError, parse_text
from envdoctor.probes import Options, ProbeSpec, builtin_probes, run_probes
from envdoctor.registry import AUTOLOAD_ENV, CheckSpec, Registry, RegistryError, check, load_registry

from .fakes.nvidia_fakes import fake_cuda, fake_nvml, host_with

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).resolve().parent / "corpus"


def _nothing(facts: Facts) -> None:
    return None


# -- registration ---------------------------------------------------------------------------------------------
def test_a_needs_key_nothing_produces_fails_registration_naming_key_and_check():
    with pytest.raises(RegistryError, match=r"check 'typo-check' needs=: unknown fact key 'nvml.driver_verison'"):
        check("typo-check", "Has a typo", needs=("nvml.driver_version", "nvml.driver_verison"))
    spec = CheckSpec("hand-made", "Built without the decorator", _nothing, needs=("torch.cuda_avialable",))
    with pytest.raises(RegistryError, match=r"'hand-made'.*'torch.cuda_avialable'"):
        Registry().add(spec)


def test_a_plugin_with_an_unknown_needs_key_becomes_a_warning_naming_it(tmp_path, monkeypatch):
    (tmp_path / "envdoctor_typo.py").write_text(
        "from envdoctor import check\n\n"
        "@check('typo-plugin', 'Typo', needs=('host.shm_sise',))\n"
        "def typo(facts):\n    return None\n")
    info = tmp_path / "envdoctor-typo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: envdoctor-typo\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[envdoctor.checks]\nenvdoctor-typo = envdoctor_typo\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = load_registry(environ={})
    assert "typo-plugin" not in reg.checks
    assert any("host.shm_sise" in w and "typo-plugin" in w for w in reg.warnings), reg.warnings


def test_a_probe_key_outside_the_registry_or_its_producer_fails():
    with pytest.raises(RegistryError, match=r"probe 'mine' keys: unknown fact key 'host.gpu_temperature'"):
        ProbeSpec("mine", lambda host, options: {}, ("host.os", "host.gpu_temperature"))
    # A real key, but the registry does not say this probe writes it.
    with pytest.raises(RegistryError, match=r"'nvml.gpus' is not listed as written by probe:host"):
        ProbeSpec("host", lambda host, options: {}, ("host.os", "nvml.gpus"))


def test_every_builtin_check_probe_and_parser_passes():
    reg = load_registry(environ={AUTOLOAD_ENV: "1"})
    assert len(reg) > 40 and not reg.warnings
    for spec in reg:
        assert not factkeys.unknown(spec.needs), spec.id
    assert set(_producers()) >= {"host", "python", "nvml", "cuda-driver", "libraries", "micro"}
    for name, keys in PARSERS.items():
        assert not factkeys.not_produced_by(keys, f"parser:{name}"), name


# -- the registry itself --------------------------------------------------------------------------------------
def _producers() -> dict[str, set[str]]:
    """Each built-in probe's keys by the name it reports them under (a probe with parts, the NVML
    and cuInit one, reports each part as a probe of its own)."""
    return {name: set(keys) for p in builtin_probes() for name, keys in (p.parts or ((p.name, p.keys),))}


def test_every_registry_key_has_a_producer_that_declares_it():
    from envdoctor.pipeline import cluster, collect

    probes = _producers()
    commands = {c: set(collect.PLAN_KEYS) for c in collect.PLAN_COMMANDS}
    commands["distributed"] = set(cluster.KEYS) | commands.get("distributed", set())
    for entry in factkeys.FACT_KEYS.values():
        assert entry.type in factkeys.TYPES, entry.key
        assert entry.doc.strip() and entry.producers, entry.key
        assert re.fullmatch(r"[a-z]+\.[a-z0-9_]+", entry.key), entry.key
        for producer in entry.producers:
            kind, _, name = producer.partition(":")
            declared = {"probe": probes, "parser": PARSERS, "command": commands}.get(kind, {}).get(name)
            assert declared is not None, f"{entry.key}: unknown producer {producer}"
            assert entry.key in declared, f"{entry.key}: {producer} does not declare it"


def test_the_probes_and_parsers_declare_nothing_the_registry_does_not_attribute_to_them():
    claimed = {(p, e.key) for e in factkeys.FACT_KEYS.values() for p in e.producers}
    declared = {(f"probe:{name}", k) for name, keys in _producers().items() for k in keys}
    declared |= {(f"parser:{name}", k) for name, keys in PARSERS.items() for k in keys}
    from envdoctor.pipeline import cluster, collect

    declared |= {("command:distributed", k) for k in cluster.KEYS}
    declared |= {(f"command:{c}", k) for c in collect.PLAN_COMMANDS for k in collect.PLAN_KEYS}
    assert declared == claimed


def test_conforms_knows_the_vocabulary():
    assert factkeys.conforms(3, "int") and not factkeys.conforms(True, "int") and not factkeys.conforms(None, "int")
    assert factkeys.conforms(None, "int|null") and factkeys.conforms(2, "float") and factkeys.conforms(0.5, "float")
    assert factkeys.conforms((1,), "list") and factkeys.conforms({}, "object") and not factkeys.conforms("x", "list")
    assert factkeys.conforms(False, "bool") and not factkeys.conforms(0, "bool")


def _assert_in_contract(facts: Facts, where: str) -> None:
    unknown = sorted(set(facts) - set(factkeys.FACT_KEYS))
    assert not unknown, f"{where} wrote keys the registry does not list: {unknown}"
    for key, reading in facts.items():
        if reading.ok:
            entry = factkeys.FACT_KEYS[key]
            assert factkeys.conforms(reading.value, entry.type), (
                f"{where}: {key} = {reading.value!r:.80} is not {entry.type}")


# -- what a real run and the corpus write ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> Facts:
    """The built-in probes on this machine, with the stand-in libnvidia-ml and libcuda (two GPUs)."""
    tmp = tmp_path_factory.mktemp("run")
    host = host_with(fake_nvml(tmp, {"count": 2, "gpu1.cc": "9.0", "gpu1.mig": 1, "gpu1.mig_devices": 1}),
                     fake_cuda(tmp, {"count": 2}))
    facts, runs = run_probes(host, Options(timeout=5.0, micro=False), builtin_probes())
    assert {r.name for r in runs} >= {"host", "python", "nvml", "cuda-driver", "libraries"}
    return facts


def test_a_real_run_writes_only_registry_keys_of_the_registry_types(real_run):
    _assert_in_contract(real_run, "the probes")
    probe_keys = {k for p in builtin_probes() for k in p.keys}
    assert probe_keys <= set(real_run)
    # The stand-ins make the NVIDIA facts real values, not reasons, so their types were checked.
    assert real_run["nvml.gpus"].ok and real_run["cuda.init"].ok and real_run["visibility.cuda_devices"].ok


def _corpus() -> list[Path]:
    return sorted(p for p in CORPUS.iterdir() if p.suffix == ".txt")


def test_every_corpus_paste_writes_only_registry_keys_of_the_registry_types():
    written: set[str] = set()
    for path in _corpus():
        try:
            facts = parse_text(path.read_text(encoding="utf-8", errors="replace"))
        except ParseError:
            continue
        _assert_in_contract(facts, path.name)
        written |= {k for k, r in facts.items() if r.ok}
    # Every key the registry says a parser writes is written, read fine, by some paste; except
    # env.vars, which only vLLM's variant prints (tests/test_parsers.py), and host.shm_size, which a
    # paste states only through `df -h /dev/shm` (tests/test_evidence_checks.py). (torch.nccl_version,
    # which collect_env never prints, is written by a hand-written list's "**NCCL**: 2.25.1".) No corpus
    # thread pastes `lspci -nn` output either: pci.nvidia_devices is held by tests/test_pci_ids_text.py, nor
    # `kubectl describe node`: text.node_gpus is held by tests/test_tool_lines_and_prose.py; nor TensorFlow's GPU
    # list, pip's missing extra, `wsl -l -v` or a Compose file: text.tensorflow_gpus, text.pip_missing_extras,
    # text.wsl_distros and text.compose_gpus are held by tests/test_paste_judged.py; nor nvidia-container-cli's
    # "load library failed": container.runtime_library_error is held by tests/test_message_catalogue.py; nor Windows'
    # `ver` line or a sentence naming WSL: host.windows_build and text.wsl_named are held by tests/test_paste_judged.py;
    # nor Slurm's --gpus-per-task: launch.slurm_gpus_per_task is too.
    pasted = {e.key for e in factkeys.FACT_KEYS.values() if e.parsers}
    assert sorted(pasted - written) == ["container.runtime_library_error", "env.vars", "host.shm_size",
                                        "host.windows_build", "launch.slurm_gpus_per_task", "pci.nvidia_devices",
                                        "text.compose_gpus",
                                        "text.node_gpus", "text.pip_missing_extras", "text.tensorflow_gpus",
                                        "text.wsl_distros", "text.wsl_named"]


def test_every_literal_key_a_check_reads_is_in_the_registry():
    """facts.get/value("…") and evidence(facts, "…") in checks/: a typo there reads as not_collected."""
    bad = []
    for path in sorted((ROOT / "checks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            receiver = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
            if receiver == "facts" and name in ("get", "value"):
                args = node.args[:1]
            elif name in ("evidence", "_evidence"):
                args = node.args[1:]
            else:
                continue
            for arg in args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value not in factkeys.FACT_KEYS:
                    bad.append(f"{path.name}:{node.lineno}: {arg.value}")
    assert bad == []


# -- docs/FACTS.md --------------------------------------------------------------------------------------------
def test_facts_md_tables_are_the_generated_ones():
    text = (ROOT / "docs" / "FACTS.md").read_text(encoding="utf-8")
    assert factkeys.render_doc(text) == text, "run: python -m envdoctor.knowledge.factkeys docs/FACTS.md"
    namespaces = {k.split(".", 1)[0] for k in factkeys.FACT_KEYS}
    assert factkeys.documented_namespaces(text) == namespaces


def test_facts_md_lists_every_check_id():
    text = (ROOT / "docs" / "FACTS.md").read_text(encoding="utf-8")
    section = text.split("## Check ids", 1)[1]
    listed = set(re.findall(r"`([a-z0-9]+(?:-[a-z0-9]+)+)`", section))
    from envdoctor.checks import cluster

    # The cluster checks are run by `check --distributed` only (not in the registry's list).
    registered = {s.id for s in load_registry(environ={AUTOLOAD_ENV: "1"})} | {s.id for s in cluster.CHECKS}
    assert not registered - listed, f"check ids missing from docs/FACTS.md's 'Check ids': {sorted(registered - listed)}"
    assert not listed - registered, f"docs/FACTS.md's 'Check ids' names unregistered ids: {sorted(listed - registered)}"


def test_the_generator_rewrites_a_stale_table(tmp_path):
    doc = tmp_path / "FACTS.md"
    doc.write_text("# intro kept\n<!-- facts-table: env -->\n| stale |\n<!-- end facts-table -->\ntail kept\n")
    assert factkeys.main([str(doc), "--check"]) == 1
    assert factkeys.main([str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("# intro kept\n") and text.endswith("tail kept\n") and "| env.vars | object |" in text
    assert "stale" not in text and factkeys.main([str(doc), "--check"]) == 0


def test_a_reading_of_a_registry_key_round_trips():
    reading = Reading.from_dict(ok(12080, "nvml").to_dict())
    assert factkeys.conforms(reading.value, factkeys.FACT_KEYS["nvml.cuda_driver_version"].type)


def test_the_test_builders_write_the_same_contract():
    """The healthy nodes tests judge are built from registry keys of the registry types too."""
    from .builders import facts as core_facts
    from .fakes.nvidia_facts import nv_facts

    _assert_in_contract(core_facts(), "tests/builders.py")
    _assert_in_contract(nv_facts(), "tests/fakes/nvidia_facts.py")


def test_fact_key_validation_lives_in_factkeys_and_no_producer_imports_the_registry_for_it() -> None:
    """Probes, parsers and the cluster command validate their keys through envdoctor.knowledge.factkeys; the
    check registry raises the same RegistryError, so callers catch one class."""
    import ast
    from pathlib import Path

    from envdoctor import registry
    from envdoctor.knowledge import factkeys

    assert registry.validate_fact_keys is factkeys.validate_fact_keys
    assert registry.RegistryError is factkeys.RegistryError
    root = Path(factkeys.__file__).parent.parent
    for path in (root / "parsers" / "__init__.py", root / "probes" / "spec.py", root / "pipeline" / "cluster.py"):
        names = {n.module for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ImportFrom) and n.module}
        assert "registry" not in {m.rsplit(".", 1)[-1] for m in names}, path
