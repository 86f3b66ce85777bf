#!/usr/bin/env python3
"""gpt-data encode against tiktoken's GPT-2 encoding on the same text: MB/s and
tokens/s, in all and per worker (thread or process), and whether the ids agree.

  python3 bench/tools/tokenizer_bench.py --gpt-data build/bin/gpt-data \
      --vocab-dir data/gpt2 --input text.txt --workers 1,2,4,8,16 --out OUTDIR

The text is split into documents as llm.c's tinyshakespeare script and
`gpt-data encode --split-on-blank-lines` split it: at every "\\n\\n", which stays
at the end of the document it closes. Runs:
  gpt-data      --threads N for each N (timed by gpt-data itself, the
                tokenizer's loading excluded; the wall time is printed too);
                every N must write the same bytes
  tiktoken      one process, one thread (encode_ordinary per document); its
                own thread pool (encode_ordinary_batch, num_threads=N: the Rust
                core releases the GIL); and N processes (multiprocessing, the
                documents cut into 4N runs, results sent back), timed after
                the pool has started and built its encodings
tiktoken is built from DIR/encoder.json and DIR/vocab.bpe (tiktoken.Encoding
with GPT-2's pattern and ranks), never tiktoken.get_encoding("gpt2"), which
downloads those two files from openaipublic.blob.core.windows.net on first
use: the device has no network. Where tiktoken is not installed (the CPU
machine) its rows are skipped. Writes OUTDIR/tokenizer.md (the table).
"""

import argparse
import array
import json
import multiprocessing
import os
import re
import subprocess
import sys
import time

# GPT-2's pre-tokenization pattern (OpenAI's encoder.py).
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
END_OF_TEXT = "<|endoftext|>"


def byte_decoder():
    """GPT-2's bytes_to_unicode, inverted: the stand-in character -> its byte."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
                 list(range(ord("®"), ord("ÿ") + 1)))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    return table


def local_gpt2_encoding(vocab_dir):
    """tiktoken's GPT-2 encoding from the local encoder.json (whose ids are the
    BPE ranks: the 256 bytes, then one per merge of vocab.bpe in order)."""
    import tiktoken
    decoder = byte_decoder()
    with open(os.path.join(vocab_dir, "encoder.json"), encoding="utf-8") as f:
        encoder = json.load(f)
    ranks = {bytes(decoder[c] for c in token): rank
             for token, rank in encoder.items() if token != END_OF_TEXT}
    # vocab.bpe must agree: every merge result is the token of the next rank.
    with open(os.path.join(vocab_dir, "vocab.bpe"), encoding="utf-8") as f:
        merges = [line.split() for line in f.read().split("\n")[1:] if line]
    for i, (left, right) in enumerate(merges):
        if encoder[left + right] != 256 + i:
            raise SystemExit(f"vocab.bpe merge {i} ({left} {right}) is not encoder.json's rank")
    enc = tiktoken.Encoding(name="gpt2-local", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                            special_tokens={END_OF_TEXT: encoder[END_OF_TEXT]},
                            explicit_n_vocab=len(encoder))
    assert enc.encode_ordinary("Hello world") == [15496, 995], "not GPT-2's encoding"
    return enc


def split_documents(text):
    """llm.c's rule: a document ends with each "\\n\\n"; the last may be empty."""
    parts = text.split("\n\n")
    return [p + "\n\n" for p in parts[:-1]] + [parts[-1]]


_ENC = None


def _init_worker(vocab_dir):
    global _ENC
    _ENC = local_gpt2_encoding(vocab_dir)


def _encode_run(docs):
    return [_ENC.encode_ordinary(d) for d in docs]


def read_token_file(path):
    with open(path, "rb") as f:
        header = array.array("i")
        header.frombytes(f.read(1024))
        tokens = array.array("H")
        tokens.frombytes(f.read())
    if header[0] != 20240520 or header[2] != len(tokens):
        raise SystemExit(f"{path}: not an llm.c token file")
    return tokens


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpt-data", required=True)
    ap.add_argument("--vocab-dir", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--workers", default="1,2,4,8,16")
    ap.add_argument("--label", default="")
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    os.makedirs(args.out, exist_ok=True)
    with open(args.input, "rb") as f:
        raw = f.read()
    text = raw.decode("utf-8")
    docs = split_documents(text)
    mb = len(raw) / 1e6
    label = args.label or os.path.basename(args.input)
    print(f"{label}: {len(raw):,} bytes, {len(docs):,} documents", flush=True)
    rows = []  # (tokenizer, workers, seconds, tokens)

    # gpt-data, whose own summary times the encoding.
    reference = None
    for n in workers:
        out = os.path.join(args.out, f"gpt-data-{n}.bin")
        start = time.perf_counter()
        r = subprocess.run([args.gpt_data, "encode", "--vocab-dir", args.vocab_dir,
                            "--split-on-blank-lines", "--progress", "off", "--threads", str(n),
                            args.input, "-o", out], capture_output=True, text=True)
        wall = time.perf_counter() - start
        if r.returncode != 0:
            raise SystemExit(r.stdout + r.stderr)
        m = re.search(r": ([\d,]+) tokens, .* ([\d.]+) s on", r.stderr)
        tokens, seconds = int(m.group(1).replace(",", "")), float(m.group(2))
        print(f"  gpt-data --threads {n}: {seconds:.2f} s ({wall:.2f} s wall)", flush=True)
        rows.append(("gpt-data", n, seconds, tokens))
        with open(out, "rb") as f:
            data = f.read()
        if reference is None:
            reference = data
        elif data != reference:
            raise SystemExit(f"gpt-data --threads {n} wrote other bytes than --threads {workers[0]}")
        if n != workers[0]:
            os.remove(out)
    gd_tokens = read_token_file(os.path.join(args.out, f"gpt-data-{workers[0]}.bin"))

    # The control: N processes of one thread each on 1/N of the documents,
    # sharing nothing but the machine. Their slowest encoding time (as each
    # reports it, loading aside) against one thread's shows what the host's
    # cores give this work, whatever the program does.
    for n in workers:
        if n == 1:
            continue
        step = (len(docs) + n - 1) // n
        paths = []
        for k in range(n):
            path = os.path.join(args.out, f"part-{n}-{k}.txt")
            with open(path, "w", encoding="utf-8") as f:
                f.write("".join(docs[k * step:(k + 1) * step]))
            paths.append(path)
        procs = [subprocess.Popen([args.gpt_data, "encode", "--vocab-dir", args.vocab_dir,
                                   "--split-on-blank-lines", "--progress", "off", "--threads", "1",
                                   p, "-o", p + ".bin"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for p in paths]
        slowest, tokens = 0.0, 0
        for proc in procs:
            out_, err = proc.communicate()
            if proc.returncode != 0:
                raise SystemExit(out_ + err)
            m = re.search(r": ([\d,]+) tokens, .* ([\d.]+) s on", err)
            tokens += int(m.group(1).replace(",", ""))
            slowest = max(slowest, float(m.group(2)))
        for p in paths:
            os.remove(p)
            os.remove(p + ".bin")
        rows.append(("gpt-data processes (control)", n, slowest, tokens))
        print(f"  gpt-data, {n} processes of 1 thread: {slowest:.2f} s (the slowest)", flush=True)

    agree = "tiktoken not installed"
    try:
        enc = local_gpt2_encoding(args.vocab_dir) if not os.environ.get("NO_TIKTOKEN") else None
    except ImportError:
        enc = None
    if enc is not None:
        start = time.perf_counter()
        ids = [enc.encode_ordinary(d) for d in docs]
        seconds = time.perf_counter() - start
        total = sum(len(x) for x in ids)
        rows.append(("tiktoken", 1, seconds, total))
        print(f"  tiktoken, 1 thread: {seconds:.2f} s", flush=True)
        # The same ids as gpt-data's file (<|endoftext|> before each document)?
        flat = array.array("H")
        for x in ids:
            flat.append(50256)
            flat.extend(x)
        if flat == gd_tokens:
            agree = f"identical ({len(flat):,} ids)"
        else:
            first = next((i for i, (a, b) in enumerate(zip(flat, gd_tokens)) if a != b),
                         min(len(flat), len(gd_tokens)))
            agree = (f"DIFFERENT: tiktoken {len(flat):,} ids, gpt-data {len(gd_tokens):,}; "
                     f"first difference at id {first:,}")
        del ids, flat
        for n in workers:
            if n == 1:
                continue
            start = time.perf_counter()
            out = enc.encode_ordinary_batch(docs, num_threads=n)
            seconds = time.perf_counter() - start
            rows.append(("tiktoken threads", n, seconds, sum(len(x) for x in out)))
            print(f"  tiktoken, {n} threads: {seconds:.2f} s", flush=True)
        for n in workers:
            runs = 4 * n
            step = (len(docs) + runs - 1) // runs
            chunks = [docs[i:i + step] for i in range(0, len(docs), step)]
            with multiprocessing.Pool(n, initializer=_init_worker,
                                      initargs=(args.vocab_dir,)) as pool:
                pool.map(_encode_run, [["warm up"]] * n)
                start = time.perf_counter()
                out = pool.map(_encode_run, chunks, chunksize=1)
                seconds = time.perf_counter() - start
            rows.append(("tiktoken processes", n, seconds,
                         sum(len(x) for chunk in out for x in chunk)))
            print(f"  tiktoken, {n} processes: {seconds:.2f} s", flush=True)
    print(f"  ids, tiktoken vs gpt-data: {agree}", flush=True)

    lines = [f"**{label}**: {len(raw):,} bytes, {len(docs):,} documents; "
             f"ids, tiktoken vs gpt-data: {agree}", "",
             "| tokenizer | workers | s | MB/s | tokens/s | MB/s per worker | tokens/s per worker"
             " | speed-up vs 1 |", "|---|---|---|---|---|---|---|---|"]
    base = {name: seconds for name, n, seconds, _ in rows if n == 1}
    for name, n, seconds, tokens in rows:
        b = base.get("gpt-data" if name.startswith("gpt-data") else "tiktoken")
        lines.append(f"| {name} | {n} | {seconds:.2f} | {mb / seconds:.1f} | "
                     f"{tokens / seconds / 1e6:.2f}M | {mb / seconds / n:.1f} | "
                     f"{tokens / seconds / n / 1e6:.2f}M | "
                     f"{(b / seconds) if b else 0:.2f}x |")
    table = "\n".join(lines)
    print(table, flush=True)
    with open(os.path.join(args.out, "tokenizer.md"), "a") as f:
        f.write(table + "\n\n")


if __name__ == "__main__":
    main()
