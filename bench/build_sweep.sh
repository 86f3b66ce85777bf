#!/usr/bin/env bash
# bench/build_sweep.sh: CPU side of bench/run_sweep.sh. Compiles the issue's
# four sizes in bf16 at its batch sizes (T=1024) into
# bench/artifacts/sweep-<model>.fb and records each compile time in
# bench/artifacts/sweep.tsv (model, B, file, gptc seconds, command).
#   bash bench/build_sweep.sh                 # all four
#   SWEEP="124M:64 350M:32" bash bench/build_sweep.sh
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=bench/configs.sh
source bench/configs.sh
GPTC=${GPTC:-build/bin/gptc}
SWEEP=${SWEEP:-124M:64 350M:32 774M:16 1558M:16}
[ -x "$GPTC" ] || { echo "build_sweep: no $GPTC (run scripts/setup.sh)"; exit 1; }
mkdir -p "$ARTIFACTS"
tsv=$ARTIFACTS/sweep.tsv
: > "$tsv"
status=0
for entry in $SWEEP; do
  model=${entry%%:*} b=${entry##*:}
  file=$ARTIFACTS/sweep-$model.fb
  # shellcheck disable=SC2206
  cmd=("$GPTC" compile models/gpt2.mlir --model="$model" --batch="$b" --seq=1024 $TRAIN_OPT --precision=bf16 -o "$file")
  echo "+ ${cmd[*]}"
  t0=$(date +%s.%N)
  if "${cmd[@]}"; then
    t1=$(date +%s.%N)
    printf '%s\t%s\t%s\t%.1f\t%s\n' "$model" "$b" "$file" "$(awk -v a="$t0" -v b="$t1" "BEGIN { print b - a }")" "${cmd[*]}" >> "$tsv"
  else
    echo "build_sweep: gptc failed for $model"
    status=1
  fi
done
cat "$tsv"
exit $status
