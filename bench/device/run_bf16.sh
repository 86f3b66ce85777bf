#!/usr/bin/env bash
# bench/device/run_bf16.sh: gptc --precision=bf16 against fp32 and PyTorch bf16, in
# one device call.
#
# CPU side first (this machine has gptc):
#   bash scripts/device-build.sh --pack      # FlatBuffers for the device build
#   bash bench/device/build_artifacts.sh            # -> bench/artifacts/gpt2-124M-{train,bf16}.fb
# Device side, from the repo root:
#   run(command="bash bench/device/run_bf16.sh", timeout_s=600,
#       carry=["build-deps", "bench/artifacts", "data/austen_train.bin", "data/austen_val.bin"])
#
# Stages (each one's failure is reported and the next still runs):
#   build     scripts/device-build.sh -> build-device/bin/gptrun
#   fp32      gptrun TRAIN_FB (fp32), BF16_STEPS steps of TRAIN_MODEL B=TRAIN_B T=TRAIN_T
#   bf16      gptrun BF16_FB (bf16 GEMMs, fp32 masters), same steps, init and batches
#   scalar    gptrun BF16_SCALAR_FB (bf16, --flash-attention=false), the same
#   unfused   gptrun BF16_UNFUSED_FB (bf16, the fusion passes off), the same
#   eager     bench/twin/train_torch.py eager, bf16 autocast, same config
#   compile   bench/twin/train_torch.py torch.compile, bf16 autocast, same config
# Then: the speed table (ms/step, tok/s, MFU; ratios against torch.compile
# bf16) and the loss tracking table of bf16 vs fp32 (ours), which passes when
# every step's loss is within BF16_TOL relative (bench/device/configs.sh), and the
# flash-vs-scalar attention table (FLASH_TOL) and the fused-vs-unfused one
# (FUSION_TOL), both over the first VARIANT_STEPS steps. Success:
# the last lines print "tracking: PASS" and the four rows of the table.
# Files in $OUT: run_bf16.log, gptrun_fp32.log, gptrun_bf16.log, build.log,
# <run>.json summaries.
#
# Knobs: everything in bench/device/configs.sh (BF16_STEPS=50, BF16_TOL=2e-2, ...),
# BUDGET_S=570, BUILD_TIMEOUT=240, T_GPTRUN=150, T_EAGER=90, T_COMPILE=200,
# GPTRUN=build-device/bin/gptrun, PYTHON=python3, ATTENTION=sdpa,
# SKIP="fp32 eager" (runs to leave out: fp32 bf16 scalar unfused eager compile).
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
START=$(date +%s)
BUDGET_S=${BUDGET_S:-570}
DEADLINE=$((START + BUDGET_S))
OUT=${OUT:-out/device}
mkdir -p "$OUT"
WORK=${WORK:-/tmp/gptc-bf16}
rm -rf "$WORK"
mkdir -p "$WORK"
exec > >(tee -a "$OUT/run_bf16.log") 2>&1
TEE_PID=$!
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1

# shellcheck source=bench/device/configs.sh
source bench/device/configs.sh
PY=${PYTHON:-python3}
GPTRUN=${GPTRUN:-build-device/bin/gptrun}
ATTENTION=${ATTENTION:-sdpa}
SKIP=${SKIP:-}
BUILD_TIMEOUT=${BUILD_TIMEOUT:-240}
T_GPTRUN=${T_GPTRUN:-150}
T_EAGER=${T_EAGER:-90}
T_COMPILE=${T_COMPILE:-200}
MANIFEST=$ARTIFACTS/manifest.json
WARMUP=$((BF16_STEPS > 20 ? 10 : 2)) # steps left out of the medians

# shellcheck source=bench/device/stages.sh
source bench/device/stages.sh

banner "env"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
[ -f "$MANIFEST" ] && "$PY" -c 'import json,sys; m=json.load(open(sys.argv[1])); print("artifacts from", m.get("commit")); [print(" ", k, v["command"]) for k, v in m["executables"].items()]' "$MANIFEST"
DATA=$TRAIN_DATA
[ -f "$DATA" ] || { echo "missing $DATA: carry data/austen_train.bin"; exit 1; }

banner "build"
run_limited build "$BUILD_TIMEOUT" bash scripts/device-build.sh > "$OUT/build.log" 2>&1
tail -n 5 "$OUT/build.log"

skipped() { [[ " $SKIP " == *" $1 "* ]] && set_status "$1" "skipped (SKIP)"; }
ours() { # NAME FB DTYPE LABEL
  local name=$1 fb=$2 dtype=$3 label=$4 log=$OUT/gptrun_$1.log
  skipped "$name" && return
  banner "$name: gptrun $fb, $BF16_STEPS steps"
  if [ ! -x "$GPTRUN" ] || [ ! -f "$fb" ]; then
    set_status "$name" "skipped (no $GPTRUN or no $fb: run bench/device/build_artifacts.sh here first)"
    return
  fi
  run_limited "$name" "$T_GPTRUN" "$GPTRUN" "$fb" --data "$DATA" --steps "$BF16_STEPS" --seed "$SEED" > "$log" 2>&1
  tail -n 4 "$log"
  local exe=train
  [ "$dtype" = bf16 ] && exe=bf16
  [ "$name" = scalar ] && exe=bf16scalar
  [ "$name" = unfused ] && exe=bf16unfused
  "$PY" bench/twin/compare.py gptrun-log "$log" -o "$WORK/$name.json" --label "$label" \
    --model "$TRAIN_MODEL" --batch "$TRAIN_B" --seq "$TRAIN_T" --dtype "$dtype" --tf32 off \
    --timing-warmup "$WARMUP" --manifest "$MANIFEST" --exe "$exe" > /dev/null ||
    echo "[$name] no step lines in $log"
}
ours fp32 "$TRAIN_FB" fp32 "gptc fp32"
ours bf16 "$BF16_FB" bf16 "gptc bf16"
ours scalar "$BF16_SCALAR_FB" bf16 "gptc bf16 scalar attention"
ours unfused "$BF16_UNFUSED_FB" bf16 "gptc bf16 unfused"

torch_run() { # NAME WANT_S MODE LABEL
  skipped "$1" && return
  banner "$1: PyTorch $3, bf16 autocast, $BF16_STEPS steps"
  # shellcheck disable=SC2086
  run_limited "$1" "$2" "$PY" bench/twin/train_torch.py --device cuda --model "$TRAIN_MODEL" \
    --batch "$TRAIN_B" --seq "$TRAIN_T" --init counter --seed "$SEED" --attention "$ATTENTION" \
    --timing-warmup "$WARMUP" --quiet --steps "$BF16_STEPS" --data "$DATA" $TRAIN_OPT \
    --mode "$3" --dtype bf16 --tf32 on --json "$WORK/$1.json" --label "$4" \
    --time-limit $(($2 > 30 ? $2 - 15 : $2))
}
torch_run eager "$T_EAGER" eager "torch eager bf16"
torch_run compile "$T_COMPILE" compile "torch.compile bf16"

banner "report"
runs=()
for r in fp32 bf16 scalar unfused eager compile; do [ -f "$WORK/$r.json" ] && runs+=("$WORK/$r.json"); done
cp "${runs[@]}" "$OUT/" 2> /dev/null
if ((${#runs[@]})); then
  "$PY" bench/twin/compare.py table "${runs[@]}" --reference "torch.compile bf16"
fi
echo
if [ -f "$WORK/bf16.json" ] && [ -f "$WORK/fp32.json" ]; then
  echo "loss tracking: gptc bf16 vs gptc fp32 (same init and batches), tolerance $BF16_TOL"
  if "$PY" bench/twin/compare.py parity "$WORK/bf16.json" "$WORK/fp32.json" --tol "$BF16_TOL"; then
    set_status tracking PASS
  else
    set_status tracking "FAIL (see the table)"
  fi
  [ -f "$WORK/eager.json" ] && {
    echo "for reference, gptc bf16 vs torch eager bf16 (no tolerance: autocast rounds elsewhere):"
    "$PY" bench/twin/compare.py parity "$WORK/bf16.json" "$WORK/eager.json" --tol 1 | tail -n 1
  }
else
  set_status tracking "not measured (a gptrun run is missing)"
fi
echo
# parity STATUS_KEY RUN_A RUN_B TOLERANCE TITLE [STEPS]: per-step losses of
# two runs, over the first STEPS steps (all when not given).
parity() {
  if [ -f "$WORK/$2.json" ] && [ -f "$WORK/$3.json" ]; then
    echo "$5, tolerance $4${6:+, first $6 steps}"
    if "$PY" bench/twin/compare.py parity "$WORK/$2.json" "$WORK/$3.json" --tol "$4" --steps "${6:-0}"; then
      set_status "$1" PASS
    else
      set_status "$1" "FAIL (see the table)"
    fi
  else
    set_status "$1" "not measured (a gptrun run is missing)"
  fi
}
parity flash bf16 scalar "$FLASH_TOL" "flash attention: gptc bf16 (flash) vs gptc bf16 (scalar attention)" "$VARIANT_STEPS"
echo
parity fusion bf16 unfused "$FUSION_TOL" "fusion: gptc bf16 (fused) vs gptc bf16 (fusion passes off)" "$VARIANT_STEPS"
echo
echo "=== stages ($(($(date +%s) - START)) s) ==="
for k in "${ORDER[@]}"; do printf '  %-10s %s\n' "$k" "${STATUS[$k]}"; done
exec 1>&- 2>&-
wait "$TEE_PID" 2> /dev/null
exit 0
