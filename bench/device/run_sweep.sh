#!/usr/bin/env bash
# bench/device/run_sweep.sh: the four GPT-2 sizes, gptc (by default fp8 and bf16;
# bench/device/build_sweep.sh) next to torch.compile bf16 (and eager for the
# smallest), in one device call.
#
# CPU side first:
#   bash scripts/device-build.sh --pack && bash bench/device/build_sweep.sh
# Device side:
#   run(command="bash bench/device/run_sweep.sh", timeout_s=600,
#       carry=["build-deps", "bench/artifacts", "data/austen_train.bin"])
#
# For each entry of $ARTIFACTS/sweep.tsv (default bench/artifacts), in its
# order: gptrun SWEEP_STEPS steps, then, after a model's first entry,
# train_torch.py --mode compile (same model, batch, init, batches,
# schedule), each under a time limit taken from what is left of BUDGET_S.
# torch.compile's first compile of each size takes 45-120 s of an H100
# machine's CPU, so the four sizes need about 550 s with a built runtime.
# The table has ms/step, tok/s, MFU, peak GiB and the compile time (gptc:
# AOT on the CPU machine, from sweep.tsv; torch: its first step).
# SWEEP_TORCH="124M" runs torch for the listed models only.
# gptrun times cuBLASLt's candidate algorithms for each GEMM in its first
# step and keeps the fastest (--gemm-algos, written to the logs as
# gemm-algos-<name>.txt; -3.2% at 1.5B, 2026-12-06 ~20:30); SWEEP_ALGOS=0
# runs cuBLASLt's heuristic choice instead.
# $OUT/sweep_table.md is rewritten after each size. SWEEP_EAGER=0 skips eager.
# $OUT holds three files (the device tool returns only a few): run_sweep.log,
# sweep_table.md and logs.tar.gz (build.log, each run's log and JSON),
# repacked after each size.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
START=$(date +%s)
BUDGET_S=${BUDGET_S:-560}
DEADLINE=$((START + BUDGET_S))
OUT=${OUT:-out/device}
WORK=${WORK:-/tmp/gptc-sweep}
LOGS=$WORK/logs
mkdir -p "$OUT"
rm -rf "$WORK" && mkdir -p "$LOGS"
exec > >(tee -a "$OUT/run_sweep.log") 2>&1
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
# shellcheck source=bench/device/configs.sh
source bench/device/configs.sh
PY=${PYTHON:-python3}
# shellcheck source=bench/device/runtime.sh
source bench/device/runtime.sh
SWEEP_STEPS=${SWEEP_STEPS:-12}
WARMUP=2
DATA=$TRAIN_DATA

RESERVE_S=10
# shellcheck source=bench/device/stages.sh
source bench/device/stages.sh

echo "=== build ==="
pick_runtime
[ -x "$GPTRUN" ] || run_limited build 240 bash scripts/device-build.sh > "$LOGS/build.log" 2>&1
tail -n 2 "$LOGS/build.log" 2> /dev/null

runs=()
torch_done=""
while IFS=$'\t' read -r model b file secs tag _; do
  [ "$tag" = - ] && tag=""
  name=$model${tag:+-$tag}
  echo; echo "=== $name B=$b ($(($(date +%s) - START)) s) ==="
  log=$LOGS/gptrun_$name.log
  dtype=bf16
  [[ "-$tag-" == *-fp8-* ]] && dtype=fp8 # tags are joined by "-"
  algos=()
  [ "${SWEEP_ALGOS:-1}" != 0 ] && algos=(--gemm-algos "$LOGS/gemm-algos-$name.txt")
  run_limited "gptc-$name" 120 "$GPTRUN" "$file" --data "$DATA" --steps "$SWEEP_STEPS" --seed "$SEED" --no-progress \
    "${algos[@]}" > "$log" 2>&1
  echo "gptrun rc=$?"; tail -n 2 "$log"
  if "$PY" bench/twin/compare.py gptrun-log "$log" -o "$WORK/gptc-$name.json" --label "gptc $model${tag:+ $tag}" \
      --model "$model" --batch "$b" --seq 1024 --dtype "$dtype" --tf32 off --timing-warmup "$WARMUP" > /dev/null; then
    "$PY" - "$WORK/gptc-$name.json" "$secs" <<'PYEOF'
import json, sys
p = sys.argv[1]; r = json.load(open(p)); r["gptc_s"] = float(sys.argv[2]); json.dump(r, open(p, "w"))
PYEOF
    runs+=("$WORK/gptc-$name.json")
  fi
  modes=(compile)
  [ "$model" = 124M ] && [ "${SWEEP_EAGER:-1}" != 0 ] && modes=(eager compile)
  # torch runs once per model, with its first entry (its bf16 peer for all).
  [[ " $torch_done " == *" $model "* ]] && modes=()
  torch_done+=" $model"
  # SWEEP_TORCH="124M 350M": torch for these models only.
  [ -n "${SWEEP_TORCH:-}" ] && [[ " $SWEEP_TORCH " != *" $model "* ]] && modes=()
  for mode in "${modes[@]}"; do
    # shellcheck disable=SC2086
    run_limited "torch-$mode-$model" 150 "$PY" bench/twin/train_torch.py --device cuda --model "$model" --batch "$b" --seq 1024 \
      --init counter --seed "$SEED" --timing-warmup "$WARMUP" --quiet --steps "$SWEEP_STEPS" \
      --data "$DATA" $TRAIN_OPT --mode "$mode" --dtype bf16 --tf32 on \
      --json "$WORK/torch-$mode-$model.json" --label "torch $mode bf16 $model" \
      --time-limit $(($(left) > 150 ? 135 : $(left) - 15)) > "$LOGS/torch_${mode}_$model.log" 2>&1
    echo "torch $mode rc=$?"; tail -n 1 "$LOGS/torch_${mode}_$model.log"
    [ -f "$WORK/torch-$mode-$model.json" ] && runs+=("$WORK/torch-$mode-$model.json")
  done
  # The table so far: a call cut short still brings back every finished size.
  if ((${#runs[@]})); then
    cp "${runs[@]}" "$LOGS/" 2> /dev/null
    "$PY" bench/twin/compare.py table "${runs[@]}" --reference none > "$OUT/sweep_table.md"
  fi
  tar czf "$OUT/logs.tar.gz" -C "$LOGS" .
done < "$ARTIFACTS/sweep.tsv"

echo; echo "=== table ($(($(date +%s) - START)) s) ==="
cp "${runs[@]}" "$LOGS/" 2> /dev/null
tar czf "$OUT/logs.tar.gz" -C "$LOGS" .
((${#runs[@]})) && "$PY" bench/twin/compare.py table "${runs[@]}" --reference none
echo; echo "=== stages ==="
for k in "${ORDER[@]}"; do printf '  %-20s %s\n' "$k" "${STATUS[$k]}"; done
exit 0
