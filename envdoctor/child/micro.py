"""Child: microchecks that prove the stack works on each requested device (stdlib + torch only).

Run as ``python micro.py '{"devices": ["cuda:0"], "compile": false}'`` in the *target*
interpreter. Every result is printed as soon as it is known, under a key ``<check>@<device>``
(``matmul@cuda:0``), and every step is announced first with ``stage("<check>@<device>: <step>")``,
so when the parent abandons a hung child it still has every finished result and knows exactly
which step hung.

Arguments (all optional):

``devices``   list of ``"cpu"`` / ``"cuda:N"``; default: every visible CUDA device.
``checks``    subset of ``device, matmul, transformer, copy, dataloader, multi_gpu, compile``.
``compile``   also run the ``compile`` check (torch.compile of the training step).
``budget``    seconds each timed loop aims for (default 0.4 on a GPU, 0.05 on the CPU).
``inject``    SELF-TEST ONLY, never used in production: make the child misbehave so tests can
              prove each failure is caught. ``corrupt_matmul`` (scale a sixteenth of the output
              columns by 1.5), ``nan_matmul`` (one NaN in the output), ``hang`` (sleep forever at
              the first matmul), ``segfault`` (read address 0 at the first matmul),
              ``sigbus_worker`` (DataLoader worker raises SIGBUS, as a full /dev/shm does),
              ``sigbus_worker_unsignalled`` (the same with SIGCHLD kept from the main thread,
              as when the kernel hands it to another thread on a loaded machine),
              ``sigbus_worker_stuck`` (the same, with the main thread then blocked for good:
              the loader watchdog must report the pass itself),
              ``hang_worker`` (DataLoader workers that never return a batch).
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
import random
import signal
import subprocess
import sys
import time
import traceback
import warnings

from _edchild import args, done, emit, error_text, exit_now, stage

# In the order they run: the per-device checks device by device, then the host-wide ones.
CHECKS = ("device", "matmul", "transformer", "copy", "compile", "dataloader", "multi_gpu")

# Relative Frobenius error ||out - ref|| / ||ref|| allowed per dtype, against a float64
# reference computed from the same (already rounded) inputs. fp32 lands near 1e-6; tf32 keeps a
# 10-bit mantissa (~5e-4); bf16/fp16 results are rounded to 8/11 bits on output (~1e-3).
TOLERANCE = {"fp32": 1e-4, "tf32": 5e-3, "bf16": 1e-2, "fp16": 1e-2}

INJECT = ""


def _torch():
    import torch

    return torch


# -- small helpers --------------------------------------------------------------------------

def first_line(text):
    text = str(text).strip()
    return text.splitlines()[0][:500] if text else ""


def median(values):
    values = sorted(values)
    return values[len(values) // 2] if values else None


def rel_err(out, ref):
    """||out - ref|| / ||ref|| in float64; NaN/inf in ``out`` give NaN/inf, never a pass."""
    torch = _torch()
    out = out.double()
    ref = ref.double()
    denom = float(torch.linalg.vector_norm(ref))
    num = float(torch.linalg.vector_norm(out - ref))
    if denom == 0.0:
        return num
    return num / denom


def passes(err, tol):
    # ``err <= tol`` is False for NaN, which is the point.
    return err is not None and err <= tol


def sync(device):
    if device.startswith("cuda"):
        _torch().cuda.synchronize(device)


def timed(device, fn, budget, min_reps=3, max_reps=25):
    """Median seconds of ``fn()`` after one warm-up; repeats sized to ``budget`` seconds.

    CUDA events time the GPU work itself (host launch overhead and Python excluded);
    perf_counter on the CPU, where the work is synchronous."""
    torch = _torch()
    start = time.perf_counter()
    fn()
    sync(device)
    first = time.perf_counter() - start
    reps = int(max(min_reps, min(max_reps, budget / max(first, 1e-6))))
    times = []
    for _ in range(reps):
        if device.startswith("cuda"):
            begin = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            begin.record()
            fn()
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end) / 1000.0)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return median(times), reps


def set_tf32(enabled):
    torch = _torch()
    mm = torch.backends.cuda.matmul
    # torch >= 2.9 has fp32_precision ("ieee"/"tf32"); the older flag warns there.
    if hasattr(mm, "fp32_precision"):
        try:
            mm.fp32_precision = "tf32" if enabled else "ieee"
            return
        except Exception:
            pass
    mm.allow_tf32 = bool(enabled)


def bf16_supported(device):
    torch = _torch()
    if device == "cpu":
        return True
    try:
        return bool(torch.cuda.is_bf16_supported())
    except Exception:
        return False


def capability(device):
    torch = _torch()
    if device == "cpu":
        return None
    return list(torch.cuda.get_device_capability(device))


def gen(device):
    """A generator seeded afresh each run: the inputs are never the same twice."""
    torch = _torch()
    g = torch.Generator(device=device)
    g.manual_seed(random.SystemRandom().randrange(1 << 62))
    return g


def inject_crash_or_hang(where):
    if INJECT == "hang":
        stage(where + ": injected hang")
        while True:
            time.sleep(3600)
    if INJECT == "segfault":
        stage(where + ": injected segfault")
        import ctypes

        ctypes.string_at(0)


# -- checks -----------------------------------------------------------------------------------

def check_device(device, opts):
    """Allocate, copy host -> device -> host and compare bit for bit, run a tiny kernel,
    synchronize so asynchronous errors surface here."""
    torch = _torch()
    t0 = time.perf_counter()
    out = {"device": device}
    if device != "cpu":
        stage("device@%s: properties" % device)
        props = torch.cuda.get_device_properties(device)
        out.update(name=props.name, capability=[props.major, props.minor], total_memory=int(props.total_memory),
                   multi_processor_count=int(getattr(props, "multi_processor_count", 0)),
                   uuid=str(getattr(props, "uuid", "") or "") or None)
        stage("device@%s: mem_get_info" % device)
        free, total = torch.cuda.mem_get_info(device)
        out.update(free_memory=int(free))
    else:
        out.update(name="cpu", threads=torch.get_num_threads())
    stage("device@%s: round trip" % device)
    host = torch.randn(1 << 20, generator=gen("cpu"))
    on_dev = host.to(device)
    back = on_dev.to("cpu")
    sync(device)
    out["roundtrip_equal"] = bool(torch.equal(host, back))
    stage("device@%s: kernel" % device)
    got = float((on_dev * 2.0 + 1.0).double().sum())
    sync(device)
    want = float((host.double() * 2.0 + 1.0).sum())
    out["kernel_ok"] = abs(got - want) <= 1e-6 * max(1.0, abs(want)) + 1e-3
    out["ok"] = out["roundtrip_equal"] and out["kernel_ok"]
    out["seconds"] = round(time.perf_counter() - t0, 4)
    return out


def matmul_size(device):
    if device == "cpu":
        return 256  # fp16 GEMM on CPUs without native support runs at a few GFLOP/s
    torch = _torch()
    free, _ = torch.cuda.mem_get_info(device)
    # A, B, out, float64 copies of A and B for the reference: ~ 32 * n^2 bytes at n.
    for n in (8192, 4096, 2048):
        if 40 * n * n < free * 0.6:
            return n
    return 1024


def matmul_dtypes(device):
    torch = _torch()
    dtypes = [("fp32", torch.float32, False)]
    cap = capability(device)
    if cap is not None and cap[0] >= 8:  # TF32 tensor cores arrived with Ampere (sm_80)
        dtypes.append(("tf32", torch.float32, True))
    if bf16_supported(device):
        dtypes.append(("bf16", torch.bfloat16, False))
    dtypes.append(("fp16", torch.float16, False))
    return dtypes


def one_matmul(device, label, dtype, tf32, n, budget):
    torch = _torch()
    where = "matmul@%s: %s" % (device, label)
    stage(where + " inputs")
    g = gen(device)
    a = torch.randn(n, n, device=device, generator=g).to(dtype)
    b = torch.randn(n, n, device=device, generator=g).to(dtype)
    if device != "cpu":
        set_tf32(tf32)
    stage(where + " compute")
    out = a @ b
    sync(device)
    if INJECT == "corrupt_matmul":
        out[:, : max(1, n // 16)] *= 1.5
    elif INJECT == "nan_matmul":
        out[n // 2, n // 3] = float("nan")
    stage(where + " verify")
    finite = bool(torch.isfinite(out).all())
    # Compare a sample of rows against a float64 reference, and the whole product through
    # Freivalds' test (out @ x vs a @ (b @ x) for random x): an O(n^2) check that sees every
    # element, so a corrupted tile outside the sampled rows is still caught.
    rows = torch.randperm(n, device=device, generator=g)[: min(n, 256)]
    a64 = a.double()
    b64 = b.double()
    row_err = rel_err(out[rows], a64[rows] @ b64)
    x = torch.randn(n, 2, device=device, generator=g, dtype=torch.float64)
    freivalds_err = rel_err(out.double() @ x, a64 @ (b64 @ x))
    del a64, b64
    err = max(row_err, freivalds_err) if finite else float("nan")
    tol = TOLERANCE[label]
    stage(where + " timing")
    seconds, reps = timed(device, lambda: a @ b, budget)
    if device != "cpu":
        set_tf32(False)
    result = {
        "n": n, "ok": finite and passes(err, tol), "finite": finite,
        "rel_err": err if err == err else None, "row_rel_err": row_err if row_err == row_err else None,
        "freivalds_rel_err": freivalds_err if freivalds_err == freivalds_err else None,
        "tolerance": tol, "seconds": seconds, "repeats": reps,
        "tflops": round(2.0 * n ** 3 / seconds / 1e12, 4) if seconds else None,
    }
    return result


def check_matmul(device, opts):
    n = matmul_size(device)
    budget = opts["budget"]
    out = {"n": n, "dtypes": {}}
    first = True
    for label, dtype, tf32 in matmul_dtypes(device):
        if first:
            inject_crash_or_hang("matmul@%s: %s" % (device, label))
            first = False
        try:
            out["dtypes"][label] = one_matmul(device, label, dtype, tf32, n, budget)
        except Exception as exc:
            out["dtypes"][label] = {"ok": False, "error": error_text(exc)}
            if device != "cpu" and is_sticky_cuda_error(exc):
                raise
    out["ok"] = all(r.get("ok") for r in out["dtypes"].values())
    return out


def is_sticky_cuda_error(exc):
    # After these the CUDA context is unusable; further work on the device only repeats them.
    text = str(exc)
    return any(s in text for s in ("illegal memory access", "unspecified launch failure", "device-side assert",
                                   "uncorrectable ECC", "CUDA error: an illegal", "Xid", "device not ready",
                                   "misaligned address", "CUDA error: unknown error"))


def transformer_shape(device):
    if device == "cpu":
        return {"batch": 4, "seq": 32, "d_model": 64, "nhead": 4, "ff": 128}
    return {"batch": 8, "seq": 1024, "d_model": 1024, "nhead": 16, "ff": 4096}


def block_inputs(device):
    """``(shape, seed, x, y)`` for a Transformer block step: its shape, a fresh seed for its
    weights (reused to build identical copies) and a random batch with its target. TF32 is
    turned off first so the fp32 reference really is fp32."""
    torch = _torch()
    shape = transformer_shape(device)
    seed = random.SystemRandom().randrange(1 << 31)
    if device != "cpu":
        set_tf32(False)
    g = gen(device)
    x = torch.randn(shape["batch"], shape["seq"], shape["d_model"], device=device, generator=g)
    y = torch.randn(shape["batch"], shape["seq"], shape["d_model"], device=device, generator=g)
    return shape, seed, x, y


def amp_dtype(device):
    torch = _torch()
    # fp16 needs a GradScaler; bf16 has fp32's range and does not.
    return (torch.bfloat16, "bf16") if bf16_supported(device) else (torch.float16, "fp16")


def build_block(device, shape, seed):
    torch = _torch()
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(shape["d_model"], shape["nhead"], shape["ff"], dropout=0.0,
                                             batch_first=True, norm_first=True)
    model = torch.nn.Sequential(layer, torch.nn.Linear(shape["d_model"], shape["d_model"]))
    return model.to(device)


def flat_grads(model):
    torch = _torch()
    return torch.cat([p.grad.detach().double().reshape(-1) for p in model.parameters() if p.grad is not None])


def train_step(model, opt, x, y, device, dtype=None, scaler=None):
    """One step: forward, loss, backward, (unscale), optimizer step. Returns (loss, grads)."""
    torch = _torch()
    opt.zero_grad(set_to_none=True)
    with torch.autocast(device_type=device.split(":")[0], dtype=dtype or torch.float32, enabled=dtype is not None):
        out = model(x)
        loss = torch.nn.functional.mse_loss(out.float(), y)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
    else:
        loss.backward()
    grads = flat_grads(model)
    if scaler is not None:
        scaler.step(opt)
        scaler.update()
    else:
        opt.step()
    return loss.detach(), grads


def sdpa_backends(device, dtype):
    """Which scaled_dot_product_attention backends run here, each checked against float64."""
    torch = _torch()
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as exc:
        return {"error": error_text(exc)}
    names = {"flash": "FLASH_ATTENTION", "mem_efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION",
             "math": "MATH"}
    g = gen(device)
    qdtype = dtype if device != "cpu" else torch.float32
    q, k, v = (torch.randn(2, 8, 128, 64, device=device, generator=g).to(qdtype) for _ in range(3))
    scores = (q.double() @ k.double().transpose(-2, -1)) / 8.0
    ref = torch.softmax(scores, dim=-1) @ v.double()
    tol = 1e-4 if qdtype == torch.float32 else 2e-2
    out = {}
    for short, member in names.items():
        backend = getattr(SDPBackend, member, None)
        if backend is None:
            out[short] = {"usable": False, "why": "not in this torch"}
            continue
        stage("transformer@%s: sdpa %s" % (device, short))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                qq, kk, vv = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
                with sdpa_kernel([backend]):
                    got = torch.nn.functional.scaled_dot_product_attention(qq, kk, vv)
                    got.float().sum().backward()
                sync(device)
                err = rel_err(got, ref)
                grads_finite = all(bool(torch.isfinite(t.grad).all()) for t in (qq, kk, vv))
                out[short] = {"usable": passes(err, tol) and grads_finite, "rel_err": err if err == err else None,
                              "grads_finite": grads_finite}
                if not out[short]["usable"]:
                    out[short]["why"] = "wrong result (rel err %s > %s)" % (err, tol)
            except Exception as exc:
                # torch says why a backend refused (head dim, dtype, GPU arch) in warnings.
                reasons = [first_line(w.message) for w in caught]
                out[short] = {"usable": False, "why": first_line(error_text(exc)), "warnings": reasons[:4]}
    return out


def check_transformer(device, opts):
    """An encoder block's training step in fp32 and under autocast; finite, close, timed."""
    torch = _torch()
    shape, seed, x, y = block_inputs(device)
    budget = opts["budget"]
    where = "transformer@%s" % device
    tokens = shape["batch"] * shape["seq"]
    out = {"shape": shape}

    stage(where + ": fp32 step")
    model = build_block(device, shape, seed)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loss32, grads32 = train_step(model, opt, x, y, device)
    params_finite = all(bool(torch.isfinite(p).all()) for p in model.parameters())
    sync(device)
    out["fp32"] = {"loss": float(loss32), "loss_finite": bool(torch.isfinite(loss32)),
                   "grads_finite": bool(torch.isfinite(grads32).all()), "params_finite": params_finite}
    stage(where + ": fp32 timing")
    seconds, reps = timed(device, lambda: train_step(model, opt, x, y, device), budget)
    out["fp32"].update(seconds=seconds, repeats=reps, tokens_per_s=round(tokens / seconds, 1) if seconds else None)

    dtype, label = amp_dtype(device)
    stage(where + ": autocast %s step" % label)
    model = build_block(device, shape, seed)  # same initial weights as the fp32 run
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = None
    if label == "fp16":
        scaler = torch.amp.GradScaler(device.split(":")[0])
    loss_amp, grads_amp = train_step(model, opt, x, y, device, dtype, scaler)
    sync(device)
    grad_err = rel_err(grads_amp, grads32)
    loss_err = abs(float(loss_amp) - float(loss32)) / max(abs(float(loss32)), 1e-12)
    amp = {"dtype": label, "loss": float(loss_amp), "loss_finite": bool(torch.isfinite(loss_amp)),
           "grads_finite": bool(torch.isfinite(grads_amp).all()),
           "grad_rel_err": grad_err if grad_err == grad_err else None, "loss_rel_err": loss_err,
           "grad_tolerance": 0.1, "grad_scaler": scaler is not None}
    # Half-precision activations put ~1e-2 relative noise on gradients; an order of magnitude
    # more means the autocast kernels compute something else.
    amp["grads_close"] = passes(grad_err, amp["grad_tolerance"])
    stage(where + ": autocast %s timing" % label)
    seconds, reps = timed(device, lambda: train_step(model, opt, x, y, device, dtype, scaler), budget)
    amp.update(seconds=seconds, repeats=reps, tokens_per_s=round(tokens / seconds, 1) if seconds else None)
    out["amp"] = amp

    out["sdpa"] = sdpa_backends(device, dtype)
    f = out["fp32"]
    out["ok"] = bool(f["loss_finite"] and f["grads_finite"] and f["params_finite"] and amp["loss_finite"]
                     and amp["grads_finite"] and amp["grads_close"]
                     and any(b.get("usable") for b in out["sdpa"].values() if isinstance(b, dict)))
    return out


def check_compile(device, opts):
    """torch.compile the block's forward+backward and compare with eager: proves Inductor works
    (Triton on a GPU, the C++ compiler on the CPU)."""
    torch = _torch()
    shape, seed, x, y = block_inputs(device)
    where = "compile@%s" % device
    eager = build_block(device, shape, seed)
    opt = torch.optim.SGD(eager.parameters(), lr=1e-3)
    stage(where + ": eager step")
    loss_e, grads_e = train_step(eager, opt, x, y, device)
    model = build_block(device, shape, seed)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    stage(where + ": torch.compile (first call compiles)")
    t0 = time.perf_counter()
    compiled = torch.compile(model)
    loss_c, grads_c = train_step(compiled, opt, x, y, device)
    sync(device)
    compile_s = time.perf_counter() - t0
    grad_err = rel_err(grads_c, grads_e)
    stage(where + ": compiled timing")
    seconds, reps = timed(device, lambda: train_step(compiled, opt, x, y, device), opts["budget"])
    loss_err = abs(float(loss_c) - float(loss_e)) / max(abs(float(loss_e)), 1e-12)
    out = {"compile_seconds": round(compile_s, 2), "loss_rel_err": loss_err,
           "grad_rel_err": grad_err if grad_err == grad_err else None, "tolerance": 1e-3,
           "seconds": seconds, "repeats": reps}
    out["ok"] = passes(loss_err, 1e-3) and passes(grad_err, 1e-3)
    return out


def check_copy(device, opts):
    """Copy bandwidth and correctness: pinned host <-> device and device -> device (on the CPU
    only host -> host, since there is no device to cross to)."""
    torch = _torch()
    out = {}
    budget = opts["budget"]
    if device == "cpu":
        n = 4 << 20  # 16 MiB of float32
        src = torch.randn(n, generator=gen("cpu"))
        dst = torch.empty_like(src)
        stage("copy@cpu: host to host")
        seconds, reps = timed(device, lambda: dst.copy_(src), budget)
        out["h2h"] = {"bytes": n * 4, "seconds": seconds, "gbps": round(2 * n * 4 / seconds / 1e9, 2),
                      "equal": bool(torch.equal(src, dst))}
        out["ok"] = out["h2h"]["equal"]
        return out
    free, _ = torch.cuda.mem_get_info(device)
    n = (256 << 20) // 4 if free > (2 << 30) else (32 << 20) // 4
    nbytes = n * 4
    stage("copy@%s: pinned alloc" % device)
    pinned = torch.randn(n, generator=gen("cpu")).pin_memory()
    back = torch.empty(n, pin_memory=True)
    on_dev = torch.empty(n, device=device)
    other = torch.empty(n, device=device)
    stage("copy@%s: host to device" % device)
    s, _ = timed(device, lambda: on_dev.copy_(pinned, non_blocking=True), budget)
    out["h2d"] = {"bytes": nbytes, "seconds": s, "gbps": round(nbytes / s / 1e9, 2)}
    stage("copy@%s: device to host" % device)
    s, _ = timed(device, lambda: back.copy_(on_dev, non_blocking=True), budget)
    sync(device)
    out["d2h"] = {"bytes": nbytes, "seconds": s, "gbps": round(nbytes / s / 1e9, 2)}
    out["roundtrip_equal"] = bool(torch.equal(pinned, back))
    stage("copy@%s: device to device" % device)
    s, _ = timed(device, lambda: other.copy_(on_dev), budget)
    # Counted as read + write, the way CUDA's bandwidthTest does, so it compares with the
    # memory bandwidth on the datasheet.
    out["d2d"] = {"bytes": nbytes, "seconds": s, "gbps": round(2 * nbytes / s / 1e9, 2),
                  "equal": bool(torch.equal(other, on_dev))}
    out["ok"] = out["roundtrip_equal"] and out["d2d"]["equal"]
    return out


class _Batches:
    """A map-style dataset of large tensors whose content is known from the index alone, so
    the parent can verify every batch that crossed /dev/shm."""

    def __init__(self, count, numel, inject):
        self.count = count
        self.numel = numel
        self.inject = inject

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        torch = _torch()
        if self.inject == "hang_worker":
            while True:  # a worker stuck in the dataset's code
                time.sleep(3600)
        if self.inject in ("sigbus_worker", "sigbus_worker_unsignalled", "sigbus_worker_stuck"):
            # What a full /dev/shm does to a worker writing a batch into it.
            os.kill(os.getpid(), signal.SIGBUS)
        return torch.full((self.numel,), float(index))


def check_dataloader(device, opts):
    """DataLoader with several workers and pin_memory, batches big enough to go through
    /dev/shm; a worker killed by SIGBUS is the classic too-small-/dev/shm failure."""
    torch = _torch()
    cpus = os.cpu_count() or 2
    workers = max(2, min(4, cpus))
    numel = (1 << 20) if device == "cpu" else (4 << 20)  # 4 MiB / 16 MiB per item (float32)
    batch = 4
    items = workers * batch * 2
    data = _Batches(items, numel, INJECT)
    out = {"workers": workers, "batch_bytes": batch * numel * 4, "batches": items // batch,
           "pin_memory": True, "shm_strategy": torch.multiprocessing.get_sharing_strategy()}
    stage("dataloader@%s: workers" % device)
    # Workers inherit fd 2 and print "ERROR: Unexpected bus error encountered in worker" there,
    # while the loader only raises "worker ... exited unexpectedly": capture fd 2 to see which.
    with WorkerStderr() as captured:
        watchdog = LoaderWatchdog("dataloader@%s" % device, captured, out)
        try:
            _load(device, data, batch, workers, out, watchdog)
        except Exception as exc:  # anything _load did not record itself
            if "error" not in out:
                out.update(ok=False, error=error_text(exc))
        finally:
            watchdog.stop()
    return judge_loader(out, captured.text)


def judge_loader(out, text):
    """``out`` with what the workers said on fd 2 (``text``) and what the error says about them."""
    text = text.replace("\x00", "")
    out["worker_stderr"] = stderr_summary(text)
    if out.get("error"):
        error = out["error"]
        out["bus_error"] = "bus error" in error.lower() or "SIGBUS" in error
        out["killed"] = "killed by signal" in error or "exited unexpectedly" in error or bool(out.get("workers_killed"))
    if "bus error" in text.lower():
        out["bus_error"] = True
    return out


def stderr_summary(text, tail=10):
    """What the workers said on fd 2: the lines torch's worker signal handler prints
    (``ERROR: Unexpected bus error encountered in worker...``) first, each once, then the last
    ``tail`` other lines; a long traceback in between never pushes the worker's last words out."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = []
    for ln in lines:
        if ln.startswith("ERROR:") and ln not in errors:
            errors.append(ln)
    rest = [ln for ln in lines if not ln.startswith("ERROR:")]
    return errors[:tail] + rest[-tail:]


#: Seconds the whole DataLoader pass may take before it counts as hung (a healthy pass takes
#: well under a second; the parent's deadline is minutes).
LOADER_DEADLINE = 60
#: Seconds the watchdog then waits for the main thread to notice its killed workers (the loader
#: polls their liveness every 5 s) before it reports the pass itself (see LoaderWatchdog).
LOADER_GRACE = 10


class LoaderWatchdog:
    """Bounds the DataLoader pass from a thread of its own, whatever the main thread is blocked in.

    1. At LOADER_DEADLINE the live workers are SIGKILLed: the loader's own liveness poll (every
       5 s) then raises "exited unexpectedly" in the main thread, at a point of torch's choosing.
       No signal is raised into the main thread (see SignalGuard for why).
    2. LOADER_GRACE s later, if the pass has still not ended, it is reported from here, as hung,
       with where the main thread is, and the child ends (what it was asked to run after the pass
       is reported as not run): a main thread stuck for good could run nothing more anyway.
    """

    def __init__(self, key, captured, out):
        import threading

        self.key = key
        self.captured = captured
        self.out = out
        self.main = threading.main_thread().ident
        self.deadline, self.grace = LOADER_DEADLINE, LOADER_GRACE
        if INJECT in ("sigbus_worker_stuck", "hang_worker"):  # the self-tests sit out short steps
            self.deadline, self.grace = 3, 7
        self.expired = False
        self.started = time.perf_counter()
        self.finished = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="envdoctor-loader-watchdog", daemon=True)
        self.thread.start()

    def stop(self):
        self.finished.set()

    def _watch(self):
        if self.finished.wait(self.deadline):
            return
        self.expired = True  # before the kill: the main thread reads it once torch reports the deaths
        killed = kill_children()
        self.out["workers_killed"] = killed
        if self.finished.wait(self.grace):
            return
        self._give_up(killed)

    def _give_up(self, killed):
        frame = sys._current_frames().get(self.main)
        frames = traceback.extract_stack(frame) if frame is not None else []
        where = ["%s:%d in %s" % (os.path.basename(f.filename), f.lineno, f.name) for f in frames][-30:]
        # The innermost frame, and this script's own innermost frame when that is further out.
        mine = [w for f, w in zip(frames[-30:], where) if os.path.abspath(f.filename) == os.path.abspath(__file__)]
        at = where[-1] if where else "an unknown place"
        if mine and mine[-1] != at:
            at = "%s, from %s" % (at, mine[-1])
        seconds = time.perf_counter() - self.started
        result = dict(self.out, ok=False, hung=True, hung_at=where, wall_seconds=round(seconds, 4),
                      error="the DataLoader pass gave no answer within %d s, nor %d s after %s; the main "
                            "thread is at %s" % (self.deadline, self.grace,
                                                 "its live workers were killed" if killed else "that (no worker was alive)",
                                                 at))
        emit(**{self.key: judge_loader(result, self.captured.so_far())})
        for later in LATER:
            emit(**{later: {"ok": False, "not_run": "the DataLoader pass before it hung"}})
        done(seconds=round(seconds, 3), loader_watchdog=True)
        exit_now()


#: Result keys of the checks run after the DataLoader pass (set by :func:`run`): reported as not
#: run when the loader watchdog ends the child.
LATER = []


def kill_children():
    """SIGKILL the loader's live workers; their pids. A worker is a child of this process forked
    without exec, so its command line is this one's: a compile worker or any other program this
    process started is left alone."""
    me = str(os.getpid())
    killed = []
    try:
        entries = os.listdir("/proc")
        with open("/proc/self/cmdline", "rb") as fh:
            command = fh.read()
    except OSError:
        return killed
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry, "rb") as fh:
                stat = fh.read().decode("ascii", "replace")
            fields = stat[stat.rindex(")") + 2:].split()
            if fields[1] != me or fields[0] in ("Z", "X"):  # another's, or already dead
                continue
            with open("/proc/%s/cmdline" % entry, "rb") as fh:
                if fh.read() != command:
                    continue
            os.kill(int(entry), signal.SIGKILL)
            killed.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return killed


class SignalGuard:
    """Signal handlers that may raise, run only at the start of a call made through :meth:`call`,
    never where the signal happens to land.

    torch's SIGCHLD handler raises "DataLoader worker ... killed by signal" at whatever bytecode
    the main thread is at when a worker dies. Raised there it broke things three ways:
    - in the ``except`` recording the first death, in the fd-2 restore, in ``emit``: the result
      lost, fd 2 left redirected, the child dead before its last record;
    - inside torch's own try/except-and-log (a lazy import in ``next()``): swallowed;
    - between a ``multiprocessing`` queue's ``Condition.__enter__`` taking its lock and the
      ``with`` block starting (``iter()`` putting the first indices): the lock was never released,
      and the half-built iterator's ``__del__``, run when the exception was dropped, put ``None``
      on that queue and waited for the lock for good. That is the hang CI met (the loader
      watchdog's stack: ``_load`` -> ``__del__`` -> ``_shutdown_workers`` -> ``queues.py put`` ->
      ``threading.py __enter__``).
    So a signal is only noted here and handed to its handler at the start of the next
    :meth:`call`, or never, once the work is over. A death during a ``next()`` is still found
    within 5 s by the loader's liveness poll, which raises at a point of torch's choosing.
    """

    def __init__(self):
        self.pending = []
        self.inner = {}

    def install(self, signum, handler):
        self.inner[signum] = handler
        signal.signal(signum, self._handle)

    def _handle(self, signum, frame):
        if signum not in self.pending:
            self.pending.append(signum)

    def call(self, fn, *fn_args):
        while self.pending:
            signum = self.pending.pop(0)
            self.inner[signum](signum, None)
        return fn(*fn_args)


def torch_sigchld_handler(torch):
    """torch's DataLoader SIGCHLD handler, installed now rather than inside ``iter(loader)`` (it
    installs itself once per process), so the guard can wrap it before any worker exists."""
    handling = getattr(getattr(getattr(torch.utils, "data", None), "_utils", None), "signal_handling", None)
    setter = getattr(handling, "_set_SIGCHLD_handler", None)
    if setter is not None:
        setter()
    handler = signal.getsignal(signal.SIGCHLD)
    return handler if callable(handler) else None


def warm_up_loader_imports(torch):
    """Run the lazy imports of the loader's first ``next()`` now, before any worker exists.

    ``DataLoader.__next__`` enters ``record_function``, whose first use imports a profiler module
    inside a ``try/except Exception`` that logs and carries on. A worker dying during that import
    (on a loaded machine the import is slow and the workers die at once) had torch's SIGCHLD
    handler raise inside it: the exception was swallowed, the death went unnoticed until the
    loader's 5 s liveness poll, and the logged traceback pushed the worker's own last words out
    of the stderr tail."""
    profiler = getattr(getattr(torch, "autograd", None), "profiler", None)
    record = getattr(profiler, "record_function", None)
    if record is not None:
        try:
            with record("envdoctor.warm_up"):
                pass
        except Exception:
            pass


def shutdown_loader(iterator):
    """Stop the iterator's workers now, not whenever the garbage collector frees it: an
    iterator kept alive by a traceback's reference cycle kept its worker pids registered with
    torch's SIGCHLD handler, which then raised wherever the child was when a worker died."""
    stop = getattr(iterator, "_shutdown_workers", None)
    if stop is not None:
        try:
            stop()
        except Exception:
            pass


class WorkerStderr:
    """Redirect fd 2 into a temporary file for a while, then replay it to the real stderr."""

    def __enter__(self):
        import tempfile

        self.text = ""
        sys.stderr.flush()
        self._file = tempfile.TemporaryFile()
        self._saved = os.dup(2)
        os.dup2(self._file.fileno(), 2)
        return self

    def so_far(self):
        """What was captured until now (read without moving the file's offset)."""
        try:
            return os.pread(self._file.fileno(), 1 << 20, 0).decode("utf-8", "replace")
        except (OSError, ValueError, AttributeError):
            return ""

    def __exit__(self, *exc):
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        raw = self._file.read(1 << 20)
        self._file.close()
        self.text = raw.decode("utf-8", "replace")
        sys.stderr.write(self.text)
        sys.stderr.flush()
        return False


def _load(device, data, batch, workers, out, watchdog):
    torch = _torch()
    t0 = time.perf_counter()
    seen = 0
    wrong = []
    guard = SignalGuard()
    with warnings.catch_warnings():
        # "pin_memory ... no accelerator is found" on CPU-only builds: expected there.
        warnings.simplefilter("ignore")
        # No DataLoader timeout: with one, each batch is a single wait of that length, and a
        # dead worker is noticed only when SIGCHLD interrupts it. Without one, the loader itself
        # checks its workers' liveness every 5 s; a worker that hangs instead of dying is ended
        # by the watchdog at its deadline, which that poll then reports.
        loader = torch.utils.data.DataLoader(data, batch_size=batch, num_workers=workers, pin_memory=True)
        unsignalled = INJECT == "sigbus_worker_unsignalled"
        if unsignalled:
            signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
        previous = signal.getsignal(signal.SIGCHLD)
        sigchld = torch_sigchld_handler(torch)
        if sigchld is not None:
            guard.install(signal.SIGCHLD, sigchld)
        iterator = None
        try:
            warm_up_loader_imports(torch)
            iterator = guard.call(iter, loader)
            if INJECT == "sigbus_worker_stuck":
                # Blocked where no signal and no dead worker ends it: only the watchdog's last step
                # reports this pass.
                stuck = __import__("threading").Lock()
                stuck.acquire()
                while True:
                    stuck.acquire()
            for i in range(len(loader)):
                chunk = guard.call(next, iterator)
                want = torch.arange(i * batch, i * batch + batch, dtype=chunk.dtype).unsqueeze(1)
                if not bool((chunk == want).all()):
                    wrong.append(i)
                if device != "cpu":
                    chunk.to(device, non_blocking=True)
                seen += chunk.numel() * 4
        except Exception as exc:
            if watchdog.expired:  # the workers the watchdog ended at the deadline, reported by torch
                out.update(ok=False, hung=True, error="no batch within %d s, so the live workers were killed; then: %s"
                           % (watchdog.deadline, error_text(exc)))
            else:
                out.update(ok=False, error=error_text(exc))
            return
        finally:
            # Workers are joined while fd 2 is still captured, so every worker's last words are
            # in ``worker_stderr``; a signal meanwhile is only noted by the guard.
            shutdown_loader(iterator)
            if unsignalled:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGCHLD])
            if iterator is not None:
                # The workers are gone and unregistered: torch's handler has nothing left to
                # raise about. (If iter() itself failed, the half-built iterator may still be
                # registered, and the guard, which only takes notes, stays.)
                signal.signal(signal.SIGCHLD, sigchld or previous or signal.SIG_DFL)
    sync(device)
    seconds = time.perf_counter() - t0
    out.update(ok=not wrong, wrong_batches=wrong, seconds=round(seconds, 4),
               mbps=round(seen / seconds / 1e6, 1) if seconds else None)


def check_multi_gpu(devices, opts):
    """Peer access between every pair, then an NCCL all-reduce across the local GPUs in a
    grandchild with a hard timeout, so "hung" is told apart from "wrong" and "error"."""
    torch = _torch()
    indices = [int(d.split(":")[1]) for d in devices]
    stage("multi_gpu: peer access")
    matrix = []
    for i in indices:
        row = []
        for j in indices:
            row.append(True if i == j else bool(torch.cuda.can_device_access_peer(i, j)))
        matrix.append(row)
    out = {"devices": devices, "peer_access": matrix}
    stage("multi_gpu: nccl all_reduce")
    timeout = float(opts.get("nccl_timeout", 30.0))
    env = dict(os.environ, NCCL_DEBUG="WARN")
    result = run_grandchild({"mode": "nccl", "devices": indices}, timeout, env)
    out["nccl"] = result
    out["ok"] = result.get("status") == "ok"
    return out


def run_grandchild(payload, timeout, env):
    """Run this script in ``payload["mode"]`` with a deadline; abandon it if it will not die
    (a process stuck in the driver ignores SIGKILL)."""
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), json.dumps(payload)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    t0 = time.perf_counter()
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        return {"status": "hung", "seconds": round(time.perf_counter() - t0, 2),
                "detail": "all_reduce gave no answer within %g s" % timeout}
    text = stderr.decode("utf-8", "replace")
    nccl_lines = [ln for ln in text.splitlines() if "NCCL" in ln][-20:]
    record = {}
    for line in stdout.decode("utf-8", "replace").splitlines():
        if line.startswith("@@envdoctor@@ "):
            try:
                record.update(json.loads(line[len("@@envdoctor@@ "):]))
            except ValueError:
                pass
    record.pop("_done", None)
    record.pop("_stage", None)
    if proc.returncode and proc.returncode < 0:
        record.update(status="error", detail="killed by signal %d" % -proc.returncode)
    elif "status" not in record:
        record.update(status="error", detail=first_line(text.strip().splitlines()[-1]) if text.strip() else
                      "exited with code %s" % proc.returncode)
    record["seconds"] = round(time.perf_counter() - t0, 2)
    record["nccl_warnings"] = nccl_lines
    return record


def nccl_mode(payload):
    """Grandchild: one process, all local GPUs, torch.cuda.nccl.all_reduce of known values."""
    torch = _torch()
    indices = payload["devices"]
    try:
        import torch.cuda.nccl as nccl

        tensors = [torch.full((1 << 20,), float(i + 1), device="cuda:%d" % d) for i, d in enumerate(indices)]
        nccl.all_reduce(tensors)
        for d in indices:
            torch.cuda.synchronize(d)
        want = float(sum(range(1, len(indices) + 1)))
        wrong = [d for d, t in zip(indices, tensors) if not bool((t == want).all())]
        if wrong:
            done(status="wrong", detail="all_reduce result differs on GPU(s) %s" % wrong)
        else:
            done(status="ok")
    except Exception as exc:
        done(status="error", detail=error_text(exc))


# -- driver -----------------------------------------------------------------------------------

def run_check(name, device, fn, *fn_args):
    """Run one check, emit its result (or its exception) under ``name@device``."""
    key = "%s@%s" % (name, device)
    stage(key)
    t0 = time.perf_counter()
    try:
        if device.startswith("cuda:"):
            # CUDA events and default streams belong to the *current* device: without this,
            # timings on cuda:1 would be recorded on cuda:0's stream and read ~0 s.
            with _torch().cuda.device(device):
                result = fn(*fn_args)
        else:
            result = fn(*fn_args)
    except Exception as exc:
        result = {"ok": False, "error": error_text(exc), "where": traceback.format_exc().strip().splitlines()[-3:]}
    result.setdefault("wall_seconds", round(time.perf_counter() - t0, 4))
    emit(**{key: result})
    return result


def usable_devices(torch, requested):
    """(the devices that can be used, {device: why not} for the rest)."""
    devices = []
    unusable = {}
    for dev in requested:
        if dev == "cpu":
            devices.append(dev)
            continue
        stage("cuda init %s" % dev)
        try:
            index = int(dev.split(":")[1]) if ":" in dev else 0
            if not torch.cuda.is_available():
                raise RuntimeError("torch.cuda.is_available() is False")
            if index >= torch.cuda.device_count():
                raise RuntimeError("%s is not visible (%d CUDA device(s))" % (dev, torch.cuda.device_count()))
            devices.append("cuda:%d" % index)
        except Exception as exc:
            unusable[dev] = error_text(exc)
    return devices, unusable


def init_contexts(torch, cuda_devices):
    """Create every device's context up front, so the timings after are "after CUDA initialisation";
    an error here is left for the device touch to report."""
    t0 = time.perf_counter()
    for dev in cuda_devices:
        stage("cuda init %s: context" % dev)
        try:
            torch.zeros(1, device=dev)
            torch.cuda.synchronize(dev)
        except Exception:
            pass
    emit(cuda_init_seconds=round(time.perf_counter() - t0, 3))


class LazyImports:
    """torch's lazy imports that the training step needs, started in a thread while the device
    touch and the matmuls run.

    torch.optim's first optimizer imports torch._dynamo (``add_param_group`` is wrapped in
    ``torch._disable_dynamo``): seconds of single-threaded Python on a small machine, which the
    transformer check otherwise sat out with one core idle, while the matmuls before it spend most
    of their time in BLAS, outside the GIL. The checks still do all their own work: an import that
    fails here is simply done again, and fails again, inside the check (failed imports are not kept
    in sys.modules). :meth:`wait` is called before the checks that need it and before any
    DataLoader worker is forked, so no thread is ever inside an import across a fork."""

    MODULES = ("torch._dynamo",)

    def __init__(self, checks):
        self.thread = None
        if not any(c in checks for c in ("transformer", "compile")):
            return
        import threading

        self.thread = threading.Thread(target=self._work, name="envdoctor-lazy-imports")
        self.thread.daemon = True
        self.thread.start()

    def _work(self):
        import importlib

        for name in self.MODULES:
            try:
                importlib.import_module(name)
            except BaseException:
                pass

    def wait(self, where):
        """Until the imports are done; announced as a step of ``where`` (a hang here is its hang)."""
        if self.thread is not None:
            if self.thread.is_alive():
                stage("%s: import %s (lazy imports of torch)" % (where, ", ".join(self.MODULES)))
            self.thread.join()
            self.thread = None


def run_per_device(checks, devices, run_opts, lazy=None):
    """Each per-device check on each device; a device an earlier check broke is not run again.
    Returns the broken devices."""
    broken = set()
    per_device = [("device", check_device), ("matmul", check_matmul), ("transformer", check_transformer),
                  ("copy", check_copy), ("compile", check_compile)]
    for name, fn in per_device:
        if name not in checks:
            continue
        if lazy is not None and name in ("transformer", "compile"):
            lazy.wait("%s@%s" % (name, devices[0]))
        for dev in devices:
            if dev in broken:
                emit(**{"%s@%s" % (name, dev): {"ok": False, "not_run": "an earlier check broke %s" % dev}})
                continue
            result = run_check(name, dev, fn, dev, run_opts)
            if (name == "device" and not result.get("ok")) or (dev != "cpu" and is_sticky_cuda_error(result.get("error", ""))):
                broken.add(dev)
    return broken


def main():
    opts = args()
    if opts.get("mode") == "nccl":
        nccl_mode(opts)
        return
    run(opts)


def run(opts, torch=None):
    """The microchecks with ``opts``; ``torch`` when the caller imported it already (the torch
    facts' child runs them after its facts: one ``import torch`` for both)."""
    global INJECT
    INJECT = str(opts.get("inject") or "")
    t_start = time.perf_counter()
    if torch is None:
        stage("import torch")
        try:
            import torch
        except BaseException as exc:
            done(fatal={"stage": "import torch", "error": error_text(exc)})
            return
    emit(torch_version=torch.__version__)
    requested = opts.get("devices")
    if not requested:
        stage("torch.cuda.is_available")
        if not torch.cuda.is_available():
            done(plan={"devices": [], "checks": [], "why": "torch.cuda.is_available() is False"})
            return
        requested = ["cuda:%d" % i for i in range(torch.cuda.device_count())]
    devices, unusable = usable_devices(torch, requested)
    if not devices:
        done(plan={"devices": [], "checks": [], "unusable": unusable, "why": "none of %s is usable" % requested})
        return
    wanted = opts.get("checks") or [c for c in CHECKS if c != "compile" or opts.get("compile")]
    if opts.get("compile") and "compile" not in wanted:
        wanted = list(wanted) + ["compile"]
    cuda_devices = [d for d in devices if d != "cpu"]
    checks = [c for c in CHECKS if c in wanted and (c != "multi_gpu" or len(cuda_devices) >= 2)]
    budget = float(opts.get("budget") or (0.05 if not cuda_devices else 0.4))
    run_opts = dict(opts, budget=budget)
    emit(plan={"devices": devices, "checks": checks, "unusable": unusable,
               "multi_gpu_skipped": None if len(cuda_devices) >= 2 else "%d CUDA device(s)" % len(cuda_devices)})
    if cuda_devices:
        init_contexts(torch, cuda_devices)
    t_checks = time.perf_counter()
    lazy = LazyImports(checks)
    broken = run_per_device(checks, devices, run_opts, lazy)
    lazy.wait("dataloader@%s" % (devices[0]))  # before the DataLoader forks its workers
    LATER[:] = ["multi_gpu@all"] if "multi_gpu" in checks else []
    if "dataloader" in checks:
        usable = [d for d in devices if d not in broken]
        run_check("dataloader", usable[0] if usable else "cpu", check_dataloader,
                  usable[0] if usable else "cpu", run_opts)
    if "multi_gpu" in checks:
        run_check("multi_gpu", "all", check_multi_gpu, cuda_devices, run_opts)
    done(seconds=round(time.perf_counter() - t_start, 3), checks_seconds=round(time.perf_counter() - t_checks, 3))


if __name__ == "__main__":
    main()
    exit_now()
