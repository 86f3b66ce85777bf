#!/usr/bin/env bash
# bench/device/determinism_device.sh: are two GPU training runs bit-identical?
#
# Same executable, same seed, same data, two separate gptrun processes (with
# and without --graph): the checkpoints they write after the last step hold
# every parameter and AdamW moment, so `cmp` of the two files proves the
# whole training state bit-identical; the per-step lines are compared too.
#
# Here (CPU), first:  bash bench/device/build_artifacts.sh   (-> bench/artifacts/*.fb)
#                     bash scripts/device-build.sh --pack
# There, one device call from the repo root:
#   run(command="bash bench/device/determinism_device.sh", timeout_s=600,
#       carry=["data/austen_train.bin", "bench/artifacts", "build-deps"])
# Success: the last line is "determinism: PASS (...)" and the exit status 0;
# "determinism: FAIL" names the first differing step line or checkpoint.
# Knobs: FB (default: TRAIN_FB of bench/device/configs.sh), DET_STEPS=20, SEED=1337,
# MODES="plain graph", GPTRUN=build-device/bin/gptrun.
# FB_B: run b takes this executable instead, so the check is whether two
# compiles of one model (a codegen flag on and off) train to the same bits;
# their checkpoints name the model, not the kernels, so `cmp` still applies.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=bench/device/configs.sh
source bench/device/configs.sh
OUT=${OUT:-out/determinism}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/determinism.log") 2>&1
FB=${FB:-$TRAIN_FB}
FB_B=${FB_B:-$FB}
STEPS=${DET_STEPS:-20}
GPTRUN=${GPTRUN:-build-device/bin/gptrun}
WORK=${WORK:-/tmp/gptc-determinism}
rm -rf "$WORK" && mkdir -p "$WORK"

for f in "$FB" "$FB_B"; do
  [ -f "$f" ] || { echo "determinism: FAIL (no $f; run bench/device/build_artifacts.sh here first)"; exit 1; }
done
if [ ! -x "$GPTRUN" ]; then
  bash scripts/device-build.sh > "$OUT/build.log" 2>&1 || {
    tail -30 "$OUT/build.log"; echo "determinism: FAIL (device build)"; exit 1; }
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true

status=0
for mode in ${MODES:-plain graph}; do
  flags=()
  [ "$mode" = graph ] && flags=(--graph)
  [ "$mode" = plain ] && flags=(--no-graph) # graphs are the default
  for run in a b; do
    dir=$WORK/$mode-$run
    fb=$FB
    [ $run = b ] && fb=$FB_B
    echo "+ $GPTRUN $fb --data $TRAIN_DATA --steps $STEPS --seed $SEED ${flags[*]} --checkpoint-dir $dir"
    "$GPTRUN" "$fb" --data "$TRAIN_DATA" --steps "$STEPS" --seed "$SEED" "${flags[@]}" \
      --checkpoint-dir "$dir" > "$OUT/$mode-$run.log" 2>&1 || {
      tail -20 "$OUT/$mode-$run.log"; echo "determinism: FAIL ($mode run $run failed)"; exit 1; }
    # The step lines without the timing columns.
    grep -E '^step ' "$OUT/$mode-$run.log" | cut -d'|' -f1-4 > "$OUT/$mode-$run.steps"
  done
  tail -3 "$OUT/$mode-a.steps"
  ckpt=$(printf 'step-%08d.ckpt' "$STEPS")
  if ! diff "$OUT/$mode-a.steps" "$OUT/$mode-b.steps" > "$OUT/$mode.diff"; then
    echo "determinism: FAIL ($mode: step lines differ, first: $(grep -m1 '^[<>]' "$OUT/$mode.diff"))"
    status=1
  elif ! cmp "$WORK/$mode-a/$ckpt" "$WORK/$mode-b/$ckpt"; then
    echo "determinism: FAIL ($mode: the step-$STEPS checkpoints differ: parameters or AdamW state)"
    status=1
  else
    echo "determinism: $mode: $STEPS step lines equal, checkpoints byte-identical ($(stat -c %s "$WORK/$mode-a/$ckpt") bytes)"
  fi
done
against=""
[ "$FB_B" != "$FB" ] && against=" against $FB_B"
[ $status = 0 ] && echo "determinism: PASS ($FB$against, $STEPS steps, seed $SEED, modes: ${MODES:-plain graph})"
exit $status
