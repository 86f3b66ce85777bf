#!/usr/bin/env python3
"""The comparisons of the GPU conformance suite (scripts/gpu-test.sh).

Each check prints one line, `PASS|FAIL NAME MEASURED TOLERANCE [note]`, and
the exit status is 1 when any line it printed is FAIL (2 on a usage or
reading error, which gpu-test.sh counts as a failure too).

  gpu_test.py steps NAME A B --tol T [--tol-norm U]  loss and grad norm, every step
  gpu_test.py params NAME CKPT EXPECT --tol T   parameters after the last step (EXPECT: a
                                                file of expect-params, or another checkpoint)
  gpu_test.py ckpt-exact NAME CKPT_A CKPT_B     every tensor of two checkpoints, bit for bit
  gpu_test.py logits NAME A B --tol T           @logits of a prompt (gptrun --logits-out)
  gpu_test.py expect-params CKPT OUT            the parameters EXPECT holds (CPU side)
  gpu_test.py suggest SUMMARY                   2x the worst measured value of each tolerance
                                                (gpu-test.sh's table and the pairs), to set them
  gpu_test.py gtest NAME XML [--allow-skip S]   a GoogleTest run (--gtest_output=xml): every
                                                test ran and passed; a skip passes only with a
                                                message containing one of the S (repeatable)

A and B of `steps` are gptrun's log.jsonl (exact: %.9g of each float32) or
`gptc run-reference`'s stdout (6 decimals). MEASURED is the largest relative
difference |a - b| / |b| over the steps, for `params` the largest relative
L2 distance |a - b| / |b| of one parameter tensor (its name follows), for
`logits` that of the whole (tokens x vocab) matrix. TOLERANCE 0 means bit
for bit: the float32 values' bits, not a difference of 0 (so -0 != 0 and
NaN never passes). `params` leaves out the key third of each qkv bias
(rounding noise: see without_noise). The expected parameters hold every tensor up to
EXPECT_CAP elements and an evenly strided sample of larger ones (mini's
token embedding: every 13th element), so the carried file stays small.
Uses numpy where it is installed (the device), plain Python otherwise.
"""
import argparse
import array
import json
import math
import re
import struct
import sys

try:
    import numpy as np
except ImportError:  # the CPU machine: plain Python is fast enough for tiny and mini
    np = None

EXPECT_CAP = 262144
F32, BF16, F16, F64 = 0, 1, 2, 3
PARAMETER = 0


def line(ok, name, measured, tol, note=""):
    status = "PASS" if ok else "FAIL"
    m = measured if isinstance(measured, str) else f"{measured:.3e}"
    t = tol if isinstance(tol, str) else ("exact" if tol == 0 else f"{tol:.1e}")
    print(f"{status} {name} {m} {t}" + (f" {note}" if note else ""), flush=True)
    return ok


# ---- readers -----------------------------------------------------------------

def read_checkpoint(path):
    """{name: (role, dtype, dims, raw bytes)} of a gptrun checkpoint
    (docs/formats.md; bench/tools/compare_checkpoints.py reads it too)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"GPTCCKPT":
        raise ValueError(f"{path}: not a gptc checkpoint")
    pos = 8

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return vals

    def string():
        nonlocal pos
        (n,) = take("I")
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
        take("Q")            # tokens per step
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
        role, dtype, rank = take("BBI")
        dims = take(f"{rank}q")
        (nbytes,) = take("Q")
        tensors[name] = (role, dtype, dims, data[pos:pos + nbytes])
        pos += nbytes
    return tensors


def floats(raw, dtype):
    """A tensor's elements as float64 (numpy array or array('d'))."""
    if dtype == BF16:
        h = array.array("H", raw)
        raw = array.array("I", (x << 16 for x in h)).tobytes()
        dtype = F32
    code = {F32: "f", F16: "e", F64: "d"}.get(dtype)
    if code is None:
        raise ValueError(f"dtype {dtype} is not a float type")
    if np is not None:
        return np.frombuffer(raw, dtype={"f": np.float32, "e": np.float16, "d": np.float64}[code]).astype(np.float64)
    if code == "e":
        return array.array("d", struct.unpack(f"<{len(raw) // 2}e", raw))
    return array.array("d", array.array(code, raw))


def stride(values, step):
    return values[::step]


def rel_l2(a, b):
    """|a - b| / |b| (|a - b| alone when b is all zeros); inf on a NaN."""
    if np is not None:
        d = float(np.sqrt(np.sum((a - b) ** 2)))
        n = float(np.sqrt(np.sum(b * b)))
    else:
        d = math.sqrt(math.fsum((x - y) ** 2 for x, y in zip(a, b)))
        n = math.sqrt(math.fsum(y * y for y in b))
    if math.isnan(d) or math.isnan(n):
        return math.inf
    return d / n if n > 0 else d


def read_safetensors(path):
    """{name: (dtype string, shape, raw bytes)}, and the metadata."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {k: (v["dtype"], v["shape"], data[base + v["data_offsets"][0]:base + v["data_offsets"][1]])
           for k, v in header.items()}
    return out, meta


def write_safetensors(path, tensors, meta):
    """tensors: {name: raw f32 bytes} (1-D)."""
    header, offset, blobs = {}, 0, []
    for name, raw in tensors.items():
        header[name] = {"dtype": "F32", "shape": [len(raw) // 4], "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    header["__metadata__"] = meta
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


STEP_TEXT = re.compile(r"step\s+(\d+)/\d+:\s+loss\s+(\S+)\s+grad_norm\s+(\S+)")


def read_steps(path):
    """[(step, loss, grad_norm)] as (int, str, str): the strings keep the bits."""
    rows = []
    with open(path) as f:
        for text in f:
            text = text.strip()
            if text.startswith("{"):
                r = json.loads(text, parse_float=str)
                if r.get("kind") == "train":
                    rows.append((int(r["step"]), r["loss"], r["grad_norm"]))
            else:
                m = STEP_TEXT.match(text)
                if m:
                    rows.append((int(m.group(1)), m.group(2), m.group(3)))
    return rows


# ---- checks ------------------------------------------------------------------

def f32_bits(s):
    return struct.pack("<f", float(s))


def check_steps(args):
    a, b = read_steps(args.a), read_steps(args.b)
    if not a or [r[0] for r in a] != [r[0] for r in b]:
        ok1 = line(False, args.name + ":loss", "steps", args.tol,
                   f"steps differ: {len(a)} in {args.a}, {len(b)} in {args.b}")
        return ok1
    ok = True
    for idx, what in ((1, "loss"), (2, "norm")):
        worst, at = 0.0, a[0][0]
        same = True
        for ra, rb in zip(a, b):
            x, y = float(ra[idx]), float(rb[idx])
            same = same and f32_bits(ra[idx]) == f32_bits(rb[idx])
            d = math.inf if not (math.isfinite(x) and math.isfinite(y)) else abs(x - y) / max(abs(y), 1e-30)
            if d > worst or (d == worst and d == math.inf):
                worst, at = d, ra[0]
        tol = args.tol if what == "loss" or args.tol_norm is None else args.tol_norm
        passed = same if tol == 0 else worst <= tol
        note = f"(step {at} of {len(a)}; {a[-1][idx]} vs {b[-1][idx]} at the last)"
        ok &= line(passed, f"{args.name}:{what}", worst, tol, note)
    return ok


def params_of(ckpt):
    return {k: v for k, v in ckpt.items() if v[0] == PARAMETER}


def expect_params(args):
    """CPU side: the checkpoint's parameters as f32, large ones strided."""
    out, meta = {}, {}
    for name, (_role, dtype, dims, raw) in sorted(params_of(read_checkpoint(args.ckpt)).items()):
        n = math.prod(dims)
        step = max(1, -(-n // EXPECT_CAP))
        v = floats(raw, dtype)
        v = stride(v, step)
        out[name] = (v.astype("<f4").tobytes() if np is not None else array.array("f", v).tobytes())
        meta[name] = f"{n},{step}"
    write_safetensors(args.out, out, meta)
    return True


def expect_of(path):
    """(want, meta) as read_safetensors gives them, from an expect-params
    file or from a checkpoint (every element)."""
    with open(path, "rb") as f:
        magic = f.read(8)
    if magic != b"GPTCCKPT":
        return read_safetensors(path)
    want, meta = {}, {}
    for name, (_role, dtype, dims, raw) in params_of(read_checkpoint(path)).items():
        if dtype != F32:
            raw = (floats(raw, dtype).astype("<f4").tobytes() if np is not None
                   else array.array("f", floats(raw, dtype)).tobytes())
        want[name] = ("F32", [math.prod(dims)], raw)
        meta[name] = f"{math.prod(dims)},1"
    return want, meta


def without_noise(name, v):
    """The key third of each attention's qkv bias left out: its gradient is
    0 in exact arithmetic (a row's softmax does not change when one number
    is added to all its scores), so what the backward computes for it is
    rounding noise, which AdamW's m / sqrt(v) turns into steps of about lr,
    different on any two machines (seen: 2.8e-4 of that tensor between two
    host builds of tiny fp32 whose losses agree to 1.2e-7)."""
    if not name.endswith("attn.c_attn.bias") or len(v) % 3:
        return v
    c = len(v) // 3
    if np is not None:
        return np.concatenate([v[:c], v[2 * c:]])
    return v[:c] + v[2 * c:]


def check_params(args):
    got = params_of(read_checkpoint(args.ckpt))
    want, meta = expect_of(args.expect)
    if set(got) != set(want):
        return line(False, args.name, "names", args.tol,
                    f"tensors differ: {sorted(set(got) ^ set(want))[:4]}")
    worst, at, allsame = 0.0, "", True
    for name, (_dt, _shape, raw) in want.items():
        n, step = (int(x) for x in meta[name].split(","))
        role, dtype, dims, graw = got[name]
        if math.prod(dims) != n:
            return line(False, args.name, "shapes", args.tol, f"{name}: {dims} vs {n} elements")
        a = stride(floats(graw, dtype), step)
        b = floats(raw, F32)
        if np is not None:
            allsame &= a.astype(np.float32).tobytes() == raw
        else:
            allsame &= array.array("f", a).tobytes() == raw
        a, b = without_noise(name, a), without_noise(name, b)
        d = rel_l2(a, b)
        if d > worst or not at:
            worst, at = d, name
    passed = allsame if args.tol == 0 else worst <= args.tol
    return line(passed, args.name, worst, args.tol, f"({at}, the largest of {len(want)} tensors)")


def check_ckpt_exact(args):
    a, b = read_checkpoint(args.a), read_checkpoint(args.b)
    # An executable's own tensors (FP8 histories and scales of one variant)
    # may be absent from the other; parameters and AdamW state may not.
    core = {k for k, v in a.items() if v[0] in (0, 1)} | {k for k, v in b.items() if v[0] in (0, 1)}
    missing = sorted(k for k in core if k not in a or k not in b)
    if missing:
        return line(False, args.name, "names", 0, f"only one side holds {missing[:4]}")
    differ = [k for k in sorted(set(a) & set(b)) if a[k][1:] != b[k][1:]]
    # The count too: the names are the first three in sorted order, which
    # are a qkv bias and its moments whether 3 tensors differ or 84.
    note = f"({len(set(a) & set(b))} tensors; {len(differ)} differ: {differ[:3]})" if differ else \
        f"({len(set(a) & set(b))} tensors)"
    measured = 0.0
    for k in differ:
        try:
            measured = max(measured, rel_l2(floats(a[k][3], a[k][1]), floats(b[k][3], b[k][1])))
        except ValueError:
            measured = math.inf
    return line(not differ, args.name, measured, 0, note)


def check_logits(args):
    (ta, _), (tb, _) = read_safetensors(args.a), read_safetensors(args.b)
    if ta["tokens"][2] != tb["tokens"][2] or ta["logits"][1] != tb["logits"][1]:
        return line(False, args.name, "tokens", args.tol, "the prompts' ids or shapes differ")
    raw_a, raw_b = ta["logits"][2], tb["logits"][2]
    d = rel_l2(floats(raw_a, F32), floats(raw_b, F32))
    passed = raw_a == raw_b if args.tol == 0 else d <= args.tol
    return line(passed, args.name, d, args.tol, "({} x {})".format(*ta["logits"][1]))


def check_gtest(args):
    import xml.etree.ElementTree as ET
    root = ET.parse(args.xml).getroot()
    ran = failed = skipped = 0
    bad = []
    for case in root.iter("testcase"):
        full = f"{case.get('classname')}.{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
            bad.append(full)
        elif case.get("result") == "skipped" or case.find("skipped") is not None:
            sk = case.find("skipped")
            msg = (sk.get("message") or sk.text or "") if sk is not None else ""
            msg = " ".join(msg.split())  # one line
            skipped += 1
            if not any(a in msg for a in args.allow_skip):
                bad.append(f"{full} skipped: {msg[-60:]}")
        else:
            ran += 1
    measured = f"{ran}/{ran + failed + skipped}"
    note = f"(ran/tests; {failed} failed, {skipped} skipped" + (f"; {'; '.join(bad[:3])})" if bad else ")")
    return line(not bad and ran + failed + skipped > 0, args.name, measured, "all", note)


def suggest(args):
    """From a summary: per model and precision (mini-bf16: mini and its
    variants in bf16) and column of gpu-test.sh's table, and per pair,
    twice the worst measured value (2 significant digits, up)."""
    worst = {}
    for text in open(args.summary):
        f = text.split()
        if len(f) < 4 or f[0] not in ("PASS", "FAIL") or f[3] == "exact":
            continue
        try:
            m = float(f[2])
        except ValueError:
            continue
        name = f[1]
        if "~" in name:
            key = name.rsplit(":", 1)[0].rsplit(".", 1)[0] if name.endswith((".params", ".logits")) \
                else name.rsplit(":", 1)[0]
            col = name.rsplit(":", 1)[1] if ":" in name else name.rsplit(".", 1)[1]
        else:
            prec = next((p for p in ("fp32", "bf16", "fp16", "fp8") if f"-{p}" in name), "?")
            key = name.split("-", 1)[0] + "-" + prec
            col = {".host:loss": "loss", ".host:norm": "norm", ".params.host": "params",
                   ".logits.host": "logits", ".fp64:loss": "fp64-loss", ".fp64:norm": "fp64-norm"}
            col = next((v for k, v in col.items() if name.endswith(k)), None)
            if col is None:
                continue
        worst[(key, col)] = max(worst.get((key, col), 0.0), m)
    def up(x):
        if x <= 0 or not math.isfinite(x):
            return f"{x:.0e}"
        e = math.floor(math.log10(2 * x))
        m = math.ceil(round(2 * x / 10 ** (e - 1), 6)) / 10  # 2 digits, up (1.0 to 10.0)
        if m >= 10:
            m, e = m / 10, e + 1
        return f"{m:g}e{e}"
    for key in sorted({k for k, _ in worst}):
        cols = [c for c in ("loss", "norm", "params", "logits", "fp64-loss", "fp64-norm") if (key, c) in worst]
        print(f"suggest {key}: " + " ".join(f"{c} {up(worst[(key, c)])} (measured {worst[(key, c)]:.2e})"
                                           for c in cols))
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for cmd, pos in (("steps", ["a", "b"]), ("params", ["ckpt", "expect"]), ("logits", ["a", "b"])):
        p = sub.add_parser(cmd)
        p.add_argument("name")
        for x in pos:
            p.add_argument(x)
        p.add_argument("--tol", type=float, required=True)
        if cmd == "steps":
            p.add_argument("--tol-norm", type=float, help="the grad norm's (default: --tol)")
    p = sub.add_parser("ckpt-exact")
    p.add_argument("name")
    p.add_argument("a")
    p.add_argument("b")
    p = sub.add_parser("suggest")
    p.add_argument("summary")
    p = sub.add_parser("gtest")
    p.add_argument("name")
    p.add_argument("xml")
    p.add_argument("--allow-skip", action="append", default=[])
    p = sub.add_parser("expect-params")
    p.add_argument("ckpt")
    p.add_argument("out")
    args = ap.parse_args()
    fn = {"steps": check_steps, "params": check_params, "ckpt-exact": check_ckpt_exact,
          "logits": check_logits, "expect-params": expect_params, "gtest": check_gtest,
          "suggest": suggest}[args.cmd]
    try:
        ok = fn(args)
    except Exception as e:  # any fault is one FAIL line, never a silent traceback
        name = getattr(args, "name", args.cmd)
        print(f"FAIL {name} error - {e}", flush=True)
        return 2
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
