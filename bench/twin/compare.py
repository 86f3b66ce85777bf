#!/usr/bin/env python3
"""Reads the benchmark JSON summaries and prints the comparison tables.

Subcommands (plain python3, no torch):

  table RUN.json...            the side-by-side markdown table (ours, torch eager,
                               torch.compile, ...): ms/step, tok/s, MFU, peak GiB,
                               loss at the last step, compile time
  parity OURS.json TORCH.json  both loss columns, per-step relative differences
                               and the maximum; exit 1 above --tol
  gptrun-log LOG -o RUN.json   turns gptrun's stdout into a summary of the same
                               schema as bench/twin/train_torch.py's --json
  report --work DIR --out DIR  what bench/device/run_device.sh calls at the end: reads
                               DIR/*.json (+ DIR/<run>.smi memory samples) and
                               writes results.json, results.md and steps.csv

A summary (train_torch.py --json, or gptrun-log) holds at least: label,
runner, dtype, tf32, model, batch, seq, accum_steps, steps, losses,
grad_norms, lrs, step_ms, median_ms, median_tok_s, mfu; optionally
peak_mem_gib, peak_smi_gib, compile_s, gptc_s, val_loss.
"""
import argparse
import csv
import glob
import json
import math
import os
import re
import statistics
import sys

H200_BF16_DENSE_TFLOPS = 989.5

# Known runs of bench/device/run_device.sh, in table order.
ORDER = ["train_ours", "speed_eager", "speed_compile", "bf16_eager", "bf16_compile",
         "parity_ours", "parity_torch"]


def load(path):
    with open(path) as f:
        return json.load(f)


def fmt(x, spec, none="—"):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return none
    return format(x, spec)


def precision(r):
    d = r.get("dtype", "?")
    if d == "fp32":
        return f"fp32 (tf32 {r.get('tf32', '?')})"
    return d


# --- gptrun log ------------------------------------------------------------

NUM = r"([-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|-?inf)"
STEP_RE = re.compile(r"\bstep\s+(\d+)\s*/\s*(\d+)", re.I)
FIELDS = {
    "loss": [r"\bloss\s*[:=]?\s*" + NUM],
    "norm": [r"\b(?:grad_?)?norm\s*[:=]?\s*" + NUM],
    "lr": [r"\blr\s*[:=]?\s*" + NUM],
    "ms": [NUM + r"\s*ms\b", r"\bms\s*[:=]?\s*" + NUM, r"\bdt\s*[:=]?\s*" + NUM],
    "tok_s": [NUM + r"\s*tok(?:ens)?/s", r"\btok(?:ens)?/s\s*[:=]?\s*" + NUM],
    "mfu": [r"\bMFU\s*[:=]?\s*" + NUM, NUM + r"\s*%\s*MFU"],
}
MEM_RE = re.compile(r"(?:peak|memory|mem)\b[^\n|]*?" + NUM + r"\s*(GiB|MiB|GB|MB)", re.I)
# gptrun: "gptrun: target cuda on ...; pools: params 474.8 MiB, ...; total 21.3 GiB"
POOLS_RE = re.compile(r"pools:.*;\s*total\s+" + NUM + r"\s*(B|KiB|MiB|GiB|TiB)\b")
# gptrun: "val after step 200 | loss 4.1234 | 4 batches | 12.3 ms"
VAL_RE = re.compile(r"^val after step\s+(\d+)\s*\|\s*loss\s+" + NUM, re.I)
# gptrun: "gptrun: steps 2-200: 123.4 ms/step, 132,000 tok/s, MFU 11.5%"
MEAN_RE = re.compile(r"steps\s+2-\d+:\s*" + NUM + r"\s*ms/step")
UNITS = {"b": 2.0 ** -30, "kib": 2.0 ** -20, "mib": 2.0 ** -10, "mb": 2.0 ** -10,
         "gib": 1.0, "gb": 1.0, "tib": 1024.0}


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return float("nan")


def parse_gptrun_line(line):
    """One `step i/N | loss X | norm Y | lr Z | T ms | R tok/s | MFU M%` line, or None."""
    m = STEP_RE.search(line)
    if not m:
        return None
    rest = line[m.end():]
    row = {"step": int(m.group(1)), "of": int(m.group(2))}
    for key, patterns in FIELDS.items():
        for p in patterns:
            f = re.search(p, rest, re.I)
            if f:
                row[key] = number(f.group(1))
                break
    return row if "loss" in row else None


def summarize_gptrun(log_text, label, model, batch, seq, accum, dtype, tf32, timing_warmup,
                     peak_tflops, flops_per_token=None):
    rows, peak, pools, val, mean_ms = {}, None, None, None, None
    for line in log_text.splitlines():
        r = parse_gptrun_line(line)
        if r:
            rows[r["step"]] = r          # a repeated step number: keep the last
            continue
        m = VAL_RE.search(line)
        if m:
            val = number(m.group(2))     # the last validation wins
            continue
        m = POOLS_RE.search(line)
        if m:
            pools = number(m.group(1)) * UNITS[m.group(2).lower()]
            continue
        m = MEAN_RE.search(line)
        if m:
            mean_ms = number(m.group(1))
            continue
        m = MEM_RE.search(line)
        if m:
            gib = number(m.group(1)) * UNITS[m.group(2).lower()]
            peak = gib if peak is None else max(peak, gib)
    steps = [rows[k] for k in sorted(rows)]
    tokens = batch * seq * accum
    ms = [r.get("ms") for r in steps]
    if any(x is None for x in ms):      # derive from tok/s when ms is missing
        ms = [r.get("ms") or (tokens / r["tok_s"] * 1e3 if r.get("tok_s") else None)
              for r in steps]
    good = [x for x in ms if x is not None and math.isfinite(x)]
    timed = good[timing_warmup:] if len(good) > timing_warmup else good[-1:]
    median_ms = statistics.median(timed) if timed else None
    tok_s = tokens / (median_ms / 1e3) if median_ms else None
    s = {
        "runner": "gptrun", "label": label, "dtype": dtype, "tf32": tf32,
        "model": model, "batch": batch, "seq": seq, "accum_steps": accum,
        "steps": len(steps), "steps_planned": steps[0]["of"] if steps else None,
        "losses": [r["loss"] for r in steps],
        "grad_norms": [r.get("norm") for r in steps],
        "lrs": [r.get("lr") for r in steps],
        "step_ms": ms, "logged_tok_s": [r.get("tok_s") for r in steps],
        "logged_mfu_percent": [r.get("mfu") for r in steps],
        "timing_warmup": timing_warmup, "timed_steps": len(timed),
        "median_ms": median_ms, "median_tok_s": tok_s,
        "first_step_ms": ms[0] if ms else None,
        "final_loss": steps[-1]["loss"] if steps else None,
        # gptrun allocates its pools once: their total is its planned footprint.
        "peak_mem_gib": peak if peak is not None else pools, "pools_gib": pools,
        "val_loss": val, "gptrun_mean_ms_after_step1": mean_ms,
        "peak_tflops": peak_tflops,
    }
    if flops_per_token and tok_s:
        s["flops_per_token"] = flops_per_token
        s["mfu"] = flops_per_token * tok_s / (peak_tflops * 1e12)
    return s


def flops_per_token(model, seq):
    """6 N + 12 L T C (N with the padded vocabulary), without importing torch."""
    presets = {"124M": (12, 768), "350M": (24, 1024), "774M": (36, 1280), "1558M": (48, 1600),
               "tiny": (2, 16), "mini": (2, 64)}
    if model not in presets:
        return None
    L, C = presets[model]
    V, maxT, mult = (60, 16, 16) if model == "tiny" else (50257, 128 if model == "mini" else 1024, 128)
    Vp = (V + mult - 1) // mult * mult
    n = Vp * C + maxT * C + 2 * C + L * (12 * C * C + 13 * C)
    return 6 * n + 12 * L * seq * C


# --- Tables ----------------------------------------------------------------

def table(runs, reference=None):
    """Markdown side-by-side table; `reference` (a label) gets the speed ratios."""
    head = ("| run | precision | B×T | steps | ms/step | tok/s | vs ref | MFU | "
            "peak GiB (alloc) | peak GiB (smi) | loss @ step | val loss | compile s |")
    lines = [head, "|" + "---|" * 13]
    ref = (next((r for r in runs if r.get("label") == reference), None)
           or next((r for r in runs if r.get("label") == "torch eager"), None))
    for r in runs:
        ratio = (r["median_tok_s"] / ref["median_tok_s"]
                 if ref and r.get("median_tok_s") and ref.get("median_tok_s") else None)
        if r.get("runner") == "gptrun":
            comp = f"gptc {fmt(r.get('gptc_s'), '.1f')} (AOT, CPU)" if r.get("gptc_s") else "AOT"
        else:
            comp = fmt(r.get("compile_s"), ".1f", "—" if r.get("mode") != "compile" else "?")
        last = (f"{r['losses'][-1]:.4f} @ {len(r['losses'])}" if r.get("losses") else "—")
        lines.append(
            f"| {r.get('label', '?')} | {precision(r)} | {r.get('batch')}×{r.get('seq')}"
            f"{'×' + str(r['accum_steps']) if r.get('accum_steps', 1) > 1 else ''} | "
            f"{r.get('steps')} | {fmt(r.get('median_ms'), '.2f')} | "
            f"{fmt(r.get('median_tok_s'), ',.0f')} | {fmt(ratio, '.2f', '')}{'×' if ratio else ''} | "
            f"{fmt(100 * r['mfu'] if r.get('mfu') is not None else None, '.1f')}{'%' if r.get('mfu') is not None else ''} | "
            f"{fmt(r.get('peak_mem_gib'), '.2f')} | {fmt(r.get('peak_smi_gib'), '.2f')} | "
            f"{last} | {fmt(r.get('val_loss'), '.4f')} | {comp} |")
    return "\n".join(lines)


def parity(ours, torch_run, tol, steps=0):
    """(markdown, max relative loss difference or None, passed) over the
    first `steps` steps (0: all)."""
    a, b = ours.get("losses") or [], torch_run.get("losses") or []
    if steps > 0:
        a, b = a[:steps], b[:steps]
    n = min(len(a), len(b))
    la, lb = ours.get("label", "ours"), torch_run.get("label", "torch")
    lines = [f"| step | loss {la} | loss {lb} | rel diff | norm {la} | norm {lb} |",
             "|---|---|---|---|---|---|"]
    worst = None
    na, nb = ours.get("grad_norms") or [], torch_run.get("grad_norms") or []
    for i in range(n):
        d = abs(a[i] - b[i]) / max(abs(b[i]), 1e-30)
        if not math.isfinite(d):
            d = float("inf")
        worst = d if worst is None else max(worst, d)
        lines.append(f"| {i + 1} | {a[i]:.7f} | {b[i]:.7f} | {d:.2e} | "
                     f"{fmt(na[i] if i < len(na) else None, '.5f')} | "
                     f"{fmt(nb[i] if i < len(nb) else None, '.5f')} |")
    passed = worst is not None and worst <= tol and n == len(b) and n > 0
    lines.append("")
    lines.append(f"max relative loss difference over {n} steps: "
                 f"{fmt(worst, '.3e', 'n/a')} (tolerance {tol:g}) -> "
                 f"{'PASS' if passed else 'FAIL'}"
                 + ("" if n == len(b) else f" ({la} logged {len(a)} of {len(b)} steps)"))
    return "\n".join(lines), worst, passed


def smi_peak(path):
    """Max of `nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits` samples (GiB)."""
    try:
        vals = [float(x.split(",")[0]) for x in open(path) if x.strip() and
                x.split(",")[0].strip().replace(".", "", 1).isdigit()]
    except OSError:
        return None
    return max(vals) / 1024 if vals else None


def report(work, out, tol, reference):
    runs = {}
    for path in sorted(glob.glob(os.path.join(work, "*.json"))):
        name = os.path.splitext(os.path.basename(path))[0]
        if name in ("env", "manifest"):
            continue
        try:
            r = load(path)
        except (OSError, ValueError) as e:
            print(f"compare: skip {path}: {e}")
            continue
        peak = smi_peak(os.path.join(work, name + ".smi"))
        if peak is not None:
            r["peak_smi_gib"] = peak
        runs[name] = r
    env = load(os.path.join(work, "env.json")) if os.path.exists(os.path.join(work, "env.json")) else {}
    stages = env.get("stages", {})

    md = [f"### {env.get('date', '?')}: commit {env.get('commit', '?')}",
          "",
          f"- command: `{env.get('command', 'bash bench/device/run_device.sh')}`",
          f"- device: {env.get('gpu', '?')}; driver {env.get('driver', '?')}; "
          f"torch {env.get('torch', '?')}; CUDA {env.get('cuda', '?')}",
          f"- executables: {env.get('manifest_summary', 'none carried')}",
          f"- stages: " + ", ".join(f"{k} {v}" for k, v in stages.items()),
          ""]
    result = {"env": env, "runs": runs}
    if "parity_ours" in runs and "parity_torch" in runs:
        text, worst, passed = parity(runs["parity_ours"], runs["parity_torch"], tol)
        md += ["#### Parity (fp32, TF32 off, same init and batches)", "", text, ""]
        result["parity"] = {"max_rel_loss_diff": worst, "tol": tol, "passed": passed}
    elif "parity_torch" in runs:
        md += ["#### Parity", "", "gptrun did not run: torch losses only: "
               + ", ".join(f"{x:.6f}" for x in runs["parity_torch"]["losses"]), ""]
        result["parity"] = {"passed": None}
    speed = [runs[k] for k in ORDER if k in runs and not k.startswith("parity")]
    speed += [r for k, r in runs.items() if k not in ORDER]
    if speed:
        md += ["#### Training and speed (same model, batch, data, schedule)", "",
               table(speed, reference), "",
               "ms/step and tok/s: medians over the steps after the timing warm-up; "
               "MFU: (6N + 12·L·T·C)·tok/s over 989.5 TFLOP/s (dense bf16); "
               "peak alloc: torch.cuda.max_memory_allocated (gptrun: as it reports); "
               "peak smi: nvidia-smi memory.used during the run (context and caches included).",
               ""]
    text = "\n".join(md)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(out, "steps.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "step", "loss", "grad_norm", "lr", "ms"])
        for name, r in runs.items():
            cols = [r.get(k) or [] for k in ("losses", "grad_norms", "lrs", "step_ms")]
            for i, loss in enumerate(cols[0]):
                w.writerow([name, i + 1, loss] + [c[i] if i < len(c) else "" for c in cols[1:]])
    print(text)
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("table")
    t.add_argument("runs", nargs="+")
    t.add_argument("--reference", default="torch.compile",
                   help="label whose tok/s the ratios divide by")
    p = sub.add_parser("parity")
    p.add_argument("ours")
    p.add_argument("torch")
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--steps", type=int, default=0, help="compare the first N steps (0: all)")
    gl = sub.add_parser("gptrun-log")
    gl.add_argument("log")
    gl.add_argument("-o", "--out", required=True)
    gl.add_argument("--label", default="gptc (ours)")
    gl.add_argument("--model", default="124M")
    gl.add_argument("--batch", type=int, required=True)
    gl.add_argument("--seq", type=int, required=True)
    gl.add_argument("--accum", type=int, default=1)
    gl.add_argument("--dtype", default="fp32")
    gl.add_argument("--tf32", default="?")
    gl.add_argument("--timing-warmup", type=int, default=5)
    gl.add_argument("--peak-tflops", type=float, default=H200_BF16_DENSE_TFLOPS)
    gl.add_argument("--manifest", default="", help="bench/artifacts/manifest.json")
    gl.add_argument("--exe", default="", help="its entry for this run (parity, train)")
    r = sub.add_parser("report")
    r.add_argument("--work", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--tol", type=float, default=1e-4)
    r.add_argument("--reference", default="torch.compile")
    a = ap.parse_args(argv)

    if a.cmd == "table":
        print(table([load(x) for x in a.runs], a.reference))
    elif a.cmd == "parity":
        text, _, passed = parity(load(a.ours), load(a.torch), a.tol, a.steps)
        print(text)
        return 0 if passed else 1
    elif a.cmd == "gptrun-log":
        with open(a.log, errors="replace") as f:
            s = summarize_gptrun(f.read(), a.label, a.model, a.batch, a.seq, a.accum, a.dtype,
                                 a.tf32, a.timing_warmup, a.peak_tflops,
                                 flops_per_token(a.model, a.seq))
        if a.manifest and os.path.exists(a.manifest):
            exe = load(a.manifest).get("executables", {}).get(a.exe, {})
            s["gptc_s"] = exe.get("gptc_s")
            s["executable"] = exe
        with open(a.out, "w") as f:
            json.dump(s, f, indent=1)
        print(f"compare: {a.log}: {s['steps']} steps, median {fmt(s['median_ms'], '.2f')} ms, "
              f"{fmt(s['median_tok_s'], ',.0f')} tok/s, last loss {fmt(s['final_loss'], '.6f')}")
        return 0 if s["steps"] else 1
    elif a.cmd == "report":
        res = report(a.work, a.out, a.tol, a.reference)
        return 0 if res.get("parity", {}).get("passed") is not False else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
