#!/usr/bin/env bash
# The main job: compile GPT-2 with an IR dump after every pass, train it on
# the bundled Austen corpus (data/, built by setup.sh), and keep what it
# made in OUTDIR (default out/):
#   ir/                    the IR after each pass, kernels and commands
#   step.fb, sample.fb     the training executable, and a B=1 one to sample
#   log.jsonl, log.csv     a record per step and per validation
#   loss.svg               the loss curve (and loss.png if rsvg-convert is here)
#   checkpoints/           the model after the last step
#   sample.txt             text generated from that checkpoint
# With a GPU: GPT-2 124M with gptc's defaults (T=1024, bf16, CUDA sm_90, the
# batch fitted to the GPU's memory). Without one: the `mini` preset (GPT-2's
# vocabulary, 2 layers, width 64) at B=4, T=64 on the host target, which
# runs the same executable path on the CPU.
# Usage: bash scripts/main.sh [OUTDIR] [STEPS]
#   MAIN_TARGET=host|cuda picks the path (default: cuda when nvidia-smi
#   finds a GPU); GPTC_BIN is where the tools are (default build/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out}
bin=${GPTC_BIN:-build/bin}
target=${MAIN_TARGET:-$(nvidia-smi -L > /dev/null 2>&1 && echo cuda || echo host)}
if [ "$target" = cuda ]; then
  # 128 x 1024 tokens a step: 50 steps are about 7 passes over Austen.
  model=() batch=() steps=${2:-50}
else
  model=(--model=mini --seq=64 --target=host) batch=(--batch=4) steps=${2:-50}
fi
case $steps in
  ''|*[!0-9]*|0) echo "main: STEPS must be a whole number > 0, got '$steps'" >&2; exit 1 ;;
esac
# A tenth of the run warms up, at most 10 steps: the cosine needs the rest.
steps=$((10#$steps)) # "08" is eight, not an octal error
warmup=$(( steps / 10 < 10 ? steps / 10 : 10 ))
# A new run: what an earlier one left here would mix into the log and
# the checkpoints (gptrun refuses a --log-dir holding checkpoints).
rm -rf "$out/ir" "$out/checkpoints"
rm -f "$out"/{step.fb,sample.fb,log.jsonl,log.csv,loss.svg,loss.png,sample.txt}
mkdir -p "$out"
$bin/gptc compile models/gpt2.mlir "${model[@]}" "${batch[@]}" --lr=1e-3 --warmup-steps="$warmup" \
  --total-steps="$steps" --schedule=cosine --min-lr=1e-4 \
  --dump-ir-after-each-pass="$out/ir" -o "$out/step.fb"
# --log-dir keeps the log and, after the last step, a checkpoint.
$bin/gptrun "$out/step.fb" --data data/austen_train.bin --val data/austen_val.bin \
  --steps "$steps" --val-every 25 --val-batches 4 --log-dir "$out"
$bin/gptplot "$out/log.jsonl" -o "$out/loss.svg" --title "GPT-2 on Austen ($steps steps)"
if command -v rsvg-convert > /dev/null; then rsvg-convert "$out/loss.svg" -o "$out/loss.png"; fi
# Sampling reads one row: a B=1 executable of the same model reads the
# checkpoint (its identity is the architecture, not B and T).
$bin/gptc compile models/gpt2.mlir "${model[@]}" --batch=1 --progress=off -o "$out/sample.fb" > /dev/null
$bin/gptrun "$out/sample.fb" --checkpoint-dir "$out/checkpoints" --resume latest \
  --sample "It is a truth universally acknowledged" --sample-tokens 48 --top-k 40 --seed 1 \
  > "$out/sample.txt"
echo
echo "main: $out/sample.txt:"
cat "$out/sample.txt"
echo
echo "main: everything is in $out/ (gptc explain $out/step.fb describes the executable):"
ls -lh "$out" "$out/checkpoints"
