#!/usr/bin/env bash
# Builds the runtime half only (no MLIR) into build-device/: gptrun,
# gpt-data and the runtime GoogleTest suites, for the GPU machine (CUDA 13,
# CMake, Ninja; no MLIR, and no FlatBuffers package).
#   bash scripts/device-build.sh --pack   # here: copy FlatBuffers into build-deps/
#   bash scripts/device-build.sh          # there: build (carry build-deps/)
#   bash scripts/device-build.sh --test   # there: build, then ctest
# The CUDA tests that skip on CPU machines run for real on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
deps=build-deps/flatbuffers

if [ "${1:-}" = "--pack" ]; then
  # The Debian package's headers, static library, CMake config and flatc
  # (statically linked), laid out as a prefix for CMAKE_PREFIX_PATH.
  lib=lib/x86_64-linux-gnu
  rm -rf "$deps"
  mkdir -p "$deps/include" "$deps/$lib/cmake" "$deps/bin"
  cp -r /usr/include/flatbuffers "$deps/include/"
  cp -r /usr/$lib/cmake/flatbuffers "$deps/$lib/cmake/"
  cp -a /usr/$lib/libflatbuffers.* "$deps/$lib/"
  cp /usr/bin/flatc "$deps/bin/"
  du -sh "$deps"
  exit 0
fi

prefix=()
[ -d "$deps" ] && prefix=(-DCMAKE_PREFIX_PATH="$PWD/$deps")
cmake -G Ninja -S . -B build-device -DGPTC_BUILD_COMPILER=OFF -DGPTC_BUILD_TESTS=ON \
  -DCMAKE_BUILD_TYPE=Release "${prefix[@]}"
ninja -C build-device
if [ "${1:-}" = "--test" ]; then
  ctest --test-dir build-device --output-on-failure -j"$(nproc)"
fi
