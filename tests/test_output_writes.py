"""Issue 26 item 6: `-o` writes a legal long name, follows the umask for a new file and keeps an
existing file's mode (and group, where it may), and writes `-o /dev/stdout` to the stream."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

from envdoctor.report import standard_stream, write_atomic

from .faults import cli_env


def test_a_250_character_name_is_written(tmp_path):
    target = tmp_path / ("r" * 245 + ".json")
    write_atomic(target, "{}\n")
    assert target.read_text() == "{}\n" and [p.name for p in tmp_path.iterdir()] == [target.name]


def test_a_new_file_follows_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "new.json", "{}")
        assert stat.S_IMODE(os.stat(tmp_path / "new.json").st_mode) == 0o644
        os.umask(0o002)
        write_atomic(tmp_path / "group.json", "{}")
        assert stat.S_IMODE(os.stat(tmp_path / "group.json").st_mode) == 0o664
    finally:
        os.umask(old)


def test_an_existing_file_keeps_its_mode_and_group(tmp_path):
    target = tmp_path / "old.json"
    target.write_text("old")
    os.chmod(target, 0o664)
    gid = os.stat(target).st_gid
    if os.geteuid() == 0:
        gid = 1 if gid != 1 else 2
        os.chown(target, -1, gid)
    write_atomic(target, "{}")
    after = os.stat(target)
    assert stat.S_IMODE(after.st_mode) == 0o664 and after.st_gid == gid and target.read_text() == "{}"


def test_dev_stdout_is_the_stream_not_a_file(tmp_path):
    with open(tmp_path / "out", "wb") as fh:
        fd = os.dup(1)
        os.dup2(fh.fileno(), 1)
        try:
            assert standard_stream("/dev/stdout") is None  # a regular file behind it: written as a file
        finally:
            os.dup2(fd, 1)
            os.close(fd)
    read, write = os.pipe()
    fd = os.dup(1)
    os.dup2(write, 1)
    try:
        assert standard_stream("/dev/stdout") == 1 and standard_stream(f"/proc/self/fd/{1}") == 1
    finally:
        os.dup2(fd, 1)
        os.close(fd)
        os.close(read)
        os.close(write)


def test_report_o_dev_stdout_prints_the_report():
    out = subprocess.run([sys.executable, "-m", "envdoctor", "report", "--no-micro", "-o", "/dev/stdout"],
                         capture_output=True, timeout=120, env=cli_env())
    assert out.returncode in (0, 1, 3) and out.stdout.startswith(b"{"), out.stderr[-1000:]
