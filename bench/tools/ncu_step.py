#!/usr/bin/env python3
"""Where a train step's GPU time goes, from an ncu CSV of kernel durations.

Device side (one step after init, every kernel):
  ncu --clock-control none --cache-control none --csv \
      --metrics gpu__time_duration.sum --log-file step.csv \
      build-device/bin/gptrun step.fb --data D --steps 1 --no-graph
Then here or there:
  python3 bench/tools/ncu_step.py step.csv [--top N] [--steps N]

An FP8 run's first step is a program of its own (@train_step_first), with
other launches than the steps after it: profile 3 steps and pass
--repeated, which reports the last step as the longest tail of launches
that repeats the same kernels just before it.

Kernels up to the init program's last `random_normal` are dropped. gptc's
kernels are grouped by name without their numeric suffix (flash_attention_
backward_kv_75 -> flash_attention_backward_kv); cuBLASLt's keep their
names and count as GEMMs. Prints the step's total, the GEMM and other
shares, then the groups, largest first.
"""
import argparse
import collections
import csv
import re
import sys

GEMM = re.compile(r"nvjet|gemm|xmma|cutlass|splitK|cublas", re.IGNORECASE)
# ncu 2025 writes "ns"; older versions "nsecond".
UNITS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3,
         "nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}


def kernel_times(lines):
    """(kernel name, ms) per launch, in order, from ncu's CSV lines."""
    rows = list(csv.reader(line for line in lines if line.startswith('"')))
    if not rows:
        raise ValueError("no CSV rows (was ncu run with --csv and a --log-file?)")
    header = rows[0]
    try:
        name, value, unit = (header.index(k) for k in ("Kernel Name", "Metric Value", "Metric Unit"))
    except ValueError as e:
        raise ValueError(f"not an ncu metrics CSV: {e}") from None
    out = []
    for r in rows[1:]:
        if r[unit] not in UNITS:
            raise ValueError(f"unknown unit {r[unit]!r} for {r[name]}")
        out.append((r[name], float(r[value].replace(",", "")) * UNITS[r[unit]]))
    return out


def group(times, steps=1):
    """Drops init's kernels; returns {group: [launches, ms]} of the last of
    `steps` steps (each the same launches) and the GEMM group names."""
    start = 0
    for i, (k, _) in enumerate(times):
        if k.startswith("random_normal"):
            start = i + 1
    launches = len(times) - start
    if launches % steps:
        raise ValueError(f"{launches} launches after init do not split into {steps} equal steps")
    return group_launches(times[start + (steps - 1) * launches // steps:])


def last_repeated(times):
    """The launches of the last step of a profile whose last two steps are
    the same launches (an FP8 run's first step differs): the longest tail
    that the same kernel names precede."""
    start = 0
    for i, (k, _) in enumerate(times):
        if k.startswith("random_normal"):
            start = i + 1
    names = [k for k, _ in times[start:]]
    for n in range(len(names) // 2, 0, -1):
        if names[-n:] == names[-2 * n:-n]:
            return times[len(times) - n:]
    raise ValueError(f"no two equal steps end the {len(names)} launches after init")


def group_launches(launches):
    """{group: [launches, ms]} and the GEMM group names of `launches`."""
    groups = collections.defaultdict(lambda: [0, 0.0])
    gemms = set()
    for k, ms in launches:
        g = k if GEMM.search(k) else re.sub(r"_\d+$", "", k)
        if GEMM.search(k):
            gemms.add(g)
        groups[g][0] += 1
        groups[g][1] += ms
    return groups, gemms


def report(groups, gemms, top):
    total = sum(ms for _, ms in groups.values())
    gemm = sum(groups[g][1] for g in gemms)
    lines = [f"step: {total:.2f} ms of kernels, GEMMs {gemm:.2f} ms "
             f"({100 * gemm / total if total else 0:.0f}%), other {total - gemm:.2f} ms",
             f"{'ms':>9} {'launches':>8} {'us each':>9}  kernel"]
    for g, (n, ms) in sorted(groups.items(), key=lambda kv: -kv[1][1])[:top]:
        lines.append(f"{ms:9.3f} {n:8d} {1000 * ms / n:9.1f}  {'GEMM ' if g in gemms else ''}{g[:90]}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", help="ncu --csv --log-file output")
    ap.add_argument("--top", type=int, default=40, help="groups to print (default 40)")
    ap.add_argument("--repeated", action="store_true",
                    help="report the last step of a profile that ends in two equal steps "
                         "(an fp8 run profiled with gptrun --steps 3)")
    ap.add_argument("--steps", type=int, default=1,
                    help="steps the profile holds (gptrun --steps); the last is reported, e.g. "
                         "the first delayed-scaling step of an fp8 run with --steps 2")
    args = ap.parse_args()
    if args.steps < 1:
        sys.exit(f"ncu_step: --steps must be at least 1, got {args.steps}")
    try:
        with open(args.csv, encoding="utf-8") as f:
            times = kernel_times(f)
            groups, gemms = (group_launches(last_repeated(times)) if args.repeated
                             else group(times, args.steps))
    except (OSError, ValueError) as e:
        sys.exit(f"ncu_step: {args.csv}: {e}")
    print(report(groups, gemms, args.top))


if __name__ == "__main__":
    main()
