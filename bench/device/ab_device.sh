#!/usr/bin/env bash
# bench/device/ab_device.sh: GPU side of an A/B of executables, one device call.
# Takes bench/device/runtime.sh's gptrun (the CPU machine's build carried in
# bench/artifacts/bin, or scripts/device-build.sh's; carry build-deps), then runs
# each executable of each pair ROUNDS times, alternating, for STEPS steps
# in the CUDA graph, and prints per run the last step's loss and norm and
# the median ms/step of steps FROM..STEPS (gptrun's device-clock times).
#   run(command='PAIRS="bench/artifacts/a.fb:bench/artifacts/b.fb" bash bench/device/ab_device.sh',
#       carry=["build-deps", "bench/artifacts", "data/austen_train.bin"])
# Knobs: PAIRS (space-separated a.fb:b.fb, or a.fb alone; a side may add gptrun flags,
# a.fb@--gemm-autotune or a.fb@--gemm-algos=/tmp/g.txt,--no-pdl), ROUNDS=2,
# STEPS=24, FROM=11,
# TESTS (a gtest filter for RuntimeCudaBackendTest, run first; empty: none),
# DATA=data/austen_train.bin, GPTRUN (bench/device/runtime.sh picks one), T_RUN=120
# (seconds a run may take), LOSS_LAST (K > 0: also the mean loss of the last
# K steps; with STEPS=200, ROUNDS=1, a loss A/B over the schedule).
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
ROUNDS=${ROUNDS:-2} STEPS=${STEPS:-24} FROM=${FROM:-11} LOSS_LAST=${LOSS_LAST:-0}
T_RUN=${T_RUN:-120}
DATA=${DATA:-data/austen_train.bin}
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
# shellcheck source=bench/device/runtime.sh
source bench/device/runtime.sh
pick_runtime
if [ ! -x "$GPTRUN" ]; then
  bash scripts/device-build.sh > "$LOG" 2>&1 || { tail -20 "$LOG"; echo "ab_device: build failed"; exit 1; }
fi
if [ -n "${TESTS:-}" ]; then
  "$CUDA_TEST" --gtest_filter="$TESTS" 2>&1 |
    grep -E "^\[  (PASSED|FAILED|  OK|SKIPPED) |Failure|Value of|Actual|Expected|element" | head -30
fi
# One side of a pair: FILE.fb, or FILE.fb@FLAG,FLAG... (gptrun flags).
run() {
  local fb=${1%%@*} flags=()
  [[ $1 == *@* ]] && IFS=, read -ra flags <<< "${1#*@}"
  timeout "$T_RUN" "$GPTRUN" "$fb" --data "$DATA" --steps "$STEPS" --no-progress "${flags[@]}" > "$LOG" 2>&1
  local rc=$?
  [ $rc = 0 ] || tail -5 "$LOG"
  local median
  median=$(grep -E '^step [0-9]+/' "$LOG" | awk -F'|' -v from="$FROM" 'NR >= from {gsub(/ ms/, "", $5); print $5 + 0}' |
    sort -n | awk '{a[NR] = $1} END {if (NR) print (a[int((NR + 1) / 2)] + a[int(NR / 2) + 1]) / 2}')
  local mean=""
  if ((LOSS_LAST > 0)); then
    mean=$(grep -E '^step [0-9]+/' "$LOG" | awk -F'|' '{split($2, a, " "); print a[2]}' | tail -n "$LOSS_LAST" |
      awk -v k="$LOSS_LAST" '{s += $1; n++} END {if (n == k) printf " | mean loss of the last %d steps %.4f", k, s / n}')
  fi
  echo "$(basename "$fb")${flags[*]:+ ${flags[*]}} rc=$rc $(grep -E "^step $STEPS/" "$LOG" | cut -d'|' -f2-3) median($FROM-$STEPS): $median ms$mean"
}
for pair in ${PAIRS:?PAIRS="a.fb:b.fb ..."}; do
  for _ in $(seq "$ROUNDS"); do
    run "${pair%%:*}"
    [[ $pair == *:* ]] && run "${pair#*:}" # an entry without ':' runs alone
  done
done
