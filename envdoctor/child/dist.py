"""Child: one rank's part of `envdoctor check --distributed` (stdlib + torch only).

Run in the *target* interpreter by each rank's envdoctor process, with the launch as JSON in
argv[1]. It talks to the other ranks through a c10d TCPStore at MASTER_ADDR:MASTER_PORT (the
one torchrun's agent hosts, or its own on rank 0), never with the library defaults' 10–30 minute
timeouts:

1. arrival: ``arrived/<rank>`` (host, node, GPU); rank 0's coordinator thread waits for every
   rank until ``init_timeout`` and decides (``decision``): go with NCCL when every rank has a
   usable GPU, else Gloo, or stop and name the ranks that never arrived;
2. the process group, a barrier (clock skew: each rank's clock right after it), then an
   all-reduce of integer-valued float32 data whose sum is known exactly, over a few sizes, each
   rank timing its own iterations (``done/<rank>``); every step is posted as
   ``progress/<rank>``, so when ``collective_timeout`` runs out rank 0 names who stopped where;
3. the rank's facts (sent by its envdoctor process on stdin) are posted as ``facts/<rank>``;
4. rank 0 prints everything it gathered, reads the verdict (the exit code) from its envdoctor
   process on stdin and posts it as ``exit``; every other rank's watcher thread prints it.

Records on stdout are ``@@envdoctor@@ {json}`` lines. ``inject`` is a SELF-TEST hook, never set
in production: ``stall:R`` (rank R sleeps after the process group forms), ``exit:R`` (rank R's
whole job exits with code 1 there), ``absent:R`` (rank R never arrives), ``wrong:R`` (rank R
adds 1 to its contribution, so the sum is wrong).
"""

import os as _os
import sys as _sys

# The script's own folder holds _edchild and its siblings; PYTHONSAFEPATH=1 (or -P, -I) leaves it
# off sys.path, and the child must still start (never a "No module named '_edchild'").
_HERE = _os.path.dirname(_os.path.abspath(__file__))
if _HERE not in _sys.path[:1]:
    _sys.path.insert(0, _HERE)

import json
import os
import queue
import sys
import threading
import time
from datetime import timedelta

import _edchild
from _edchild import args, emit, error_text, stage

OPTS = {}
INBOX = queue.Queue()
PREFIX = "envdoctor/"


def injected(kind):
    spec = str(OPTS.get("inject") or "")
    for part in spec.split(","):
        name, _, who = part.partition(":")
        if name == kind and who.strip().isdigit() and int(who) == OPTS["rank"]:
            return True
    return False


def connect(timeout, master=False):
    """A store connection of our own (one per thread: clients are not shared across threads)."""
    import torch.distributed as dist

    store = dist.TCPStore(OPTS["master_addr"], int(OPTS["master_port"]), None, master,
                          timedelta(seconds=max(1.0, timeout)), wait_for_workers=False)
    return dist.PrefixStore(PREFIX + str(OPTS.get("run_id") or "run"), store)


def put(store, key, value):
    store.set(key, json.dumps(value, default=str))


def get(store, key):
    try:
        return json.loads(store.get(key).decode("utf-8", "replace"))
    except ValueError:
        return None


def has(store, key):
    try:
        return bool(store.check([key]))
    except Exception:
        return False


def wait_key(store, key, seconds):
    """The key's value, or None when it did not appear within ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if has(store, key):
            return get(store, key)
        time.sleep(0.05)
    return None


class _Capture:
    """Collects what torch_probe prints (its records), forwarding only its stages."""

    def __init__(self, out):
        self.out = out
        self.data = {}
        self.stage = ""
        self.done = False

    def write(self, text):
        for line in text.splitlines():
            if not line.startswith(_edchild.MARK):
                continue
            try:
                record = json.loads(line[len(_edchild.MARK):])
            except ValueError:
                continue
            if "_stage" in record:
                self.stage = str(record.pop("_stage"))
                self.out.write(_edchild.MARK + json.dumps({"probe_stage": self.stage}) + "\n")
                self.out.flush()
            self.done = bool(record.pop("_done", False)) or self.done
            self.data.update(record)

    def flush(self):
        pass


def torch_probe():
    """Run the torch probe's script here, after which the envdoctor process needs no torch child of
    its own. Its CUDA initialisation is done on this rank's GPU (cuda:LOCAL_RANK), not on cuda:0,
    and the memory map is read after it, as the probe does."""
    import torch_probe as probe

    started = time.perf_counter()
    capture = _Capture(_edchild._out)
    _edchild._out = capture
    try:
        probe.main()
    except BaseException as exc:
        capture.data.setdefault("torch", {})["import_error"] = error_text(exc)
    finally:
        _edchild._out = capture.out
    info = capture.data.get("torch") or {}
    if info.get("cuda_available") and info.get("device_count"):
        local = int(OPTS.get("local_rank") or 0)
        device = local if local < int(info["device_count"]) else 0
        try:
            import torch

            torch.cuda.set_device(device)
            torch.zeros(1, device="cuda:%d" % device)
            torch.cuda.synchronize(device)
        except Exception as exc:
            info["cuda_init_error"] = error_text(exc)
    if info.get("installed") and "version" in info:
        info["loaded_libraries"] = probe.loaded_libraries()
    emit(torch_probe={"data": capture.data, "stage": capture.stage, "done": capture.done,
                      "seconds": round(time.perf_counter() - started, 3)})


def usable_gpu(torch):
    if OPTS.get("device") == "cpu":
        return None, "cpu requested"
    try:
        if not torch.cuda.is_available():
            return None, "torch.cuda.is_available() is False"
        count = torch.cuda.device_count()
    except Exception as exc:
        return None, error_text(exc)
    local = int(OPTS.get("local_rank") or 0)
    if local < count:
        return local, ""
    if count == 1:
        return 0, ""
    return None, "LOCAL_RANK %d but %d visible GPU(s)" % (local, count)


def gpu_uuid(torch, gpu):
    """The UUID of the GPU this rank will use: two ranks of one node on one GPU make NCCL fail
    with "Duplicate GPU detected", and CUDA_VISIBLE_DEVICES per rank hides it from indices."""
    if gpu is None:
        return None
    try:
        return str(getattr(torch.cuda.get_device_properties(gpu), "uuid", "") or "") or None
    except Exception:
        return None


# -- rank 0's coordinator ----------------------------------------------------------------------

def gather_arrivals(store, started, world):
    """Wait (up to --init-timeout) for every rank to register; rank -> what it said."""
    arrive_by = started + float(OPTS["init_timeout"])
    while time.monotonic() < arrive_by and not stop_requested():
        if int(store.add("n_arrived", 0)) >= world:
            break
        time.sleep(0.05)
    # Who arrived, from the arrival order (``order/<n>`` = the rank that arrived n-th): as many
    # reads as ranks arrived, never one per rank of the world (a WORLD_SIZE of 100,000 with one
    # rank started was 100,000 store round trips before anything was said).
    arrived = {}
    count = int(store.add("n_arrived", 0))
    late_by = time.monotonic() + 2.0  # a rank between its add and its order key
    for n in range(1, count + 1):
        key = "order/%d" % n
        while not has(store, key) and time.monotonic() < late_by and not stop_requested():
            time.sleep(0.02)
        rank = get(store, key) if has(store, key) else None
        if isinstance(rank, int) and 0 <= rank < world and has(store, "arrived/%d" % rank):
            arrived[rank] = get(store, "arrived/%d" % rank)
    return arrived


def decide(store, started, world, arrived):
    """Go only when every rank arrived; NCCL when every rank has a GPU, else Gloo."""
    missing = [r for r in range(world) if r not in arrived]
    gpus = [a.get("gpu") for a in arrived.values()]
    backend = "nccl" if arrived and all(g is not None for g in gpus) else "gloo"
    sizes = OPTS.get("sizes") or ([1 << 20, 1 << 24, 1 << 27] if backend == "nccl" else [1 << 16, 1 << 20, 1 << 22])
    decision = {"go": not missing, "backend": backend, "missing": missing, "sizes": sizes,
                "iters": int(OPTS.get("iters") or 5), "arrival_seconds": round(time.monotonic() - started, 3)}
    put(store, "decision", decision)
    emit(decision=decision, arrived={str(k): v for k, v in arrived.items()})
    return decision


def gather_collective(store, world, arrived, decision):
    """Wait (up to --collective-timeout) for each rank's result; who finished, and how far the others got."""
    decided = time.monotonic()
    finished = {}
    if decision["go"]:
        finish_by = decided + float(OPTS["collective_timeout"])
        while time.monotonic() < finish_by and len(finished) < world and not stop_requested():
            for r in range(world):
                if r not in finished and has(store, "done/%d" % r):
                    finished[r] = get(store, "done/%d" % r)
            time.sleep(0.05)
    progress = {}
    for r in arrived:
        if r not in finished and has(store, "progress/%d" % r):
            progress[str(r)] = get(store, "progress/%d" % r)
    emit(collective={"finished": {str(k): v for k, v in finished.items()}, "progress": progress,
                     "seconds": round(time.monotonic() - decided, 3), "stopped": stop_reason()})


def gather_facts(store, started, arrived):
    """Each arrived rank's facts (up to --facts-timeout), passed on as they come."""
    facts_by = started + float(OPTS["facts_timeout"])
    got = set()
    while len(got) < len(arrived) and time.monotonic() < facts_by and not stop_requested():
        for r in arrived:
            if r not in got and has(store, "facts/%d" % r):
                emit(rank_facts={"rank": r, "facts": get(store, "facts/%d" % r)})
                got.add(r)
        time.sleep(0.05)
    emit(gathered={"facts_from": sorted(got), "stopped": stop_reason()})


def hand_out_verdict(store, arrived):
    """The parent's exit code (it judges what was gathered) to every rank, then wait for their acks."""
    code = None
    verdict_by = time.monotonic() + float(OPTS.get("verdict_timeout") or 60)
    while time.monotonic() < verdict_by:
        try:
            msg = INBOX.get(timeout=0.1)
        except queue.Empty:
            continue
        if "exit" in msg:
            code = msg["exit"]
            break
    put(store, "exit", code)
    others = len([r for r in arrived if r != 0])
    ack_by = time.monotonic() + 3.0
    while time.monotonic() < ack_by and int(store.add("n_ack", 0)) < others:
        time.sleep(0.05)
    return code


def coordinate(started):
    """Rank 0 only: arrivals -> decision -> completion -> facts -> verdict."""
    world = int(OPTS["world_size"])
    try:
        store = connect(OPTS["init_timeout"])
    except Exception as exc:
        emit(fatal={"phase": "store", "error": error_text(exc)})
        os._exit(0)
    arrived = gather_arrivals(store, started, world)
    decision = decide(store, started, world, arrived)
    gather_collective(store, world, arrived, decision)
    gather_facts(store, started, arrived)
    code = hand_out_verdict(store, arrived)
    emit(_done=True, exit=code)
    os._exit(0)


_STOP = {}


def stop_requested():
    while True:
        try:
            msg = INBOX.get_nowait()
        except queue.Empty:
            break
        if "stop" in msg:
            _STOP["why"] = msg["stop"]
        else:
            INBOX.put(msg)
            break
    return "why" in _STOP


def stop_reason():
    return _STOP.get("why")


# -- every rank ------------------------------------------------------------------------------

def watch_verdict(timeout):
    """Ranks other than 0: wait for rank 0's verdict, print it, leave (even when the main
    thread is stuck in a collective)."""
    try:
        store = connect(timeout)
        code = None
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if has(store, "exit"):
                code = get(store, "exit")
                break
            time.sleep(0.1)
        else:
            emit(_done=True, exit=None, why="rank 0 gave no verdict within %g s" % timeout)
            os._exit(0)
        store.add("n_ack", 1)
        emit(_done=True, exit=code)
    except Exception as exc:
        emit(_done=True, exit=None, why="lost the store: %s" % error_text(exc))
    os._exit(0)


def read_stdin():
    """Lines from our envdoctor process: {"facts": …}, {"exit": code}, {"stop": why}."""
    store = None
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if not isinstance(msg, dict):
            continue
        if "facts" in msg:
            try:
                store = store or connect(OPTS["init_timeout"])
                store.set("facts/%d" % OPTS["rank"], json.dumps(msg["facts"]))
            except Exception as exc:
                emit(facts_error=error_text(exc))
        else:
            INBOX.put(msg)
    # The end of stdin: our envdoctor process is gone (killed with SIGKILL, or it crashed), and no
    # one will read what this rank finds; a rank child never outlives it.
    os._exit(70)


def allreduce_sizes(torch, dist, device, decision, progress):
    world, rank = int(OPTS["world_size"]), int(OPTS["rank"])
    results = []
    for size in decision["sizes"]:
        n = max(1, int(size) // 4)
        progress("all_reduce of %d bytes" % (n * 4))
        idx = torch.arange(n, device=device)
        base = ((idx + rank) % 3).to(torch.float32)
        if injected("wrong"):
            base += 1
        # sum over ranks of (i + r) % 3 depends only on i % 3: exact in float32 for any world size.
        per_class = [float(sum((c + r) % 3 for r in range(world))) for c in range(3)]
        expected = torch.tensor(per_class, device=device)[idx % 3]
        work = base.clone()
        dist.all_reduce(work)
        sync(torch, device)
        wrong = 0 if torch.equal(work, expected) else 1
        first_bad = None
        if wrong:
            bad = (work != expected).nonzero()
            first_bad = int(bad[0].item()) if bad.numel() else None
        times = []
        for _ in range(int(decision["iters"])):
            work.copy_(base)
            sync(torch, device)
            t0 = time.perf_counter()
            dist.all_reduce(work)
            sync(torch, device)
            times.append(time.perf_counter() - t0)
            if not torch.equal(work, expected):
                wrong += 1
        results.append({"bytes": n * 4, "iters": len(times), "avg": sum(times) / len(times),
                        "min": min(times), "max": max(times), "wrong": wrong, "first_bad": first_bad})
    return results


STEPS = {"stopped": 1, "init_process_group": 2, "formed": 3, "barrier": 4, "all_reduce": 5, "done": 6}


def sync(torch, device):
    if str(device).startswith("cuda"):
        torch.cuda.synchronize(device)


def work(torch, dist, store, gpu, started):
    rank = int(OPTS["rank"])

    state = {"step": 1}

    def progress(phase, error=None):
        # Steps only grow: a failure keeps the step it happened in, so rank 0 can tell the rank that
        # stopped first (lowest step) from those that waited for it and then failed.
        state["step"] = max(state["step"], STEPS.get(phase.split(" ", 1)[0], state["step"]))
        try:
            put(store, "progress/%d" % rank, {"phase": phase, "step": state["step"], "error": error,
                                               "t": time.time()})
        except Exception:
            pass

    decision = wait_key(store, "decision", float(OPTS["init_timeout"]) + 10)
    if decision is None:
        emit(worker={"error": "no decision from rank 0"})
        return
    if not decision.get("go"):
        progress("stopped: ranks missing")
        return
    backend = decision["backend"]
    device = "cuda:%d" % gpu if backend == "nccl" else "cpu"
    progress("init_process_group (%s)" % backend)
    if backend == "gloo" and OPTS.get("loopback") and not os.environ.get("GLOO_SOCKET_IFNAME"):
        # Every rank is on this host: keep Gloo's sockets on the loopback interface.
        os.environ["GLOO_SOCKET_IFNAME"] = OPTS.get("loopback_ifname") or "lo"
    try:
        if backend == "nccl":
            torch.cuda.set_device(gpu)
        # The library's own timeout only backs ours up: NCCL's watchdog takes the whole process
        # down when it fires, and rank 0's coordinator must have reported by then.
        dist.init_process_group(backend, store=dist.PrefixStore("pg", store), rank=rank,
                                world_size=int(OPTS["world_size"]),
                                timeout=timedelta(seconds=float(OPTS["collective_timeout"]) + 60))
    except Exception as exc:
        progress("init_process_group failed", error_text(exc)[:300])
        return
    progress("formed process group")
    if injected("stall"):
        time.sleep(10 ** 6)
    if injected("exit"):
        emit(injected_exit=True)
        os._exit(1)
    try:
        progress("barrier")
        if backend == "nccl":
            dist.barrier(device_ids=[gpu])
        else:
            dist.barrier()
        clock = time.time()
        results = allreduce_sizes(torch, dist, device, decision, progress)
    except Exception as exc:
        progress("failed in the collective", error_text(exc)[:300])
        return
    record = {"clock": clock, "device": device, "backend": backend, "sizes": results,
              "seconds": round(time.monotonic() - started, 3)}
    put(store, "done/%d" % rank, record)
    progress("done")
    emit(worker=record)


def main():
    global OPTS
    OPTS = args()
    started = time.monotonic()
    rank = int(OPTS["rank"])
    threading.Thread(target=read_stdin, name="stdin", daemon=True).start()
    stage("import torch")
    torch_probe()
    try:
        import torch
        import torch.distributed as dist
    except BaseException as exc:
        emit(fatal={"phase": "import torch", "error": error_text(exc)})
        return
    gpu, why = usable_gpu(torch)
    uuid = gpu_uuid(torch, gpu)
    emit(torch=torch.__version__, gpu=gpu, gpu_why=why)
    if injected("absent"):
        emit(injected_absent=True)
        time.sleep(10 ** 6)
    stage("store")
    try:
        # Rank 0 hosts the store unless torchrun's agent already does (TORCHELASTIC_USE_AGENT_STORE).
        host_it = rank == 0 and not OPTS.get("agent_store")
        store = connect(float(OPTS["init_timeout"]), master=host_it)
    except Exception as exc:
        emit(fatal={"phase": "store", "error": error_text(exc),
                    "address": "%s:%s" % (OPTS["master_addr"], OPTS["master_port"]), "host_it": rank == 0})
        return
    put(store, "arrived/%d" % rank, {"rank": rank, "host": OPTS.get("host"), "node_rank": OPTS.get("node_rank"),
                                     "local_rank": OPTS.get("local_rank"), "pid": os.getpid(), "gpu": gpu,
                                     "gpu_why": why, "gpu_uuid": uuid, "torch": torch.__version__})
    put(store, "order/%d" % int(store.add("n_arrived", 1)), rank)
    stage("arrived")
    total = float(OPTS["facts_timeout"]) + float(OPTS.get("verdict_timeout") or 60)
    if rank == 0:
        threading.Thread(target=coordinate, args=(started,), name="coordinator", daemon=True).start()
    else:
        threading.Thread(target=watch_verdict, args=(total,), name="verdict", daemon=True).start()
    try:
        work(torch, dist, store, gpu, started)
    except Exception as exc:
        emit(worker={"error": error_text(exc)})
    # The coordinator / watcher thread ends the process once the verdict is known.
    time.sleep(total + 5)


if __name__ == "__main__":
    try:
        main()
    except BaseException as exc:
        emit(fatal={"phase": "child", "error": error_text(exc)})
    sys.stdout.flush()
    os._exit(0)
