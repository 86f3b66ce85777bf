#!/usr/bin/env bash
# The main job: compile GPT-2 with an IR dump after every pass, then train it
# with gptrun on the bundled Austen corpus (data/, built by setup.sh).
#   With a GPU: 124M, B=16, T=1024, CUDA target.
#   Without one: the `mini` preset (GPT-2's vocabulary, 2 layers, width 64)
#   on the Host target, which runs the same executable path on the CPU.
# Usage: bash scripts/main.sh [OUTDIR] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out}
mkdir -p "$out"
if nvidia-smi -L > /dev/null 2>&1; then
  model=(--model=124M --batch=16 --seq=1024 --target=cuda)
  steps=${2:-200}
else
  model=(--model=mini --batch=4 --seq=64 --target=host)
  steps=${2:-50}
fi
case $steps in
  ''|*[!0-9]*|0) echo "main: STEPS must be a whole number > 0, got '$steps'" >&2; exit 1 ;;
esac
# A tenth of the run warms up, at most 10 steps: the cosine needs the rest.
steps=$((10#$steps)) # "08" is eight, not an octal error
warmup=$(( steps / 10 < 10 ? steps / 10 : 10 ))
build/bin/gptc compile models/gpt2.mlir "${model[@]}" --lr=1e-3 --warmup-steps="$warmup" \
  --total-steps="$steps" --schedule=cosine --min-lr=1e-4 \
  --dump-ir-after-each-pass="$out/ir" -o "$out/step.fb"
echo "main: IR after each pass, kernels and commands in $out/ir/"
build/bin/gptrun "$out/step.fb" --data data/austen_train.bin --val data/austen_val.bin \
  --steps "$steps" --val-every 25 --val-batches 4
