#!/usr/bin/env bash
# bench/device/build_hf.sh: CPU side of bench/device/hf_parity.sh. Compiles the fp32
# executables it imports Hugging Face weights into, into bench/artifacts/hf/:
#   tiny-fp32.fb   tiny, B=2 T=8 (the CI fixture's batch; E2EHfFixtureTest compiles
#                  the same shape for the Host)
#   124M-fp32.fb   124M, B=4 T=64
#   NAME.shape     "B T PROMPT": the batch and the --sample prompt (tiny's ids must
#                  stay below its vocabulary of 60: "1+1=2;3" is 7 of them)
#   124M-bf16-ft.fb  bench/device/finetune_device.sh's fine-tune: 124M bf16, B=8 T=1024,
#                  cosine from lr 1e-4 (20 warm-up steps) to 1e-5 at FT_STEPS (300)
#   bin/           build/bin/gptrun and gpt-convert, when they link the CUDA runtime
#                  (otherwise the device builds them: carry build-deps)
# Usage (repo root, after /work/bin/nj gptc gptrun gpt-convert or scripts/setup.sh):
#   bash bench/device/build_hf.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
GPTC=${GPTC:-build/bin/gptc}
ART=${ARTIFACTS:-bench/artifacts}/hf
mkdir -p "$ART"
[ -x "$GPTC" ] || { echo "build_hf: no $GPTC"; exit 1; }
status=0
build() { # name model B T prompt
  echo "+ $GPTC compile models/gpt2.mlir --model=$2 --batch=$3 --seq=$4 --precision=fp32 -o $ART/$1-fp32.fb"
  "$GPTC" compile models/gpt2.mlir --model="$2" --batch="$3" --seq="$4" --precision=fp32 \
    -o "$ART/$1-fp32.fb" || { echo "build_hf: gptc failed for $1"; status=1; }
  echo "$3 $4 $5" > "$ART/$1.shape"
}
build tiny tiny 2 8 "1+1=2;3"
build 124M 124M 4 64 "It is a truth universally acknowledged"
FT_STEPS=${FT_STEPS:-300}
echo "+ $GPTC compile models/gpt2.mlir --model=124M --batch=8 --seq=1024 (bf16) ... -o $ART/124M-bf16-ft.fb"
"$GPTC" compile models/gpt2.mlir --model=124M --batch=8 --seq=1024 --precision=bf16 --lr=1e-4 \
  --schedule=cosine --warmup-steps=20 --total-steps="$FT_STEPS" --min-lr=1e-5 \
  -o "$ART/124M-bf16-ft.fb" || { echo "build_hf: gptc failed for the fine-tune"; status=1; }
echo "$FT_STEPS" > "$ART/124M-bf16-ft.steps"
if ldd build/bin/gptrun 2> /dev/null | grep -q libcudart && [ -x build/bin/gpt-convert ]; then
  mkdir -p "$ART/bin" && cp build/bin/gptrun build/bin/gpt-convert "$ART/bin/"
fi
ls -la "$ART" "$ART/bin" 2> /dev/null
exit $status
