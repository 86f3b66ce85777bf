#!/usr/bin/env bash
# The main job (for now): compile GPT-2 124M to its train step with an IR
# dump after every pass, then train the tiny model for 300 steps on the
# reference interpreter (synthetic stream: each token decides the next).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out}
mkdir -p "$out"
build/bin/gptc compile models/gpt2.mlir --model=124M --batch=16 --seq=1024 \
  --dump-ir-after-each-pass="$out/ir" -o "$out/gpt2-124M.mlir"
echo "main: IR after each pass in $out/ir:"
ls "$out/ir"
build/bin/gptc run-reference models/gpt2.mlir --model=tiny --batch=8 --steps=300 \
  --lr=3e-3 --schedule=cosine --warmup-steps=20 --total-steps=300 | awk 'NR == 1 || NR % 25 == 1'
