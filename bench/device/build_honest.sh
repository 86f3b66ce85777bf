#!/usr/bin/env bash
# bench/device/build_honest.sh: CPU side of bench/device/run_honest.sh (issue 48,
# "the honest sweep"): gptc next to the peers a user would pick, each in its own
# precision, with the same model, batch, T=1024 and padded vocabulary (50304).
#
#   1. gptc executables per size (124M B=64, 350M B=32, 774M B=16, 1558M B=16),
#      with configs.sh's TRAIN_OPT (the optimizer flags train_torch.py also gets):
#        bf16      --precision=bf16
#        fp8       --precision=fp8                  (the default FP8 recipe: the blocks' GEMMs)
#        fp8best   --precision=fp8 --fp8-lm-head    (124M, 350M), and
#                  --precision=fp8 --fp8-lm-head --disable-patterns=fp8-cross-entropy-grad (774M, 1558M):
#                  the fastest recipe of bench/results/2026-12.md (2026-12-06 ~20:20)
#      into $HONEST_DIR/<model>/ (default bench/artifacts/honest), each with
#      honest.tsv (model, B, tag, file, gptc seconds, command) and commit.txt,
#      and $HONEST_DIR/bin/ (this machine's gptrun, as bench/device/runtime.sh
#      copies it for run_sweep.sh). One folder per size, so a call carries only
#      its sizes (all four with the peers come near the 64 MiB a call carries).
#   2. the peers, from bare git mirrors of their repositories ($MIRRORS, the
#      session's `fetch` tool puts them in /work/.mirror/<owner>+<name>/repo),
#      into $PEERS_DIR (default bench/artifacts/peers; git-ignored, never
#      committed), with peers.txt naming each one's commit:
#        torchao/     pytorch/ao at $TORCHAO_REF (v0.17.0: the release built
#                     against torch 2.11, the device's) -- its Python package
#                     only (torchao/**.py); float8 training is pure Python and
#                     runs with TORCHAO_FORCE_SKIP_LOADING_SO_FILES=1
#        llmc/        karpathy/llm.c: train_gpt2cu built HERE with
#                     `make train_gpt2cu USE_CUDNN=1` (nvcc 13 and cuDNN 9 of
#                     /usr/local/cuda; NVIDIA/cudnn-frontend's include/), sm_90,
#                     no NCCL/MPI/NVML (one GPU); the device loads the cuDNN that
#                     PyTorch ships (site-packages/nvidia/cudnn/lib). Its
#                     sources and the frontend headers go along too, for a
#                     device-side build when the carried binary does not run
#                     there (LLMC_BUILD=device in run_honest.sh).
#
#   bash bench/device/build_honest.sh                     # all four sizes, gptc + peers
#   SIZES="124M 350M" bash bench/device/build_honest.sh
#   SKIP_GPTC=1 bash bench/device/build_honest.sh         # peers only
#   SKIP_PEERS=1 bash bench/device/build_honest.sh        # gptc only
#
# Build gptc and gptrun first (`/work/bin/nj gptc gptrun`, or ninja -C build),
# so the copies are the tree's. The device call and its carry list are in the
# header of bench/device/run_honest.sh.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=bench/device/configs.sh
source bench/device/configs.sh
GPTC=${GPTC:-build/bin/gptc}
SIZES=${SIZES:-124M 350M 774M 1558M}
HONEST_DIR=${HONEST_DIR:-bench/artifacts/honest}
PEERS_DIR=${PEERS_DIR:-bench/artifacts/peers}
MIRRORS=${MIRRORS:-/work/.mirror}
TORCHAO_REF=${TORCHAO_REF:-v0.17.0}
LLMC_REF=${LLMC_REF:-HEAD}
CUDNN_FE_REF=${CUDNN_FE_REF:-HEAD}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
status=0

batch_of() {
  case $1 in
    124M) echo 64 ;; 350M) echo 32 ;; 774M | 1558M) echo 16 ;;
    *) echo "" ;;
  esac
}

# The fastest FP8 recipe per size (bench/results/2026-12.md, 2026-12-06 ~20:20:
# the FP8 LM head; at 774M and 1558M with the logits' gradient in bf16).
best_fp8_flags() {
  case $1 in
    124M | 350M) echo "--fp8-lm-head" ;;
    *) echo "--fp8-lm-head --disable-patterns=fp8-cross-entropy-grad" ;;
  esac
}

# --- 1. gptc -----------------------------------------------------------------
if [ "${SKIP_GPTC:-0}" != 1 ]; then
  [ -x "$GPTC" ] || { echo "build_honest: no $GPTC (build it first: /work/bin/nj gptc gptrun)"; exit 1; }
  mkdir -p "$HONEST_DIR"
  for model in $SIZES; do
    b=$(batch_of "$model")
    [ -n "$b" ] || { echo "build_honest: unknown size '$model' (124M, 350M, 774M or 1558M)"; status=1; continue; }
    dir=$HONEST_DIR/$model
    rm -rf "$dir" && mkdir -p "$dir"
    tsv=$dir/honest.tsv
    : > "$tsv"
    git rev-parse HEAD > "$dir/commit.txt" 2> /dev/null
    git status --porcelain --untracked-files=no | head -n 20 > "$dir/dirty.txt"
    for tag in bf16 fp8 fp8best; do
      case $tag in
        bf16) flags=(--precision=bf16) ;;
        fp8) flags=(--precision=fp8) ;;
        fp8best) read -ra flags <<< "--precision=fp8 $(best_fp8_flags "$model")" ;;
      esac
      file=$dir/honest-$model-$tag.fb
      # shellcheck disable=SC2206
      cmd=("$GPTC" compile models/gpt2.mlir --model="$model" --batch="$b" --seq=1024 $TRAIN_OPT "${flags[@]}" -o "$file")
      echo "+ ${cmd[*]}"
      t0=$(date +%s.%N)
      if "${cmd[@]}" > "$dir/gptc-$tag.log" 2>&1; then
        t1=$(date +%s.%N)
        printf '%s\t%s\t%s\t%s\t%.1f\t%s\n' "$model" "$b" "$tag" "$file" \
          "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "${cmd[*]}" >> "$tsv"
      else
        echo "build_honest: gptc failed for $model $tag:"; tail -n 5 "$dir/gptc-$tag.log"
        status=1
      fi
    done
    cat "$tsv"
  done
  # This machine's gptrun and CUDA test, for pick_runtime on the device.
  # shellcheck source=bench/device/runtime.sh
  source bench/device/runtime.sh
  ARTIFACTS=$HONEST_DIR copy_runtime
  [ -x "$HONEST_DIR/bin/gptrun" ] && echo "build_honest: gptrun copied to $HONEST_DIR/bin" ||
    echo "build_honest: build/bin/gptrun not copied (no CUDA build here): the device builds build-device/ (carry build-deps)"
  du -sh "$HONEST_DIR"/* 2> /dev/null
fi

# --- 2. the peers -----------------------------------------------------------
mirror() { echo "$MIRRORS/$1/repo"; }
if [ "${SKIP_PEERS:-0}" != 1 ]; then
  mkdir -p "$PEERS_DIR"
  git check-ignore -q "$PEERS_DIR/x" || { echo "build_honest: $PEERS_DIR is not git-ignored; refusing to stage peer code there"; exit 1; }
  : > "$PEERS_DIR/peers.txt"

  # torchao: the Python package only.
  ao=$(mirror pytorch+ao)
  if git --git-dir="$ao" rev-parse -q --verify "$TORCHAO_REF^{commit}" > /dev/null 2>&1; then
    rm -rf "$PEERS_DIR/torchao" && mkdir -p "$PEERS_DIR/torchao"
    git --git-dir="$ao" archive "$TORCHAO_REF" torchao version.txt | tar -x -C "$PEERS_DIR/torchao"
    # Drop everything but Python sources (kernels' C++/CUDA sources are not needed).
    find "$PEERS_DIR/torchao/torchao" -type f ! -name '*.py' -delete
    find "$PEERS_DIR/torchao/torchao" -type d -empty -delete
    printf 'torchao\tpytorch/ao\t%s\t%s\t%s\n' "$TORCHAO_REF" "$(git --git-dir="$ao" rev-parse "$TORCHAO_REF^{commit}")" \
      "$(cat "$PEERS_DIR/torchao/version.txt")" >> "$PEERS_DIR/peers.txt"
    for f in config.py float8_linear_utils.py float8_linear.py; do
      [ -f "$PEERS_DIR/torchao/torchao/float8/$f" ] || { echo "build_honest: torchao/float8/$f missing"; status=1; }
    done
    echo "build_honest: torchao $TORCHAO_REF -> $PEERS_DIR/torchao ($(du -sh "$PEERS_DIR/torchao" | cut -f1))"
  else
    echo "build_honest: no pytorch/ao mirror with $TORCHAO_REF at $ao (fetch github:pytorch/ao)"; status=1
  fi

  # llm.c: sources, cuDNN frontend headers, and train_gpt2cu built here.
  llmc=$(mirror karpathy+llm.c) fe=$(mirror NVIDIA+cudnn-frontend)
  if [ -d "$llmc" ] && [ -d "$fe" ]; then
    dst=$PEERS_DIR/llmc
    rm -rf "$dst" && mkdir -p "$dst/src" "$dst/src/cudnn-frontend"
    git --git-dir="$llmc" archive "$LLMC_REF" Makefile train_gpt2.cu llmc | tar -x -C "$dst/src"
    git --git-dir="$fe" archive "$CUDNN_FE_REF" include | tar -x -C "$dst/src/cudnn-frontend"
    # One patch, in the staged copy only: cudaMallocConditionallyManaged falls
    # back to cudaMallocManaged on an OOM, and its cudaMemAdvise(..., int) does
    # not compile under CUDA 13 (a cudaMemLocation now). The device machines
    # must not be asked for managed memory beyond what the card has free, so
    # an OOM exits instead (run_honest.sh then retries with recompute on).
    python3 - "$dst/src/llmc/cuda_utils.cuh" <<'PYEOF' || status=1
import re, sys
p = sys.argv[1]
s = open(p).read()
pat = re.compile(r"if\(err == cudaErrorMemoryAllocation\) \{.*?return 1;\n(\s*)\} else \{", re.S)
new = ('if(err == cudaErrorMemoryAllocation) {\n'
       '        // gptc bench (bench/device/build_honest.sh): no managed-memory fallback\n'
       '        fprintf(stderr, "llm.c: out of device memory allocating %zu bytes\\n", bytes);\n'
       '        exit(EXIT_FAILURE);\n')
s, n = pat.subn(lambda m: new + m.group(1) + "} else {", s)
if n != 1:
    sys.exit(f"build_honest: llm.c patch: {n} matches in {p}")
open(p, "w").write(s)
print(f"build_honest: patched {p} (no managed-memory fallback)")
PYEOF
    printf 'llm.c\tkarpathy/llm.c\t%s\t%s\n' "$LLMC_REF" "$(git --git-dir="$llmc" rev-parse "$LLMC_REF^{commit}")" >> "$PEERS_DIR/peers.txt"
    printf 'cudnn-frontend\tNVIDIA/cudnn-frontend\t%s\t%s\n' "$CUDNN_FE_REF" "$(git --git-dir="$fe" rev-parse "$CUDNN_FE_REF^{commit}")" >> "$PEERS_DIR/peers.txt"
    if [ "${LLMC_BUILD_HERE:-1}" = 1 ] && [ -x "$CUDA_HOME/bin/nvcc" ] && [ -f "$CUDA_HOME/include/cudnn.h" ]; then
      # The Makefile's defaults, less what one GPU does not use: NCCL, MPI and
      # OpenMP off, and NVCC_LDFLAGS without -lnvidia-ml (no nvml.h here, so
      # llm.c's USE_NVML is 0 and nothing calls it; there is no libnvidia-ml to
      # link on this machine); -lnvrtc for the frontend (>= 1.2x) runtime-compiled
      # kernels. GPU_COMPUTE_CAPABILITY=90: sm_90 + compute_90 PTX.
      cmd=(make -C "$dst/src" train_gpt2cu USE_CUDNN=1 GPU_COMPUTE_CAPABILITY=90 NO_MULTI_GPU=1 NO_USE_MPI=1 NO_OMP=1
           "NVCC_LDFLAGS=-lcublas -lcublasLt -lcudnn -lnvrtc")
      echo "+ PATH=$CUDA_HOME/bin:\$PATH ${cmd[*]}"
      t0=$(date +%s)
      if PATH=$CUDA_HOME/bin:$PATH nice "${cmd[@]}" > "$dst/build.log" 2>&1; then
        mv "$dst/src/train_gpt2cu" "$dst/train_gpt2cu"
        rm -rf "$dst/src/build"
        echo "build_honest: llm.c train_gpt2cu built in $(($(date +%s) - t0)) s ($(du -h "$dst/train_gpt2cu" | cut -f1))"
        printf 'llm.c build\t%s\n' "${cmd[*]}" >> "$PEERS_DIR/peers.txt"
      else
        echo "build_honest: llm.c build failed (the device builds it then: LLMC_BUILD=device):"; tail -n 15 "$dst/build.log"
        status=1
      fi
    else
      echo "build_honest: no nvcc/cuDNN here: llm.c is built on the device (run_honest.sh, ~60-120 s)"
    fi
  else
    echo "build_honest: no llm.c or cudnn-frontend mirror (fetch github:karpathy/llm.c and github:NVIDIA/cudnn-frontend)"; status=1
  fi
  cat "$PEERS_DIR/peers.txt"
  du -sh "$PEERS_DIR" "$HONEST_DIR" 2> /dev/null
fi
exit $status
