#!/usr/bin/env bash
# scripts/gpu-test-build.sh: the CPU side of the GPU conformance suite
# (scripts/gpu-test.sh runs on the device). On this machine, no GPU needed:
#   1. compiles every executable of scripts/gpu-test-matrix.sh for CUDA
#      (sm_90) into bench/artifacts/conformance/exe/, and those with host
#      references again with --target=host into bench/artifacts/conformance-host/;
#   2. runs the host executables with gptrun (loss and grad norm per step in
#      log.jsonl, the parameters after the last step from its checkpoint,
#      the @logits of a prompt at the init parameters) and `gptc
#      run-reference --arithmetic=fp64`, into conformance/expect/;
#   3. writes the token files (tiny's: Austen's ids mod 60) and GPT-2's
#      vocabulary (for the prompt) into conformance/data/ and vocab/;
#   4. copies gptrun and the GPU GoogleTests (and the files whose absolute
#      paths those tests hold: the nvcc-built kernels, gptrun itself) into
#      conformance/bin/, and writes conformance/manifest.txt.
# Build first: /work/bin/nj gptc gptrun RuntimeCudaBackendTest RuntimeNcclTest
# RuntimeDriverTest GptrunTest (or ninja -C build). About 3 minutes on 2 cores.
#   ONLY="mini-bf16 ..."   rebuild only these executables (and their expectations),
#                          with the gptrun already in conformance/bin
#   SKIP_EXPECT=1          compile only; keep the expectations already there
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-test-matrix.sh

BUILD=${BUILD:-build}
GPTC=$BUILD/bin/gptc
GPTRUN=$BUILD/bin/gptrun
GTESTS="RuntimeCudaBackendTest RuntimeNcclTest RuntimeDriverTest GptrunTest"
for b in "$GPTC" "$GPTRUN"; do
  [ -x "$b" ] || { echo "gpu-test-build: $b is missing (build it first)" >&2; exit 1; }
done
if [[ $(ldd "$GPTRUN") != *libcudart* ]]; then
  echo "gpu-test-build: $GPTRUN is built without CUDA; the device could not run it" >&2
  exit 1
fi
mkdir -p "$CONF"/{exe,expect,data,vocab,bin} "$CONF_HOST"
start=$SECONDS
# One snapshot of gptrun computes the host expectations and goes to the
# device: a rebuild during this script (others share build/) would give the
# two sides different runtimes. ONLY= keeps the snapshot it finds.
if [ -z "${ONLY:-}" ] || [ ! -x "$CONF/bin/gptrun" ]; then cp "$GPTRUN" "$CONF/bin/gptrun"; fi
GPTRUN=$CONF/bin/gptrun

# Token files. mini reads Austen as it is; tiny's vocabulary is 60, so its
# ids are Austen's mod 60. 50,000 tokens cover every run of the matrix.
python3 - "$CONF/data" <<'EOF'
import array, struct, sys
src = open("data/austen_train.bin", "rb").read()
magic, version, n = struct.unpack_from("<3i", src)
assert magic == 20240520, "data/austen_train.bin: not an llm.c token file"
toks = array.array("H", src[1024:1024 + 2 * min(n, 50000)])
for name, ids in (("mini", toks), ("tiny", array.array("H", (t % 60 for t in toks)))):
    with open(f"{sys.argv[1]}/{name}.bin", "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(ids), *([0] * 253)) + ids.tobytes())
EOF
cp data/gpt2/encoder.json data/gpt2/vocab.bpe "$CONF/vocab/"

opt_of() { case $1 in tiny) echo "$TINY_OPT" ;; *) echo "$MINI_OPT" ;; esac; }
steps_of() { case $1 in tiny) echo "$TINY_STEPS" ;; *) echo "$MINI_STEPS" ;; esac; }
prompt_of() { case $1 in tiny) echo "$TINY_PROMPT" ;; *) echo "$MINI_PROMPT" ;; esac; }
wanted() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }

: > "$CONF/manifest.new"
for entry in "${CONF_EXES[@]}"; do
  read -r name model prec refs flags <<< "$entry"
  # shellcheck disable=SC2046,SC2086 # the flag strings are word lists
  set -- --model="$model" --precision="$prec" $(opt_of "$model") ${flags:-}
  steps=$(steps_of "$model")
  echo "exe $name model=$model precision=$prec steps=$steps refs=$refs flags=$* " >> "$CONF/manifest.new"
  wanted "$name" || continue
  t0=$SECONDS
  "$GPTC" compile models/gpt2.mlir "$@" --target=cuda --cuda-arch=sm_90 --progress=off \
    -o "$CONF/exe/$name.fb" > "$CONF/exe/$name.compile.txt" 2>&1 ||
    { cat "$CONF/exe/$name.compile.txt" >&2; exit 1; }
  echo "gpu-test-build: $name cuda ($((SECONDS - t0)) s)"
  [ -n "${SKIP_EXPECT:-}" ] && continue
  if [[ ,$refs, == *,host,* ]]; then
    "$GPTC" compile models/gpt2.mlir "$@" --target=host --progress=off \
      -o "$CONF_HOST/$name.fb" > /dev/null 2>&1
    run=$CONF_HOST/run-$name
    rm -rf "$run"
    "$GPTRUN" "$CONF_HOST/$name.fb" --data "$CONF/data/$model.bin" --steps "$steps" --seed "$SEED" \
      --log-dir "$run" --checkpoint-dir "$run/ck" --no-progress > "$run.txt" 2>&1 ||
      { tail -5 "$run.txt" >&2; exit 1; }
    cp "$run/log.jsonl" "$CONF/expect/$name.host.jsonl"
    ckpts=("$run"/ck/step-*.ckpt)
    python3 scripts/gpu_test.py expect-params "${ckpts[-1]}" "$CONF/expect/$name.host.params.st"
    "$GPTRUN" "$CONF_HOST/$name.fb" --sample "$(prompt_of "$model")" --sample-tokens 1 --seed "$SEED" \
      --vocab-dir "$CONF/vocab" --logits-out "$CONF/expect/$name.host.logits.st" > "$run.sample.txt" 2>&1 ||
      { tail -5 "$run.sample.txt" >&2; exit 1; }
    echo "gpu-test-build: $name host: $(tail -1 "$run.txt")"
  fi
  if [[ ,$refs, == *,fp64,* ]]; then
    "$GPTC" run-reference models/gpt2.mlir "$@" --arithmetic=fp64 --steps="$steps" --seed="$SEED" \
      --data="$CONF/data/$model.bin" > "$CONF/expect/$name.fp64.txt" 2>&1 ||
      { tail -5 "$CONF/expect/$name.fp64.txt" >&2; exit 1; }
    echo "gpu-test-build: $name fp64 interpreter: $(tail -1 "$CONF/expect/$name.fp64.txt")"
  fi
  echo "gpu-test-build: $name done ($((SECONDS - t0)) s)"
done

# gptrun and the GPU GoogleTests, as built here (CUDA 13, Release: they run
# on the device as they are, as bench/device/runtime.sh found). The tests
# name files by their absolute build paths (GPTC_TEST_CUBIN, GPTC_GPTRUN,
# ... in build.ninja): each is copied under bin/paths/ and gpu-test.sh links
# it back into place on the device where the path does not exist.
for t in $GTESTS; do
  [ -x "$BUILD/bin/$t" ] || { echo "gpu-test-build: $BUILD/bin/$t is missing (build it first)" >&2; exit 1; }
  cp "$BUILD/bin/$t" "$CONF/bin/"
done
abs=$(cd "$BUILD" && pwd)
rm -rf "$CONF/bin/paths"
for def in GPTC_GPTRUN GPTC_TEST_CUBIN GPTC_TEST_PTX GPTC_TEST_KERNELS_SO; do
  { grep -o "$def=[^ ]*" "$BUILD/build.ninja" || true; } | sed 's/^[^=]*=//; s/[\\"]//g' | sort -u |
    while read -r p; do
      if [ ! -f "$p" ] || [[ $p != "$abs"/* ]]; then continue; fi
      mkdir -p "$CONF/bin/paths/$(dirname "${p#"$abs"/}")"
      cp "$p" "$CONF/bin/paths/${p#"$abs"/}"
      echo "path $p ${p#"$abs"/}" >> "$CONF/manifest.new"
    done
done

{
  echo "commit $(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- compiler runtime tools dialects models || echo '+dirty')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n), $(nproc) cores, $((SECONDS - start)) s"
  echo "gptc $("$GPTC" --version 2>&1 | head -1)"
  sort -u "$CONF/manifest.new"
} > "$CONF/manifest.txt"
rm -f "$CONF/manifest.new"
(cd "$CONF" && sha256sum exe/*.fb expect/* bin/gptrun > sha256.txt)
# What the device call carries: the folder packed (the executables' code
# compresses about 5x; 49 MiB of files, under 20 MiB packed).
tar czf "$CONF.tgz" -C "$(dirname "$CONF")" "$(basename "$CONF")"
echo "gpu-test-build: $CONF holds $(du -sh "$CONF" | cut -f1); the device call carries $CONF.tgz, $(du -sh "$CONF.tgz" | cut -f1) (the working tree and carried paths: 64 MiB in all)"
