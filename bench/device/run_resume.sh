#!/usr/bin/env bash
# bench/device/run_resume.sh: determinism, checkpoint/resume exactness and the cost
# of --on-nan=skip on the GPU, in one device call.
#   here:   bash scripts/device-build.sh --pack && bash bench/device/build_artifacts.sh
#   device: run(command="bash bench/device/run_resume.sh",
#               carry=["build-deps", "bench/artifacts", "data/austen_train.bin"])
# Prints PASS/FAIL for: two runs with the same seed give bit-identical
# losses; 10 steps + resume + 10 steps equal 20 straight steps; and the
# ms/step of --on-nan=stop vs skip. Logs go to $OUT (or out/device).
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-out/device}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
FB=${FB:-bench/artifacts/gpt2-124M-bf16.fb}
GPTRUN=build-device/bin/gptrun
W=/tmp/gptc-resume
rm -rf "$W" && mkdir -p "$W"
bash scripts/device-build.sh --test > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; echo "build/test FAILED"; }
grep -E "tests passed|Failed|Skipped" "$OUT/build.log" | tail -12
losses() { grep -E '^step [0-9]+/' "$1" | sed -E 's/.*\| loss ([0-9.]+) \| norm ([0-9.]+).*/\1 \2/'; }
run() { local log=$1; shift; "$GPTRUN" "$FB" --data data/austen_train.bin "$@" > "$log" 2>&1 || echo "gptrun FAILED: $*"; }
run "$W/a.log" --steps 20
run "$W/b.log" --steps 20
if cmp -s <(losses "$W/a.log") <(losses "$W/b.log"); then echo "determinism (2 runs x 20 steps): PASS"; else echo "determinism: FAIL"; diff <(losses "$W/a.log") <(losses "$W/b.log") | head; fi
run "$W/c1.log" --steps 10 --checkpoint-dir "$W/ckpt"
run "$W/c2.log" --steps 20 --checkpoint-dir "$W/ckpt" --resume latest
if cmp -s <(losses "$W/a.log") <(losses "$W/c1.log"; losses "$W/c2.log"); then echo "resume (10 + resume + 10 vs 20): PASS"; else echo "resume: FAIL"; diff <(losses "$W/a.log") <(losses "$W/c1.log"; losses "$W/c2.log") | head; fi
run "$W/skip.log" --steps 20 --on-nan skip
echo "stop (default): $(grep -E '^gptrun: steps' "$W/a.log")"
echo "skip:           $(grep -E '^gptrun: steps' "$W/skip.log")"
ls -la "$W/ckpt"
cp "$W"/*.log "$OUT"/ 2>/dev/null
tail -3 "$W/c2.log"
