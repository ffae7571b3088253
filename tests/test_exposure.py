"""Exposure hints through the CLI: real listening sockets (bind only, on 127.0.0.1 / 0.0.0.0; nothing is
sent) owned by stand-in processes whose command lines are those of Jupyter, TensorBoard and sshd, and a
saved report for the container-root rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envdoctor.model import SCHEMA_VERSION
from envdoctor.probes.exposure import ALL_INTERFACES, service_of

CANARY = "tok-5ecret-canary-93d1"

SERVER = f"""#!{sys.executable}
import os, socket, sys, time
sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.bind((os.environ["FAKE_BIND"], 0))
sock.listen(1)
print(sock.getsockname()[1], flush=True)
time.sleep(300)
"""


def run(*args: str, timeout: float = 120, **more_env: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1", **more_env}
    return subprocess.run([sys.executable, "-m", "envdoctor", *args], capture_output=True, env=env, timeout=timeout)


class Service:
    def __init__(self, directory: Path, name: str, bind: str, *args: str) -> None:
        script = directory / name
        script.write_text(SERVER)
        script.chmod(0o755)
        self.proc = subprocess.Popen([str(script), *args], stdout=subprocess.PIPE, env={**os.environ, "FAKE_BIND": bind})
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        self.pid = self.proc.pid

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


@pytest.fixture(scope="module")
def listening(tmp_path_factory) -> Iterator[tuple[dict[str, Service], dict[str, Any]]]:
    base = tmp_path_factory.mktemp("exposure")
    dirs = {name: base / name for name in ("open", "local", "cfg", "tb-all", "tb-local", "sshd", "pw")}
    for d in dirs.values():
        d.mkdir()
    (dirs["cfg"] / "jupyter_server_config.json").write_text(json.dumps({"ServerApp": {"token": ""}}))
    (dirs["pw"] / "jupyter_server_config.py").write_text("c = get_config()\nc.ServerApp.password = 'argon2:$argon2id$v=19$x'\n")
    services = {
        # jupyter lab --ip=0.0.0.0 --ServerApp.token='' : every interface, no token
        "open": Service(dirs["open"], "jupyter-lab", "0.0.0.0", "--ip=0.0.0.0", "--ServerApp.token=", "--allow-root"),
        # on the loopback, with a token given on the command line (its value must never be shown)
        "local": Service(dirs["local"], "jupyter-lab", "127.0.0.1", "--ip=127.0.0.1", f"--ServerApp.token={CANARY}"),
        # the token switched off in the config file the command line names
        "cfg": Service(dirs["cfg"], "jupyter-notebook", "127.0.0.1",
                       f"--config={dirs['cfg'] / 'jupyter_server_config.json'}"),
        # a password set in a Python config file
        "pw": Service(dirs["pw"], "jupyter-lab", "127.0.0.1", f"--config={dirs['pw'] / 'jupyter_server_config.py'}"),
        "tb-all": Service(dirs["tb-all"], "tensorboard", "0.0.0.0", "--logdir", "runs", "--bind_all"),
        "tb-local": Service(dirs["tb-local"], "tensorboard", "127.0.0.1", "--logdir", "runs"),
        "sshd": Service(dirs["sshd"], "sshd", "0.0.0.0", "-D"),
    }
    try:
        # These checks read the exposure probe, never torch: a torch that refuses to import at once
        # spares the run the seconds of CPU a real `import torch` costs in its torch child.
        stub = base / "no-torch" / "torch"
        stub.mkdir(parents=True)
        (stub / "__init__.py").write_text("raise ImportError('not needed by the exposure tests')\n")
        proc = run("report", "--json", "--no-micro", "--only", "exposed-services", "--only", "jupyter-auth",
                   "--python", sys.executable, PYTHONPATH=str(stub.parent))
        assert proc.returncode in (0, 1), proc.stderr.decode()
        yield services, json.loads(proc.stdout)
    finally:
        for s in services.values():
            s.stop()


def _for(report: dict[str, Any], check_id: str, pid: int) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["id"] == check_id and (f["evidence"].get("service") or {}).get("pid") == pid]


def test_the_probe_names_each_service_and_where_it_listens(listening):
    services, report = listening
    seen = {s["pid"]: s for s in report["facts"]["exposure.services"]["value"]}
    expect = {"open": ("jupyter", True, "none"), "local": ("jupyter", False, "token"),
              "cfg": ("jupyter", False, "none"), "pw": ("jupyter", False, "password"),
              "tb-all": ("tensorboard", True, None), "tb-local": ("tensorboard", False, None),
              "sshd": ("sshd", True, None)}
    for name, (service, everywhere, auth) in expect.items():
        entry = seen[services[name].pid]
        assert (entry["service"], entry["all_interfaces"], entry["auth"]) == (service, everywhere, auth), name
        assert {"address": "0.0.0.0" if everywhere else "127.0.0.1", "port": services[name].port} in entry["listen"]
    assert "jupyter_server_config.json" in seen[services["cfg"].pid]["auth_from"]


def test_jupyter_and_tensorboard_on_every_interface_warn_with_the_flag_to_fix(listening):
    services, report = listening
    (jupyter,) = _for(report, "exposed-services", services["open"].pid)
    assert jupyter["status"] == "warn" and f"0.0.0.0:{services['open'].port}" in jupyter["title"]
    assert any(c.startswith(f"jupyter lab --ip=127.0.0.1 --port={services['open'].port}")
               for c in jupyter["remediation"]["commands"])
    (board,) = _for(report, "exposed-services", services["tb-all"].pid)
    assert board["status"] == "warn"
    assert any("--host 127.0.0.1" in c and "--bind_all" in c for c in board["remediation"]["commands"])
    for name in ("local", "cfg", "pw", "tb-local"):
        assert not _for(report, "exposed-services", services[name].pid), name


def test_sshd_on_every_interface_warns_only_in_a_container(listening):
    services, report = listening
    found = _for(report, "exposed-services", services["sshd"].pid)
    if report["facts"]["host.container"]["value"]:
        (sshd,) = found
        assert sshd["status"] == "warn" and any("ListenAddress 127.0.0.1" in c for c in sshd["remediation"]["commands"])
    else:
        assert found == []  # a server's own sshd listens everywhere by design


def test_jupyter_without_token_warns_wherever_it_was_switched_off(listening):
    services, report = listening
    (flag,) = _for(report, "jupyter-auth", services["open"].pid)
    assert flag["status"] == "warn" and "an empty --ServerApp.token on its command line" in flag["detail"]
    assert "every interface" in flag["detail"]
    assert any("jupyter server password" in c for c in flag["remediation"]["commands"])
    (config,) = _for(report, "jupyter-auth", services["cfg"].pid)
    assert config["status"] == "warn" and "jupyter_server_config.json" in config["detail"]
    for name in ("local", "pw"):
        assert not _for(report, "jupyter-auth", services[name].pid), name


def test_no_token_value_or_command_line_reaches_the_report(listening):
    _, report = listening
    text = json.dumps(report)
    assert CANARY not in text and "argon2id" not in text
    assert "--allow-root" not in text  # command lines are not kept, only what was concluded from them


def test_command_lines_are_classified_by_their_program_not_by_their_arguments():
    assert service_of(["/usr/bin/python3", "/usr/local/bin/jupyter-lab", "--ip=0.0.0.0"]) == "jupyter"
    assert service_of(["/usr/bin/python3", "/usr/local/bin/jupyter", "notebook"]) == "jupyter"
    assert service_of(["python", "-m", "jupyterlab"]) == "jupyter"
    assert service_of(["python", "-m", "tensorboard.main", "--logdir", "x"]) == "tensorboard"
    assert service_of(["sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups"]) == "sshd"
    assert service_of(["python", "train.py", "--log", "tensorboard"]) is None
    assert service_of(["/usr/bin/python3", "/usr/local/bin/jupyter", "kernelspec", "list"]) is None
    assert service_of(["python", "-m", "ipykernel_launcher", "-f", "kernel.json"]) is None
    assert {"0.0.0.0", "::"} <= ALL_INTERFACES and "127.0.0.1" not in ALL_INTERFACES


def _container_report(tmp_path: Path, **facts: Any) -> dict[str, Any]:
    base = {"host.container": {"value": "docker"}, "host.is_root": {"value": True},
            "driver.device_nodes": {"value": {"/dev/nvidiactl": "ok", "/dev/nvidia-uvm": "ok"}},
            "nvml.device_count": {"value": 8}, "exposure.services": {"value": []},
            "host.shared_mounts": {"value": [{"mountpoint": "/data", "fstype": "ext4", "writable": True}]}}
    base.update(facts)
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"schema_version": SCHEMA_VERSION, "facts": base}))
    proc = run("diagnose", str(path), "--json", "--only", "container-root")
    assert proc.returncode in (0, 1), proc.stderr.decode()
    (finding,) = json.loads(proc.stdout)["findings"]
    return finding


def test_a_gpu_container_running_as_root_warns_with_the_user_flag(tmp_path):
    found = _container_report(tmp_path)
    assert found["status"] == "warn" and "runs as root" in found["title"]
    assert any(c.startswith('docker run --user "$(id -u):$(id -g)"') for c in found["remediation"]["commands"])
    k8s = _container_report(tmp_path, **{"host.container": {"value": "kubernetes"}})
    assert "runAsNonRoot: true" in k8s["remediation"]["commands"][0]


def test_root_warns_where_it_matters_and_is_ok_level_elsewhere(tmp_path):
    """An NGC/pytorch image under torchrun runs as root: a warn only with an exposed service or a host
    folder mounted writable; without either an ok (shown with -v); unread, a skip (never ok)."""
    shared = _container_report(tmp_path)
    assert shared["status"] == "warn" and "/data (ext4)" in shared["title"]
    plain = _container_report(tmp_path, **{"host.shared_mounts": {"value": [
        {"mountpoint": "/datasets", "fstype": "nfs4", "writable": False}]}})
    assert plain["status"] == "ok" and "runs as root, with no exposed service" in plain["title"]
    exposed = _container_report(tmp_path, **{"host.shared_mounts": {"value": []}, "exposure.services": {"value": [
        {"service": "jupyter", "pid": 7, "all_interfaces": True, "listen": [{"address": "0.0.0.0", "port": 8888}]}]}})
    assert exposed["status"] == "warn" and "Jupyter listens on 0.0.0.0:8888" in exposed["title"]
    unread = _container_report(tmp_path, **{"host.shared_mounts": {"value": None, "reason": "denied"}})
    assert unread["status"] == "skip" and "was not read" in unread["title"]


def test_root_is_only_a_hint_for_training_containers(tmp_path):
    unprivileged = _container_report(tmp_path, **{"host.is_root": {"value": False}})
    assert unprivileged["status"] == "ok"
    cpu_only = _container_report(tmp_path, **{"driver.device_nodes": {"value": {"/dev/nvidiactl": "absent"}},
                                              "nvml.device_count": {"value": None, "reason": "absent"}})
    assert cpu_only["status"] == "skip"
    bare = _container_report(tmp_path, **{"host.container": {"value": None}})
    assert bare["status"] == "skip"
