"""Times each GEMM of a GPT-2 train step as PyTorch runs it (cuBLAS), one
shape at a time, so `GPTC_PROFILE` rows of gptrun can be set against the
peer's shape by shape.

For every linear layer (in -> out) over N = B*T rows it times the three
products of a step: forward y = x @ W^T + b (F.linear, cuBLASLt's bias
epilogue), dX = dY @ W and dW = dY^T @ X. cuBLAS is column-major, so these
are the GEMMs gptc's descriptors name m x n x k: forward out x N x in, dX
in x N x out, dW in x out x N. Prints ms per call, TFLOP/s, and ms per step
(times the layer count).

With --fp8 it also times each product with FP8 operands (torch._scaled_mm,
cuBLASLt; forward E4M3 x E4M3, dX and dW E5M2 gradients x E4M3, bf16 out,
per-tensor scales), the casts a delayed-scaling FP8 step would add (each
GEMM input cast to FP8, plus the transposed copies cuBLASLt's FP8 kernels
need: on sm_90 they take only A transposed and B not, so dW needs dY^T and
X^T), and the relative error of each FP8 product against bf16. The LM head
stays bf16 in the projection (it is the one GEMM FP8 recipes keep wide).

  python3 bench/probes/gemm_shapes.py --model 124M --batch 16
  python3 bench/probes/gemm_shapes.py --model 124M --batch 64 --fp8
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "twin"))
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
    p.add_argument("--fp8", action="store_true", help="also time FP8 products and their casts")
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
    fp8 = Fp8Totals() if args.fp8 else None
    print(f"gemm_shapes: {args.model} N={n} (bf16, fp32 accumulate), torch {torch.__version__}")
    print(f"{'layer':8s} {'product':8s} {'cuBLAS m x n x k':>22s} {'ms/call':>9s} {'TFLOP/s':>8s} "
          f"{'ms/step':>8s}" + (f" {'fp8 ms':>9s} {'TFLOP/s':>8s} {'x':>5s} {'rel err':>8s}" if fp8 else ""))
    for name, fin, fout, count in layers:
        x = torch.randn(n, fin, device=dev, dtype=bf)
        w = torch.randn(fout, fin, device=dev, dtype=bf) * 0.02
        b = torch.zeros(fout, device=dev, dtype=bf) if name != "lm_head" else None
        dy = torch.randn(n, fout, device=dev, dtype=bf)
        flops = 2.0 * n * fin * fout
        products = [
            ("forward", f"{fout}x{n}x{fin}", lambda: F.linear(x, w, b)),
            ("dX", f"{fin}x{n}x{fout}", lambda: dy @ w),
            ("dW", f"{fin}x{fout}x{n}", lambda: dy.t() @ x),
        ]
        quant = fp8.operands(x, w, dy) if fp8 and name != "lm_head" else None
        for prod, shape, fn in products:
            ms = time_ms(fn, args.reps)
            total += ms * count
            line = (f"{name:8s} {prod:8s} {shape:>22s} {ms:9.4f} {flops / ms / 1e9:8.1f} "
                    f"{ms * count:8.3f}")
            if quant:
                f8 = quant[prod]
                ms8 = time_ms(f8, args.reps)
                err = (f8().float() - fn().float()).norm() / fn().float().norm()
                fp8.gemm_ms += ms8 * count
                fp8.bf16_ms += ms * count
                line += f" {ms8:9.4f} {flops / ms8 / 1e9:8.1f} {ms / ms8:5.2f} {err.item():8.2e}"
            elif fp8:
                fp8.kept_ms += ms * count
            print(line)
        if quant:
            fp8.time_casts(x, w, dy, count, args.reps)
        del x, w, b, dy, quant
    print(f"gemm_shapes: all GEMMs of a step {total:.2f} ms")
    if fp8:
        fp8.report(total)


class Fp8Totals:
    """FP8 operands for one linear layer's three products, and the totals."""

    E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2

    def __init__(self):
        self.gemm_ms = self.bf16_ms = self.kept_ms = 0.0
        self.cast_ms = self.cast_bytes = 0.0
        self.one = torch.ones((), device="cuda", dtype=torch.float32)

    def quantize(self, t, dtype):
        # Per-tensor scale to the format's range, as delayed scaling would
        # have it (the amax is fused into the cast there, so not timed).
        scale = torch.finfo(dtype).max / t.abs().max().float().clamp(min=1e-12)
        return (t.float() * scale).to(dtype), (1.0 / scale).reshape(())

    def operands(self, x, w, dy):
        x8, sx = self.quantize(x, self.E4M3)
        w8, sw = self.quantize(w, self.E4M3)
        dy8, sdy = self.quantize(dy, self.E5M2)
        # sm_90 FP8 GEMMs take A row-major and B column-major only.
        wt8, dyt8, xt8 = w8.t().contiguous(), dy8.t().contiguous(), x8.t().contiguous()
        mm = torch._scaled_mm
        bf = torch.bfloat16
        return {
            "forward": lambda: mm(x8, w8.t(), sx, sw, out_dtype=bf, use_fast_accum=True),
            "dX": lambda: mm(dy8, wt8.t(), sdy, sw, out_dtype=bf),
            "dW": lambda: mm(dyt8, xt8.t(), sdy, sx, out_dtype=bf),
        }

    def time_casts(self, x, w, dy, count, reps):
        """The casts of one layer: X to E4M3 and X^T, dY to E5M2 and dY^T, W
        and W^T, each a cast then a transposed copy (unfused: an upper bound
        for one fused cast-transpose kernel)."""
        for t, dtype in ((x, self.E4M3), (dy, self.E5M2), (w, self.E4M3)):
            ms = time_ms(lambda: t.to(dtype).t().contiguous(), reps)
            self.cast_ms += ms * count
            # Fused: read bf16 once, write the FP8 tensor and its transpose.
            self.cast_bytes += t.numel() * (2 + 1 + 1) * count

    def report(self, total):
        bw = copy_bandwidth()
        fused = self.cast_bytes / bw * 1e3
        print(f"gemm_shapes: fp8 products {self.gemm_ms:.2f} ms against bf16 {self.bf16_ms:.2f} ms "
              f"({self.bf16_ms / self.gemm_ms:.2f}x); LM head kept bf16 {self.kept_ms:.2f} ms")
        print(f"gemm_shapes: fp8 casts {self.cast_ms:.2f} ms unfused (torch cast + transpose), "
              f"{fused:.2f} ms fused at the measured copy bandwidth {bw / 1e12:.2f} TB/s "
              f"({self.cast_bytes / 1e9:.2f} GB)")
        best = self.gemm_ms + self.kept_ms + fused
        print(f"gemm_shapes: step GEMM time bf16 {total:.2f} ms -> fp8 {best:.2f} ms with fused casts "
              f"({total - best:+.2f} ms saved), {self.gemm_ms + self.kept_ms + self.cast_ms:.2f} ms unfused")


def copy_bandwidth():
    """Device-to-device copy bandwidth in bytes/s (read + write), 1 GiB."""
    a = torch.empty(1 << 29, device="cuda", dtype=torch.bfloat16)
    b = torch.empty_like(a)
    ms = time_ms(lambda: b.copy_(a), 10)
    return 2 * a.numel() * 2 / (ms / 1e3)

if __name__ == "__main__":
    main()
