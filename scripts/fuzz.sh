#!/usr/bin/env bash
# libFuzzer targets for the runtime's input parsers, built with clang-22
# (ASan + UBSan + libFuzzer) into build-fuzz/, apart from the g++ build and
# without MLIR: each links only the sources it fuzzes.
#   ExecutableFuzzer  step.fb loader (FlatBuffers verifier + semantic checks)
#   TokenFileFuzzer   llm.c token file parser
#   TokenizerFuzzer   GPT-2 BPE encode/decode round trip (needs data/gpt2)
# Usage (repo root, after build/ has generated executable_generated.h or with
# flatc on PATH):
#   bash scripts/fuzz.sh            # build, then 45 s per target
#   FUZZ_SECONDS=3600 bash scripts/fuzz.sh ExecutableFuzzer   # a longer run
# Seeds: test/fuzz/corpus/<target>/ (committed); the growing corpus and any
# crash-* reproducer go to build-fuzz/<target>/. Exit status != 0 on a crash.
set -euo pipefail
cd "$(dirname "$0")/.."
CXX=${FUZZ_CXX:-clang++-22}
SECONDS_PER_TARGET=${FUZZ_SECONDS:-45}
OUT=build-fuzz
mkdir -p "$OUT/runtime/schemas"
flatc --cpp --scoped-enums -o "$OUT/runtime/schemas" runtime/schemas/executable.fbs
flags=(-std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I. -I"$OUT")
declare -A sources=(
  [ExecutableFuzzer]="test/fuzz/ExecutableFuzzer.cpp runtime/executable/Executable.cpp"
  [TokenFileFuzzer]="test/fuzz/TokenFileFuzzer.cpp runtime/data/TokenFile.cpp runtime/data/FileIO.cpp"
  [TokenizerFuzzer]="test/fuzz/TokenizerFuzzer.cpp runtime/data/Tokenizer.cpp runtime/data/Json.cpp runtime/data/Unicode.cpp runtime/data/FileIO.cpp"
)
declare -A corpus=([ExecutableFuzzer]=executable [TokenFileFuzzer]=tokenfile [TokenizerFuzzer]=tokenizer)
targets=("$@")
[ ${#targets[@]} = 0 ] && targets=(ExecutableFuzzer TokenFileFuzzer TokenizerFuzzer)
export GPTC_VOCAB_DIR=${GPTC_VOCAB_DIR:-$PWD/data/gpt2}
status=0
for t in "${targets[@]}"; do
  echo "== $t: build"
  # shellcheck disable=SC2086
  "$CXX" "${flags[@]}" ${sources[$t]} -o "$OUT/$t"
  mkdir -p "$OUT/$t.corpus"
  echo "== $t: ${SECONDS_PER_TARGET} s"
  if ! (cd "$OUT" && "./$t" -max_total_time="$SECONDS_PER_TARGET" -max_len=8192 -rss_limit_mb=2048 \
          -artifact_prefix="$t-" -print_final_stats=1 "$t.corpus" \
          "../test/fuzz/corpus/${corpus[$t]}" 2>&1 | tail -25); then
    echo "== $t: FAILED (reproducer: build-fuzz/$t-crash-*)"
    status=1
  fi
done
exit $status
