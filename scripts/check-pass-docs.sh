#!/usr/bin/env bash
# Every pass that a Passes.td declares has a row in docs/architecture.md's
# pass table, and every row names a declared pass: ctest's docs.passes.
set -euo pipefail
cd "$(dirname "$0")/.."
doc=docs/architecture.md
declared=$(sed -n 's/^def [A-Za-z0-9]*Pass : Pass<"\([^"]*\)".*/\1/p' \
  dialects/GPT/Transforms/Passes.td compiler/Transforms/Passes.td | sort)
documented=$(sed -n 's/^| `\(gpt-[a-z0-9-]*\)` | .*/\1/p' "$doc" | sort)
if [ "$declared" != "$documented" ]; then
  echo "check-pass-docs: the passes of the Passes.td files and the rows of $doc's pass table differ" \
    "(< declared, > documented):" >&2
  diff <(echo "$declared") <(echo "$documented") >&2 || true
  exit 1
fi
echo "check-pass-docs: $(echo "$declared" | wc -l) passes, each with a row in $doc"
