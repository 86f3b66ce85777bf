#!/usr/bin/env bash
# bench/device/run_scaling.sh: data-parallel scaling of one executable,
# `gptrun step.fb --gpus N` for N = 1 and every power of two up to the
# machine's GPU count, next to PyTorch DDP + torch.compile through torchrun
# (bench/twin/ddp_torch.py, the same model and per-GPU batch), and, at
# N = 1, single-process torch.compile (bench/twin/train_torch.py), in one
# device call. On one GPU it runs N = 1 of each: the path is known to work
# before a multi-GPU machine comes.
#
# CPU side first:
#   bash bench/device/build_scaling.sh        # -> bench/artifacts/scaling-*.fb, bin/gptrun
# Device side (any kind; 124M alone fits one call with torch.compile twice):
#   run(command="SCALING_MODELS=124M bash bench/device/run_scaling.sh", timeout_s=600,
#       carry=["bench/artifacts/bin", "bench/artifacts/scaling-124M.fb",
#              "bench/artifacts/scaling.tsv", "data/austen_train.bin"])
#
# Prints a table per model: N, gptc tok/s (all GPUs), per GPU, scaling
# efficiency (per-GPU rate over N = 1's), and the same for torch DDP; the
# ratio gptc / torch at each N. $OUT: run_scaling.log, scaling.md,
# scaling.json (every run's numbers), logs.tar.gz.
# ZeRO-1 (gptc --world-size=N --zero=1, one executable per N from
# scaling-zero.tsv) runs beside gptc's at every N >= 2 the machine has, its
# tok/s and peak memory in the table; ZeRO-1 has no N = 1 (nothing to
# shard), so on one GPU its rows say so. The carry adds
# "bench/artifacts/scaling-zero.tsv" and the scaling-<model>-zero<N>.fb
# files for the N the machine has.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
START=$(date +%s)
BUDGET_S=${BUDGET_S:-570}
DEADLINE=$((START + BUDGET_S))
OUT=${OUT:-out/device}
WORK=${WORK:-/tmp/gptc-scaling}
LOGS=$WORK/logs
mkdir -p "$OUT"
rm -rf "$WORK" && mkdir -p "$LOGS"
exec > >(tee -a "$OUT/run_scaling.log") 2>&1
# NVLink multicast stays off (device KINDS.md); the rest is NCCL's default.
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
ARTIFACTS=${ARTIFACTS:-bench/artifacts}
# shellcheck source=bench/device/runtime.sh
source bench/device/runtime.sh
PY=${PYTHON:-python3}
STEPS=${SCALING_STEPS:-15}
WARMUP=5
DATA=${DATA:-data/austen_train.bin}
RESERVE_S=10
# shellcheck source=bench/device/stages.sh
source bench/device/stages.sh

pick_runtime
[ -x "$GPTRUN" ] || { echo "run_scaling: no gptrun (bench/device/build_scaling.sh copies the CPU build's)"; exit 1; }
GPUS=$(nvidia-smi -L 2> /dev/null | wc -l)
[ "$GPUS" -ge 1 ] || { echo "run_scaling: no GPU"; exit 1; }
NS=()
for n in 1 2 4 8 16; do [ "$n" -le "$GPUS" ] && NS+=("$n"); done
echo "run_scaling: $GPUS GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); N = ${NS[*]}"
echo "commit $(git rev-parse --short HEAD 2> /dev/null || echo '?'), $($GPTRUN --version | head -1)"

# gptc's median ms/step of a gptrun log (steps after WARMUP), or empty.
gptc_ms() {
  "$PY" - "$1" "$WARMUP" <<'PYEOF'
import re, statistics, sys
ms = [float(m.group(1)) for m in re.finditer(r"^step\s+\d+/\d+ \|.*?\|\s*([0-9.]+) ms \|", open(sys.argv[1]).read(), re.M)]
w = int(sys.argv[2])
ms = ms[w:] if len(ms) > w else ms[-1:]
print(f"{statistics.median(ms):.3f}" if ms else "")
PYEOF
}

rows=()
while IFS=$'\t' read -r model b file; do
  for n in "${NS[@]}"; do
    echo; echo "=== $model B=$b, N=$n ($(($(date +%s) - START)) s) ==="
    log=$LOGS/gptrun_${model}_$n.log
    run_limited "gptc-$model-$n" 120 "$GPTRUN" "$file" --data "$DATA" --gpus "$n" --steps "$STEPS" \
      --no-progress > "$log" 2>&1
    echo "gptrun rc=$?"; tail -n 3 "$log"
    ms=$(gptc_ms "$log")
    json=$WORK/ddp_${model}_$n.json
    run_limited "ddp-$model-$n" 200 torchrun --standalone --nproc_per_node "$n" bench/twin/ddp_torch.py \
      --model "$model" --batch "$b" --steps "$STEPS" --timing-warmup "$WARMUP" --json "$json" \
      --time-limit $(($(left) > 200 ? 180 : $(left) - 15)) > "$LOGS/ddp_${model}_$n.log" 2>&1
    echo "torch ddp rc=$?"; tail -n 1 "$LOGS/ddp_${model}_$n.log"
    tms=$([ -f "$json" ] && "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["median_ms"])' "$json")
    zms=""
    zfile=$(awk -F'\t' -v m="$model" -v n="$n" '$1 == m && $2 == n { print $3 }' \
      "$ARTIFACTS/scaling-zero.tsv" 2> /dev/null)
    if [ "$n" -ge 2 ] && [ -n "$zfile" ] && [ -f "$zfile" ]; then
      zlog=$LOGS/gptrun_${model}_${n}_zero.log
      run_limited "gptc-zero-$model-$n" 120 "$GPTRUN" "$zfile" --data "$DATA" --gpus "$n" \
        --steps "$STEPS" --no-progress > "$zlog" 2>&1
      echo "gptrun ZeRO-1 rc=$?"; tail -n 3 "$zlog"
      zms=$(gptc_ms "$zlog")
    elif [ "$n" -ge 2 ]; then
      echo "no ZeRO-1 executable for $model at N=$n (bench/device/build_scaling.sh, ZERO_NS)"
    fi
    rows+=("$model $b $n ${ms:-nan} ${tms:-nan} ${zms:-nan}")
  done
  # torch.compile in one process at N = 1: the single-GPU peer of the sweep.
  if [ "$(left)" -gt 120 ]; then
    run_limited "torch-compile-$model" 200 "$PY" bench/twin/train_torch.py --device cuda --model "$model" \
      --batch "$b" --seq 1024 --steps "$STEPS" --timing-warmup "$WARMUP" --quiet --data "$DATA" \
      --mode compile --dtype bf16 --tf32 on --json "$WORK/torch_${model}_1.json" \
      --time-limit $(($(left) > 200 ? 180 : $(left) - 15)) > "$LOGS/torch_${model}_1.log" 2>&1
    echo "torch.compile rc=$?"; tail -n 1 "$LOGS/torch_${model}_1.log"
  fi
done < "$ARTIFACTS/scaling.tsv"

echo; echo "=== table ($(($(date +%s) - START)) s) ==="
"$PY" - "$WORK" "${rows[@]}" > "$OUT/scaling.md" <<'PYEOF'
import json, math, os, sys
work, rows = sys.argv[1], [r.split() for r in sys.argv[2:]]
T = 1024
out, base = [], {}
print("| model | B/GPU | N | gptc tok/s | per GPU | efficiency | gptc ZeRO-1 tok/s | per GPU | efficiency "
      "| torch DDP tok/s | per GPU | efficiency | gptc / torch |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for model, b, n, ms, tms, zms in rows:
    b, n, ms, tms, zms = int(b), int(n), float(ms), float(tms), float(zms)
    g = n * b * T / (ms / 1e3) if ms == ms else math.nan
    t = n * b * T / (tms / 1e3) if tms == tms else math.nan
    z = n * b * T / (zms / 1e3) if zms == zms else math.nan
    if n == 1:
        base[model] = (g, t)
    g1, t1 = base.get(model, (math.nan, math.nan))
    zcols = (f"{z:,.0f} | {z / n:,.0f} | {z / n / g1:.3f}" if z == z
             else ("(N >= 2 only) | | " if n == 1 else "not run | | "))
    print(f"| {model} | {b} | {n} | {g:,.0f} | {g / n:,.0f} | {g / n / g1:.3f} | {zcols} | {t:,.0f} "
          f"| {t / n:,.0f} | {t / n / t1:.3f} | {g / t:.3f} |")
    out.append({"model": model, "batch": b, "gpus": n, "gptc_ms": ms, "torch_ddp_ms": tms,
                "gptc_zero1_ms": zms, "gptc_tok_s": g, "torch_ddp_tok_s": t, "gptc_zero1_tok_s": z})
for model in base:
    p = os.path.join(work, f"torch_{model}_1.json")
    if os.path.exists(p):
        s = json.load(open(p))
        print(f"\n{model} at N=1: torch.compile (one process) {s['median_ms']:.2f} ms/step, "
              f"{s['median_tok_s']:,.0f} tok/s; gptc / torch.compile = {base[model][0] / s['median_tok_s']:.3f}")
        out.append({"model": model, "torch_compile_ms": s["median_ms"], "torch_compile_tok_s": s["median_tok_s"]})
json.dump(out, open(os.path.join(work, "scaling.json"), "w"), indent=1)
PYEOF
cat "$OUT/scaling.md"
cp "$WORK/scaling.json" "$OUT/" 2> /dev/null
tar czf "$OUT/logs.tar.gz" -C "$LOGS" .
echo; echo "=== stages ==="
for k in "${ORDER[@]}"; do printf '  %-20s %s\n' "$k" "${STATUS[$k]}"; done
exit 0
