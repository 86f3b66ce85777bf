#!/usr/bin/env bash
# Runs every test: the lit suite and the GoogleTest suites, through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
ninja -C build -j2
ctest --test-dir build --output-on-failure -j2
