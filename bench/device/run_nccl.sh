#!/usr/bin/env bash
# bench/device/run_nccl.sh: the NCCL path of gptrun against the plain one, on one
# GPU, in one device call. Compiles nothing: the executables come from
# bench/device/build_artifacts.sh (TRAIN_FB: one device, no collectives; NCCL_FB:
# the same config without --world-size, whose every gradient bucket is an
# all-reduce, through NCCL on 2+ ranks and skipped on one).
#
# CPU side first (this machine has gptc):
#   bash scripts/device-build.sh --pack      # FlatBuffers for the device build
#   bash bench/device/build_artifacts.sh            # -> bench/artifacts/gpt2-124M-{train,ws1,ws2}.fb
# Device side, from the repo root:
#   run(command="bash bench/device/run_nccl.sh", timeout_s=600,
#       carry=["build-deps", "bench/artifacts", "data/austen_train.bin"])
#
# Stages (each one's failure is reported and the next still runs):
#   build     scripts/device-build.sh -> build-device/bin/gptrun
#   nccltest  build-device/bin/RuntimeNcclTest (all-reduce sum/mean on every GPU)
#   plain     gptrun TRAIN_FB, NCCL_STEPS steps (no collectives)
#   gpus1     gptrun NCCL_FB --gpus 1 (one rank: the all-reduces skipped)
#   graph     the same with --graph (the all-reduces captured in the CUDA graph)
#   launcher  NCCL_FB as rank 0 of 1 under torchrun's variables (RANK,
#             WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT): the TCP bootstrap path
#   ws2       NCCL_WS2_FB --gpus 2: with one GPU, the clear GPU-count error;
#             with two or more, training on 2 GPUs (reported, not compared)
#   errors    TRAIN_FB (--world-size=1) --gpus 2 must say it is for one device
# Each of gpus1/graph/launcher passes when every step's loss is within
# NCCL_TOL (1e-6, relative) of plain's. The last line is "nccl: PASS" or
# "nccl: FAIL (...)".
# Files in $OUT: run_nccl.log, gptrun_<stage>.log, <stage>/log.csv, build.log.
#
# Knobs: bench/device/configs.sh (NCCL_STEPS=20, NCCL_TOL=1e-6, ...), BUDGET_S=570,
# BUILD_TIMEOUT=240 (BUILD=0: use the gptrun already there), T_GPTRUN=90,
# GPTRUN=build-device/bin/gptrun.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
START=$(date +%s)
BUDGET_S=${BUDGET_S:-570}
DEADLINE=$((START + BUDGET_S))
OUT=${OUT:-out/device}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run_nccl.log") 2>&1
TEE_PID=$!
# The lent machines forbid NVLink multicast; gptrun sets this too.
export NCCL_NVLS_ENABLE=0

# shellcheck source=bench/device/configs.sh
source bench/device/configs.sh
GPTRUN=${GPTRUN:-build-device/bin/gptrun}
BUILD_TIMEOUT=${BUILD_TIMEOUT:-240}
T_GPTRUN=${T_GPTRUN:-90}
DATA=$TRAIN_DATA

# shellcheck source=bench/device/stages.sh
source bench/device/stages.sh
FAILS=()

banner "env"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
[ -f "$DATA" ] || { echo "missing $DATA: carry data/austen_train.bin"; exit 1; }

banner "build"
if [ "${BUILD:-1}" != 0 ]; then
  run_limited build "$BUILD_TIMEOUT" bash scripts/device-build.sh > "$OUT/build.log" 2>&1
  tail -n 5 "$OUT/build.log"
else
  set_status build "skipped (BUILD=0)"
fi

banner "nccltest"
if [ -x build-device/bin/RuntimeNcclTest ]; then
  run_limited nccltest 60 build-device/bin/RuntimeNcclTest || FAILS+=(nccltest)
else
  set_status nccltest "skipped (no build-device/bin/RuntimeNcclTest)"
fi

# gptrun_run NAME [ENV=VALUE...] -- ARGS...: NCCL_STEPS steps, log in $OUT/NAME.
gptrun_run() {
  local name=$1 envs=()
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  banner "$name: ${envs[*]} gptrun $*"
  rm -rf "${OUT:?}/$name"
  run_limited "$name" "$T_GPTRUN" env "${envs[@]}" "$GPTRUN" "$@" --data "$DATA" \
    --steps "$NCCL_STEPS" --seed "$SEED" --no-progress --log-dir "$OUT/$name" --no-checkpoint \
    > "$OUT/gptrun_$name.log" 2>&1
  local rc=$?
  grep -E "^gptrun: (target|[0-9]+ data-parallel)|^step 1/|^step $NCCL_STEPS/" "$OUT/gptrun_$name.log"
  ((rc == 0)) || tail -n 3 "$OUT/gptrun_$name.log"
  return $rc
}

# compare NAME: every step's loss within NCCL_TOL of plain's.
compare() {
  python3 - "$OUT/plain/log.csv" "$OUT/$1/log.csv" "$NCCL_TOL" "$NCCL_STEPS" << 'PY'
import csv, sys
def losses(path):
    with open(path) as f:
        return [float(r["loss"]) for r in csv.DictReader(f) if r["kind"] == "train"]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
tol, steps = float(sys.argv[3]), int(sys.argv[4])
if len(a) != steps or len(b) != steps:
    sys.exit(f"  {len(a)} and {len(b)} steps logged, not {steps}")
worst = max(abs(x - y) / max(abs(x), 1e-30) for x, y in zip(a, b))
same = sum(x == y for x, y in zip(a, b))
print(f"  {steps} steps: {same} bit-identical, max relative loss difference {worst:.3g} (tolerance {tol:g})")
print(f"  first {a[0]:.7f} / {b[0]:.7f}, last {a[-1]:.7f} / {b[-1]:.7f}")
sys.exit(0 if worst <= tol else 1)
PY
}

check() { # NAME: compare against plain, recording the verdict
  if [ ! -f "$OUT/plain/log.csv" ] || [ ! -f "$OUT/$1/log.csv" ]; then
    set_status "$1-losses" "not measured"
    FAILS+=("$1")
  elif compare "$1"; then
    set_status "$1-losses" "PASS"
  else
    set_status "$1-losses" "FAIL"
    FAILS+=("$1")
  fi
}

if [ ! -x "$GPTRUN" ] || [ ! -f "$TRAIN_FB" ] || [ ! -f "$NCCL_FB" ]; then
  echo "no $GPTRUN, $TRAIN_FB or $NCCL_FB: run bench/device/build_artifacts.sh here first"
  FAILS+=(inputs)
else
  gptrun_run plain -- "$TRAIN_FB" --no-graph # graphs are gptrun's default
  gptrun_run gpus1 -- "$NCCL_FB" --gpus 1 --no-graph
  check gpus1
  gptrun_run graph -- "$NCCL_FB" --gpus 1 --graph
  check graph
  gptrun_run launcher RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29611 \
    -- "$NCCL_FB" --no-graph
  check launcher

  banner "errors"
  "$GPTRUN" "$TRAIN_FB" --data "$DATA" --gpus 2 > "$OUT/gptrun_errors.log" 2>&1
  rc=$?
  cat "$OUT/gptrun_errors.log"
  if [ $rc = 1 ] && grep -q -- "was compiled for one device" "$OUT/gptrun_errors.log"; then
    set_status errors PASS
  else
    set_status errors "FAIL (rc=$rc)"
    FAILS+=(errors)
  fi

  if [ -f "$NCCL_WS2_FB" ]; then
    gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU')
    if ((gpus < 2)); then
      banner "ws2: one GPU"
      "$GPTRUN" "$NCCL_WS2_FB" --data "$DATA" --gpus 2 > "$OUT/gptrun_ws2.log" 2>&1
      rc=$?
      cat "$OUT/gptrun_ws2.log"
      if [ $rc = 1 ] && grep -q -- "--gpus 2 needs 2 GPUs, but cudaGetDeviceCount found" "$OUT/gptrun_ws2.log"; then
        set_status ws2 "PASS (the GPU count error)"
      else
        set_status ws2 "FAIL (rc=$rc)"
        FAILS+=(ws2)
      fi
    else
      gptrun_run ws2 -- "$NCCL_WS2_FB" --gpus 2 || FAILS+=(ws2)
    fi
  fi
fi

echo
echo "=== stages ($(($(date +%s) - START)) s) ==="
for k in "${ORDER[@]}"; do printf '  %-16s %s\n' "$k" "${STATUS[$k]}"; done
if ((${#FAILS[@]})); then
  echo "nccl: FAIL (${FAILS[*]})"
else
  echo "nccl: PASS"
fi
exec 1>&- 2>&-
wait "$TEE_PID" 2> /dev/null
exit 0
