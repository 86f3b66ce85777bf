#!/usr/bin/env bash
# Builds everything with g++ AddressSanitizer + UndefinedBehaviorSanitizer
# into build-asan/ (apart from build/) and runs ctest there. Any ASan report,
# leak or UB (-fno-sanitize-recover) fails the test that hit it.
#   bash scripts/sanitize.sh            # configure, build (-j2), ctest
#   JOBS=8 bash scripts/sanitize.sh -R Checkpoint   # extra args go to ctest
# Our code is instrumented; libMLIR.so, cudart and cuBLASLt are not (and
# needed no suppressions). The fuzz tests are left out: scripts/fuzz.sh
# builds them with clang's ASan + UBSan already.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}
BUILD=build-asan
san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
launcher=()
command -v ccache >/dev/null 2>&1 &&
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -G Ninja -S . -B "$BUILD" "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DCMAKE_CXX_FLAGS="$san" -DCMAKE_C_FLAGS="$san" \
  -DCMAKE_EXE_LINKER_FLAGS="-fuse-ld=lld $san" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fuse-ld=lld $san" \
  -DGPTC_FUZZ_TESTS=OFF
ninja -C "$BUILD" -j"$JOBS"
# abort_on_error: a report ends in SIGABRT, not exit 1, so that a lit test's
# `not gptc ...` (which expects exit 1) cannot pass over it.
# protect_shadow_gap=0: cudart maps memory in ASan's shadow gap, so a GPU
# test would abort at its first CUDA call without it (GPU machines only).
export ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:abort_on_error=1
ctest --test-dir "$BUILD" --output-on-failure -j"$JOBS" "$@"
