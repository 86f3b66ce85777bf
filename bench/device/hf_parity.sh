#!/usr/bin/env bash
# bench/device/hf_parity.sh: gptc against Hugging Face transformers, weights in and out, in
# one device call (torch, transformers and safetensors on the GPU machine).
#   here:   bash bench/device/build_hf.sh
#   device: run(command="bash bench/device/hf_parity.sh", timeout_s=600,
#               carry=["bench/artifacts", "build-deps", "data/gpt2"])
# For each config in CONFIGS (tiny, 124M), with the fp32 executable build_hf.sh compiled:
#   make    a seeded random GPT2LMHeadModel, save_pretrained -> model.safetensors +
#           config.json, a token file of random ids, HF's fp32 loss on its batch 0
#           (TF32 off, eager attention)
#   import  gptrun --init-from DIR --steps 1: step 1's loss is gptc's fp32 loss of
#           batch 0 at the imported weights; PASS within LOSS_TOL (1e-5) relative
#   train   gptrun --init-from DIR --steps TRAIN_STEPS --checkpoint-dir, then
#           gpt-convert EXE step-N.ckpt --hf EXPORTED
#   export  transformers loads EXPORTED; its loss of batch 0 against gptrun
#           --init-from EXPORTED --steps 1 (LOSS_TOL), and its logits of PROMPT
#           against gptrun --resume step-N.ckpt --sample PROMPT --logits-out (@logits of
#           the trained checkpoint itself; PASS within LOGITS_TOL absolute, 1e-4)
# and for tiny the CI fixture: $OUT/fixtures/hf_tiny/{model.safetensors, config.json}
# as transformers wrote them, expected.json (batch 0 at B=2 T=8, HF's fp64 loss and
# row-0 logits). Commit it as test/fixtures/hf_tiny/ (E2EHfFixtureTest reads it).
# $OUT gets hf_parity.log (everything), summary.jsonl (one line per check) and the
# fixture. Prints "hf_parity: PASS" or "hf_parity: FAIL (...)".
# Knobs: CONFIGS="tiny 124M" TRAIN_STEPS=5 LOSS_TOL=1e-5 LOGITS_TOL=1e-4 PYTHON=python3
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-out/device}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/hf_parity.log") 2>&1
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
ART=${ARTIFACTS:-bench/artifacts}/hf
CONFIGS=${CONFIGS:-tiny 124M}
TRAIN_STEPS=${TRAIN_STEPS:-5}
LOSS_TOL=${LOSS_TOL:-1e-5}
LOGITS_TOL=${LOGITS_TOL:-1e-4}
PY=${PYTHON:-python3}
HF="$PY bench/twin/hf_parity.py"
W=${WORK:-/tmp/gptc-hf}
rm -rf "$W" && mkdir -p "$W"
: > "$OUT/summary.jsonl"
FAILS=()

echo "date $(date -u '+%Y-%m-%d %H:%M:%S UTC'), host $(hostname)"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$PY -c 'import torch, transformers, safetensors; print("torch", torch.__version__, "transformers", transformers.__version__, "safetensors", safetensors.__version__)' ||
  { echo "hf_parity: FAIL (no torch/transformers/safetensors)"; exit 1; }

# The CPU machine's gptrun and gpt-convert (CUDA 13, Release) when they run here;
# otherwise the runtime half is built (carry build-deps).
BIN=$ART/bin
if ! "$BIN/gptrun" --help > /dev/null 2>&1 || ! "$BIN/gpt-convert" --help > /dev/null 2>&1; then
  echo "building the runtime half (scripts/device-build.sh)"
  bash scripts/device-build.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; echo "hf_parity: FAIL (build)"; exit 1; }
  BIN=build-device/bin
fi
echo "gptrun: $BIN/gptrun ($("$BIN/gptrun" --version 2>&1 | head -1))"

record() { # JSON line from hf_parity.py compare/logits, plus the config
  local cfg=$1 line=$2
  echo "{\"config\": \"$cfg\", ${line#\{}" >> "$OUT/summary.jsonl"
}
first_loss() { # log.jsonl -> the first train record's loss
  $PY -c 'import json,sys; print(next(json.loads(l)["loss"] for l in open(sys.argv[1]) if "\"train\"" in l))' "$1"
}
check() { # CFG WHAT OURS THEIRS TOL
  local line rc
  line=$($HF compare --what "$2" --ours "$3" --theirs "$4" --tol "$5")
  rc=$?
  echo "[$1] $line"
  record "$1" "$line"
  ((rc == 0)) || FAILS+=("$1 $2")
}

for cfg in $CONFIGS; do
  echo
  echo "=== $cfg ==="
  exe=$ART/$cfg-fp32.fb
  if [ ! -f "$exe" ]; then
    echo "[$cfg] no $exe: run bench/device/build_hf.sh here and carry bench/artifacts"
    FAILS+=("$cfg missing-exe")
    continue
  fi
  read -r B T PROMPT < "$ART/$cfg.shape"
  d=$W/$cfg
  mkdir -p "$d"
  # make: the model, the tokens, HF's loss.
  made=$($HF make --config "$cfg" --out "$d/hf" --tokens "$d/tokens.bin" --batch "$B" --seq "$T" \
    --windows $((TRAIN_STEPS + 2))) || { FAILS+=("$cfg make"); continue; }
  echo "[$cfg] $made"
  hf_loss=$($PY -c 'import json,sys; print(json.loads(sys.argv[1])["hf_loss"])' "$made")
  ls -la "$d/hf"

  # import: step 1's loss at the imported weights.
  "$BIN/gptrun" "$exe" --data "$d/tokens.bin" --steps 1 --init-from "$d/hf" --log-dir "$d/import" --no-checkpoint \
    --no-progress > "$d/import.log" 2>&1 || { tail -5 "$d/import.log"; FAILS+=("$cfg import-run"); continue; }
  grep -E "^gptrun: parameters from|^step 1/" "$d/import.log"
  check "$cfg" import "$(first_loss "$d/import/log.jsonl")" "$hf_loss" "$LOSS_TOL"

  # train, then export.
  "$BIN/gptrun" "$exe" --data "$d/tokens.bin" --steps "$TRAIN_STEPS" --init-from "$d/hf" \
    --checkpoint-dir "$d/ckpt" --no-progress > "$d/train.log" 2>&1 || { tail -5 "$d/train.log"; FAILS+=("$cfg train"); continue; }
  grep -E "^step " "$d/train.log"
  ckpts=("$d"/ckpt/step-*.ckpt)
  ckpt=${ckpts[-1]}
  "$BIN/gpt-convert" "$exe" "$ckpt" --hf "$d/exported" || { FAILS+=("$cfg export"); continue; }
  cat "$d/exported/config.json"

  # export: HF's loss on the exported model against gptc's at the same weights.
  theirs=$($HF loss --model "$d/exported" --tokens "$d/tokens.bin" --batch "$B" --seq "$T") || { FAILS+=("$cfg hf-loss"); continue; }
  "$BIN/gptrun" "$exe" --data "$d/tokens.bin" --steps 1 --init-from "$d/exported" --log-dir "$d/reimport" --no-checkpoint \
    --no-progress > "$d/reimport.log" 2>&1 || { tail -5 "$d/reimport.log"; FAILS+=("$cfg reimport"); continue; }
  check "$cfg" export-loss "$(first_loss "$d/reimport/log.jsonl")" \
    "$($PY -c 'import json,sys; print(json.loads(sys.argv[1])["hf_loss"])' "$theirs")" "$LOSS_TOL"

  # export: HF's logits against @logits of the trained checkpoint.
  "$BIN/gptrun" "$exe" --resume "$ckpt" --sample "$PROMPT" --sample-tokens 1 --temperature 0 \
    --vocab-dir data/gpt2 --logits-out "$d/logits.safetensors" > "$d/sample.log" 2>&1 ||
    { tail -5 "$d/sample.log"; FAILS+=("$cfg sample"); continue; }
  line=$($HF logits --model "$d/exported" --gptc "$d/logits.safetensors" --tol "$LOGITS_TOL")
  rc=$?
  echo "[$cfg] logits: $line"
  record "$cfg" "$line"
  ((rc == 0)) || FAILS+=("$cfg logits")

  if [ "$cfg" = tiny ]; then
    f=$OUT/fixtures/hf_tiny
    mkdir -p "$f"
    cp "$d/hf/model.safetensors" "$d/hf/config.json" "$f/"
    $HF fixture --model "$d/hf" --config tiny --tokens "$d/tokens.bin" --batch "$B" --seq "$T" \
      --out "$f/expected.json" || FAILS+=("tiny fixture")
    ls -la "$f"
  fi
done

echo
cat "$OUT/summary.jsonl"
if ((${#FAILS[@]} == 0)); then
  echo "hf_parity: PASS"
else
  echo "hf_parity: FAIL (${FAILS[*]})"
  exit 1
fi
