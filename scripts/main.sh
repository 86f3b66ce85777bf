#!/usr/bin/env bash
# The main job (for now): compile GPT-2 124M to its train step with an IR
# dump after every pass, then train the tiny model for 20 steps on the
# reference interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out}
mkdir -p "$out"
build/bin/gptc compile models/gpt2.mlir --model=124M --batch=16 --seq=1024 \
  --dump-ir-after-each-pass="$out/ir" -o "$out/gpt2-124M.mlir"
echo "main: IR after each pass in $out/ir:"
ls "$out/ir"
build/bin/gptc run-reference models/gpt2.mlir --model=tiny --steps=20 --lr=1e-2
