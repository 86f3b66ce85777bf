#!/usr/bin/env bash
# bench/device/run_async.sh: the step loop with and without CUDA graphs, in one
# device call: ms/step of each, and every step's loss, grad norm and lr must
# be the same bits (graphs replay the same kernels on the same addresses).
#
# CPU side first (this machine has gptc):
#   bash scripts/device-build.sh --pack      # FlatBuffers for the device build
#   bash bench/device/build_artifacts.sh            # -> bench/artifacts/gpt2-124M-bf16.fb
# Device side, from the repo root:
#   run(command="bash bench/device/run_async.sh", timeout_s=600,
#       carry=["build-deps", "bench/artifacts", "data/austen_train.bin"])
#
# Runs (ASYNC_STEPS steps each of ASYNC_FB, seed SEED, same batches):
#   graph     gptrun's default: CUDA graph replay, step s+1 enqueued before
#             step s is read back
#   nograph   --no-graph: every command launched directly, still overlapped
#   sync      --no-graph --no-overlap: the loop as it was, a host sync per step
# Then the table (median ms/step after ASYNC_WARMUP steps, tok/s) and the
# verdict: "async: PASS" when graph and nograph (and sync) log identical
# loss/grad_norm/lr columns for every step. Files in $OUT: run_async.log,
# build.log, <run>/log.csv, gptrun_<run>.log.
#
# Knobs: ASYNC_FB (default BF16_FB of bench/device/configs.sh), ASYNC_STEPS=40,
# ASYNC_WARMUP=5, RUNS="graph nograph sync", GPTRUN=build-device/bin/gptrun,
# BUILD_TIMEOUT=300, T_GPTRUN=120.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-out/device}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run_async.log") 2>&1
export NCCL_NVLS_ENABLE=0

# shellcheck source=bench/device/configs.sh
source bench/device/configs.sh
ASYNC_FB=${ASYNC_FB:-$BF16_FB}
ASYNC_STEPS=${ASYNC_STEPS:-40}
ASYNC_WARMUP=${ASYNC_WARMUP:-5}
RUNS=${RUNS:-graph nograph sync}
GPTRUN=${GPTRUN:-build-device/bin/gptrun}
BUILD_TIMEOUT=${BUILD_TIMEOUT:-300}
T_GPTRUN=${T_GPTRUN:-120}

[ -f "$ASYNC_FB" ] || { echo "async: FAIL (no $ASYNC_FB; run bench/device/build_artifacts.sh here first)"; exit 1; }
[ -f "$TRAIN_DATA" ] || { echo "async: FAIL (no $TRAIN_DATA; carry it)"; exit 1; }
if [ ! -x "$GPTRUN" ]; then
  echo "+ scripts/device-build.sh (log: $OUT/build.log)"
  timeout "$BUILD_TIMEOUT" bash scripts/device-build.sh > "$OUT/build.log" 2>&1 || {
    tail -30 "$OUT/build.log"; echo "async: FAIL (device build)"; exit 1; }
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true

flags_of() {
  case $1 in
    graph) echo "" ;;
    nograph) echo "--no-graph" ;;
    sync) echo "--no-graph --no-overlap" ;;
    *) echo "unknown run $1" >&2; return 1 ;;
  esac
}

status=0
ran=()
for run in $RUNS; do
  flags=$(flags_of "$run") || { status=1; continue; }
  rm -rf "${OUT:?}/$run"
  # shellcheck disable=SC2206 # flags are words
  cmd=("$GPTRUN" "$ASYNC_FB" --data "$TRAIN_DATA" --steps "$ASYNC_STEPS" --seed "$SEED"
       --no-progress --log-dir "$OUT/$run" --no-checkpoint $flags)
  echo "+ ${cmd[*]}"
  if timeout "$T_GPTRUN" "${cmd[@]}" > "$OUT/gptrun_$run.log" 2>&1; then
    grep -E "^gptrun: (target|steps )|warning" "$OUT/gptrun_$run.log"
    ran+=("$run")
  else
    tail -n 10 "$OUT/gptrun_$run.log"
    echo "async: $run failed"
    status=1
  fi
done

python3 - "$OUT" "$ASYNC_WARMUP" "${ran[@]}" <<'PY' || status=1
import csv, statistics, sys
out, warmup, runs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
logs = {}
for r in runs:
    with open(f"{out}/{r}/log.csv") as f:
        logs[r] = [row for row in csv.DictReader(f) if row["kind"] == "train"]
print(f"{'run':8} {'steps':>5} {'median ms/step':>15} {'mean ms/step':>13} {'tok/s':>10}")
for r, rows in logs.items():
    ms = [float(x["ms"]) for x in rows[warmup:]] or [float("nan")]
    tok = statistics.median(float(x["tok_per_s"]) for x in rows[warmup:]) if rows[warmup:] else 0
    print(f"{r:8} {len(rows):5} {statistics.median(ms):15.2f} {statistics.mean(ms):13.2f} {tok:10.0f}")
if "graph" in logs and "nograph" in logs:
    g, n = statistics.median(float(x["ms"]) for x in logs["graph"][warmup:]), \
        statistics.median(float(x["ms"]) for x in logs["nograph"][warmup:])
    print(f"CUDA graphs save {n - g:.2f} ms/step ({100 * (n - g) / n:.1f}% of --no-graph)")
ok = len(logs) >= 2
base = runs[0] if runs else None
for r in runs[1:]:
    a, b = logs[base], logs[r]
    cols = ("step", "loss", "grad_norm", "lr")
    diff = [i for i, (x, y) in enumerate(zip(a, b)) if any(x[c] != y[c] for c in cols)]
    if len(a) != len(b) or diff:
        ok = False
        first = diff[0] if diff else min(len(a), len(b))
        print(f"{base} vs {r}: {len(a)} and {len(b)} steps; first difference at row {first}")
    else:
        print(f"{base} vs {r}: {len(a)} steps, loss/grad_norm/lr bit-identical "
              f"(last loss {a[-1]['loss']})")
if not ok:
    print("async: FAIL (losses differ or fewer than two runs)")
sys.exit(0 if ok else 1)
PY
[ $status = 0 ] && echo "async: PASS ($ASYNC_FB, $ASYNC_STEPS steps, runs: ${ran[*]})" || echo "async: FAIL"
exit $status
