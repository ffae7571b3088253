"""remedies.py writes every command a finding prints: the index comes from the table, pip runs as the
target interpreter, flags come in one order."""

from __future__ import annotations

from envdoctor import compat, kit, remedies
from envdoctor.recommend import Recommendation


def test_index_url_is_the_tables_base() -> None:
    base = compat.data()["index"]["base"]
    assert remedies.index_url("cu128") == f"{base}cu128"
    assert base == "https://download.pytorch.org/whl/"


def test_pip_runs_as_the_target_interpreter_when_known() -> None:
    assert remedies.pip("/opt/venv/bin/python", "list") == "/opt/venv/bin/python -m pip list"
    assert remedies.pip(None, "list") == "pip list"


def test_torch_install_shapes() -> None:
    assert remedies.torch_install("/v/bin/python", "2.7.1", "cu128", ("torchvision",)) == (
        "/v/bin/python -m pip install --force-reinstall torch==2.7.1 torchvision "
        "--index-url https://download.pytorch.org/whl/cu128")
    assert remedies.torch_install(None, None, "cpu", force=False) == (
        "pip install torch --index-url https://download.pytorch.org/whl/cpu")
    assert remedies.torch_install(None, "2.7.1", None, force=False) == "pip install torch==2.7.1"


def test_pip_install_flag_order_and_quoting() -> None:
    cmd = remedies.pip_install("py", ["nvidia-cudnn-cu12==9.1.0.70", "a b"], force=True, no_deps=True, quote=True)
    assert cmd == "py -m pip install --force-reinstall --no-deps nvidia-cudnn-cu12==9.1.0.70 'a b'"
    assert remedies.pip_install("py", "nvidia-ml-py", upgrade=True) == "py -m pip install -U nvidia-ml-py"
    assert remedies.pip_uninstall("py", ["pynvml", "nvidia-ml-py"]) == "py -m pip uninstall -y pynvml nvidia-ml-py"


def test_gpu_resets_once_per_gpu() -> None:
    assert remedies.gpu_resets([0, 0, "0000:07:00.0"], "when idle") == (
        "sudo nvidia-smi -r -i 0   # when idle", "sudo nvidia-smi -r -i 0000:07:00.0   # when idle")


def test_driver_packages() -> None:
    assert remedies.apt_install(remedies.driver_branch_package(580)) == "sudo apt install nvidia-driver-580"
    assert remedies.apt_install(remedies.compute_library_package("570"), reinstall=True) == (
        "sudo apt install --reinstall libnvidia-compute-570")
    assert remedies.dkms_rebuild("now").endswith("&& sudo dkms autoinstall   # now")


def test_recommendation_and_kit_ask_remedies() -> None:
    rec = Recommendation("2.7.1", "cu118", "why", True, extras=("torchvision",))
    assert rec.command() == remedies.torch_install(None, "2.7.1", "cu118", ("torchvision",))
    assert rec.command("/p") == remedies.torch_install("/p", "2.7.1", "cu118", ("torchvision",))
    assert rec.index_url == remedies.index_url("cu118")
    assert kit.pip_install_torch("2.7.1", "cu118", "torchvision", python="/p") == rec.command("/p")


def test_first_import_of_kit_from_the_package() -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "from envdoctor import kit; print(kit.__name__)"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "envdoctor.kit"


def test_each_link_is_written_once() -> None:
    links = {name: value for name, value in vars(remedies).items()
             if name.isupper() and isinstance(value, str) and value.startswith("https://")}
    by_url: dict[str, list[str]] = {}
    for name, url in links.items():
        by_url.setdefault(url, []).append(name)
    assert not {u: n for u, n in by_url.items() if len(n) > 1}
