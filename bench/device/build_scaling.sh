#!/usr/bin/env bash
# bench/device/build_scaling.sh (CPU side): the executables of
# bench/device/run_scaling.sh, compiled as a user would, without a world
# size (one executable for any number of GPUs):
#   scaling-124M.fb    gptc compile models/gpt2.mlir          (the defaults: 124M,
#                      T=1024, bf16, CUDA sm_90, B fitted to --gpu-memory)
#   scaling-1558M.fb   the same with --model=1558M
#   scaling-<model>-zero<N>.fb   the same with --world-size=N --zero=1 for N
#                      in ZERO_NS (default "2 4 8"): ZeRO-1's shards fix N
# and $ARTIFACTS/scaling.tsv (model, B, file), scaling-zero.tsv (model, N,
# file), plus the CPU build's gptrun in $ARTIFACTS/bin
# (bench/device/runtime.sh). SCALING_MODELS="124M" narrows.
set -euo pipefail
cd "$(dirname "$0")/../.."
ART=${ARTIFACTS:-bench/artifacts}
GPTC=${GPTC:-build/bin/gptc}
[ -x "$GPTC" ] || { echo "build_scaling: no $GPTC (run scripts/setup.sh)"; exit 1; }
# shellcheck source=bench/device/runtime.sh
source bench/device/runtime.sh
mkdir -p "$ART"
: > "$ART/scaling.tsv"
: > "$ART/scaling-zero.tsv"
for model in ${SCALING_MODELS:-124M 1558M}; do
  file=$ART/scaling-$model.fb
  flags=()
  [ "$model" = 124M ] || flags=(--model="$model")
  echo "+ $GPTC compile models/gpt2.mlir ${flags[*]} -o $file"
  "$GPTC" compile models/gpt2.mlir "${flags[@]}" --progress=off -o "$file" 2> "$ART/scaling-$model.log"
  cat "$ART/scaling-$model.log"
  b=$("$GPTC" explain "$file" | sed -n 's/^  batch = //p')
  printf '%s\t%s\t%s\n' "$model" "$b" "$file" >> "$ART/scaling.tsv"
  # The same batch per GPU, so the ZeRO-1 rows compare with the plain ones.
  for n in ${ZERO_NS:-2 4 8}; do
    zfile=$ART/scaling-$model-zero$n.fb
    echo "+ $GPTC compile models/gpt2.mlir ${flags[*]} --batch=$b --world-size=$n --zero=1 -o $zfile"
    "$GPTC" compile models/gpt2.mlir "${flags[@]}" --batch="$b" --world-size="$n" --zero=1 \
      --progress=off -o "$zfile" 2>&1 | tail -n 1
    "$GPTC" explain "$zfile" | grep "ZeRO-1" || true
    printf '%s\t%s\t%s\n' "$model" "$n" "$zfile" >> "$ART/scaling-zero.tsv"
  done
done
copy_runtime
cat "$ART/scaling.tsv"
