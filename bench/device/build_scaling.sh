#!/usr/bin/env bash
# bench/device/build_scaling.sh (CPU side): the executables of
# bench/device/run_scaling.sh, compiled as a user would, without a world
# size (one executable for any number of GPUs):
#   scaling-124M.fb    gptc compile models/gpt2.mlir          (the defaults: 124M,
#                      T=1024, bf16, CUDA sm_90, B fitted to --gpu-memory)
#   scaling-1558M.fb   the same with --model=1558M
# and $ARTIFACTS/scaling.tsv (model, B, file), plus the CPU build's gptrun
# in $ARTIFACTS/bin (bench/device/runtime.sh). SCALING_MODELS="124M" narrows.
set -euo pipefail
cd "$(dirname "$0")/../.."
ART=${ARTIFACTS:-bench/artifacts}
GPTC=${GPTC:-build/bin/gptc}
[ -x "$GPTC" ] || { echo "build_scaling: no $GPTC (run scripts/setup.sh)"; exit 1; }
# shellcheck source=bench/device/runtime.sh
source bench/device/runtime.sh
mkdir -p "$ART"
: > "$ART/scaling.tsv"
for model in ${SCALING_MODELS:-124M 1558M}; do
  file=$ART/scaling-$model.fb
  flags=()
  [ "$model" = 124M ] || flags=(--model="$model")
  echo "+ $GPTC compile models/gpt2.mlir ${flags[*]} -o $file"
  "$GPTC" compile models/gpt2.mlir "${flags[@]}" --progress=off -o "$file" 2> "$ART/scaling-$model.log"
  cat "$ART/scaling-$model.log"
  b=$("$GPTC" explain "$file" | sed -n 's/^  batch = //p')
  printf '%s\t%s\t%s\n' "$model" "$b" "$file" >> "$ART/scaling.tsv"
done
copy_runtime
cat "$ART/scaling.tsv"
