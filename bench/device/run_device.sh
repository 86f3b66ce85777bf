#!/usr/bin/env bash
# bench/device/run_device.sh: everything one device call can measure, in one go.
#
# Run from the repo root on the GPU machine, with $OUT set (the device
# tool's output folder), e.g. through the device tool:
#   run(command="bash bench/device/run_device.sh", timeout_s=600,
#       carry=["data/austen_train.bin", "data/austen_val.bin", "bench/artifacts"])
#
# Stages (each one's failure is reported and the next stage still runs; each
# has a time limit, all inside BUDGET_S seconds from the start):
#   env     GPU, driver, torch; init_counter (torch, CPU + CUDA) vs the scalar
#           reference (bench/twin/test_counter_normal.py --torch)
#   build   bash scripts/device-build.sh -> build-device/bin/gptrun (runtime half)
#   parity  PARITY_* config (bench/device/configs.sh): fp32, TF32 off, same @init and
#           batches; gptrun PARITY_FB vs train_torch eager; both loss columns and
#           the max relative difference (target <= PARITY_TOL)
#   train   gptrun TRAIN_FB: TRAIN_STEPS steps of TRAIN_MODEL B=TRAIN_B T=TRAIN_T on
#           TRAIN_DATA; its step times are ours in the speed table
#   speed   train_torch eager and torch.compile on the same model, batch, data and
#           schedule, in SPEED_DTYPE/SPEED_TF32
#   bf16    the same two in bf16 autocast, TORCH_BF16_STEPS steps (the numbers to
#           beat), unless SPEED_DTYPE is already bf16
# Then bench/twin/compare.py report prints the tables and writes into $OUT:
#   run_device.log  everything printed      build.log        device build output
#   gptrun_parity.log, gptrun_train.log     gptrun's stdout
#   results.json    every run's summary     results.md       tables for bench/results/
#   steps.csv       run, step, loss, grad_norm, lr, ms
#
# Knobs (environment): everything in bench/device/configs.sh, plus
#   STAGES=env,build,parity,train,speed,bf16   which stages to run
#   BUDGET_S=570       whole-script deadline (the device call allows 600)
#   BUILD_TIMEOUT=240 T_PARITY=150 T_TRAIN=240 T_EAGER=150 T_COMPILE=240
#   T_BF16_EAGER=90 T_BF16_COMPILE=180   per-stage limits (capped by time left)
#   GPTRUN=build-device/bin/gptrun   GPTRUN_ARGS=   GPTRUN_PARITY_ARGS=   GPTRUN_VAL=1
#   OURS_DTYPE=fp32 OURS_TF32=?      what the .fb computes in (for the table)
#   TORCH_DEVICE=cuda  ATTENTION=sdpa  COMPILE_MODE=default  PYTHON=python3
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
START=$(date +%s)
BUDGET_S=${BUDGET_S:-570}
DEADLINE=$((START + BUDGET_S))
RESERVE_S=${RESERVE_S:-15}      # kept for the report at the end
MIN_STAGE_S=${MIN_STAGE_S:-20}  # a stage with less time than this is skipped

OUT=${OUT:-out/device}
mkdir -p "$OUT"
WORK=${WORK:-/tmp/gptc-bench}
rm -rf "$WORK"
mkdir -p "$WORK"
exec > >(tee -a "$OUT/run_device.log") 2>&1
TEE_PID=$!

# Never NVLink multicast (device README); nothing here changes GPU settings.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1

# shellcheck source=bench/device/configs.sh
source bench/device/configs.sh
STAGES=${STAGES:-env,build,parity,train,speed,bf16}
PY=${PYTHON:-python3}
GPTRUN=${GPTRUN:-build-device/bin/gptrun}
GPTRUN_ARGS=${GPTRUN_ARGS:-}
GPTRUN_PARITY_ARGS=${GPTRUN_PARITY_ARGS:-}
GPTRUN_VAL=${GPTRUN_VAL:-1}   # 1: the train run also validates (--val VAL_DATA --val-batches 4)
OURS_DTYPE=${OURS_DTYPE:-fp32}
OURS_TF32=${OURS_TF32:-?}
TORCH_DEVICE=${TORCH_DEVICE:-cuda}
ATTENTION=${ATTENTION:-sdpa}
COMPILE_MODE=${COMPILE_MODE:-default}
# Per-stage limits in seconds (each also capped by the time left).
BUILD_TIMEOUT=${BUILD_TIMEOUT:-240}
T_PARITY=${T_PARITY:-150}          # each of torch and gptrun
T_TRAIN=${T_TRAIN:-240}            # gptrun, TRAIN_STEPS steps
T_EAGER=${T_EAGER:-150}
T_COMPILE=${T_COMPILE:-240}        # includes the cold torch.compile
T_BF16_EAGER=${T_BF16_EAGER:-90}
T_BF16_COMPILE=${T_BF16_COMPILE:-180}
MANIFEST=$ARTIFACTS/manifest.json

# shellcheck source=bench/device/stages.sh
source bench/device/stages.sh
# Whether STAGES lists stage $1 (lost when stages.sh took the bookkeeping).
have_stage() { [[ ",$STAGES," == *",$1,"* ]]; }

# GPU memory samples (MiB, every 250 ms) during a run: WORK/NAME.smi.
SMI_PID=""
smi_start() {
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi -i 0 --query-gpu=memory.used --format=csv,noheader,nounits -lms 250 \
      > "$WORK/$1.smi" 2> /dev/null &
    SMI_PID=$!
  fi
}
smi_stop() {
  if [ -n "$SMI_PID" ]; then
    kill "$SMI_PID" 2> /dev/null
    wait "$SMI_PID" 2> /dev/null
    SMI_PID=""
  fi
}

# A token file, or (if it is missing) seeded random tokens so that the runs
# can still be compared: prints the path to use.
data_or_random() { # path ntokens
  if [ -f "$1" ]; then
    echo "$1"
    return
  fi
  local f
  f="$WORK/random_$(basename "$1")"
  "$PY" - "$f" "$2" "$SEED" << 'EOF'
import random, struct, sys
path, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
toks = [rng.randrange(50257) for _ in range(n)]
with open(path, "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack(f"<{n}H", *toks))
EOF
  echo "missing $1: using $2 random tokens in $f" >&2
  echo "$f"
}

torch_run() { # NAME WANT_S TORCH_ARGS...: train_torch.py -> WORK/NAME.json
  local name=$1 want=$2
  shift 2
  local t
  t=$(left)
  ((t > want)) && t=$want
  smi_start "$name"
  # --time-limit ends the run (with its summary) 15 s before the hard timeout.
  run_limited "$name" "$want" "$PY" bench/twin/train_torch.py --device "$TORCH_DEVICE" \
    --json "$WORK/$name.json" --time-limit $((t > 30 ? t - 15 : t)) "$@"
  local rc=$?
  smi_stop
  return $rc
}

gptrun_run() { # NAME WANT_S LOG FB DATA STEPS EXTRA_ARGS
  local name=$1 want=$2 log=$3 fb=$4 data=$5 steps=$6 extra=$7
  if [ ! -x "$GPTRUN" ]; then
    set_status "$name" "skipped (no $GPTRUN)"
    return 99
  fi
  if [ ! -f "$fb" ]; then
    set_status "$name" "skipped (no $fb: run bench/device/build_artifacts.sh on the CPU side and carry bench/artifacts)"
    return 99
  fi
  smi_start "$name"
  echo "[$name] $GPTRUN $fb --data $data --steps $steps --seed $SEED $GPTRUN_ARGS $extra > $log"
  # shellcheck disable=SC2086
  run_limited "$name" "$want" "$GPTRUN" "$fb" --data "$data" --steps "$steps" --seed "$SEED" \
    $GPTRUN_ARGS $extra > "$log" 2>&1
  local rc=$?
  smi_stop
  cat "$log"
  return $rc
}

gptrun_summary() { # NAME LOG MODEL B T ACCUM EXE LABEL RUN: WORK/NAME.json (+ RUN's .smi)
  [ -f "$WORK/$9.smi" ] && mv "$WORK/$9.smi" "$WORK/$1.smi"
  "$PY" bench/twin/compare.py gptrun-log "$2" -o "$WORK/$1.json" --label "${8:-gptc (ours)}" \
    --model "$3" --batch "$4" --seq "$5" --accum "$6" --dtype "$OURS_DTYPE" --tf32 "$OURS_TF32" \
    --timing-warmup "$TIMING_WARMUP" --manifest "$MANIFEST" --exe "$7" ||
    echo "[$1] no step lines in $2"
}

accum_of() { # an *_OPT string -> its --accum-steps
  local a
  a=$(sed -n 's/.*--accum-steps[= ]\([0-9]*\).*/\1/p' <<< "$1")
  echo "${a:-1}"
}

# ------------------------------------------------------------------- env
banner "env"
echo "date $(date -u '+%Y-%m-%d %H:%M:%S UTC'), host $(hostname), budget ${BUDGET_S} s"
echo "stages: $STAGES"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
"$PY" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.get_device_name() if torch.cuda.is_available() else None)'
if [ -f "$MANIFEST" ]; then
  echo "executables ($MANIFEST):"
  "$PY" - "$MANIFEST" "$PARITY_MODEL" "$PARITY_B" "$PARITY_T" "$PARITY_OPT" \
    "$TRAIN_MODEL" "$TRAIN_B" "$TRAIN_T" "$TRAIN_OPT" << 'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
want = {"parity": sys.argv[2:6], "train": sys.argv[6:10]}
print("  built from commit", m.get("commit"), "on", m.get("date"), "by", m.get("gptc_version"))
for k, v in m.get("executables", {}).items():
    print(f"  {k}: {v['file']} {v['model']} B={v['batch']} T={v['seq']} {v['opt']} "
          f"({v['bytes']:,} bytes, gptc {v['gptc_s']:.1f} s)")
    if k in want:
        model, b, t, opt = want[k]
        have = [v["model"], str(v["batch"]), str(v["seq"]), v["opt"].split()]
        if have != [model, b, t, opt.split()]:
            print(f"  WARNING: {k} was compiled for {have[:3]} {v['opt']!r}, but this run's "
                  f"PyTorch side uses {[model, b, t]} {opt!r}: rebuild the artifacts or "
                  "set the same variables")
EOF
else
  echo "no $MANIFEST: no precompiled executables were carried"
fi
for f in "$PARITY_FB" "$TRAIN_FB"; do
  [ -f "$f" ] && echo "  $f: identifier '$(head -c 8 "$f" | tail -c 4)' (want GPTX)"
done
if have_stage env; then
  run_limited counter_normal 120 "$PY" bench/twin/test_counter_normal.py --torch
fi

# ------------------------------------------------------------------- build
if have_stage build; then
  banner "build (scripts/device-build.sh)"
  if [ -f scripts/device-build.sh ]; then
    run_limited build "$BUILD_TIMEOUT" bash scripts/device-build.sh > "$OUT/build.log" 2>&1
    tail -n 25 "$OUT/build.log"
  else
    set_status build "skipped: scripts/device-build.sh does not exist yet (PyTorch stages only)"
  fi
  if [ -x "$GPTRUN" ]; then
    echo "gptrun: $GPTRUN"
    timeout 10 "$GPTRUN" --version 2>&1 | head -n 3
  else
    echo "gptrun: $GPTRUN is missing: the gptrun stages are skipped"
  fi
fi

# ------------------------------------------------------------------- parity
if have_stage parity; then
  banner "parity: $PARITY_MODEL B=$PARITY_B T=$PARITY_T, $PARITY_STEPS steps, fp32, TF32 off"
  pacc=$(accum_of "$PARITY_OPT")
  pdata=$(data_or_random "$PARITY_DATA" $((PARITY_STEPS * pacc * PARITY_B * PARITY_T + 1)))
  # shellcheck disable=SC2086
  torch_run parity_torch "$T_PARITY" --model "$PARITY_MODEL" --batch "$PARITY_B" --seq "$PARITY_T" \
    --steps "$PARITY_STEPS" --data "$pdata" $PARITY_OPT --init counter --seed "$SEED" \
    --mode eager --dtype fp32 --tf32 off --attention math --adamw exact \
    --timing-warmup 2 --label "torch eager (fp32 ref)"
  if gptrun_run parity_gptrun "$T_PARITY" "$OUT/gptrun_parity.log" "$PARITY_FB" "$pdata" \
    "$PARITY_STEPS" "$GPTRUN_PARITY_ARGS"; [ -s "$OUT/gptrun_parity.log" ]; then
    gptrun_summary parity_ours "$OUT/gptrun_parity.log" "$PARITY_MODEL" "$PARITY_B" \
      "$PARITY_T" "$pacc" parity "gptrun" parity_gptrun
  fi
  if [ -f "$WORK/parity_ours.json" ] && [ -f "$WORK/parity_torch.json" ]; then
    "$PY" bench/twin/compare.py parity "$WORK/parity_ours.json" "$WORK/parity_torch.json" \
      --tol "$PARITY_TOL"
    case $? in
      0) set_status parity "PASS" ;;
      *) set_status parity "FAIL (see the table)" ;;
    esac
  fi
fi

# ------------------------------------------------------------------- train (gptrun)
tacc=$(accum_of "$TRAIN_OPT")
tdata=""
if have_stage train || have_stage speed || have_stage bf16; then
  tdata=$(data_or_random "$TRAIN_DATA" $((TRAIN_STEPS * tacc * TRAIN_B * TRAIN_T + 1)))
fi
if have_stage train; then
  banner "train: gptrun $TRAIN_MODEL B=$TRAIN_B T=$TRAIN_T, $TRAIN_STEPS steps on $tdata"
  gval=""
  if [ "$GPTRUN_VAL" != 0 ] && [ -f "$VAL_DATA" ]; then
    gval="--val $VAL_DATA --val-batches 4"
  fi
  gptrun_run train_gptrun "$T_TRAIN" "$OUT/gptrun_train.log" "$TRAIN_FB" "$tdata" "$TRAIN_STEPS" "$gval"
  if [ -n "$gval" ] && grep -q -- "--val needs program" "$OUT/gptrun_train.log" 2> /dev/null; then
    echo "[train_gptrun] the executable has no 'forward' program: again without --val"
    gptrun_run train_gptrun "$T_TRAIN" "$OUT/gptrun_train.log" "$TRAIN_FB" "$tdata" "$TRAIN_STEPS" ""
  fi
  if [ -s "$OUT/gptrun_train.log" ]; then
    gptrun_summary train_ours "$OUT/gptrun_train.log" "$TRAIN_MODEL" "$TRAIN_B" "$TRAIN_T" \
      "$tacc" train "gptc (ours)" train_gptrun
  fi
fi

# ------------------------------------------------------------------- speed (torch)
val_args=()
[ -f "$VAL_DATA" ] && val_args=(--val-data "$VAL_DATA" --val-batches 4)
common=(--model "$TRAIN_MODEL" --batch "$TRAIN_B" --seq "$TRAIN_T" --init counter
  --seed "$SEED" --attention "$ATTENTION" --timing-warmup "$TIMING_WARMUP" --quiet)
if have_stage speed; then
  banner "speed: torch eager and torch.compile, $SPEED_DTYPE (tf32 $SPEED_TF32), $SPEED_STEPS steps"
  # shellcheck disable=SC2086
  torch_run speed_eager "$T_EAGER" "${common[@]}" --steps "$SPEED_STEPS" --data "$tdata" $TRAIN_OPT \
    --mode eager --dtype "$SPEED_DTYPE" --tf32 "$SPEED_TF32" "${val_args[@]}" --label "torch eager"
  # shellcheck disable=SC2086
  torch_run speed_compile "$T_COMPILE" "${common[@]}" --steps "$SPEED_STEPS" --data "$tdata" $TRAIN_OPT \
    --mode compile --compile-mode "$COMPILE_MODE" --dtype "$SPEED_DTYPE" --tf32 "$SPEED_TF32" \
    "${val_args[@]}" --label "torch.compile"
fi
if have_stage bf16 && [ "$SPEED_DTYPE" != bf16 ] && [ "$TORCH_BF16_STEPS" -gt 0 ]; then
  banner "bf16: torch eager and torch.compile in bf16 autocast, $TORCH_BF16_STEPS steps"
  # shellcheck disable=SC2086
  torch_run bf16_eager "$T_BF16_EAGER" "${common[@]}" --steps "$TORCH_BF16_STEPS" --data "$tdata" $TRAIN_OPT \
    --mode eager --dtype bf16 --tf32 on --label "torch eager bf16"
  # shellcheck disable=SC2086
  torch_run bf16_compile "$T_BF16_COMPILE" "${common[@]}" --steps "$TORCH_BF16_STEPS" --data "$tdata" $TRAIN_OPT \
    --mode compile --compile-mode "$COMPILE_MODE" --dtype bf16 --tf32 on --label "torch.compile bf16"
fi

# ------------------------------------------------------------------- report
banner "report"
stage_lines=()
for k in "${ORDER[@]}"; do stage_lines+=("$k=${STATUS[$k]}"); done
"$PY" - "$WORK/env.json" "$MANIFEST" "$(($(date +%s) - START))" "${stage_lines[@]}" << 'EOF'
import json, os, subprocess, sys, time
out, manifest, elapsed, stages = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:
        return ""
env = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
       "command": "bash bench/device/run_device.sh" + (f" (STAGES={os.environ['STAGES']})" if os.environ.get("STAGES") else ""),
       "elapsed_s": int(elapsed),
       "gpu": sh("nvidia-smi -i 0 --query-gpu=name,memory.total --format=csv,noheader"),
       "driver": sh("nvidia-smi -i 0 --query-gpu=driver_version --format=csv,noheader"),
       "stages": dict(s.split("=", 1) for s in stages)}
try:
    import torch
    env["torch"], env["cuda"] = torch.__version__, torch.version.cuda
except Exception as e:
    env["torch"] = f"not importable: {e}"
commit = sh("git rev-parse --short HEAD 2>/dev/null")
if os.path.exists(manifest):
    m = json.load(open(manifest))
    commit = commit or m.get("commit", "?")
    env["manifest"] = m
    env["manifest_summary"] = "; ".join(
        f"{k}: {os.path.basename(v['file'])} (gptc {m.get('commit', '?')[:12]}, {v['gptc_s']:.1f} s)"
        for k, v in m.get("executables", {}).items())
env["commit"] = commit or "unknown"
json.dump(env, open(out, "w"), indent=1)
EOF
"$PY" bench/twin/compare.py report --work "$WORK" --out "$OUT" --tol "$PARITY_TOL"

echo
echo "=== stages ($(($(date +%s) - START)) s) ==="
for k in "${ORDER[@]}"; do printf '  %-16s %s\n' "$k" "${STATUS[$k]}"; done
echo "files in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
exec 1>&- 2>&-
wait "$TEE_PID" 2> /dev/null
exit 0
