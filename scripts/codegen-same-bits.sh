#!/usr/bin/env bash
# scripts/codegen-same-bits.sh OUT [BASE]: compiles a matrix of small
# configurations (tiny and mini; every precision; CUDA and host; the codegen
# flags' variants) with --dump-ir-after-each-pass and writes OUT/hashes.txt,
# the sha256 of every dump: the pass dumps (NN-*.mlir), commands.txt, the
# kernel modules (kernels.*: GPU/NVVM MLIR and PTX, host MLIR and LLVM IR)
# and `gptc explain` of the executable less its version line. The .fb itself
# is left out: it embeds the compiler's git commit. With BASE (an earlier
# OUT), compares and exits non-zero on any difference. A refactoring of
# codegen that moves code must leave every hash as it was (issue 44).
#   scripts/codegen-same-bits.sh /tmp/codegen-baseline       # before
#   scripts/codegen-same-bits.sh /tmp/codegen-after /tmp/codegen-baseline
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: $0 OUT [BASE]}
BASE=${2:-}
GPTC=${GPTC:-build/bin/gptc}
JOBS=${JOBS:-2}

# NAME MODEL PRECISION TARGET FLAGS...
CONFIGS=(
  "tiny-fp32-cuda        tiny fp32 cuda"
  "tiny-bf16-cuda        tiny bf16 cuda"
  "tiny-fp16-cuda        tiny fp16 cuda --loss-scale=1024"
  "tiny-fp8-cuda         tiny fp8  cuda"
  "tiny-fp32-host        tiny fp32 host"
  "tiny-bf16-host        tiny bf16 host"
  "tiny-fp16-host        tiny fp16 host --loss-scale=1024"
  "tiny-fp8-host         tiny fp8  host"
  "tiny-fp32-unfused     tiny fp32 cuda --fuse-elementwise=false --fuse-adamw=false"
  "tiny-fp32-host-unfused tiny fp32 host --fuse-elementwise=false --fuse-adamw=false --fuse-cross-entropy=false"
  "mini-fp32-cuda        mini fp32 cuda"
  "mini-bf16-cuda        mini bf16 cuda"
  "mini-fp16-cuda        mini fp16 cuda --loss-scale=1024"
  "mini-fp8-cuda         mini fp8  cuda"
  "mini-fp32-host        mini fp32 host"
  "mini-bf16-host        mini bf16 host"
  "mini-fp16-host        mini fp16 host --loss-scale=1024"
  "mini-fp8-host         mini fp8  host"
  "mini-fp8-head         mini fp8  cuda --fp8-lm-head"
  "mini-fp8-head-host    mini fp8  host --fp8-lm-head"
  "mini-bf16-nr          mini bf16 cuda --narrow-residual"
  "mini-fp32-accum2      mini fp32 cuda --batch=2 --accum-steps=2"
  "mini-fp8-accum2       mini fp8  cuda --batch=2 --accum-steps=2 --fuse-grad-accumulation"
  "mini-bf16-t128        mini bf16 cuda --batch=2 --seq=128"
  "mini-bf16-t128-scalar mini bf16 cuda --batch=2 --seq=128 --flash-attention=false"
  "mini-bf16-unfused     mini bf16 cuda --fuse-elementwise=false --fuse-adamw=false"
  "mini-bf16-ln16        mini bf16 cuda --layernorm-grad-chunk-rows=16"
  "mini-bf16-ln16-col    mini bf16 cuda --layernorm-grad-chunk-rows=16 --layernorm-grad-one-launch=false"
  "mini-bf16-lncol       mini bf16 cuda --layernorm-grad-one-launch=false"
  "mini-bf16-scalar      mini bf16 cuda --flash-attention=false"
  "mini-bf16-scalar-unfused mini bf16 cuda --flash-attention=false --fuse-elementwise=false --fuse-adamw=false"
  "mini-bf16-mmasync     mini bf16 cuda --warpgroup-mma=false"
  "mini-bf16-noepi       mini bf16 cuda --fuse-matmul-epilogue=false"
  "mini-bf16-allepi      mini bf16 cuda --matmul-epilogues=gelu,gelu-grad,gelu-bias-grad,bias-grad"
  "mini-bf16-noce        mini bf16 cuda --fuse-cross-entropy=false"
  "mini-bf16-ce2         mini bf16 cuda --cross-entropy-one-pass=false"
  "mini-bf16-narrowg     mini bf16 cuda --narrow-grads"
  "mini-fp8-nosteady     mini fp8  cuda --fp8-steady-step=false"
  "mini-fp8-nolnfp8      mini fp8  cuda --disable-patterns=fp8-layernorm-codes"
  "mini-fp8-nofold       mini fp8  cuda --disable-patterns=fp8-fold-input-cast"
  "mini-fp8-history0     mini fp8  cuda --fp8-history=0"
  "mini-fp8-gelumm       mini fp8  cuda --enable-patterns=fp8-gelu-matmul-codes"
  "mini-fp8-head-ce      mini fp8  cuda --fp8-lm-head --disable-patterns=fp8-cross-entropy-grad"
  "mini-fp8-nocastfuse   mini fp8  cuda --disable-patterns=fp8-cast-gelu-grad,fp8-cast-column-sum"
  "mini-fp32-ws1         mini fp32 cuda --world-size=1"
  "mini-bf16-ws2         mini bf16 cuda --world-size=2"
  "mini-bf16-zero1       mini bf16 cuda --world-size=2 --zero=1"
  "mini-fp8-zero1        mini fp8  cuda --world-size=2 --zero=1"
  "mini-fp32-zero1-host  mini fp32 host --world-size=2 --zero=1"
  "tiny-fp32-remat       tiny fp32 cuda --batch=8 --seq=16 --memory-budget=0.0003"
  "tiny-bf16-remat-host  tiny bf16 host --batch=8 --seq=16 --memory-budget=0.0003"
  "tiny-fp32-split       tiny fp32 cuda --batch=8 --seq=16 --memory-budget=0.0003 --split-batch"
  "mini-fp32-sm80        mini fp32 cuda --cuda-arch=sm_80"
  "mini-bf16-sm80        mini bf16 cuda --cuda-arch=sm_80"
)

rm -rf "$OUT"
mkdir -p "$OUT/dumps"
compile_one() {
  local name=$1 model=$2 prec=$3 target=$4
  shift 4
  local dir=$OUT/dumps/$name
  mkdir -p "$dir"
  if ! "$GPTC" compile models/gpt2.mlir --model="$model" --precision="$prec" --target="$target" \
      "$@" --progress=off --dump-ir-after-each-pass="$dir" -o "$dir/x.fb" >"$dir/log.txt" 2>&1; then
    echo "FAILED: $name (see $dir/log.txt)" >&2
    return 1
  fi
  "$GPTC" explain "$dir/x.fb" | grep -v -e 'written by gptc' -e '^executable: ' >"$dir/explain.txt"
  rm -f "$dir/x.fb" "$dir/log.txt"
}
export -f compile_one
export OUT GPTC
printf '%s\n' "${CONFIGS[@]}" | xargs -P "$JOBS" -L 1 bash -c 'compile_one "$@"' _

(cd "$OUT/dumps" && find . -type f | LC_ALL=C sort | xargs sha256sum) >"$OUT/hashes.txt"
echo "${#CONFIGS[@]} configurations, $(wc -l <"$OUT/hashes.txt") files hashed: $OUT/hashes.txt"
if [[ -n $BASE ]]; then
  if diff "$BASE/hashes.txt" "$OUT/hashes.txt" >"$OUT/diff.txt"; then
    echo "same bits: every hash as in $BASE"
  else
    echo "DIFFERENT from $BASE ($(grep -c '^[<>]' "$OUT/diff.txt") lines, $OUT/diff.txt):" >&2
    head -20 "$OUT/diff.txt" >&2
    exit 1
  fi
fi
