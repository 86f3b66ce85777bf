"""Times each GEMM of a GPT-2 train step as PyTorch runs it (cuBLAS), one
shape at a time, so `GPTC_PROFILE` rows of gptrun can be set against the
peer's shape by shape.

For every linear layer (in -> out) over N = B*T rows it times the three
products of a step: forward y = x @ W^T + b (F.linear, cuBLASLt's bias
epilogue), dX = dY @ W and dW = dY^T @ X. cuBLAS is column-major, so these
are the GEMMs gptc's descriptors name m x n x k: forward out x N x in, dX
in x N x out, dW in x out x N. Prints ms per call, TFLOP/s, and ms per step
(times the layer count).

  python3 bench/gemm_shapes.py --model 124M --batch 16
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_torch import PRESETS  # noqa: E402


def time_ms(fn, reps):
    for _ in range(3):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / reps


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="124M", choices=sorted(PRESETS))
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--reps", type=int, default=20)
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gemm_shapes.py: needs a CUDA device")
    cfg = PRESETS[args.model]
    d, n, L = cfg.n_embd, args.batch * args.seq, cfg.n_layer
    vp = (cfg.vocab_size + cfg.vocab_multiple - 1) // cfg.vocab_multiple * cfg.vocab_multiple
    layers = [("qkv", d, 3 * d, L), ("proj", d, d, L), ("fc", d, 4 * d, L), ("fcproj", 4 * d, d, L),
              ("lm_head", d, vp, 1)]
    dev, bf = "cuda", torch.bfloat16
    total = 0.0
    print(f"gemm_shapes: {args.model} N={n} (bf16, fp32 accumulate), torch {torch.__version__}")
    print(f"{'layer':8s} {'product':8s} {'cuBLAS m x n x k':>22s} {'ms/call':>9s} {'TFLOP/s':>8s} "
          f"{'ms/step':>8s}")
    for name, fin, fout, count in layers:
        x = torch.randn(n, fin, device=dev, dtype=bf)
        w = torch.randn(fout, fin, device=dev, dtype=bf) * 0.02
        b = torch.zeros(fout, device=dev, dtype=bf) if name != "lm_head" else None
        dy = torch.randn(n, fout, device=dev, dtype=bf)
        flops = 2.0 * n * fin * fout
        for prod, shape, fn in [
            ("forward", f"{fout}x{n}x{fin}", lambda: F.linear(x, w, b)),
            ("dX", f"{fin}x{n}x{fout}", lambda: dy @ w),
            ("dW", f"{fin}x{fout}x{n}", lambda: dy.t() @ x),
        ]:
            ms = time_ms(fn, args.reps)
            total += ms * count
            print(f"{name:8s} {prod:8s} {shape:>22s} {ms:9.4f} {flops / ms / 1e9:8.1f} "
                  f"{ms * count:8.3f}")
        del x, w, b, dy
    print(f"gemm_shapes: all GEMMs of a step {total:.2f} ms")


if __name__ == "__main__":
    main()
