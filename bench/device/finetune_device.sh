#!/usr/bin/env bash
# bench/device/finetune_device.sh: fine-tune GPT-2 124M from Hugging Face-format weights on
# the Austen corpus, bf16, in one device call.
#   here:   bash bench/device/build_hf.sh     (compiles bench/artifacts/hf/124M-bf16-ft.fb)
#   device: run(command="bash bench/device/finetune_device.sh", timeout_s=600,
#               carry=["bench/artifacts", "build-deps", "data/austen_train.bin", "data/austen_val.bin"])
# The weights, first found: $GPT2_DIR (a HF GPT-2 directory); transformers' local cache
# of "gpt2" (openai-community/gpt2, local_files_only: the device has no network);
# llm.c's gpt2_124M.bin in the repo root; otherwise a random GPT2LMHeadModel, which
# shows the flow but is no fine-tune (the output says so, and the verdict is
# "flow only").
# Runs gptrun 124M-bf16-ft.fb --init-from W --data data/austen_train.bin --val
# data/austen_val.bin --val-every 50 --steps FT_STEPS --log-dir $OUT/ft --checkpoint-dir;
# exports the last checkpoint with gpt-convert, loads it with transformers and
# prints a greedy continuation. Prints step 1's loss (GPT-2 124M on Austen starts
# near 4, random weights near 11), every val loss, and "finetune: PASS" when the
# last val loss is below the first. $OUT/ft holds log.jsonl and log.csv.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-out/device}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/finetune.log") 2>&1
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
ART=${ARTIFACTS:-bench/artifacts}/hf
EXE=$ART/124M-bf16-ft.fb
FT_STEPS=$(cat "$ART/124M-bf16-ft.steps" 2> /dev/null || echo 300)
PY=${PYTHON:-python3}
W=${WORK:-/tmp/gptc-ft}
rm -rf "$W" && mkdir -p "$W"
[ -f "$EXE" ] || { echo "finetune: FAIL (no $EXE: run bench/device/build_hf.sh here)"; exit 1; }
BIN=$ART/bin
if ! "$BIN/gptrun" --help > /dev/null 2>&1 || ! "$BIN/gpt-convert" --help > /dev/null 2>&1; then
  bash scripts/device-build.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; echo "finetune: FAIL (build)"; exit 1; }
  BIN=build-device/bin
fi
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

KIND=pretrained
if [ -n "${GPT2_DIR:-}" ]; then
  WEIGHTS=$GPT2_DIR
elif $PY - "$W/gpt2" << 'PYEOF'; then
import sys
from transformers import GPT2LMHeadModel
GPT2LMHeadModel.from_pretrained("gpt2", local_files_only=True).save_pretrained(sys.argv[1])
PYEOF
  WEIGHTS=$W/gpt2
elif [ -f gpt2_124M.bin ]; then
  WEIGHTS=gpt2_124M.bin
else
  echo "no pretrained GPT-2 here (no GPT2_DIR, no transformers cache, no gpt2_124M.bin):"
  echo "a random GPT2LMHeadModel instead; this shows the flow, not a fine-tune"
  KIND=random
  $PY bench/twin/hf_parity.py make --config 124M --out "$W/gpt2" --tokens "$W/unused.bin" \
    --batch 1 --seq 8 --windows 1 || { echo "finetune: FAIL (make)"; exit 1; }
  WEIGHTS=$W/gpt2
fi
echo "weights: $WEIGHTS ($KIND)"

"$BIN/gptrun" "$EXE" --init-from "$WEIGHTS" --data data/austen_train.bin --val data/austen_val.bin \
  --val-every 50 --val-batches 20 --steps "$FT_STEPS" --log-dir "$OUT/ft" \
  --checkpoint-dir "$W/ckpt" --no-progress > "$W/train.log" 2>&1
rc=$?
grep -vE "^step ([2-9]|[1-9][0-9]+)/" "$W/train.log" | tail -40
((rc == 0)) || { echo "finetune: FAIL (gptrun rc=$rc)"; exit 1; }
ckpts=("$W"/ckpt/step-*.ckpt)
"$BIN/gpt-convert" "$EXE" "${ckpts[-1]}" --hf "$W/exported" || { echo "finetune: FAIL (export)"; exit 1; }
$PY - "$W/exported" << 'PYEOF' || echo "(transformers could not load or sample the export)"
import sys, torch
from transformers import GPT2LMHeadModel
m = GPT2LMHeadModel.from_pretrained(sys.argv[1]).eval()
# "It is a truth universally acknowledged" in GPT-2's ids (no tokenizer files needed).
ids = torch.tensor([[1026, 318, 257, 3872, 26208, 10810]])
out = m.generate(ids, max_new_tokens=24, do_sample=False)
print("exported model, greedy ids:", out[0].tolist())
PYEOF
$PY - "$OUT/ft/log.jsonl" "$KIND" << 'PYEOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
train = [r for r in recs if r["kind"] == "train"]
val = [r for r in recs if r["kind"] == "val"]
print(f"step 1 train loss {train[0]['loss']:.4f}, step {train[-1]['step']} {train[-1]['loss']:.4f}")
print("val:", ", ".join(f"{r['step']}: {r['loss']:.4f}" for r in val))
ok = len(val) >= 2 and val[-1]["loss"] < val[0]["loss"]
verdict = "PASS" if ok else "FAIL"
if sys.argv[2] != "pretrained":
    verdict += " (flow only: random weights)"
print(f"finetune: {verdict}")
PYEOF
