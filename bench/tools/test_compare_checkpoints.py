#!/usr/bin/env python3
"""Checks bench/tools/compare_checkpoints.py on two synthetic checkpoints (any python3)."""
import os
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_checkpoints  # noqa: E402


def string(s):
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def checkpoint(tensors, version=3):
    """README.md's layout; tensors: (name, dtype, dims, raw bytes)."""
    out = b"GPTCCKPT" + struct.pack("<I", version) + struct.pack("<QqQQQ", 7, 1, 0, 1337, 1337)
    if version >= 2:
        out += struct.pack("<QQ", 1000, 0xFEED)  # training data: tokens, hash
    if version >= 3:
        out += struct.pack("<Q", 256)  # tokens per data position
    out += string("tiny")
    if version >= 3:
        out += struct.pack("<I", 2) + string("lr") + struct.pack("<d", 1e-3)
        out += string("schedule") + struct.pack("<d", 1.0)
    out += struct.pack("<I", len(tensors))
    for name, dtype, dims, raw in tensors:
        out += string(name) + struct.pack("<BBI", 0, dtype, len(dims))
        out += struct.pack(f"<{len(dims)}q", *dims) + struct.pack("<Q", len(raw)) + raw
    return out + struct.pack("<Q", 0)  # the checksum is not read


def f32(*xs):
    return struct.pack(f"<{len(xs)}f", *xs)


def bf16(*xs):
    return b"".join(struct.pack("<f", x)[2:] for x in xs)  # exact for these values


def main():
    a = [("w", 0, [2, 2], f32(1, 2, 3, 4)), ("m", 1, [2], bf16(0.5, -2.0)),
         ("step", 4, [1], struct.pack("<i", 3)), ("only_a", 0, [1], f32(1))]
    b = [("w", 0, [2, 2], f32(1, 2, 3, 4.5)), ("m", 1, [2], bf16(0.5, -2.0)),
         ("step", 4, [1], struct.pack("<i", 3))]
    with tempfile.TemporaryDirectory() as d:
        pa, pb = os.path.join(d, "a.ckpt"), os.path.join(d, "b.ckpt")
        for path, ts in ((pa, a), (pb, b)):
            with open(path, "wb") as f:
                f.write(checkpoint(ts))
        ta = compare_checkpoints.read(pa)
        assert list(ta["m"]) == [0.5, -2.0], ta["m"]  # bf16 widened
        assert list(ta["w"]) == [1, 2, 3, 4], ta["w"]
        rows = compare_checkpoints.compare(ta, compare_checkpoints.read(pb))
        names = [r[2] for r in rows]
        assert names[0] == "w" and "only_a" not in names, rows
        l2, maxrel, _ = rows[0]
        assert abs(maxrel - 0.5 / 4) < 1e-12, maxrel
        assert abs(l2 - 0.5 / 30 ** 0.5) < 1e-12, l2
        assert all(r[0] == 0 for r in rows[1:]), rows
        assert len(compare_checkpoints.read(pa, "w")) == 1  # --match
        p1 = os.path.join(d, "v1.ckpt")  # format 1: no training data fields
        with open(p1, "wb") as f:
            f.write(checkpoint(a, version=1))
        assert list(compare_checkpoints.read(p1)["w"]) == [1, 2, 3, 4]
        p2 = os.path.join(d, "v2.ckpt")  # format 2: no tokens per position or settings
        with open(p2, "wb") as f:
            f.write(checkpoint(a, version=2))
        assert list(compare_checkpoints.read(p2)["w"]) == [1, 2, 3, 4]
        try:
            with open(pa, "r+b") as f:
                f.write(b"NOTACKPT")
            compare_checkpoints.read(pa)
            raise AssertionError("a file without the magic was read")
        except ValueError:
            pass
    print("compare_checkpoints: ok")


if __name__ == "__main__":
    main()
