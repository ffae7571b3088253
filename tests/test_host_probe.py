"""Host probe on fake /proc, /sys and /etc trees (Host(root=...)) and on the real machine."""

from __future__ import annotations

from envdoctor.probes import Options
from envdoctor.probes.host_probe import KEYS, probe_host
from envdoctor.process.host import Host
from envdoctor.redact import REDACTED


def _tree(root, files):
    for path, text in files.items():
        p = root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_kubernetes_container_with_cgroup_v2_limits(tmp_path):
    _tree(tmp_path, {
        "/etc/os-release": 'NAME="Ubuntu"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\n',
        "/sys/fs/cgroup/cpu.max": "400000 100000\n",
        "/sys/fs/cgroup/memory.max": "17179869184\n",
        "/proc/meminfo": "MemTotal:       263842876 kB\n",
        "/proc/1/cgroup": "0::/kubepods/burstable/pod1234/abcd\n",
        "/proc/version": "Linux version 5.15.0-100-generic\n",
    })
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz",
           "CUDA_VISIBLE_DEVICES": "0,1", "AWS_SECRET_ACCESS_KEY": "x", "HOME": "/root",
           "NCCL_SOCKET_IFNAME": "eth0", "WANDB_API_KEY": "secret"}
    facts = probe_host(Host(environ=env, root=tmp_path), Options())
    assert set(KEYS) <= set(facts)
    assert facts["host.distro"].value == "Ubuntu 22.04.4 LTS"
    assert facts["host.cgroup_cpu_limit"].value == 4.0
    assert facts["host.cgroup_memory_limit"].value == 16 << 30
    assert facts["host.memory_total"].value == 263842876 * 1024
    assert facts["host.container"].value == "kubernetes"
    assert facts["host.wsl"].value is False
    env_vars = facts["env.vars"].value
    assert env_vars["CUDA_VISIBLE_DEVICES"] == "0,1" and env_vars["NCCL_SOCKET_IFNAME"] == "eth0"
    assert env_vars["HF_TOKEN"] == REDACTED  # allow-listed prefix, secret name
    assert "AWS_SECRET_ACCESS_KEY" not in env_vars and "WANDB_API_KEY" not in env_vars and "HOME" not in env_vars


def test_docker_with_cgroup_v1_unlimited_and_wsl(tmp_path):
    _tree(tmp_path, {
        "/.dockerenv": "",
        "/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n",
        "/sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
        "/proc/version": "Linux version 5.15.153.1-microsoft-standard-WSL2\n",
    })
    facts = probe_host(Host(environ={}, root=tmp_path), Options())
    assert facts["host.container"].value == "docker"
    assert facts["host.cgroup_cpu_limit"].ok and facts["host.cgroup_cpu_limit"].value is None
    assert facts["host.cgroup_memory_limit"].value is None
    assert facts["host.wsl"].value is True
    assert facts["host.distro"].reason.value == "absent"
    assert facts["host.shm_size"].reason.value == "absent"  # no /dev/shm in the fake tree


def test_real_machine_answers_every_key_quickly():
    import time

    began = time.monotonic()
    facts = probe_host(Host(), Options())
    assert time.monotonic() - began < 3.0  # ~20 ms idle; margin for a loaded 2-core machine
    assert set(KEYS) <= set(facts)
    assert facts["host.os"].value == "Linux" and facts["host.cpu_count"].value >= 1


def test_a_zero_cgroup_period_is_a_failed_reading_not_a_crash(tmp_path):
    _tree(tmp_path, {"/sys/fs/cgroup/cpu.max": "100000 0\n"})
    reading = probe_host(Host(environ={}, root=tmp_path), Options())["host.cgroup_cpu_limit"]
    assert reading.reason.value == "failed" and "100000 0" in reading.detail
    v1 = tmp_path / "v1"
    _tree(v1, {"/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "50000\n", "/sys/fs/cgroup/cpu/cpu.cfs_period_us": "0\n"})
    reading = probe_host(Host(environ={}, root=v1), Options())["host.cgroup_cpu_limit"]
    assert reading.reason.value == "failed" and "period" in reading.detail


def test_strange_files_and_environment_never_crash_the_probe(tmp_path):
    import os
    import time

    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").write_bytes(b"MemTotal: \xff\xfe kB\n")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "os-release").write_bytes(b'PRETTY_NAME="Caf\xe9 OS"\n')
    os.mkfifo(tmp_path / "proc" / "version")  # a blocking read would hang the probe
    env = {"CUDA_VISIBLE_DEVICES": "0\n1", "NCCL_DEBUG": "x" * 1_000_000, "PYTORCH_CUDA_ALLOC_CONF": "caf\u00e9",
           "CUDA_HOME": "/opt/caf\u00e9"}
    began = time.monotonic()
    facts = probe_host(Host(environ=env, root=tmp_path), Options())
    assert time.monotonic() - began < 3.0  # redacting the whole 1 MB value took minutes
    assert set(KEYS) <= set(facts)
    nccl_debug = facts["env.vars"].value["NCCL_DEBUG"]
    assert len(nccl_debug) < 9000 and nccl_debug.endswith("(1000000 characters in all)")
    assert facts["env.vars"].value["CUDA_VISIBLE_DEVICES"] == "0\n1"
    assert facts["host.memory_total"].reason.value == "failed"
    assert facts["host.distro"].value == "Caf\ufffd OS"
    assert facts["host.wsl"].value is False
    assert facts["env.vars"].value["CUDA_HOME"] == "/opt/caf\u00e9"
    assert facts["env.vars"].value["PYTORCH_CUDA_ALLOC_CONF"] == "<redacted>"  # no check judges its value


def test_shared_mounts_are_the_host_and_network_folders_bound_in(tmp_path):
    """A Docker container's mountinfo (proc(5)): the overlay root, pseudo filesystems, tmpfs and the
    files every runtime binds in are left out; a host folder and an NFS share are kept, with rw/ro."""
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/mountinfo").write_text(
        "540 487 0:52 / / rw,relatime master:232 - overlay overlay rw,lowerdir=/var/lib/docker/l/A\n"
        "541 540 0:55 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
        "545 540 0:58 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k\n"
        "548 540 259:2 /home/ann/data /data rw,relatime - ext4 /dev/nvme0n1p2 rw\n"
        "549 540 259:2 /var/lib/docker/containers/x/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/nvme0n1p2 rw\n"
        "550 540 259:2 /var/lib/docker/containers/x/hosts /etc/hosts rw,relatime - ext4 /dev/nvme0n1p2 rw\n"
        "551 540 0:60 / /mnt/my\\040share ro,relatime - nfs4 fs:/export ro,vers=4.2\n"
        "552 540 0:61 / /s3 rw,relatime - fuse.s3fs s3fs rw\n")
    reading = probe_host(Host(environ={}, root=tmp_path), Options())["host.shared_mounts"]
    assert reading.ok and [dict(m) for m in reading.value] == [
        {"mountpoint": "/data", "fstype": "ext4", "writable": True},
        {"mountpoint": "/mnt/my share", "fstype": "nfs4", "writable": False},
        {"mountpoint": "/s3", "fstype": "fuse.s3fs", "writable": True}]
    assert not probe_host(Host(environ={}, root=tmp_path / "none"), Options())["host.shared_mounts"].ok
