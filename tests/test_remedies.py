"""remedies.py writes every command a finding prints: the index comes from the table, pip runs as the
target interpreter, flags come in one order."""

from __future__ import annotations

from envdoctor import kit
from envdoctor.knowledge import compat, remedies
from envdoctor.knowledge.recommend import Recommendation


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


# -- typed commands -----------------------------------------------------------------------------------

def test_a_line_is_the_printed_string_and_carries_its_typed_command() -> None:
    import json
    import pickle

    line = remedies.torch_install("/v/bin/python", "2.7.1", "cu128", ("torchvision",), note="the build torch needs")
    assert isinstance(line, str) and isinstance(line, remedies.Line)
    assert line == ("/v/bin/python -m pip install --force-reinstall torch==2.7.1 torchvision "
                    "--index-url https://download.pytorch.org/whl/cu128   # the build torch needs")
    cmd = line.command
    assert isinstance(cmd, remedies.PipInstall)
    assert (cmd.python, cmd.packages, cmd.variant, cmd.force_reinstall) == ("/v/bin/python", ("torch==2.7.1", "torchvision"),
                                                                            "cu128", True)
    assert cmd.torch_targets() == (("2.7.1", "cu128"),)
    assert json.dumps([line]) == json.dumps([str(line)])  # the saved report's remediation.commands: strings
    again = pickle.loads(pickle.dumps(line))
    assert again == line and again.command == cmd


def test_what_a_command_installs_is_read_from_its_fields() -> None:
    assert remedies.torch_install(None, None, "cpu").command.torch_targets() == ((None, "cpu"),)
    assert remedies.torch_install(None, "7.0", None).command.torch_targets() == ((None, None),)  # not a release: no pin
    assert remedies.pip_install(None, "torchvision", variant="cu128").command.torch_targets() == ()
    assert remedies.pip_install(None, "torch>=2").command.torch_targets() == ()  # a range is no one build
    chain = remedies.pip_replace("py", "cupy-cuda11x", "cupy-cuda12x")
    assert chain == "py -m pip uninstall -y cupy-cuda11x && py -m pip install cupy-cuda12x"
    assert [type(s).__name__ for s in chain.command.steps()] == ["PipUninstall", "PipInstall"]
    assert remedies.pip_uninstall(None, ["torch", "torchvision"]).command.uninstalls_torch
    assert not chain.command.uninstalls_torch and not chain.command.torch_targets()
    # A command shown for another OS, commented out, installs nothing here.
    other = remedies.elsewhere("on Linux", remedies.torch_install(None, "2.7.1", "cu128"))
    assert other.startswith("# on Linux: pip install") and other.command.torch_targets() == ()


def test_driver_installs_are_typed() -> None:
    assert remedies.driver_install(580, note="R580") == "sudo apt install nvidia-driver-580   # R580"
    assert remedies.ubuntu_drivers_install() == "sudo ubuntu-drivers install"
    assert remedies.driver_install_windows().startswith("nvidia-smi   # after installing the driver from nvidia.com")
    for line in (remedies.driver_install(580), remedies.ubuntu_drivers_install(), remedies.driver_install_windows()):
        assert line.command.installs_driver and remedies.installs_driver([line])
    assert remedies.installs_driver([remedies.apt_install(remedies.driver_branch_package(570))])
    assert not remedies.installs_driver([remedies.apt_install(remedies.compute_library_package("570")),
                                         remedies.gpu_reset(0), "sudo apt install nvidia-driver-580"])
    assert remedies.installs_driver([], [remedies.DRIVER_DOWNLOAD])


def test_system_steps_render_one_way() -> None:
    assert remedies.kernel_log("xid|nvrm", flags="-iE", tail=20) == "sudo dmesg | grep -iE 'xid|nvrm' | tail -20"
    assert remedies.kernel_log("xid", times=True) == "sudo dmesg -T | grep -i xid"
    assert remedies.kernel_log(tail=0) == "sudo dmesg | tail"
    assert remedies.env_set("CUDA_DEVICE_ORDER", "PCI_BUS_ID") == "export CUDA_DEVICE_ORDER=PCI_BUS_ID"
    assert remedies.env_unset("LD_PRELOAD", "why") == "unset LD_PRELOAD   # why"
    assert remedies.container_run("--gpus all") == "docker run --gpus all …"
    assert remedies.container_run("--rm", "--gpus all", image="ubuntu", argv="nvidia-smi") == (
        "docker run --rm --gpus all ubuntu nvidia-smi")
    assert remedies.then(remedies.ldconfig(), "nvidia-smi") == "sudo ldconfig && nvidia-smi"
    assert remedies.gpu_reset(3).command == remedies.GpuReset(3)


# -- no command is written outside remedies --------------------------------------------------------

import ast  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402

#: A command word anywhere in a string, or one that only starts a command (``export``, ``unset``,
#: ``modprobe``, ``apt``) at the start of a line or after a shell separator or a backtick.
_ANYWHERE = re.compile(r"\bpip3?\s+(?:install|uninstall)\b|\bapt(?:-get|-mark)?\s+(?:install|hold|remove|purge)\b"
                       r"|\bsudo\b|\bnvidia-smi\s+-r\b|\bconda\s+(?:install|remove)\b|\bdocker\s+(?:run|restart)\b")
_COMMAND_START = re.compile(r"(?:^|\n|`|\$\(|&&|;|\|)\s*(?:modprobe|export|unset|apt|apt-get)\s")
CHECKS = Path(__file__).resolve().parent.parent / "checks"


def command_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string constant (f-strings: their literal parts, ``{}`` for each field)
    that writes a command."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if _ANYWHERE.search(text) or _COMMAND_START.search(text):
            found.append((node.lineno, text))
    return found


def test_the_detector_sees_commands_and_not_prose() -> None:
    for src in ('"sudo reboot"', 'f"export X={x}"', '"pip install torch"', '"x && modprobe nvidia"', '"unset FOO"',
                '"sudo apt install nvidia-driver-580"', '"docker run --gpus all …"', "f'`{a}` or `apt install b`'",
                '"nvidia-smi -r -i 0"', '"conda install -c nvidia x"', '"apt-get install -y x"', '"conda remove x"',
                '"docker restart <container>"'):
        assert command_literals(src), src
    for src in ('"normally done by the udev rules or nvidia-modprobe"', '"or unset the variable to let NCCL choose"',
                '"under srun export MASTER_ADDR"', '"dmesg: \'Lockdown: modprobe: unsigned module\'"', '"nvidia-smi -L"'):
        assert not command_literals(src), src


def test_no_check_writes_a_command_itself() -> None:
    """Every pip, apt, sudo, modprobe, export, conda and docker command a check prints comes from
    envdoctor.knowledge.remedies (typed, rendered once), so diagnose.cohere can read what it does."""
    found = {f"{p.name}:{line}": text[:100] for p in sorted(CHECKS.glob("*.py"))
             for line, text in command_literals(p.read_text(encoding="utf-8"))}
    assert not found, found


def test_every_command_the_corpus_prints_that_installs_or_runs_as_root_is_typed() -> None:
    """On every corpus case each printed command that installs, runs as root or sets the environment is
    a remedies.Line (so cohere reads its type), and its words are what its type renders."""
    from tests.corpus_judged import judged

    untyped: set[str] = set()
    typed = 0
    for _name, _facts, findings in judged():
        for f in findings:
            stack = [f.remediation]
            while stack:
                rem = stack.pop()
                stack.extend(rem.alternatives)
                for c in rem.commands:
                    if isinstance(c, remedies.Line):
                        typed += 1
                        assert c == c.command.render()
                    elif _ANYWHERE.search(c) or _COMMAND_START.search(c):
                        untyped.add(f"{f.id}: {c}")
    assert typed > 100 and not untyped, sorted(untyped)
