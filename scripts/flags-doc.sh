#!/usr/bin/env bash
# docs/flags.md from the tools' own --help, so the flag reference cannot go
# stale: the help text is the one source, and ctest's docs.flags runs
# `--check` against the built tools.
#   bash scripts/flags-doc.sh [BINDIR]          rewrite docs/flags.md (BINDIR: build/bin)
#   bash scripts/flags-doc.sh --check [BINDIR]  exit 1, with a diff, if it differs
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = --check ]; then
  check=1
  shift
fi
bin=${1:-build/bin}
doc=docs/flags.md

# One tool's help: a heading, the command line, then its output verbatim.
section() {
  local title=$1
  shift
  local text
  if ! text=$("$bin/$1" "${@:2}" 2>&1); then
    echo "flags-doc: '$1 ${*:2}' failed:" >&2
    printf '%s\n' "$text" >&2
    exit 1
  fi
  printf '%s\n\n`%s`\n\n```text\n%s\n```\n\n' "$title" "$*" "$text"
}

generate() {
  cat <<'EOF'
# Flags

Every flag of every tool, as its `--help` prints it. This page is generated:
do not edit it. `bash scripts/flags-doc.sh` rewrites it from build/bin, and
ctest's `docs.flags` test fails when it differs from the built tools' help
(run the script and commit the page). `gpt-opt --help` lists every pass and
its options (it is mlir-opt's, with MLIR's own flags).
[tools.md](tools.md) shows the tools by example.

EOF
  section "## gptc" gptc --help-hidden
  section "## gptrun" gptrun --help
  section "## gpt-data" gpt-data --help
  local command
  for command in encode decode info austen; do
    section "### gpt-data $command" gpt-data "$command" --help
  done
  section "## gptplot" gptplot --help
  section "## gpt-convert" gpt-convert --help
}

# The page ends in one newline, not the blank line a section leaves.
render() {
  generate | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}'
}

if [ "$check" = 1 ]; then
  if ! diff -u "$doc" <(render) >&2; then
    echo "flags-doc: $doc differs from the tools' --help (above: - the page, + the tools);" \
      "run 'bash scripts/flags-doc.sh' and commit $doc" >&2
    exit 1
  fi
  echo "flags-doc: $doc matches the tools' --help"
else
  render > "$doc.tmp"
  mv "$doc.tmp" "$doc"
  echo "flags-doc: wrote $doc"
fi
