#!/usr/bin/env bash
# bench/device/build_artifacts.sh: CPU side. Compiles the benchmark executables with
# gptc (bench/device/configs.sh holds the configurations) into bench/artifacts/:
#
#   gpt2-124M-parity.fb   PARITY_MODEL, B=PARITY_B, T=PARITY_T, PARITY_OPT
#   gpt2-124M-train.fb    TRAIN_MODEL,  B=TRAIN_B,  T=TRAIN_T,  TRAIN_OPT
#   gpt2-124M-bf16.fb     the same with --precision=bf16 (bench/device/run_bf16.sh);
#                         BUILD_BF16=0 skips it and the next
#   gpt2-124M-bf16-scalar.fb  bf16 with --flash-attention=false
#   gpt2-124M-bf16-unfused.fb bf16 with the fusion passes off
#   gpt2-124M-ws1.fb      the train config for any number of ranks (no --world-size:
#                         the all-reduces in, skipped on one GPU; bench/device/run_nccl.sh)
#   gpt2-124M-ws2.fb      the same with --world-size=2; BUILD_NCCL=0 skips both
#   manifest.json         per file: config (model, B, T, the *_OPT string, extra
#                         flags), gptc command, compile seconds, bytes, sha256;
#                         the commit and date
#
# Usage (repo root, after scripts/setup.sh built build/bin/gptc):
#   bash bench/device/build_artifacts.sh
#   GPTC=/path/to/gptc GPTC_FLAGS="--compile-to=serialize" bash bench/device/build_artifacts.sh
# Then carry bench/artifacts (and the data files) to the device call; see
# bench/README.md.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=bench/device/configs.sh
source bench/device/configs.sh

GPTC=${GPTC:-build/bin/gptc}
GPTC_FLAGS=${GPTC_FLAGS:-}               # extra flags for both executables
PARITY_GPTC_FLAGS=${PARITY_GPTC_FLAGS:-} # extra flags for the parity one (e.g. no TF32)
TRAIN_GPTC_FLAGS=${TRAIN_GPTC_FLAGS:-}
BUILD_BF16=${BUILD_BF16:-1}
BUILD_NCCL=${BUILD_NCCL:-1}
ART=$ARTIFACTS
mkdir -p "$ART"
[ -x "$GPTC" ] || { echo "build_artifacts: no $GPTC (run scripts/setup.sh)"; exit 1; }

rows=()
status=0
compile() { # name file model B T opt extra
  local name=$1 file=$2 model=$3 b=$4 t=$5 opt=$6 extra=$7
  # shellcheck disable=SC2206
  local cmd=("$GPTC" compile models/gpt2.mlir --model="$model" --batch="$b" --seq="$t" $opt $GPTC_FLAGS $extra -o "$file")
  echo "+ ${cmd[*]}"
  local t0 t1
  t0=$(date +%s.%N)
  if "${cmd[@]}"; then
    t1=$(date +%s.%N)
    local magic
    magic=$(head -c 8 "$file" | tail -c 4)
    if [ "$magic" != "GPTX" ]; then
      echo "build_artifacts: $file has identifier '$magic', not GPTX (is serialize the last phase?)"
      status=1
    fi
    rows+=("$name|$file|$model|$b|$t|$opt|$GPTC_FLAGS $extra|$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')|${cmd[*]}")
  else
    echo "build_artifacts: gptc failed for $name"
    status=1
  fi
}

# Parity and train are fp32 on one device (gptc's defaults are bf16 and any
# number of ranks).
compile parity "$PARITY_FB" "$PARITY_MODEL" "$PARITY_B" "$PARITY_T" "$PARITY_OPT" "--precision=fp32 --world-size=1 $PARITY_GPTC_FLAGS"
compile train "$TRAIN_FB" "$TRAIN_MODEL" "$TRAIN_B" "$TRAIN_T" "$TRAIN_OPT" "--precision=fp32 --world-size=1 $TRAIN_GPTC_FLAGS"
if [ "$BUILD_BF16" != 0 ]; then
  compile bf16 "$BF16_FB" "$TRAIN_MODEL" "$TRAIN_B" "$TRAIN_T" "$TRAIN_OPT" "$TRAIN_GPTC_FLAGS --precision=bf16"
  compile bf16scalar "$BF16_SCALAR_FB" "$TRAIN_MODEL" "$TRAIN_B" "$TRAIN_T" "$TRAIN_OPT" "$TRAIN_GPTC_FLAGS --precision=bf16 --flash-attention=false"
  compile bf16unfused "$BF16_UNFUSED_FB" "$TRAIN_MODEL" "$TRAIN_B" "$TRAIN_T" "$TRAIN_OPT" "$TRAIN_GPTC_FLAGS --precision=bf16 --fuse-matmul-epilogue=false --fuse-elementwise=false --fuse-adamw=false --fuse-cross-entropy=false"
fi
if [ "$BUILD_NCCL" != 0 ]; then
  compile ws1 "$NCCL_FB" "$TRAIN_MODEL" "$TRAIN_B" "$TRAIN_T" "$TRAIN_OPT" "--precision=fp32 $TRAIN_GPTC_FLAGS"
  compile ws2 "$NCCL_WS2_FB" "$TRAIN_MODEL" "$TRAIN_B" "$TRAIN_T" "$TRAIN_OPT" "--precision=fp32 $TRAIN_GPTC_FLAGS --world-size=2"
fi

commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit+dirty"
printf '%s\n' "${rows[@]}" | python3 -c '
import hashlib, json, os, sys, time
commit, version = sys.argv[1], sys.argv[2]
out = {"commit": commit, "date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "gptc_version": version,
       "executables": {}}
for line in sys.stdin.read().splitlines():
    if not line:
        continue
    name, path, model, b, t, opt, extra, secs, cmd = line.split("|", 8)
    data = open(path, "rb").read()
    out["executables"][name] = {
        "file": path, "model": model, "batch": int(b), "seq": int(t),
        "opt": " ".join(opt.split()), "extra_flags": " ".join(extra.split()),
        "gptc_s": float(secs), "command": cmd,
        "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
json.dump(out, open(sys.argv[3], "w"), indent=1)
print(json.dumps(out, indent=1))
' "$commit" "$("$GPTC" --version 2>/dev/null | head -1)" "$ART/manifest.json"
du -sh "$ART"
exit $status
