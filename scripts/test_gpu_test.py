#!/usr/bin/env python3
"""Checks scripts/gpu_test.py (the GPU conformance suite's comparisons) on
synthetic files: a check passes or fails where it should, prints one line,
and its exit status says so. Runs on a bare python3 (ctest: scripts.test_gpu_test)."""
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "gpu_test.py")


def checkpoint(path, tensors, version=3):
    """tensors: [(name, role, [floats])], all f32 1-D."""
    def s(x):
        b = x.encode()
        return struct.pack("<I", len(b)) + b
    out = b"GPTCCKPT" + struct.pack("<I", version) + struct.pack("<QqQQQ", 1, 4, 0, 1337, 0)
    out += struct.pack("<QQ", 100, 7)
    if version >= 3:
        out += struct.pack("<Q", 256)
    out += s("mini")
    if version >= 3:
        out += struct.pack("<I", 1) + s("lr") + struct.pack("<d", 3e-3)
    out += struct.pack("<I", len(tensors))
    for name, role, vals in tensors:
        raw = struct.pack(f"<{len(vals)}f", *vals)
        out += s(name) + struct.pack("<BBI", role, 0, 1) + struct.pack("<q", len(vals))
        out += struct.pack("<Q", len(raw)) + raw
    out += struct.pack("<Q", 0)  # the checksum: not read by gpu_test.py
    with open(path, "wb") as f:
        f.write(out)


def run(*args):
    r = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True)
    lines = [x for x in r.stdout.splitlines() if x]
    return r.returncode, lines


def expect(cond, what):
    if not cond:
        print(f"FAILED: {what}")
        sys.exit(1)


def main():
    d = tempfile.mkdtemp()
    p = lambda n: os.path.join(d, n)  # noqa: E731

    # steps: log.jsonl against log.jsonl and against run-reference's text.
    with open(p("a.jsonl"), "w") as f:
        for i, (loss, norm) in enumerate([("10.8", "1.5"), ("10.5", "1.25")], 1):
            f.write(json.dumps({"kind": "train", "step": i, "loss": float(loss), "grad_norm": float(norm)}) + "\n")
    with open(p("b.txt"), "w") as f:
        f.write("model mini\nstep    1/2: loss 10.800001  grad_norm 1.500000\n"
                "step    2/2: loss 10.500000  grad_norm 1.250010\n")
    rc, out = run("steps", "x", p("a.jsonl"), p("b.txt"), "--tol", "1e-6", "--tol-norm", "1e-4")
    expect(rc == 0 and len(out) == 2 and all(x.startswith("PASS x:") for x in out), f"steps within tol: {out}")
    rc, out = run("steps", "x", p("a.jsonl"), p("b.txt"), "--tol", "1e-8")
    expect(rc == 1 and out[0].startswith("FAIL x:loss") and out[1].startswith("FAIL x:norm"), f"steps past tol: {out}")
    rc, out = run("steps", "x", p("a.jsonl"), p("a.jsonl"), "--tol", "0")
    expect(rc == 0 and "exact" in out[0], f"steps exact: {out}")
    rc, out = run("steps", "x", p("a.jsonl"), p("b.txt"), "--tol", "0")
    expect(rc == 1, f"steps exact, not the same bits: {out}")

    # params: the key third of a qkv bias is left out; NaN never passes.
    base = [("wte", 0, [0.5, -0.25, 1.0, 2.0]), ("h.0.attn.c_attn.bias", 0, [0.1, 0.2, 0.3]),
            ("wte.m", 1, [0.0, 0.0, 0.0, 0.0])]
    checkpoint(p("a.ckpt"), base)
    checkpoint(p("a2.ckpt"), base, version=2)
    noisy = [base[0], ("h.0.attn.c_attn.bias", 0, [0.1, -5.0, 0.3]), base[2]]
    checkpoint(p("noisy.ckpt"), noisy)
    rc, _ = run("expect-params", p("a.ckpt"), p("a.st"))
    expect(rc == 0, "expect-params")
    rc, out = run("params", "x", p("a2.ckpt"), p("a.st"), "--tol", "0")
    expect(rc == 0 and out[0].startswith("PASS x 0.000e+00 exact"), f"params exact, format 2 vs 3: {out}")
    rc, out = run("params", "x", p("noisy.ckpt"), p("a.st"), "--tol", "1e-6")
    expect(rc == 0, f"params: the key bias is noise: {out}")
    rc, out = run("params", "x", p("noisy.ckpt"), p("a.st"), "--tol", "0")
    expect(rc == 1, f"params exact sees every element: {out}")
    off = [("wte", 0, [0.5, -0.25, 1.0, 2.001]), base[1], base[2]]
    checkpoint(p("off.ckpt"), off)
    rc, out = run("params", "x", p("off.ckpt"), p("a.ckpt"), "--tol", "1e-4")
    expect(rc == 1 and "wte" in out[0], f"params past tol against a checkpoint: {out}")
    checkpoint(p("nan.ckpt"), [("wte", 0, [0.5, -0.25, float("nan"), 2.0]), base[1], base[2]])
    rc, out = run("params", "x", p("nan.ckpt"), p("a.st"), "--tol", "1.0")
    expect(rc == 1, f"params: NaN fails: {out}")
    checkpoint(p("fewer.ckpt"), base[:1] + base[2:])
    rc, out = run("params", "x", p("fewer.ckpt"), p("a.st"), "--tol", "1.0")
    expect(rc == 1 and "names" in out[0], f"params: a missing tensor fails: {out}")

    # ckpt-exact: every tensor, optimizer state included.
    rc, out = run("ckpt-exact", "x", p("a.ckpt"), p("a2.ckpt"))
    expect(rc == 0, f"ckpt-exact: {out}")
    checkpoint(p("m.ckpt"), base[:2] + [("wte.m", 1, [0.0, 0.0, 1e-30, 0.0])])
    rc, out = run("ckpt-exact", "x", p("a.ckpt"), p("m.ckpt"))
    expect(rc == 1 and "wte.m" in out[0], f"ckpt-exact sees the state: {out}")

    # logits: safetensors as gptrun --logits-out writes them.
    def logits(path, vals):
        raw_t = struct.pack("<2i", 5, 6)
        raw_l = struct.pack(f"<{len(vals)}f", *vals)
        h = json.dumps({"tokens": {"dtype": "I32", "shape": [2], "data_offsets": [0, 8]},
                        "logits": {"dtype": "F32", "shape": [2, len(vals) // 2],
                                   "data_offsets": [8, 8 + len(raw_l)]}}).encode()
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + raw_t + raw_l)
    logits(p("l1.st"), [1.0, 2.0, 3.0, 4.0])
    logits(p("l2.st"), [1.0, 2.0, 3.0, 4.0001])
    rc, out = run("logits", "x", p("l2.st"), p("l1.st"), "--tol", "1e-4")
    expect(rc == 0 and "(2 x 2)" in out[0], f"logits within tol: {out}")
    rc, out = run("logits", "x", p("l2.st"), p("l1.st"), "--tol", "0")
    expect(rc == 1, f"logits exact: {out}")

    # gtest: a skip passes only with an allowed message; a failure fails.
    def xml(path, cases):
        body = "".join(f'<testcase name="{n}" classname="T" result="{r}">{inner}</testcase>'
                       for n, r, inner in cases)
        with open(path, "w") as f:
            f.write(f'<?xml version="1.0"?><testsuites><testsuite name="T">{body}</testsuite></testsuites>')
    ok = ("A", "completed", "")
    skip_gpu = ("B", "skipped", '<skipped message="x.cpp:3&#x0A;no GPU on this machine"/>')
    skip_two = ("C", "skipped", '<skipped message="needs 2 GPUs, found 1"/>')
    failed = ("D", "completed", '<failure message="boom"/>')
    xml(p("ok.xml"), [ok, skip_two])
    rc, out = run("gtest", "g", p("ok.xml"), "--allow-skip", "needs 2 GPUs")
    expect(rc == 0 and out[0].startswith("PASS g 1/2"), f"gtest allowed skip: {out}")
    xml(p("gpu.xml"), [ok, skip_gpu])
    rc, out = run("gtest", "g", p("gpu.xml"), "--allow-skip", "needs 2 GPUs")
    expect(rc == 1 and len(out) == 1 and "no GPU" in out[0], f"gtest skip without a GPU fails: {out}")
    xml(p("fail.xml"), [ok, failed])
    rc, out = run("gtest", "g", p("fail.xml"))
    expect(rc == 1 and "1 failed" in out[0], f"gtest failure: {out}")

    # suggest: 2x the worst measured value per model-precision and column, per pair.
    with open(p("summary.txt"), "w") as f:
        f.write("PASS tiny-bf16.host:loss 1.200e-03 1.0e-02 (step 3)\n"
                "PASS mini-bf16.host:loss 2.000e-03 1.0e-02 (step 1)\n"
                "FAIL mini-fp8.params.host 3.000e-01 1.0e-01 (wte)\n"
                "PASS mini-bf16~mini-bf16-scalar.params 4.000e-04 2.0e-02 (wte)\n"
                "PASS mini-bf16.again:loss 0.000e+00 exact (step 1)\n")
    rc, out = run("suggest", p("summary.txt"))
    expect(rc == 0 and "suggest mini-bf16: loss 4e-3 (measured 2.00e-03)" in out
           and "suggest tiny-bf16: loss 2.4e-3 (measured 1.20e-03)" in out
           and "suggest mini-fp8: params 6e-1 (measured 3.00e-01)" in out
           and "suggest mini-bf16~mini-bf16-scalar: params 8e-4 (measured 4.00e-04)" in out, f"suggest: {out}")

    # A reading error is one FAIL line and exit 2.
    rc, out = run("params", "x", p("missing.ckpt"), p("a.st"), "--tol", "1")
    expect(rc == 2 and out[0].startswith("FAIL x error"), f"reading error: {out}")
    print("test_gpu_test: all passed")


if __name__ == "__main__":
    main()
