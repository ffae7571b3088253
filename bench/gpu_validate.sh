#!/usr/bin/env bash
# Validate envdoctor on a real GPU machine: run `envdoctor check` with the microchecks and full
# output, write `envdoctor report --json` into a folder the caller names, and print the
# microcheck figures (TFLOP/s and ratio to the datasheet peak, tokens/s, copy bandwidth, timings).
#
# usage: bench/gpu_validate.sh OUTDIR [envdoctor options, e.g. --device cuda:0 --compile]
#   PYTHON=/path/to/python   the interpreter that has torch (default: python3)
#   TIMEOUT=5                envdoctor --timeout (the microcheck deadline is 24x this)
#
# Installs nothing it cannot: torch must already be there. envdoctor itself is installed from
# this checkout with --no-deps when its dependencies (click, rich, packaging, nvidia-ml-py,
# psutil) are already importable; otherwise pip is asked once, and an offline machine stops
# here with exit code 2. Exit code: envdoctor check's (0 ok, 1 a failure, 3 could not complete).
set -u -o pipefail

if [ $# -lt 1 ]; then
    echo "usage: $0 OUTDIR [envdoctor options]" >&2
    exit 2
fi
OUT=$1
shift
PY=${PYTHON:-python3}
TIMEOUT=${TIMEOUT:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
LOG="$OUT/gpu_validate.log"
: >"$LOG"

say() { echo "== $*" | tee -a "$LOG"; }

say "machine"
{ date -u +%Y-%m-%dT%H:%M:%SZ; uname -srm; nproc; } 2>&1 | tee -a "$LOG"
if command -v nvidia-smi >/dev/null 2>&1; then
    timeout 30 nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
    timeout 30 nvidia-smi --query-gpu=index,name,driver_version,pcie.link.gen.max,pcie.link.width.max,clocks.sm,clocks.max.sm,power.limit,temperature.gpu \
        --format=csv 2>&1 | tee -a "$LOG"
else
    say "no nvidia-smi on PATH"
fi

say "torch in $PY"
if ! timeout 120 "$PY" -c "import torch; print(torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available(), 'devices', torch.cuda.device_count())" 2>&1 | tee -a "$LOG"; then
    say "torch does not import in $PY; set PYTHON to the interpreter that has it"
    exit 2
fi

say "envdoctor"
if ! "$PY" -c "import envdoctor.commands.cli" >/dev/null 2>&1; then
    if "$PY" -c "import click, rich, packaging, pynvml, psutil" >/dev/null 2>&1; then
        "$PY" -m pip install -q --no-deps --no-build-isolation -e "$ROOT" 2>&1 | tee -a "$LOG"
    else
        "$PY" -m pip install -q -e "$ROOT" 2>&1 | tee -a "$LOG" || {
            say "cannot install envdoctor's dependencies here (offline?); install click rich packaging nvidia-ml-py psutil first"
            exit 2
        }
    fi
fi
"$PY" -m envdoctor --version 2>&1 | tee -a "$LOG"

say "envdoctor check -v --timeout $TIMEOUT $*"
start=$(date +%s.%N)
COLUMNS=${COLUMNS:-160} "$PY" -m envdoctor check -v --timeout "$TIMEOUT" "$@" 2>&1 | tee "$OUT/check.txt"
rc=${PIPESTATUS[0]}
end=$(date +%s.%N)
say "check exit code $rc, $(echo "$end - $start" | bc 2>/dev/null || echo '?') s"

say "envdoctor report --json -o $OUT/report.json"
"$PY" -m envdoctor report --json --timeout "$TIMEOUT" -o "$OUT/report.json" "$@" 2>&1 | tee -a "$LOG"

say "microcheck figures"
"$PY" - "$OUT/report.json" <<'EOF' 2>&1 | tee "$OUT/micro_figures.txt"
import json, sys

from envdoctor.knowledge.compat import gpu_peaks

report = json.load(open(sys.argv[1]))
facts = report.get("facts", {})


def value(key):
    reading = facts.get(key) or {}
    if reading.get("reason"):
        print(f"{key}: {reading['reason']}: {reading.get('detail', '')}")
    return reading.get("value")


def f(x, fmt="{:.1f}"):
    return fmt.format(x) if isinstance(x, (int, float)) else "-"


run = value("micro.run") or {}
print(f"run: status {run.get('status')}, {f(run.get('seconds'))} s total, CUDA init {f(run.get('cuda_init_seconds'), '{:.2f}')} s, "
      f"checks {f(run.get('checks_seconds'))} s on {run.get('devices')} (deadline {run.get('deadline')} s)")
devices = [d for d in (run.get("devices") or []) if d != "cpu"]
if devices and isinstance(run.get("checks_seconds"), (int, float)):
    per = run["checks_seconds"] / len(devices)
    print(f"     {per:.1f} s per GPU after CUDA init (target: under 10 s){'' if per < 10 else '  <-- OVER'}")
for dev, r in (value("micro.device") or {}).items():
    print(f"device {dev}: {r.get('name')} cc {r.get('capability')} ok={r.get('ok')} {r.get('error', '')}")
def ratio(x, peak):
    return x / peak if isinstance(x, (int, float)) and peak else None


for dev, r in (value("micro.matmul") or {}).items():
    peaks = gpu_peaks(r.get("name"))  # the facts carry measurements; the peaks come from the table
    print(f"matmul {dev} n={r.get('n')} ({peaks.model if peaks else 'no datasheet peak'})")
    for label, d in (r.get("dtypes") or {}).items():
        share = ratio(d.get("tflops"), peaks.tflops.get(label) if peaks else None)
        print(f"   {label:5s} {f(d.get('tflops'), '{:9.4g}')} TFLOP/s  ratio {f(share, '{:.2f}')}  "
              f"rel_err {f(d.get('rel_err'), '{:.2e}')} (tol {d.get('tolerance')})  ok={d.get('ok')} {d.get('error', '')}")
for dev, r in (value("micro.transformer") or {}).items():
    amp, f32 = r.get("amp") or {}, r.get("fp32") or {}
    usable = [k for k, b in (r.get("sdpa") or {}).items() if isinstance(b, dict) and b.get("usable")]
    print(f"transformer {dev}: fp32 {f(f32.get('tokens_per_s'), '{:,.0f}')} tok/s, {amp.get('dtype')} autocast "
          f"{f(amp.get('tokens_per_s'), '{:,.0f}')} tok/s, grad rel err {f(amp.get('grad_rel_err'), '{:.2e}')}, "
          f"SDPA {usable}, ok={r.get('ok')} {r.get('error', '')}")
for dev, r in (value("micro.copy") or {}).items():
    parts = [f"{k} {f((r.get(k) or {}).get('gbps'))} GB/s" for k in ("h2d", "d2h", "d2d", "h2h") if k in r]
    peaks = gpu_peaks(r.get("name"))
    share = ratio((r.get("d2d") or {}).get("gbps"), peaks.memory_gbps if peaks else None)
    print(f"copy {dev}: {', '.join(parts)}" + (f" (D->D {share:.0%} of memory bandwidth)" if share else ""))
for dev, r in (value("micro.compile") or {}).items():
    print(f"compile {dev}: {f(r.get('compile_seconds'))} s, ok={r.get('ok')} {r.get('error', '')}")
for dev, r in (value("micro.dataloader") or {}).items():
    print(f"dataloader ({dev}): {r.get('workers')} workers, {f(r.get('mbps'))} MB/s, ok={r.get('ok')} {r.get('error', '')}")
mg = value("micro.multi_gpu")
if mg:
    print(f"multi-gpu: peer access {mg.get('peer_access')}, nccl {mg.get('nccl')}")
print()
for finding in report.get("findings", []):
    if finding["id"].startswith("micro-"):
        print(f"{finding['status']:5s} {finding['id']:18s} {finding['title']}")
EOF

say "cluster check: torchrun --standalone --nproc-per-node=<GPUs> -m envdoctor check --distributed"
GPUS=$(timeout 120 "$PY" -c "import torch; print(torch.cuda.device_count())" 2>/dev/null | tail -n 1)
if [ -n "$GPUS" ] && [ "$GPUS" -ge 1 ] 2>/dev/null; then
    start=$(date +%s.%N)
    # NCCL when every rank has a GPU: one rank per GPU, all-reduce of 1 MiB, 16 MiB and 128 MiB.
    COLUMNS=${COLUMNS:-160} NCCL_DEBUG=${NCCL_DEBUG:-WARN} timeout 300 "$PY" -m torch.distributed.run --standalone \
        --nproc-per-node="$GPUS" -m envdoctor check --distributed --timeout "$TIMEOUT" -o "$OUT/cluster.json" \
        2>&1 | tee "$OUT/cluster.txt"
    crc=${PIPESTATUS[0]}
    end=$(date +%s.%N)
    say "cluster check exit code $crc, $(echo "$end - $start" | bc 2>/dev/null || echo '?') s on $GPUS GPU(s)"
    "$PY" - "$OUT/cluster.json" <<'EOF2' 2>&1 | tee -a "$LOG"
import json, sys

try:
    data = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    sys.exit(f"no cluster report: {exc}")
decision = (data["facts"].get("cluster.decision") or {}).get("value") or {}
print(f"backend {decision.get('backend')}, {data['facts']['cluster.world_size']['value']} ranks, exit {data['exit_code']}")
for row in data["cluster"]["allreduce"]:
    t = row["time_s"]
    print(f"  {row['bytes']:>11d} B  {t * 1e3 if t else float('nan'):9.3f} ms  algbw {row['algbw_gbps'] or 0:8.2f} GB/s  "
          f"busbw {row['busbw_gbps'] or 0:8.2f} GB/s  exact={not row['wrong']}  per rank {row['per_rank']}")
for f in data["findings"]:
    if f["id"].startswith("cluster-"):
        print(f"{f['status']:5s} {f['id']:22s} {f['title']}")
EOF2
else
    say "no CUDA device visible to torch: cluster check skipped"
fi

say "outputs in $OUT: check.txt report.json micro_figures.txt cluster.txt cluster.json gpu_validate.log nvidia-smi.txt"
exit "$rc"
