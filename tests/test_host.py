"""The Host door: real subprocesses and child interpreters with deadlines, no mocks."""

from __future__ import annotations

import re
import time

import pytest

from envdoctor.model import Reason
from envdoctor.process.host import Host

from .conftest import make_exe, test_env


@pytest.fixture
def child_script(tmp_path, monkeypatch):
    """Write a real child script (next to a copy of _edchild.py) that Host.run_child will run."""
    from envdoctor.process import host as host_mod

    child_dir = tmp_path / "child"
    child_dir.mkdir()
    (child_dir / "_edchild.py").write_text((host_mod.CHILD_DIR / "_edchild.py").read_text())
    monkeypatch.setattr(host_mod, "CHILD_DIR", child_dir)

    def write(name: str, code: str) -> str:
        (child_dir / f"{name}.py").write_text(code)
        return name

    return write

def test_run_captures_output_and_exit_code(tmp_path):
    make_exe(tmp_path, "tool", "echo out; echo err >&2; exit 3\n")
    host = Host(environ=test_env(PATH=f"{tmp_path}:/usr/bin:/bin"))
    res = host.run(["tool"], timeout=5)
    assert res.status == "ok" and res.returncode == 3
    assert res.stdout == "out\n" and res.stderr == "err\n"


def test_missing_executable_is_absent_not_an_exception(tmp_path):
    host = Host(environ=test_env(PATH=str(tmp_path)))
    res = host.run(["nvidia-smi"], timeout=1)
    assert res.status == "absent" and res.reason is Reason.ABSENT
    assert "not found" in res.detail


def test_hanging_command_is_abandoned_within_the_deadline(tmp_path):
    # A child that ignores SIGTERM and has a grandchild holding the pipes open.
    make_exe(tmp_path, "hang", "trap '' TERM; sleep 60 & sleep 60\n")
    host = Host(environ=test_env(PATH=f"{tmp_path}:/usr/bin:/bin"))
    began = time.monotonic()
    res = host.run(["hang"], timeout=0.5)
    assert time.monotonic() - began < 4.0  # 0.5 s + reaping; the sleeps last 60 s
    assert res.status == "timeout" and res.reason is Reason.TIMEOUT


def test_crashing_command_reports_the_signal(tmp_path):
    make_exe(tmp_path, "segv", "kill -SEGV $$\n")
    host = Host(environ=test_env(PATH=f"{tmp_path}:/usr/bin:/bin"))
    res = host.run(["segv"], timeout=5)
    assert res.status == "crashed" and "SIGSEGV" in res.detail


def test_non_utf8_output_never_raises(tmp_path):
    make_exe(tmp_path, "latin", "printf 'GPU \\377\\376 name\\n'\n")
    res = Host(environ=test_env(PATH=f"{tmp_path}:/usr/bin:/bin")).run(["latin"], timeout=5)
    assert res.ok and "GPU" in res.stdout and "\ufffd" in res.stdout


def test_child_partial_records_survive_a_hang(child_script):
    # A real child script that reports, announces a stage, then hangs.
    child_script("stuck",
                 "import time\nfrom _edchild import emit, stage\nemit(driver='570.1')\nstage('nvmlInit')\n"
                 "time.sleep(60)\n")
    began = time.monotonic()
    # 2.5 s: the child must start Python and print its stage before the deadline, even on a
    # loaded 2-core machine; the sleep is 60 s, so returning at all proves it was abandoned.
    res = Host(environ=test_env()).run_child("stuck", timeout=2.5)
    assert time.monotonic() - began < 6
    assert res.status == "timeout"
    assert res.data == {"driver": "570.1"}
    assert res.stage == "nvmlInit" and "nvmlInit" in res.explain()


def test_a_hung_child_says_where_it_hung_even_with_fd_2_redirected(child_script):
    # The child script's main thread waits in a helper while another thread sleeps, with fd 2
    # pointed elsewhere (as the DataLoader check does): its stacks still reach the parent.
    child_script("waits",
                 "import os, queue, tempfile, threading, time\nfrom _edchild import stage\n"
                 "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
                 "elsewhere = tempfile.TemporaryFile()\nos.dup2(elsewhere.fileno(), 2)\n"
                 "def collect():\n    queue.Queue().get()\n"
                 "stage('workers')\ncollect()\n")
    began = time.monotonic()
    res = Host(environ=test_env()).run_child("waits", timeout=2.5)
    assert time.monotonic() - began < 6
    assert res.status == "timeout" and res.stage == "workers"
    assert "(most recent call first)" in res.stderr
    # The main thread's innermost frame, then the child script's own frame it was called from.
    assert re.search(r"\(stuck in workers\), at threading\.py:\d+ in wait, from waits\.py:7 in collect$", res.explain()), \
        res.explain()


def test_hung_at_reads_the_main_threads_block_of_a_dump():
    from envdoctor.process.host import hung_at

    dump = ('Thread 0x00007f1 (most recent call first):\n  File "/x/threading.py", line 327 in wait\n\n'
            'Current thread 0x00007f2 (most recent call first):\n'
            '  File "/usr/lib/python3.11/multiprocessing/queues.py", line 113 in get\n'
            '  File "/opt/envdoctor/child/micro.py", line 744 in _load\n'
            '  File "/opt/envdoctor/child/micro.py", line 900 in run\n')
    assert hung_at(dump) == "queues.py:113 in get, from micro.py:744 in _load"
    assert hung_at(dump.replace("multiprocessing/queues.py", "micro.py")) == "micro.py:113 in get"
    assert hung_at("Traceback (most recent call last):\n  File ...") == ""
    assert hung_at("") == ""
    # torch's C++ exceptions print the same heading over "frame #0:" lines, after the dump or not.
    cpp = "Exception raised from recvBytes at Utils.hpp:787 (most recent call first):\nframe #0: c10::Error\n"
    assert hung_at(dump + cpp) == "queues.py:113 in get, from micro.py:744 in _load"
    assert hung_at(cpp) == ""


def test_the_parent_asks_for_the_stacks_on_the_signal_the_child_scripts_dump_them_on():
    from envdoctor.process import host as host_mod

    text = (host_mod.CHILD_DIR / "_edchild.py").read_text()
    assert f'STACKS_SIGNAL = "{host_mod.STACKS_SIGNAL}"' in text


def test_child_that_dies_is_crashed_with_its_stage(child_script):
    child_script("boom",
                 "import os, signal\nfrom _edchild import emit, stage\nemit(a=1)\nstage('cuInit')\n"
                 "os.kill(os.getpid(), signal.SIGSEGV)\n")
    res = Host(environ=test_env()).run_child("boom", timeout=10)
    assert res.status == "crashed" and res.data == {"a": 1}
    assert "SIGSEGV" in res.explain() and "cuInit" in res.explain()


def test_rooted_host_reads_a_fake_tree(tmp_path):
    (tmp_path / "proc/driver/nvidia").mkdir(parents=True)
    (tmp_path / "proc/driver/nvidia/version").write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.124.06\n")
    host = Host(environ={}, root=tmp_path)
    text, reason, _ = host.read_text("/proc/driver/nvidia/version")
    assert reason is None and "570.124.06" in text
    text, reason, detail = host.read_text("/proc/nope")
    assert text is None and reason is Reason.ABSENT and "/proc/nope" in detail


def test_background_commands_run_at_lower_priority():
    host = Host(environ=test_env())
    assert host.run(["nice"], timeout=5).stdout.strip() == "0"
    assert host.niced(10).run(["nice"], timeout=5).stdout.strip() == "10"


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    import os

    (tmp_path / "proc").mkdir()
    os.mkfifo(tmp_path / "proc" / "fifo")
    began = time.monotonic()
    text, reason, detail = Host(environ={}, root=tmp_path).read_text("/proc/fifo")
    assert time.monotonic() - began < 1.5  # a blocking open would wait here for ever
    assert text is None and reason is Reason.FAILED and "FIFO" in detail


def test_a_device_node_is_refused_not_read():
    # /dev/kmsg (like any character device) can block a reader until the next kernel message.
    text, reason, detail = Host(environ={}).read_text("/dev/null")
    assert text is None and reason is Reason.FAILED and "character device" in detail


def test_a_read_stuck_in_the_kernel_is_abandoned_at_its_deadline():
    import os

    from envdoctor.process.host import call_with_deadline

    r, w = os.pipe()  # nothing is ever written: os.read blocks in the kernel, as on a wedged driver
    try:
        began = time.monotonic()
        try:
            call_with_deadline(os.read, 0.3, r, 10)
        except TimeoutError:
            pass
        else:
            raise AssertionError("the blocked read returned")
        assert time.monotonic() - began < 2.0
    finally:
        os.close(w)  # lets the abandoned reader return EOF and finish
    assert call_with_deadline(lambda: 42, 1.0) == 42


def test_a_command_that_never_reads_its_stdin_keeps_the_deadline(tmp_path):
    # 1 MiB is far more than a pipe buffer: writing it from the caller's thread would block.
    make_exe(tmp_path, "deaf", "exec sleep 30\n")
    host = Host(environ=test_env(PATH=f"{tmp_path}:/usr/bin:/bin"))
    began = time.monotonic()
    res = host.run(["deaf"], timeout=0.5, stdin=b"x" * (1 << 20))
    assert time.monotonic() - began < 4.0
    assert res.status == "timeout"
    assert host.run(["cat"], timeout=5, stdin=b"hello").stdout == "hello"


def test_a_nul_byte_in_the_environment_is_a_failed_run_not_an_exception():
    host = Host(environ=dict(test_env(), BROKEN="a\x00b"))
    res = host.run(["true"], timeout=5)
    assert res.status == "failed" and "null byte" in res.detail
    res = Host(environ=test_env()).run(["echo", "a\x00b"], timeout=5)
    assert res.status == "failed"


def test_realpath_under_a_root_keeps_dot_names_and_stays_inside(tmp_path):
    root = tmp_path / "root"
    (root / ".hidden").mkdir(parents=True)
    (root / "usr" / "lib").mkdir(parents=True)
    (root / "usr" / "lib" / "libx.so.1").write_text("")
    (root / "usr" / "lib" / "libx.so").symlink_to("libx.so.1")
    (tmp_path / "rootfoo").mkdir()
    (root / "out").symlink_to("../rootfoo")
    host = Host(environ={}, root=root)
    assert host.realpath("/.hidden") == "/.hidden"
    assert host.realpath("/usr/lib/libx.so") == "/usr/lib/libx.so.1"
    assert host.realpath("/") == "/"
    # A sibling whose name merely starts with the root's is not inside the root.
    assert host.realpath("/out") == str(tmp_path / "rootfoo")


def test_child_records_are_strict_json_even_with_nan_and_infinity(child_script):
    import json

    child_script("nan",
                 "from _edchild import done\n"
                 "done(loss=float('nan'), run={'gbps': float('inf'), 'errs': [1.5, float('-inf')], 'ok': False})\n")
    res = Host(environ=test_env()).run_child("nan", timeout=10)
    assert res.ok, res.explain()
    assert res.data == {"loss": None, "run": {"gbps": None, "errs": [1.5, None], "ok": False}}
    json.dumps(res.data, allow_nan=False)  # strict JSON: no NaN/Infinity tokens


def test_children_lead_their_own_group_in_our_session_so_nice_counts(child_script):
    # One session per child would give each its own scheduler autogroup, where a nice value
    # competes only with itself (measured: 51%/49% niced vs not); a group in our session keeps
    # nice effective and still lets a hung child be killed with everything it started.
    import os

    child_script("ids", "import os\nfrom _edchild import done\n"
                 "done(pid=os.getpid(), pgid=os.getpgid(0), sid=os.getsid(0), nice=os.nice(0))\n")
    plain = Host(environ=test_env()).run_child("ids", timeout=10)
    niced = Host(environ=test_env()).niced(10).run_child("ids", timeout=10)
    for res in (plain, niced):
        assert res.ok, res.explain()
        assert res.data["sid"] == os.getsid(0)
        assert res.data["pgid"] != os.getpgid(0)
    assert plain.data["pgid"] == plain.data["pid"]
    assert niced.data["nice"] == min(19, os.nice(0) + 10) and plain.data["nice"] == os.nice(0)


def test_the_parent_does_not_wait_for_a_childs_teardown_after_its_final_record(child_script):
    import time

    child_script("slow_exit", "import time\nfrom _edchild import done\ndone(a=1)\ntime.sleep(30)\n")
    start = time.monotonic()
    res = Host(environ=test_env()).run_child("slow_exit", timeout=20)
    assert res.ok and res.data == {"a": 1}, res.explain()
    assert time.monotonic() - start < 10
