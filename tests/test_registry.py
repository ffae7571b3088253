"""Registry: built-ins listed explicitly, plugins through the envdoctor.checks entry-point group.

The example plugin is a real (tiny) installed distribution: a .dist-info folder with an
entry_points.txt on sys.path, found by importlib.metadata exactly as pip would leave it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from envdoctor.model import Facts, Status, ok
from envdoctor.pipeline.diagnose import diagnose, run_check, select
from envdoctor.registry import AUTOLOAD_ENV, CheckSpec, Registry, RegistryError, check, load_registry


def _install_plugin(site, dist: str, module: str, code: str, group_value: str | None = None) -> None:
    (site / f"{module}.py").write_text(textwrap.dedent(code))
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[envdoctor.checks]\n{dist} = {group_value or module}\n")


PLUGIN = """
from envdoctor import check, kit

@check("site-nfs-home", "Home directory is not on NFS", needs=("host.os",))
def nfs(facts):
    return kit.warn("Home is on NFS", detail="torch.compile caches are slow there",
                    remedy=kit.Remediation("Point TORCHINDUCTOR_CACHE_DIR at local disk.",
                                           ("export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor",)))
"""


def test_builtins_load_and_never_import_top_level_checks():
    reg = load_registry(environ={AUTOLOAD_ENV: "1"})
    assert {"host-shm-size", "torch-import", "torch-cpu-build"} <= {s.id for s in reg}
    assert all(s.provider == "envdoctor" for s in reg)
    assert "checks" not in sys.modules


def test_plugin_from_an_installed_distribution(tmp_path, monkeypatch):
    _install_plugin(tmp_path, "envdoctor-site-checks", "envdoctor_site_checks", PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = load_registry(environ={})
    spec = reg.checks["site-nfs-home"]
    assert spec.provider == "envdoctor-site-checks"
    [finding] = diagnose(Facts({"host.os": ok("Linux")}), [spec])
    assert finding.id == "site-nfs-home" and finding.status is Status.WARN
    assert finding.remediation.commands == ("export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor",)
    # The autoload switch turns discovery off.
    assert "site-nfs-home" not in load_registry(environ={AUTOLOAD_ENV: "1"}).checks


def test_broken_plugin_becomes_a_warning(tmp_path, monkeypatch):
    _install_plugin(tmp_path, "envdoctor-broken", "envdoctor_broken", "raise ImportError('libfoo.so: cannot open')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = load_registry(environ={})
    assert "torch-import" in reg.checks
    assert any("envdoctor-broken" in w and "libfoo.so" in w for w in reg.warnings)


def test_duplicate_id_fails_loudly(tmp_path, monkeypatch):
    _install_plugin(tmp_path, "envdoctor-dupe", "envdoctor_dupe", """
        from envdoctor import check
        @check("torch-import", "mine")
        def mine(facts):
            return None
    """)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RegistryError, match="duplicate check id 'torch-import'.*envdoctor-dupe"):
        load_registry(environ={})


def test_duplicate_plugin_stops_the_cli_with_exit_3(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    _install_plugin(site, "envdoctor-dupe", "envdoctor_dupe", """
        from envdoctor import check
        @check("torch-import", "mine")
        def mine(facts):
            return None
    """)
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "envdoctor", "list"], env=env, capture_output=True, text=True)
    assert proc.returncode == 3 and "duplicate check id" in proc.stderr and "Traceback" not in proc.stderr


def test_non_kebab_ids_are_refused():
    with pytest.raises(RegistryError):
        check("Not_Kebab", "x")


def test_crashing_check_becomes_an_error_finding():
    @check("always-crashes", "Crashes")
    def crash(facts):
        return {}["missing"]

    [f] = run_check(crash, Facts({}))
    assert f.status is Status.ERROR and "KeyError" in f.detail and f.id == "always-crashes"


def test_a_needed_fact_that_timed_out_makes_the_check_error():
    from envdoctor.model import Reason, missing

    @check("needs-nvml", "Needs NVML", needs=("nvml.driver_version",))
    def judge(facts):
        return None

    [f] = run_check(judge, Facts({"nvml.driver_version": missing(Reason.TIMEOUT, detail="stuck in nvmlInit")}))
    assert f.status is Status.ERROR and "stuck in nvmlInit" in f.detail


def test_select_reports_unknown_ids():
    reg = load_registry(environ={AUTOLOAD_ENV: "1"})
    chosen, unknown = select(reg, only=["torch-import", "no-such-check"])
    assert [c.id for c in chosen] == ["torch-import"] and unknown == ["no-such-check"]
    assert isinstance(chosen[0], CheckSpec)


# -- declarations instead of ids: microchecks and owned symptoms ----------------------------------------------------
def _owner_queries() -> set[str]:
    """Every literal symptom the built-in checks ask owner_of about (f-strings give their fixed part)."""
    import ast
    from pathlib import Path

    asked: set[str] = set()
    for path in (Path(__file__).resolve().parent.parent / "checks").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "owner_of" and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant):
                    asked.add(arg.value)
                elif isinstance(arg, ast.JoinedStr) and isinstance(arg.values[0], ast.Constant):
                    asked.add(str(arg.values[0].value) + "*")
    return asked


def test_every_owned_symptom_has_one_owner_and_someone_who_defers_to_it():
    from fnmatch import fnmatch

    from envdoctor.registry import owner_of

    reg = load_registry(environ={AUTOLOAD_ENV: "1"})
    owned = {symptom: spec.id for spec in reg for symptom in spec.owns}
    assert owned == {"cuda.init:802": "fabric-manager", "cuda.init:804": "cuda-forward-compat",
                     "cuda.init:35": "driver-too-old", "cuda.init:35:no-gpus-requested": "container-gpu",
                     "library_errors:cudnn": "cudnn-mismatch", "library_errors:nccl": "nccl-mismatch",
                     "nvml.gpus:no-torch-wheel": "gpu-eol", "cuda.init:46": "gpu-compute-mode"}
    assert all(owner_of(s) == owner for s, owner in owned.items()) and owner_of("cuda.init:999") is None
    asked = _owner_queries()
    assert all(any(fnmatch(s, q) for q in asked) for s in owned), (asked, owned)


def test_a_second_owner_of_a_symptom_fails_registration():
    reg = Registry()
    reg.add(check("first-owner", "First", owns=("cuda.init:802",))(lambda facts: None))
    with pytest.raises(RegistryError, match=r"'second-owner'.*'cuda.init:802'.*'first-owner'"):
        reg.add(check("second-owner", "Second", owns=("cuda.init:802",))(lambda facts: None))
    with pytest.raises(RegistryError, match="a symptom is"):
        check("bad-symptom", "Bad", owns=("fabric manager",))


def test_microchecks_are_declared_not_recognised_by_their_ids():
    reg = load_registry(environ={AUTOLOAD_ENV: "1"})
    micro = [s.id for s in reg if s.micro]
    assert micro == [s.id for s in reg if s.id.startswith("micro-")] and len(micro) == 7
    assert [s.id for s in reg if s.micro and s.healthcheck] == ["micro-device"]
    assert all(s.needs and all(k.startswith("micro.") for k in s.needs) for s in reg if s.micro)


def test_the_public_api_is_served_lazily_and_typed_for_plugin_authors():
    """Every public name resolves at run time, and each is also imported under TYPE_CHECKING so a
    type checker sees the real class or function, not Any."""
    import ast
    from pathlib import Path

    import envdoctor

    for name in envdoctor.__all__:
        assert getattr(envdoctor, name) is not None
    assert envdoctor.check is check and envdoctor.CheckSpec is CheckSpec
    tree = ast.parse((Path(envdoctor.__file__)).read_text())
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    typed = {a.asname or a.name for imp in guarded.body if isinstance(imp, ast.ImportFrom) for a in imp.names}
    assert typed == set(envdoctor.__all__) - {"__version__"}
    assert {"check", "kit", "Reason", "Reading", "Facts", "CheckSpec", "CheckResult"} <= typed


def test_a_check_that_defers_names_the_owner_it_looked_up():
    from envdoctor.checks import compat as compat_checks
    from envdoctor.checks import driver as driver_checks

    from .fakes.nvidia_facts import healthy_gpu, nv_facts

    kepler = nv_facts(gpus=[healthy_gpu(0, name="GeForce GTX 680", compute_capability="3.0")],
                      torch__version="2.6.0+cu126", torch__cuda_version="12.6",
                      torch__arch_list=["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"])
    [f] = run_check(compat_checks.torch_arch_support, kepler)
    assert f.status is Status.SKIP and f.title.endswith("judged by gpu-eol")
    for code, owner in ((802, "fabric-manager"), (804, "cuda-forward-compat"), (35, "driver-too-old")):
        [f] = run_check(driver_checks.cuda_init, nv_facts(cuda__init={"code": code, "name": "X", "message": "m"}))
        assert f.status is Status.SKIP and f.title.endswith(f"judged by {owner}"), f.title
    no_gpus = nv_facts(cuda__init={"code": 35, "name": "X", "message": "m"}, container__gpus_requested=False)
    [f] = run_check(driver_checks.cuda_init, no_gpus)
    assert f.title.endswith("judged by container-gpu")


def test_every_check_defined_under_checks_is_registered():
    # A module under checks/ missing from checks/__init__.py BUILTIN (or a check missing from its
    # module's CHECKS list) would never run, while its own tests, which call it directly, pass.
    import importlib
    import pkgutil

    import envdoctor.checks as builtin
    from envdoctor.checks import cluster

    # The cluster checks run under `check --distributed` only, from cluster.CHECKS.
    registered = {spec.id for spec in load_registry(environ={AUTOLOAD_ENV: "1"})} | {s.id for s in cluster.CHECKS}
    for info in pkgutil.iter_modules(builtin.__path__):
        module = importlib.import_module(f"envdoctor.checks.{info.name}")
        for value in vars(module).values():
            if isinstance(value, CheckSpec) and value.id not in registered:
                pytest.fail(f"check {value.id!r} (checks/{info.name}.py) is never run: add {info.name!r} to "
                            "BUILTIN in checks/__init__.py (or the check to its module's CHECKS list)")


def test_the_cheap_plugin_scan_defers_to_importlib_metadata_whenever_it_could_be_wrong(tmp_path, monkeypatch):
    """No distribution declaring the group: importlib.metadata is not asked (it costs ~25 ms on every
    command). A dist-info naming the group, a zip or egg on sys.path, or another kind of distribution
    finder: it is asked, so the scan can cost a few milliseconds but never hide a plugin."""
    from envdoctor import registry

    clean = tmp_path / "clean"
    clean.mkdir()
    other = clean / "other-1.0.dist-info"
    other.mkdir()
    (other / "entry_points.txt").write_text("[console_scripts]\nother = other:main\n")
    (clean / "plain-2.0.dist-info").mkdir()  # no entry_points.txt at all
    (clean / "legacy.egg-info").write_text("Metadata-Version: 1.0\n")  # an egg-info file, not a folder
    monkeypatch.setattr(sys, "path", [str(clean), str(tmp_path / "absent")])
    assert registry._plugins_possible() is False
    site = tmp_path / "site"
    site.mkdir()
    _install_plugin(site, "envdoctor-site-x", "site_x", PLUGIN)
    monkeypatch.setattr(sys, "path", [str(clean), str(site)])
    assert registry._plugins_possible() is True
    (tmp_path / "bundle.zip").write_bytes(b"PK\x05\x06" + b"\x00" * 18)
    monkeypatch.setattr(sys, "path", [str(clean), str(tmp_path / "bundle.zip")])
    assert registry._plugins_possible() is True

    class Finder:
        @staticmethod
        def find_distributions(*args, **kwargs):
            return iter(())

    monkeypatch.setattr(sys, "path", [str(clean)])
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, Finder])
    assert registry._plugins_possible() is True
