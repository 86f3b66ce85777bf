#!/usr/bin/env bash
# bench/device/run_honest.sh: issue 48's honest sweep, device side. For each size
# in SIZES, on one GPU in one call, with the same model, batch, T=1024 and
# padded vocabulary (50304):
#   gptc bf16, gptc fp8 (default recipe, and the best recipe)   gptrun on build_honest.sh's executables
#   torch.compile bf16                                            bench/twin/train_torch.py --mode compile --dtype bf16
#   torch.compile + torchao float8 tensorwise, and rowwise        ... --float8 tensorwise|rowwise (torchao v0.17.0, carried)
#   llm.c bf16 with cuDNN attention                               train_gpt2cu (built on the CPU machine, carried)
# and the speed-of-light bounds (bench/probes/sol.py), then one table with
# each gptc row against the best peer of its precision (bench/tools/honest_report.py).
#
# CPU side first (the executables, gptrun, torchao's Python source, llm.c):
#   /work/bin/nj gptc gptrun && bash bench/device/build_honest.sh
# Device side, one call per pair of sizes (~570 s each; torch.compile's cold
# compiles are most of it: 27-116 s per size in earlier calls, and torchao's
# float8 graphs compile again):
#   run(command="SIZES='124M 350M' bash bench/device/run_honest.sh", timeout_s=600,
#       carry=["bench/artifacts/honest/bin", "bench/artifacts/honest/124M", "bench/artifacts/honest/350M",
#              "bench/artifacts/peers", "data/austen_train.bin", "data/austen_val.bin", "build-deps"])
#   run(command="SIZES='774M 1558M' bash bench/device/run_honest.sh", timeout_s=600,
#       carry=["bench/artifacts/honest/bin", "bench/artifacts/honest/774M", "bench/artifacts/honest/1558M",
#              "bench/artifacts/peers", "data/austen_train.bin", "data/austen_val.bin", "build-deps"])
# Carry only the call's sizes: the executables of all four (~43 MiB) with the
# peers (~13 MiB: torchao's Python 5.4, llm.c's binary 3.4 and its sources
# with the cuDNN frontend headers 3.5) and the tree reach the 64 MiB limit.
# build-deps only for the fallback device build of gptrun (bash
# scripts/device-build.sh --pack makes it). The two large sizes may not all fit in one
# call: the stages run in priority order across the sizes (every gptc run,
# then llm.c, torch.compile bf16, torchao tensorwise, the bounds, torchao
# rowwise), each under a limit taken from what is left of BUDGET_S, so a call
# cut short loses the least important runs, and says which. RUNS picks
# stages (default: "gptc llmc torch tensorwise sol rowwise"; "profile" adds
# GPTC_PROFILE's per-kernel split of gptc's step, 2 steps each of bf16 and
# the best fp8, "ncu" the same split from ncu's kernel durations, without
# launch overhead: where the step's time beyond the bound goes); e.g. a second call RUNS="rowwise" SIZES="774M 1558M" on the
# same warm machine, whose $OUT/logs.tar.gz merges with the first's:
#   python3 bench/tools/honest_report.py --work call1/ --work call2/
# The speed-of-light table alone (item 2; gptc's times come from the same
# call): RUNS="gptc sol ncu" SIZES="124M 350M 774M 1558M" (~450-500 s by
# estimate: 12 gptrun runs, 4 sol.py runs, 8 ncu runs).
#
# Steps: HONEST_STEPS (12) per run, the median of the last 10 (HONEST_WARMUP=2
# left out: gptrun's first step times cuBLASLt's candidates, --gemm-algos;
# torch's compiles; llm.c's builds cuDNN plans).
# DRY_RUN=1: no GPU needed. Every runner is a stand-in that prints its real
# command line and fakes its output in the real format (sol.py runs with
# --fake-rates), so the parsing, the time guards, the report and $OUT are
# exercised; the numbers are made up.
# $OUT: run_honest.log, honest_table.md, honest.json, logs.tar.gz (every
# run's log and JSON, sol-*.json, gemm-algos files), rewritten after each stage.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
START=$(date +%s)
BUDGET_S=${BUDGET_S:-570}
DEADLINE=$((START + BUDGET_S))
OUT=${OUT:-out/device}
WORK=${WORK:-/tmp/gptc-honest}
LOGS=$WORK/logs RUNSD=$WORK/runs
mkdir -p "$OUT"
rm -rf "$LOGS" "$RUNSD" && mkdir -p "$LOGS" "$RUNSD"
exec > >(tee -a "$OUT/run_honest.log") 2>&1
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 TORCHAO_FORCE_SKIP_LOADING_SO_FILES=1
# shellcheck source=bench/device/configs.sh
source bench/device/configs.sh
HONEST_DIR=${HONEST_DIR:-bench/artifacts/honest}
PEERS_DIR=${PEERS_DIR:-bench/artifacts/peers}
SIZES=${SIZES:-124M 350M}
RUNS=${RUNS:-gptc llmc torch tensorwise sol rowwise}
STEPS=${HONEST_STEPS:-12}
WARMUP=${HONEST_WARMUP:-2}
DRY_RUN=${DRY_RUN:-0}
# torchao converts every block linear layer (all: gptc's FP8 recipe's set), or
# only those its size heuristic picks (auto: _auto_filter_for_recipe, which
# at 124M keeps most of them bf16).
FLOAT8_FILTER=${FLOAT8_FILTER:-all}
DATA=$PWD/$TRAIN_DATA VAL=$PWD/$VAL_DATA
PY=${PYTHON:-python3}
TRAIN_TORCH=bench/twin/train_torch.py
RESERVE_S=10
# shellcheck source=bench/device/stages.sh
source bench/device/stages.sh

batch_of() { case $1 in 124M) echo 64 ;; 350M) echo 32 ;; *) echo 16 ;; esac; }
depth_of() { case $1 in 124M) echo 12 ;; 350M) echo 24 ;; 774M) echo 36 ;; 1558M) echo 48 ;; esac; }
# Seconds a stage may take (its limit) and the least worth starting it with:
# torch.compile's first step compiles (cold: 42-116 s from 124M to 1558M in
# earlier calls; torchao's float8 graph is larger).
want_of() {
  local kind=$1 model=$2 i
  case $model in 124M) i=0 ;; 350M) i=1 ;; 774M) i=2 ;; *) i=3 ;; esac
  local -a w
  case $kind in
    gptc) w=(45 45 60 75) ;;
    llmc) w=(60 70 90 150) ;;
    torch) w=(130 150 180 240) ;;
    tensorwise | rowwise) w=(160 180 220 290) ;;
    sol) w=(60 60 70 90) ;;
    profile) w=(40 40 50 60) ;;
    ncu) w=(60 70 90 120) ;;
  esac
  echo "${w[$i]}"
}
min_of() {
  local kind=$1 model=$2 i
  case $model in 124M) i=0 ;; 350M) i=1 ;; 774M) i=2 ;; *) i=3 ;; esac
  local -a m
  case $kind in
    gptc) m=(20 20 25 30) ;;
    llmc) m=(30 35 45 70) ;;
    torch) m=(60 70 90 130) ;;
    tensorwise | rowwise) m=(75 90 115 160) ;;
    sol) m=(25 25 30 40) ;;
    profile) m=(15 15 20 25) ;;
    ncu) m=(25 30 35 45) ;;
  esac
  echo "${m[$i]}"
}
# run_stage NAME KIND MODEL CMD...: CMD under run_limited unless less than
# min_of is left (then recorded as skipped).
run_stage() {
  local name=$1 kind=$2 model=$3
  shift 3
  local need
  need=$(min_of "$kind" "$model")
  if (($(left) < need)); then
    set_status "$name" "skipped ($(left) s left, needs ~$need s)"
    return 99
  fi
  run_limited "$name" "$(want_of "$kind" "$model")" "$@"
}

report() {
  "$PY" bench/tools/honest_report.py --work "$RUNSD" --md "$OUT/honest_table.md" --json "$OUT/honest.json" > "$WORK/table.md" 2> "$WORK/report.err"
  cp "$RUNSD"/*.json "$LOGS/" 2> /dev/null
  tar czf "$OUT/logs.tar.gz" -C "$LOGS" . 2> /dev/null
}

# --- dry-run stand-ins ----------------------------------------------------------
make_fakes() {
  local d=$WORK/fake
  mkdir -p "$d"
  cat > "$d/gptrun" <<'EOF'
#!/usr/bin/env python3
# DRY_RUN stand-in for gptrun: its step and pools lines, made-up numbers.
import sys, random
a = sys.argv[1:]
steps = int(a[a.index("--steps") + 1]) if "--steps" in a else 10
fb = a[0]
base = {"124M": 100.0, "350M": 130.0, "774M": 140.0, "1558M": 250.0}
ms = next((v for k, v in base.items() if f"-{k}-" in fb), 100.0) * (1.25 if fb.endswith("bf16.fb") else 1.0)
print(f"gptrun (DRY_RUN stand-in): {' '.join(a)}")
print("gptrun: target cuda on none; pools: params 474.8 MiB, activations 20.1 GiB; total 28.4 GiB")
for i in range(1, steps + 1):
    t = ms * (30 if i == 1 else 1) * random.uniform(0.99, 1.01)
    print(f"step {i}/{steps} | loss {11 - 0.3 * i:.4f} | norm {1.5:.4f} | lr {6e-4 * i / 20:.4e} | {t:.2f} ms | {65536 / t * 1e3:.0f} tok/s | MFU 50.0%")
print(f"gptrun: steps 2-{steps}: {ms:.1f} ms/step")
EOF
  cat > "$d/train_gpt2cu" <<'EOF'
#!/usr/bin/env python3
# DRY_RUN stand-in for llm.c's train_gpt2cu: its step lines, made-up numbers
# (FAKE_LLMC_OOM=1: an out-of-memory exit with -r 0).
import os, sys, random
a = sys.argv[1:]
opt = {a[i]: a[i + 1] for i in range(0, len(a) - 1, 2)}
steps = int(opt.get("-x", 10))
ms = {"d12": 120.0, "d24": 160.0, "d36": 175.0, "d48": 340.0}.get(opt.get("-e"), 100.0)
print(f"train_gpt2cu (DRY_RUN stand-in): {' '.join(a)}")
if opt.get("-r") == "0" and os.environ.get("FAKE_LLMC_OOM") == "1":
    sys.exit("llm.c: out of device memory allocating 123456 bytes")
print("device memory usage: 30123 MiB / 81559 MiB")
print("val loss 11.0123")
for i in range(1, steps + 1):
    t = ms * (3 if i == 1 else 1) * random.uniform(0.99, 1.01)
    print(f"step {i:4d}/{steps} | loss {11 - 0.3 * i:7.6f} (+nanz)| norm {1.5:6.4f} (+nanz)| lr {6e-4:.2e} | {t:.2f} ms | 40.0% bf16 MFU | 500000 tok/s")
print(f"total average iteration time: {ms:f} ms")
EOF
  cat > "$d/train_torch.py" <<'EOF'
#!/usr/bin/env python3
# DRY_RUN stand-in for bench/twin/train_torch.py: a summary JSON, made-up numbers.
import argparse, json, sys
p = argparse.ArgumentParser()
for k in ("--model", "--json", "--label", "--float8", "--mode", "--dtype"):
    p.add_argument(k, default="")
p.add_argument("--batch", type=int)
p.add_argument("--seq", type=int, default=1024)
p.add_argument("--steps", type=int, default=10)
a, _ = p.parse_known_args()
print(f"train_torch (DRY_RUN stand-in): {' '.join(sys.argv[1:])}")
ms = {"124M": 140.0, "350M": 174.0, "774M": 190.0, "1558M": 355.0}[a.model] * (0.9 if a.float8 else 1.0)
f8 = {"recipe": a.float8, "filter": "all", "converted": 48, "of": 48} if a.float8 else None
json.dump({"runner": "torch", "label": a.label, "model": a.model, "batch": a.batch, "seq": a.seq,
           "accum_steps": 1, "steps": a.steps, "timed_steps": a.steps - 2, "median_ms": ms,
           "compile_s": 40.0, "peak_mem_gib": 30.0, "final_loss": 7.9, "float8": f8,
           "device_name": "none (DRY_RUN)", "torch": "none"}, open(a.json, "w"))
EOF
  chmod +x "$d/gptrun" "$d/train_gpt2cu" "$d/train_torch.py"
  GPTRUN=$d/gptrun LLMC=$d/train_gpt2cu TRAIN_TORCH=$d/train_torch.py
}

# --- env ---------------------------------------------------------------------------
banner "env: SIZES='$SIZES' RUNS='$RUNS' STEPS=$STEPS WARMUP=$WARMUP DRY_RUN=$DRY_RUN BUDGET_S=$BUDGET_S"
git log -1 --format='commit %H %s' 2> /dev/null | cut -c1-120
for model in $SIZES; do sed "s/^/$model executables compiled at /" "$HONEST_DIR/$model/commit.txt" 2> /dev/null; done
cat "$PEERS_DIR/peers.txt" 2> /dev/null
[ -f "$DATA" ] || { echo "run_honest: no $DATA (carry data/austen_train.bin)"; exit 1; }
# Absolute: llm.c runs with its working directory in $WORK/llmc.
LLMC=$(realpath -m "$PEERS_DIR/llmc/train_gpt2cu")
LLMC_LD=""
if [ "$DRY_RUN" = 1 ]; then
  make_fakes
  echo "DRY_RUN: stand-ins in $WORK/fake (gptrun, train_gpt2cu, train_torch.py); sol.py --fake-rates"
else
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), torch.cuda.get_device_name())'
  # torchao from the carried source (pure Python float8 training).
  PYTHONPATH=$PEERS_DIR/torchao${PYTHONPATH:+:$PYTHONPATH} "$PY" -c '
import os, torchao, torchao.float8 as f
from torchao.float8 import Float8LinearConfig, convert_to_float8_training
print("torchao", open(os.path.join(os.path.dirname(torchao.__file__), "..", "version.txt")).read().strip(),
      "from", os.path.dirname(torchao.__file__), "| recipes:", [r.value for r in f.Float8LinearRecipeName])' 2>&1 | tail -n 3 ||
    echo "run_honest: torchao does not import: the float8 rows will fail (see above)"
  # shellcheck source=bench/device/runtime.sh
  source bench/device/runtime.sh
  ARTIFACTS=$HONEST_DIR pick_runtime
  if [ ! -x "$GPTRUN" ]; then
    run_limited build 200 bash scripts/device-build.sh > "$LOGS/build.log" 2>&1
    tail -n 2 "$LOGS/build.log"
  fi
  # llm.c: the cuDNN (and NVRTC, cuBLAS) that PyTorch ships, for the carried binary.
  LLMC_LD=$("$PY" - <<'EOF'
import glob, os, site
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = [os.path.join(p, "nvidia") for p in site.getsitepackages()]
dirs = []
for pat in ("libcudnn.so.9", "libnvrtc.so.1*", "libcublasLt.so.1*"):
    for r in roots:
        for f in sorted(glob.glob(os.path.join(r, "**", pat), recursive=True)):
            if os.path.dirname(f) not in dirs:
                dirs.append(os.path.dirname(f))
print(":".join(dirs))
EOF
  )
  echo "llm.c libraries: ${LLMC_LD:-none found in the nvidia packages of torch}"
  if [[ " $RUNS " == *" llmc "* ]]; then
    if [ ! -x "$LLMC" ] || LD_LIBRARY_PATH=$LLMC_LD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd "$LLMC" | grep -q "not found"; then
      [ -x "$LLMC" ] && LD_LIBRARY_PATH=$LLMC_LD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd "$LLMC" | grep "not found"
      # Fallback: build here, against the cuDNN headers and library of torch's wheel.
      echo "run_honest: the carried train_gpt2cu does not load here; building llm.c on the device"
      b=/tmp/gptc-llmc
      rm -rf "$b" && mkdir -p "$b/lib" && cp -r "$PEERS_DIR/llmc/src/." "$b/"
      cudnn_dir=""
      IFS=: read -ra lds <<< "$LLMC_LD"
      for d in "${lds[@]}"; do [ -z "$cudnn_dir" ] && [ -e "$d/libcudnn.so.9" ] && cudnn_dir=$d; done
      ln -sf "$cudnn_dir/libcudnn.so.9" "$b/lib/libcudnn.so"
      run_limited llmc-build 240 make -C "$b" train_gpt2cu USE_CUDNN=1 GPU_COMPUTE_CAPABILITY=90 NO_MULTI_GPU=1 NO_USE_MPI=1 NO_OMP=1 \
        "NVCC_LDFLAGS=-L$b/lib -L$cudnn_dir -lcublas -lcublasLt -lcudnn -lnvrtc" \
        "NVCC_INCLUDES=-Icudnn-frontend/include -I$cudnn_dir/../include" > "$LOGS/llmc_build.log" 2>&1
      tail -n 3 "$LOGS/llmc_build.log"
      LLMC=$b/train_gpt2cu
    fi
  fi
fi
echo "gptrun: ${GPTRUN:-none}; llm.c: $LLMC"

# --- runners ------------------------------------------------------------------------
gptc_run() { # model tag
  local model=$1 tag=$2 b name log file secs dtype=bf16
  b=$(batch_of "$model") name=gptc-$tag
  file=$HONEST_DIR/$model/honest-$model-$tag.fb
  log=$LOGS/${name}_$model.log
  if [ ! -f "$file" ]; then
    set_status "$name-$model" "no $file (bench/device/build_honest.sh)"
    return
  fi
  [ "$tag" != bf16 ] && dtype=fp8
  secs=$(awk -F'\t' -v m="$model" -v t="$tag" '$1 == m && $3 == t { print $5 }' "$HONEST_DIR/$model/honest.tsv" 2> /dev/null)
  run_stage "$name-$model" gptc "$model" "$GPTRUN" "$file" --data "$DATA" --steps "$STEPS" --seed "$SEED" --no-progress \
    --gemm-algos "$LOGS/gemm-algos-$model-$tag.txt" > "$log" 2>&1
  tail -n 2 "$log"
  "$PY" bench/twin/compare.py gptrun-log "$log" -o "$RUNSD/run-$model-$name.json" --label "gptc $model $tag" \
    --model "$model" --batch "$b" --seq 1024 --dtype "$dtype" --tf32 off --timing-warmup "$WARMUP" > /dev/null &&
    "$PY" - "$RUNSD/run-$model-$name.json" "${secs:-nan}" "$file" <<'EOF'
import json, sys
p = sys.argv[1]; r = json.load(open(p)); r["gptc_s"] = float(sys.argv[2]); r["fb"] = sys.argv[3]
json.dump(r, open(p, "w"))
EOF
}

llmc_run() { # model
  local model=$1 b d r log rc
  b=$(batch_of "$model") d=$(depth_of "$model")
  # Recompute 0 (nothing recomputed, the fastest); on an out-of-memory exit
  # again with 1 (the GELU recomputed). 1558M B=16 needs about 67 GB with 0
  # by llm.c's buffer sizes (25 GB of weights and AdamW state).
  r=${LLMC_RECOMPUTE:-0}
  log=$LOGS/llmc-bf16_$model.log
  mkdir -p "$WORK/llmc"
  llmc_once "$model" "$b" "$d" "$r" "llmc-bf16-$model" > "$log" 2>&1
  rc=$?
  if ((rc != 0 && rc != 99)) && ((r == 0)) && grep -qiE "out of (device )?memory" "$log"; then
    echo "llm.c $model: out of memory with -r 0; again with -r 1 (the GELU recomputed)"
    mv "$log" "$log.r0"
    llmc_once "$model" "$b" "$d" 1 "llmc-bf16-$model-r1" > "$log" 2>&1
  fi
  grep -E "^\[llmc|^step +[0-9]+/|rror" "$log" | tail -n 3
  "$PY" bench/twin/compare.py gptrun-log "$log" -o "$RUNSD/run-$model-llmc-bf16.json" --label "llm.c bf16 $model" \
    --model "$model" --batch "$b" --seq 1024 --dtype bf16 --tf32 off --timing-warmup "$WARMUP" > /dev/null 2>&1 ||
    rm -f "$RUNSD/run-$model-llmc-bf16.json"
}

# llmc_once MODEL B DEPTH RECOMPUTE NAME: one train_gpt2cu run, in $WORK/llmc.
#   -e dN: llm.c's random init of GPT-2 with N layers (50304 padded vocabulary);
#   -d B*T: no gradient accumulation; -x: the steps; -v 100000 -m 1: a
#   validation loss only at step 0 and the last, over one batch; -s 0: no
#   sampling; -h 0: no HellaSwag; -z 0: no ZeRO (one GPU); -r: recompute;
#   -l/-u/-q/-c: configs.sh's lr 6e-4, 20 warm-up steps, lr/10 at the end,
#   weight decay 0.1 (grad clip 1.0 and AdamW betas 0.9/0.95 are llm.c's own);
#   bf16 with fp32 master weights (-w 1, its default) and cuDNN attention (the build).
llmc_once() {
  local model=$1 b=$2 d=$3 r=$4 name=$5
  run_stage "$name" llmc "$model" env -C "$WORK/llmc" LD_LIBRARY_PATH="$LLMC_LD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$LLMC" -i "$DATA" -j "$VAL" -e "d$d" -b "$b" -t 1024 -d $((b * 1024)) -x "$STEPS" \
    -v 100000 -m 1 -s 0 -h 0 -z 0 -r "$r" -l 6e-4 -u 20 -q 0.1 -c 0.1
}

torch_run() { # model kind (torch | tensorwise | rowwise)
  local model=$1 kind=$2 b name extra=() pp=${PYTHONPATH:-} lim
  b=$(batch_of "$model")
  case $kind in
    torch) name=torch-bf16 ;;
    *) name=torchao-$kind extra=(--float8 "$kind" --float8-filter "$FLOAT8_FILTER")
       pp=$PEERS_DIR/torchao${PYTHONPATH:+:$PYTHONPATH} ;;
  esac
  lim=$(want_of "$kind" "$model")
  (($(left) < lim)) && lim=$(left)
  # shellcheck disable=SC2086
  PYTHONPATH=$pp run_stage "$name-$model" "$kind" "$model" "$PY" "$TRAIN_TORCH" --device cuda --model "$model" --batch "$b" --seq 1024 \
    --init counter --seed "$SEED" --timing-warmup "$WARMUP" --quiet --steps "$STEPS" \
    --data "$DATA" $TRAIN_OPT --mode compile --dtype bf16 --tf32 on "${extra[@]}" \
    --json "$RUNSD/run-$model-$name.json" --label "$name $model" \
    --time-limit $((lim > 30 ? lim - 15 : 15)) > "$LOGS/${name}_$model.log" 2>&1
  grep -E "torchao float8|median|Error|error:" "$LOGS/${name}_$model.log" | tail -n 3
}

sol_run() { # model
  local model=$1 b fake=()
  b=$(batch_of "$model")
  [ "$DRY_RUN" = 1 ] && fake=(--fake-rates)
  run_stage "sol-$model" sol "$model" "$PY" bench/probes/sol.py --model "$model" --batch "$b" "${fake[@]}" \
    --json "$RUNSD/sol-$model.json" > "$LOGS/sol_$model.log" 2>&1
  grep -E "^sol: (bf16|fp8_|copy|[0-9]+M)" "$LOGS/sol_$model.log" | tail -n 4
  cp "$RUNSD/sol-$model.json" "$LOGS/" 2> /dev/null
}

# Where gptc's step goes: GPTC_PROFILE=40 (each command between CUDA events,
# the top 40 kernels and GEMM shapes; launch and ramp-up included, so short
# kernels read slow: bench/README.md) over 2 steps of the bf16 and best fp8
# executables, into the logs (profile-<tag>_<model>.log).
profile_run() { # model
  local model=$1 tag file
  for tag in bf16 fp8best; do
    file=$HONEST_DIR/$model/honest-$model-$tag.fb
    [ -f "$file" ] || continue
    GPTC_PROFILE=40 run_stage "profile-$tag-$model" profile "$model" "$GPTRUN" "$file" --data "$DATA" --steps 2 \
      --seed "$SEED" --no-progress > "$LOGS/profile-${tag}_$model.log" 2>&1
    grep -m 12 -E "^ +[0-9.]+ ms +[0-9.]+%|profile " "$LOGS/profile-${tag}_$model.log"
  done
}

# Where gptc's step goes, measured without the launch overhead: ncu's kernel
# durations of whole steps (--no-graph; bf16 one step, the best fp8 three,
# its first step being a program of its own), summed by bench/tools/ncu_step.py
# into GEMMs, attention and the rest (ncu-<tag>_<model>.csv and .txt).
ncu_run() { # model
  local model=$1 tag file steps rep
  command -v ncu > /dev/null || [ "$DRY_RUN" = 1 ] || { set_status "ncu-$model" "no ncu on the PATH"; return; }
  for tag in bf16 fp8best; do
    file=$HONEST_DIR/$model/honest-$model-$tag.fb
    [ -f "$file" ] || continue
    steps=1 rep=()
    [ "$tag" = fp8best ] && steps=3 rep=(--repeated)
    if [ "$DRY_RUN" = 1 ]; then
      echo "DRY_RUN: ncu --clock-control none --cache-control none --csv --metrics gpu__time_duration.sum" \
        "--log-file $LOGS/ncu-${tag}_$model.csv $GPTRUN $file --data $DATA --steps $steps --no-graph --no-progress"
      continue
    fi
    run_stage "ncu-$tag-$model" ncu "$model" ncu --clock-control none --cache-control none --csv \
      --metrics gpu__time_duration.sum --log-file "$LOGS/ncu-${tag}_$model.csv" \
      "$GPTRUN" "$file" --data "$DATA" --steps "$steps" --seed "$SEED" --no-graph --no-progress > "$LOGS/ncu-${tag}_$model.log" 2>&1
    "$PY" bench/tools/ncu_step.py "$LOGS/ncu-${tag}_$model.csv" "${rep[@]}" --top 25 > "$LOGS/ncu-${tag}_$model.txt" 2>&1
    head -n 12 "$LOGS/ncu-${tag}_$model.txt"
  done
}

# --- the stages, in priority order across the sizes ------------------------------
for stage in $RUNS; do
  for model in $SIZES; do
    banner "$stage $model"
    case $stage in
      gptc) for tag in bf16 fp8best fp8; do gptc_run "$model" "$tag"; done ;;
      llmc) llmc_run "$model" ;;
      torch | tensorwise | rowwise) torch_run "$model" "$stage" ;;
      sol) sol_run "$model" ;;
      profile) profile_run "$model" ;;
      ncu) ncu_run "$model" ;;
      *) echo "run_honest: unknown stage '$stage' (gptc llmc torch tensorwise sol rowwise profile ncu)" ;;
    esac
    report
  done
  echo; echo "--- after stage $stage ($(($(date +%s) - START)) s) ---"
  cat "$WORK/table.md"
done

banner "table"
report
cat "$WORK/table.md"
[ -s "$WORK/report.err" ] && cat "$WORK/report.err"
echo; echo "=== stages ==="
for k in "${ORDER[@]}"; do printf '  %-28s %s\n' "$k" "${STATUS[$k]}"; done
exit 0
