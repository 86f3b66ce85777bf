#!/usr/bin/env bash
# Installs every Debian 12 package gptc needs, then configures and builds
# it into build/. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
PACKAGES=(
  cmake ninja-build g++ lld python3
  # MLIR/LLVM 22 (bookworm-security): libMLIR.so, mlir-tblgen, lit, FileCheck.
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  # What LLVM's CMake config links against.
  libzstd-dev libedit-dev zlib1g-dev libz3-dev libxml2-dev libffi-dev libncurses-dev
  flatbuffers-compiler libflatbuffers-dev
  libgtest-dev libgmock-dev
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

cmake -G Ninja -S . -B build \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld \
  -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld
ninja -C build -j2
