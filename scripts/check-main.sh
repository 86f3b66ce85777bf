#!/usr/bin/env bash
# ctest's main.host: the main job on the CPU with 3 steps leaves its IR,
# log, plot, checkpoint and sample in the folder it names.
# Usage: bash scripts/check-main.sh BINDIR
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
MAIN_TARGET=host GPTC_BIN=${1:-build/bin} bash scripts/main.sh "$out/run" 3 > "$out/main.log" 2>&1 ||
  { cat "$out/main.log" >&2; echo "check-main: scripts/main.sh failed" >&2; exit 1; }
run=$out/run
fail() { cat "$out/main.log" >&2; echo "check-main: $*" >&2; exit 1; }
[ -n "$(ls "$run/ir")" ] || fail "no IR dumps in $run/ir"
[ "$(grep -c '"kind":"train"' "$run/log.jsonl")" = 3 ] || fail "log.jsonl lacks 3 train records"
grep -q '"kind":"val","step":3' "$run/log.jsonl" || fail "log.jsonl lacks the validation after step 3"
grep -q '^<svg' "$run/loss.svg" || fail "loss.svg is not an SVG"
head -c 8 "$run/checkpoints/step-00000003.ckpt" | grep -q GPTCCKPT || fail "no checkpoint of step 3"
prompt="It is a truth universally acknowledged"
grep -q "^$prompt" "$run/sample.txt" || fail "sample.txt does not start with the prompt"
[ "$(wc -c < "$run/sample.txt")" -gt $(( ${#prompt} + 20 )) ] || fail "sample.txt holds no generated text"
grep -q "main: everything is in $run/" "$out/main.log" || fail "main.sh did not name its folder"
echo "check-main: $run holds ir/, log.jsonl, log.csv, loss.svg, checkpoints/step-00000003.ckpt and sample.txt"
