#!/usr/bin/env bash
# bench/device/run_tokenizer.sh: gpt-data encode's speed against tiktoken's GPT-2
# encoding on the same text, per core and scaling with cores (issue 43, item 3).
# It needs no GPU: the device is used for its 16 cores and its tiktoken.
#   here:   /work/bin/nj gpt-data
#   device: run(command="bash bench/device/run_tokenizer.sh",
#               carry=["build/bin/gpt-data", "data/gpt2", "data/austen_train.bin"])
#   on the CPU machine (no tiktoken: its rows are skipped):
#           SIZE_MB=16 WORKERS=1,2 bash bench/device/run_tokenizer.sh
# Two inputs of SIZE_MB (default 100) MB each, made on the spot:
#   austen   the five novels of data/austen_train.bin (gpt-data decode, without
#            the <|endoftext|> markers), repeated: natural English, but every
#            word recurs many times (which gpt-data's per-thread cache of
#            pieces, and tiktoken's whole-token lookups, both gain from)
#   diverse  generated text over a 200,000-word lexicon drawn with Zipf's law
#            (s = 1.1), with numbers, punctuation, capitals and paragraphs:
#            many more distinct words, as a web or Wikipedia dump has
# Each is split into documents at blank lines (gpt-data --split-on-blank-lines,
# llm.c's rule) and encoded by
#   gpt-data --threads N for N in WORKERS (default 1,2,4,8,16; the bytes must
#            be the same for every N)
#   tiktoken (0.14 on the device) in one thread, its own thread pool of N, and
#            N processes; built from data/gpt2's encoder.json and vocab.bpe with
#            tiktoken.Encoding, since tiktoken.get_encoding("gpt2") would
#            download them (openaipublic.blob.core.windows.net) and the device
#            has no network
# and the script checks that tiktoken's ids equal gpt-data's. The tables (MB/s
# and tokens/s, in all and per worker) go to stdout and $OUT/tokenizer.md
# (or out/device).
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-out/device}
SIZE_MB=${SIZE_MB:-100}
WORKERS=${WORKERS:-1,2,4,8,16}
PYTHON=${PYTHON:-python3}
GPT_DATA=${GPT_DATA:-build/bin/gpt-data}
VOCAB=${VOCAB:-data/gpt2}
W=${W:-/tmp/gptc-tokenizer}
mkdir -p "$OUT" "$W"
rm -f "$OUT/tokenizer.md"
echo "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
# Physical cores against hardware threads: scaling past the physical cores
# is SMT's, not the program's.
lscpu 2>/dev/null | grep -E '^(Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\))' || true
"$PYTHON" -c 'import tiktoken; print("tiktoken", tiktoken.__version__)' 2>/dev/null ||
  echo "tiktoken: not installed (its rows are skipped)"
"$GPT_DATA" --version || exit 1

# austen: the training novels as text, repeated to SIZE_MB.
"$GPT_DATA" decode --vocab-dir "$VOCAB" data/austen_train.bin -o "$W/austen1.txt" || exit 1
SIZE_MB=$SIZE_MB W=$W "$PYTHON" - <<'EOF' || exit 1
import os
w, size = os.environ["W"], int(os.environ["SIZE_MB"]) * 1000000
one = open(f"{w}/austen1.txt", encoding="utf-8").read().replace("<|endoftext|>", "")
with open(f"{w}/austen.txt", "w", encoding="utf-8") as f:
    written = 0
    while written < size:
        f.write(one)
        written += len(one.encode("utf-8"))
EOF

# diverse: Zipf-distributed words of a large generated lexicon.
SIZE_MB=$SIZE_MB W=$W "$PYTHON" - <<'EOF' || exit 1
import itertools, os, random
w, size = os.environ["W"], int(os.environ["SIZE_MB"]) * 1000000
rng = random.Random(43)
syllables = ("ka ro mi ne sta ver lin do qua pel tor ish an un re ex ing ed ly ment "
             "tion ous al ic er est th sch ph zy wo gra bel fu xi ya ou au ei ch ck").split()
lexicon, seen = [], set()
while len(lexicon) < 200000:
    word = "".join(rng.choice(syllables) for _ in range(rng.choice((1, 2, 2, 3, 3, 4))))
    if word not in seen:
        seen.add(word)
        lexicon.append(word.capitalize() if rng.random() < 0.15 else word)
cum = list(itertools.accumulate(1 / (k + 1) ** 1.1 for k in range(len(lexicon))))
with open(f"{w}/diverse.txt", "w", encoding="utf-8") as f:
    written = 0
    while written < size:
        words = rng.choices(lexicon, cum_weights=cum, k=200000)
        out, line = [], 0
        for i, word in enumerate(words):
            r = rng.random()
            if r < 0.02:
                word = str(rng.randrange(100000))
            out.append(word)
            line += len(word) + 1
            if r > 0.94:
                out.append("," if r < 0.97 else ".")
            if line > 75:
                out.append("\n\n" if rng.random() < 0.15 else "\n")
                line = 0
            else:
                out.append(" ")
        chunk = "".join(out).replace(" ,", ",").replace(" .", ".")
        f.write(chunk)
        written += len(chunk)
EOF
ls -la "$W"/austen.txt "$W"/diverse.txt

for input in austen diverse; do
  "$PYTHON" bench/tools/tokenizer_bench.py --gpt-data "$GPT_DATA" --vocab-dir "$VOCAB" \
    --input "$W/$input.txt" --label "$input" --workers "$WORKERS" --out "$W/$input" ||
    echo "tokenizer_bench FAILED on $input"
  cat "$W/$input/tokenizer.md" >> "$OUT/tokenizer.md"
  rm -rf "$W/$input"
done
rm -f "$W"/austen1.txt "$W"/austen.txt "$W"/diverse.txt
