#!/usr/bin/env bash
# libFuzzer targets for the runtime's input parsers, built with clang-22
# (ASan + UBSan + libFuzzer) by test/fuzz/CMakeLists.txt into a build dir of
# their own, apart from the g++ build and without MLIR:
#   ExecutableFuzzer  step.fb loader (FlatBuffers verifier + semantic checks)
#   TokenFileFuzzer   llm.c token file parser
#   TokenizerFuzzer   GPT-2 BPE encode/decode round trip (needs data/gpt2)
#   SafetensorsFuzzer safetensors reader (and its writer's round trip)
#   LogFuzzer         gptplot's log.jsonl reader and SVG renderer
# Each target first replays its reproducers in test/fuzz/regressions/, then
# fuzzes from its seeds in test/fuzz/corpus/<target>/ (committed).
# Usage (repo root):
#   bash scripts/fuzz.sh                        # build, then 45 s per target
#   bash scripts/fuzz.sh --seconds 3600 ExecutableFuzzer   # a longer run
#   bash scripts/fuzz.sh --build-only | --no-build ...
# `ctest` runs each target for 20 s the same way (test/fuzz/CMakeLists.txt).
# Env: FUZZ_BUILD_DIR (default build-fuzz/), FUZZ_CXX (default clang++-22),
# FUZZ_SECONDS (default 45), FUZZ_TIMEOUT (seconds one input may take,
# default 30; a niced long run on a machine that builds needs more: its
# wall clock is not its CPU time), FUZZ_SEED (default: libFuzzer's, from the
# clock; ctest fixes it so that CI explores the same inputs each run and a
# finding there reproduces). The growing corpus and any crash-* reproducer
# go to the build dir. Exit status: 1 on a finding, 77 if a target was
# skipped (no vocabulary) and none failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
CXX=${FUZZ_CXX:-clang++-22}
seconds=${FUZZ_SECONDS:-45}
out=${FUZZ_BUILD_DIR:-build-fuzz}
build=1
run=1
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift ;;
    --build-only) run=0 ;;
    --no-build) build=0 ;;
    -*) echo "fuzz.sh: unknown option '$1'" >&2; exit 2 ;;
    *) targets+=("$1") ;;
  esac
  shift
done
[ ${#targets[@]} = 0 ] && targets=(ExecutableFuzzer TokenFileFuzzer TokenizerFuzzer SafetensorsFuzzer LogFuzzer
                                    CheckpointFuzzer)
mkdir -p "$out"
out=$(cd "$out" && pwd)

if [ $build = 1 ]; then
  launcher=()
  command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # Configured once; later calls only run ninja, which rebuilds what changed.
  if [ ! -f "$out/build.ninja" ]; then
    cmake -G Ninja -S test/fuzz -B "$out" -DCMAKE_CXX_COMPILER="$CXX" "${launcher[@]}"
  fi
  cmake --build "$out" -j"${FUZZ_JOBS:-2}"
fi
[ $run = 1 ] || exit 0

declare -A corpus=([ExecutableFuzzer]=executable [TokenFileFuzzer]=tokenfile [TokenizerFuzzer]=tokenizer
                   [SafetensorsFuzzer]=safetensors [LogFuzzer]=log [CheckpointFuzzer]=checkpoint)
export GPTC_VOCAB_DIR=${GPTC_VOCAB_DIR:-$root/data/gpt2}
failed=0
skipped=0
for t in "${targets[@]}"; do
  name=${corpus[$t]:-}
  if [ -z "$name" ]; then
    echo "fuzz.sh: unknown target '$t'" >&2
    exit 2
  fi
  if [ "$t" = TokenizerFuzzer ] && [ ! -f "$GPTC_VOCAB_DIR/encoder.json" ]; then
    echo "== $t: skipped: no GPT-2 vocabulary in $GPTC_VOCAB_DIR (scripts/setup.sh fetches it)"
    skipped=1
    continue
  fi
  shopt -s nullglob
  regressions=("$root/test/fuzz/regressions/$name"-*)
  shopt -u nullglob
  flags=(-max_len=8192 -rss_limit_mb=2048 -timeout="${FUZZ_TIMEOUT:-30}" -artifact_prefix="$out/$t-")
  [ -n "${FUZZ_SEED:-}" ] && flags+=(-seed="$FUZZ_SEED")
  if [ ${#regressions[@]} -gt 0 ]; then
    echo "== $t: ${#regressions[@]} regression input(s)"
    if ! "$out/$t" "${flags[@]}" "${regressions[@]}" >"$out/$t.log" 2>&1; then
      tail -80 "$out/$t.log"
      echo "== $t: FAILED on a reproducer in test/fuzz/regressions"
      failed=1
      continue
    fi
  fi
  mkdir -p "$out/$t.corpus"
  echo "== $t: ${seconds} s"
  if "$out/$t" "${flags[@]}" -max_total_time="$seconds" -print_final_stats=1 \
       "$out/$t.corpus" "$root/test/fuzz/corpus/$name" >"$out/$t.log" 2>&1; then
    grep -E '^(INFO: seed corpus|Done|stat::(number_of_executed|new_units|peak_rss))' "$out/$t.log"
  else
    tail -80 "$out/$t.log"
    echo "== $t: FAILED (reproducer: $out/$t-crash-*; whole log: $out/$t.log)"
    failed=1
  fi
done
[ $failed = 1 ] && exit 1
[ $skipped = 1 ] && exit 77
exit 0
