#!/usr/bin/env python3
"""The table of bench/device/run_honest.sh (issue 48): gptc next to its peers,
each ratio against the best peer of the same precision, and the speed-of-light
table when bench/probes/sol.py's JSONs are there. Needs no torch.

Reads, in --work:
  run-<model>-<kind>.json   one run's summary: bench/twin/compare.py gptrun-log
                            (gptc, llm.c) or bench/twin/train_torch.py --json
                            (torch.compile, torchao float8); kinds:
                              gptc-bf16, gptc-fp8, gptc-fp8best,
                              torch-bf16, torchao-tensorwise, torchao-rowwise, llmc-bf16
  sol-<model>.json          bench/probes/sol.py's bounds for that size (optional)
and writes --md (markdown) and --json (rows, ratios, bounds).

Ratios (peer ms / gptc ms, > 1 means gptc is faster): gptc bf16 against the
best (fastest) bf16 peer of its size (torch.compile bf16, llm.c bf16); each
gptc fp8 row against the best FP8 peer (torchao float8 tensorwise, rowwise);
and every gptc row against the best peer of any precision.

  python3 bench/tools/honest_report.py --work /tmp/gptc-honest/runs --md t.md --json t.json
"""
import argparse
import glob
import json
import math
import os
import re
import sys

SIZES = ["124M", "350M", "774M", "1558M"]
# n_layer, n_embd (the presets of models/gpt2.mlir; padded vocabulary 50304).
SHAPES = {"124M": (12, 768), "350M": (24, 1024), "774M": (36, 1280), "1558M": (48, 1600)}
VOCAB_PADDED, BLOCK = 50304, 1024
MIN_TIMED = 3       # timed steps a run needs to count as a peer's time
PEAK_TFLOPS = 989.5  # H100/H200 SXM dense bf16 (bench/README.md, MFU), for every precision

KINDS = [  # (kind, label, precision, side)
    ("gptc-bf16", "gptc bf16", "bf16", "gptc"),
    ("gptc-fp8best", "gptc fp8, best recipe", "fp8", "gptc"),
    ("gptc-fp8", "gptc fp8, default recipe", "fp8", "gptc"),
    ("torch-bf16", "torch.compile bf16", "bf16", "peer"),
    ("llmc-bf16", "llm.c bf16 (cuDNN attention)", "bf16", "peer"),
    ("torchao-tensorwise", "torch.compile + torchao float8 tensorwise", "fp8", "peer"),
    ("torchao-rowwise", "torch.compile + torchao float8 rowwise", "fp8", "peer"),
]
KIND = {k[0]: k for k in KINDS}
RUN_RE = re.compile(r"^run-(\d+M)-(.+)\.json$")


def num_parameters(model):
    L, C = SHAPES[model]
    return VOCAB_PADDED * C + BLOCK * C + 2 * C + L * (12 * C * C + 13 * C)


def flops_per_token(model, T=1024):
    L, C = SHAPES[model]
    return 6 * num_parameters(model) + 12 * L * T * C


def fmt(x, spec, empty="—"):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return empty
    return format(x, spec)


def load_runs(works):
    """run-<model>-<kind>.json of each folder; a later folder's run replaces
    an earlier one's (calls on one warm machine, merged)."""
    runs = {}
    paths = [p for w in works for p in sorted(glob.glob(os.path.join(w, "run-*.json")))]
    for path in paths:
        m = RUN_RE.match(os.path.basename(path))
        if not m or m.group(2) not in KIND:
            continue
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, ValueError) as e:
            print(f"honest_report: {path}: {e}", file=sys.stderr)
            continue
        if not r.get("median_ms"):
            continue
        runs[(m.group(1), m.group(2))] = r
    return runs


def load_sol(works):
    sol = {}
    for path in [p for w in works for p in sorted(glob.glob(os.path.join(w, "sol-*.json")))]:
        try:
            with open(path) as f:
                s = json.load(f)
            sol[s["model"]] = s
        except (OSError, ValueError, KeyError) as e:
            print(f"honest_report: {path}: {e}", file=sys.stderr)
    return sol


def build(runs, sol):
    out = {"sizes": {}, "peak_tflops": PEAK_TFLOPS}
    for model in SIZES:
        rows = []
        for kind, label, prec, side in KINDS:
            r = runs.get((model, kind))
            if not r:
                continue
            batch, seq = r.get("batch"), r.get("seq") or 1024
            ms = r["median_ms"]
            tok_s = batch * seq * (r.get("accum_steps") or 1) / (ms / 1e3) if batch else r.get("median_tok_s")
            rows.append({
                "kind": kind, "label": label, "precision": prec, "side": side,
                "batch": batch, "seq": seq, "ms": ms, "tok_s": tok_s,
                "mfu": flops_per_token(model, seq) * tok_s / (PEAK_TFLOPS * 1e12) if tok_s else None,
                "peak_gib": r.get("peak_mem_gib"),
                "final_loss": r.get("final_loss"),
                "steps": r.get("steps"), "timed_steps": r.get("timed_steps"),
                "compile_s": r.get("gptc_s") if side == "gptc" else r.get("compile_s"),
                "compile_where": "gptc AOT, CPU" if side == "gptc" else ("first step" if r.get("compile_s") is not None else None),
                "float8": r.get("float8"),
                "device": r.get("device_name"),
                "torch": r.get("torch"),
            })
        if not rows:
            continue
        best = {}
        for prec in ("bf16", "fp8", "any"):
            # A run stopped before MIN_TIMED steps were timed (a compile that
            # ate its time limit) is shown but sets no ratio.
            peers = [x for x in rows if x["side"] == "peer" and (prec == "any" or x["precision"] == prec)
                     and (x["timed_steps"] or 0) >= MIN_TIMED]
            best[prec] = min(peers, key=lambda x: x["ms"]) if peers else None
        for x in rows:
            if x["side"] != "gptc":
                continue
            b = best[x["precision"]]
            x["vs_best_same_precision"] = b["ms"] / x["ms"] if b else None
            x["best_same_precision_peer"] = b["kind"] if b else None
            x["vs_best_any_peer"] = best["any"]["ms"] / x["ms"] if best["any"] else None
            x["best_any_peer"] = best["any"]["kind"] if best["any"] else None
        size = {"rows": rows, "best_bf16_peer": best["bf16"] and best["bf16"]["kind"],
                "best_fp8_peer": best["fp8"] and best["fp8"]["kind"]}
        s = sol.get(model)
        if s:
            size["sol"] = sol_fractions(s, rows)
        out["sizes"][model] = size
    return out


def sol_fractions(s, rows):
    """gptc's step against sol.py's bounds: bound / gptc ms (the fraction of
    speed of light reached) for bf16 against the bf16 bound and each fp8 row
    against the fp8 bound of its recipe."""
    res = {"bounds": s.get("bounds"), "device": s.get("device"), "rates": s.get("rates")}
    by_kind = {r["kind"]: r for r in rows}
    pairs = [("gptc-bf16", "bf16"), ("gptc-fp8", "fp8_blocks"), ("gptc-fp8best", "fp8_head")]
    res["fractions"] = {}
    for kind, bound_name in pairs:
        r, b = by_kind.get(kind), (s.get("bounds") or {}).get(bound_name)
        if r and b:
            res["fractions"][kind] = {"bound": bound_name, "bound_ms": b["total_ms"], "gptc_ms": r["ms"],
                                      "fraction_of_sol": b["total_ms"] / r["ms"],
                                      "gap_ms": r["ms"] - b["total_ms"]}
    return res


def markdown(rep):
    lines = []
    for model, size in rep["sizes"].items():
        rows = size["rows"]
        b = rows[0]["batch"]
        lines += [f"#### {model}, B={b}, T=1024", "",
                  "| run | ms/step | tok/s | MFU | peak GiB | loss @ last | compile s | vs best peer, same precision | vs best peer, any |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for x in rows:
            vs = (f"**{x['vs_best_same_precision']:.3f}×** ({KIND[x['best_same_precision_peer']][1]})"
                  if x.get("vs_best_same_precision") else "")
            vs_any = f"{x['vs_best_any_peer']:.3f}×" if x.get("vs_best_any_peer") else ""
            comp = fmt(x["compile_s"], ".1f")
            if x["side"] == "gptc" and x["compile_s"] is not None:
                comp += " (AOT, CPU)"
            label = x["label"]
            if (x["timed_steps"] or 0) < MIN_TIMED:
                label += f" (only {x['timed_steps']} timed step(s): not used)"
            f8 = x.get("float8")
            if f8:
                label += f" ({f8.get('converted')}/{f8.get('of')} linears)"
            lines.append(f"| {label} | {fmt(x['ms'], '.2f')} | {fmt(x['tok_s'], ',.0f')} | "
                         f"{fmt(100 * x['mfu'] if x['mfu'] else None, '.1f')}% | {fmt(x['peak_gib'], '.2f')} | "
                         f"{fmt(x['final_loss'], '.4f')} | {comp} | {vs} | {vs_any} |")
        lines.append("")
        sol = size.get("sol")
        if sol and sol.get("bounds"):
            lines += [f"Speed of light, {model} (bench/probes/sol.py; rates measured in the same call):", "",
                      "| bound | GEMM ms | attention ms | memory-bound rest ms | total ms | gptc ms | gptc at % of SOL |",
                      "|---|---|---|---|---|---|---|"]
            fr = {v["bound"]: (k, v) for k, v in sol.get("fractions", {}).items()}
            for name, bd in sol["bounds"].items():
                k, v = fr.get(name, (None, None))
                lines.append(f"| {name} | {bd['gemm_ms']:.2f} | {bd['attention_ms']:.2f} | {bd['memory_ms']:.2f} | "
                             f"{bd['total_ms']:.2f} | {fmt(v and v['gptc_ms'], '.2f')} ({k or '—'}) | "
                             f"{fmt(v and 100 * v['fraction_of_sol'], '.1f')}% |")
            lines.append("")
    lines.append("Ratios: peer ms / gptc ms (> 1: gptc faster). ms/step: median after the warm-up steps; "
                 "MFU = (6N + 12LTC) tok/s / 989.5 TFLOP/s for every precision.")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", required=True, action="append",
                    help="a folder of run-*.json and sol-*.json; repeat to merge calls (later wins)")
    ap.add_argument("--md", default="")
    ap.add_argument("--json", default="")
    a = ap.parse_args(argv)
    rep = build(load_runs(a.work), load_sol(a.work))
    md = markdown(rep)
    print(md, end="")
    if a.md:
        with open(a.md, "w") as f:
            f.write(md)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rep, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
