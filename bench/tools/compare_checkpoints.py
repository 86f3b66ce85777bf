#!/usr/bin/env python3
"""Tensor by tensor, how far two gptrun checkpoints of one model are apart.

  python3 bench/tools/compare_checkpoints.py A.ckpt B.ckpt [--top N] [--match SUBSTR]

Prints, for each tensor both hold (largest difference first), the max
|a - b| over max |a| and the relative L2 distance |a - b| / |a|. After one
step the AdamW first moments are (1 - beta1) times the clipped gradients,
so two executables' gradients can be compared through them (e.g. a fused
kernel against the unfused one). The format is README.md's "Checkpoint
format"; the checksum is not verified here (gptrun does that on --resume).
"""
import argparse
import array
import math
import struct
import sys

# executable.fbs DType values -> struct formats; bf16 is widened by hand.
FORMATS = {0: "f", 2: "e", 3: "d", 4: "i"}
BF16 = 1


def values(raw, dtype):
    """The tensor's elements as Python floats (no numpy: runs anywhere)."""
    if dtype == BF16:
        halves = array.array("H", raw)
        if sys.byteorder != "little":
            halves.byteswap()
        # Native order both ways: the widened words reread as floats.
        return array.array("f", array.array("I", (h << 16 for h in halves)).tobytes())
    fmt = FORMATS.get(dtype)
    return None if fmt is None else struct.unpack(f"<{len(raw) // struct.calcsize(fmt)}{fmt}", raw)


def read(path, match=""):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"GPTCCKPT":
        raise ValueError(f"{path}: not a gptc checkpoint (magic {data[:8]!r})")
    pos = 8

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return vals

    def string():
        (n,) = take("I")
        nonlocal pos
        s = data[pos:pos + n].decode()
        pos += n
        return s

    (version,) = take("I")
    if version not in (1, 2, 3):
        raise ValueError(f"{path}: checkpoint format {version}, this script reads 1 to 3")
    take("QqQQQ")            # identity, step, data position, seeds
    if version >= 2:
        take("QQ")           # training data: token count, hash
    if version >= 3:
        take("Q")            # tokens per data position
    string()                 # model description
    if version >= 3:
        (settings,) = take("I")
        for _ in range(settings):  # optimizer settings: key, f64 value
            string()
            take("d")
    (count,) = take("I")
    tensors = {}
    for _ in range(count):
        name = string()
        _role, dtype, rank = take("BBI")
        dims = take(f"{rank}q")
        (nbytes,) = take("Q")
        raw = data[pos:pos + nbytes]
        pos += nbytes
        if match in name:
            v = values(raw, dtype)
            if v is not None:
                tensors[name] = v
    return tensors


def compare(a, b):
    """(relative L2, max |a - b| / max |a|, name) per tensor both hold,
    largest first."""
    rows = []
    for name in sorted(set(a) & set(b)):
        x, y = a[name], b[name]
        if len(x) != len(y):
            print(f"{name}: sizes differ ({len(x)}, {len(y)})", file=sys.stderr)
            continue
        scale = max((abs(v) for v in x), default=0.0)
        diff = max((abs(u - v) for u, v in zip(x, y)), default=0.0)
        norm = math.sqrt(sum(v * v for v in x))
        dist = math.sqrt(sum((u - v) ** 2 for u, v in zip(x, y)))
        maxrel = diff / scale if scale > 0 else float(diff > 0)
        l2 = dist / norm if norm > 0 else float(dist > 0)
        rows.append((l2, maxrel, name))
    rows.sort(reverse=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--match", default="", help="only tensors whose name contains this")
    args = ap.parse_args()
    rows = compare(read(args.a, args.match), read(args.b, args.match))
    print(f"{len(rows)} tensors; largest relative L2 differences first")
    for l2, maxrel, name in rows[:args.top]:
        print(f"  {l2:10.3e}  max {maxrel:10.3e}  {name}")


if __name__ == "__main__":
    main()
