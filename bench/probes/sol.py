#!/usr/bin/env python3
"""Speed of light of one GPT-2 train step on this GPU (issue 48, item 2): the
time the step could not beat with the GEMM library, the attention kernel and
the memory system measured here, to set gptc's step time against.

  bound = sum over the step's GEMMs of (FLOPs / cuBLASLt's measured rate on
          that exact shape)                                      [GEMM]
        + layers x (causal attention forward + backward, the fastest measured
          SDPA backend: flash, cuDNN or memory-efficient)        [attention]
        + unavoidable bytes / measured device-to-device copy bandwidth
                                                                  [memory-bound rest]

GEMMs (as bench/probes/gemm_shapes.py times them, torch -> cuBLAS/cuBLASLt):
for each linear layer (qkv C->3C, proj C->C, fc C->4C, fcproj 4C->C; x n_layer)
and the tied LM head (C->Vp, once), over N = B*T rows: forward y = x W^T (+
bias), dX = dY W, dW = dY^T X. The bf16 rate is torch.matmul / F.linear's, the
faster of torch's default BLAS and cuBLASLt (preferred_blas_library); the
FP8 rate torch._scaled_mm's (cuBLASLt; forward E4M3 x E4M3 with fast
accumulation, dX and dW E5M2 gradient x E4M3, bf16 out, per-tensor scales).
Three bounds:
  bf16        every GEMM in bf16                          (gptc --precision=bf16)
  fp8_blocks  the blocks' GEMMs in FP8, the LM head bf16   (gptc --precision=fp8)
  fp8_head    every GEMM in FP8, the LM head too           (gptc --precision=fp8 --fp8-lm-head)
Attention is bf16 in all three (gptc's is).

Unavoidable bytes of the rest (a lower bound: everything that could be fused
into a GEMM prologue/epilogue or the attention kernel is taken as fused, and
each tensor as moved once), per step, with N_p parameters, B*T = BT rows,
width C, L layers, padded vocabulary Vp, a = 2 bytes (bf16 activations):
  optimizer      28 N_p: AdamW reads the f32 master weight, both f32 moments
                 and the bf16 gradient (4+4+4+2) and writes the three f32
                 tensors and the bf16 (or FP8 + transposed FP8) weight copy the
                 next step's GEMMs read (4+4+4+2). The global norm's read of
                 the gradients is taken as fused into the dW GEMMs' epilogues.
  layernorms     (2L+1) x BT x C x (fwd: read x a + write y a, or 1 byte where
                 an FP8 GEMM reads y; bwd: read dy, x, write dx: 3a); the mean
                 and rstd rows are negligible; the residual-stream gradient
                 add is fused into the backward.
  residual       2L x BT x C x a: the residual adds fused into the projection
                 GEMMs' epilogues still read the residual once.
  GELU           L x BT x 4C x 2a: the pre-activation written by the fc GEMM
                 epilogue (which also applies GELU) and read back by the
                 backward's dGELU epilogue (1 byte each where FP8).
  cross-entropy  BT x Vp x (a + a): the logits read once and their gradient
                 written once (1 byte e5m2 under fp8_head); the loss and the
                 softmax statistics ride along.
  embedding      BT x C x 5a: wte rows read, x written, dx read, and dx
                 scatter-added into dwte (2a); wpe (T x C) is negligible.
  not counted    bias gradients (fused into dW epilogues / casts), the
                 attention's Q/K/V/O traffic (inside its measured time), the
                 FP8 amax/scales (a few floats per tensor), host work.

  python3 bench/probes/sol.py --model 124M --batch 64 --json sol-124M.json
  python3 bench/probes/sol.py --model 124M --batch 64 --fake-rates   # plumbing only, no GPU
"""
import argparse
import json
import os
import sys
import time

SHAPES = {"124M": (12, 12, 768), "350M": (24, 16, 1024), "774M": (36, 20, 1280), "1558M": (48, 25, 1600)}
VOCAB_PADDED, BLOCK = 50304, 1024


def num_parameters(L, C):
    return VOCAB_PADDED * C + BLOCK * C + 2 * C + L * (12 * C * C + 13 * C)


def layers_of(L, C):
    """(name, in, out, count) of every GEMM-carrying layer."""
    return [("qkv", C, 3 * C, L), ("proj", C, C, L), ("fc", C, 4 * C, L), ("fcproj", 4 * C, C, L),
            ("lm_head", C, VOCAB_PADDED, 1)]


def attention_flops(B, T, C):
    """Causal attention FLOPs of one layer: forward QK^T and PV, 2 x 2BT^2C,
    halved by the mask; backward 2.5x the forward (recomputed S, dP, dV, dQ, dK)."""
    fwd = 2.0 * B * T * T * C
    return fwd, 2.5 * fwd


def rest_bytes(L, C, B, T, a=2, ln_out=2, gelu_saved=2, dlogits=2):
    BT, Np = B * T, num_parameters(L, C)
    parts = {
        "optimizer": 28 * Np,
        "layernorms": (2 * L + 1) * BT * C * ((a + ln_out) + 3 * a),
        "residual": 2 * L * BT * C * a,
        "gelu": L * BT * 4 * C * 2 * gelu_saved,
        "cross_entropy": BT * VOCAB_PADDED * (a + dlogits),
        "embedding": BT * C * 5 * a,
    }
    return parts


# --- measurement (CUDA) -------------------------------------------------------

def time_ms(torch, fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / reps


def measure(args):
    import torch
    import torch.nn.functional as F
    dev, bf = "cuda", torch.bfloat16
    E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
    L, H, C = SHAPES[args.model]
    B, T = args.batch, args.seq
    n = B * T
    gemms = []
    one = torch.ones((), device=dev, dtype=torch.float32)
    try:
        blas_default = torch.backends.cuda.preferred_blas_library()
        blas_lt = True
    except (AttributeError, RuntimeError):
        blas_default, blas_lt = None, False
    for name, fin, fout, count in layers_of(L, C):
        x = torch.randn(n, fin, device=dev, dtype=bf)
        w = torch.randn(fout, fin, device=dev, dtype=bf) * 0.02
        b = torch.zeros(fout, device=dev, dtype=bf) if name != "lm_head" else None
        dy = torch.randn(n, fout, device=dev, dtype=bf) * 0.01
        flops = 2.0 * n * fin * fout
        x8, w8, dy8 = x.to(E4M3), w.to(E4M3), dy.to(E5M2)
        # sm_90 FP8 GEMMs: first operand row-major, second column-major.
        wt8, dyt8, xt8 = w8.t().contiguous(), dy8.t().contiguous(), x8.t().contiguous()
        mm = torch._scaled_mm
        prods = [
            ("forward", f"{fout}x{n}x{fin}", lambda: F.linear(x, w, b),
             lambda: mm(x8, w8.t(), one, one, out_dtype=bf, use_fast_accum=True)),
            ("dX", f"{fin}x{n}x{fout}", lambda: dy @ w, lambda: mm(dy8, wt8.t(), one, one, out_dtype=bf)),
            ("dW", f"{fin}x{fout}x{n}", lambda: dy.t() @ x, lambda: mm(dyt8, xt8.t(), one, one, out_dtype=bf)),
        ]
        for prod, shape, f16, f8 in prods:
            # bf16: the faster of torch's default BLAS choice (cuBLAS) and
            # cuBLASLt (preferred_blas_library), so the rate is the library's best.
            ms16 = time_ms(torch, f16, args.reps)
            ms16_lt = None
            if blas_lt:
                torch.backends.cuda.preferred_blas_library("cublaslt")
                ms16_lt = time_ms(torch, f16, args.reps)
                torch.backends.cuda.preferred_blas_library(blas_default)
            ms16_default = ms16
            if ms16_lt is not None:
                ms16 = min(ms16, ms16_lt)
            try:
                ms8 = time_ms(torch, f8, args.reps)
            except RuntimeError as e:  # an FP8 shape cuBLASLt refuses
                print(f"sol: fp8 {name} {prod}: {e}", file=sys.stderr)
                ms8 = None
            gemms.append({"layer": name, "product": prod, "cublas_mnk": shape, "count": count,
                          "flops": flops, "bf16_ms": ms16, "bf16_default_ms": ms16_default,
                          "bf16_cublaslt_ms": ms16_lt, "fp8_ms": ms8})
            print(f"sol: {name:8s} {prod:8s} {shape:>22s} x{count:<3d} bf16 {ms16:8.4f} ms "
                  f"{flops / ms16 / 1e9:7.1f} TFLOP/s" +
                  (f" | fp8 {ms8:8.4f} ms {flops / ms8 / 1e9:7.1f} TFLOP/s" if ms8 else " | fp8 —"), flush=True)
        del x, w, b, dy, x8, w8, dy8, wt8, dyt8, xt8
    torch.cuda.empty_cache()

    # Attention: (B, H, T, hd) bf16, causal, forward + backward per backend.
    hd = C // H
    q, k, v = (torch.randn(B, H, T, hd, device=dev, dtype=bf, requires_grad=True) for _ in range(3))
    do = torch.randn(B, H, T, hd, device=dev, dtype=bf)
    att = {}
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                    ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
    except ImportError:
        sdpa_kernel, backends = None, [("default", None)]
    for bname, backend in backends:
        ctx = sdpa_kernel(backend) if backend is not None else None
        try:
            if ctx is not None:
                ctx.__enter__()

            def fwd():
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)

            def fwd_bwd():
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                torch.autograd.grad(o, (q, k, v), do)

            with torch.no_grad():
                f_ms = time_ms(torch, fwd, args.reps)
            fb_ms = time_ms(torch, fwd_bwd, args.reps)
            att[bname] = {"fwd_ms": f_ms, "fwd_bwd_ms": fb_ms}
        except RuntimeError as e:
            att[bname] = {"error": str(e).splitlines()[0][:200]}
        finally:
            if ctx is not None:
                ctx.__exit__(None, None, None)
    del q, k, v, do
    torch.cuda.empty_cache()

    # Copy bandwidth: 1 GiB device to device, bytes read + written.
    src = torch.empty(1 << 29, device=dev, dtype=bf)
    dst = torch.empty_like(src)
    cp_ms = time_ms(torch, lambda: dst.copy_(src), max(args.reps, 10))
    bw = 2 * src.numel() * 2 / (cp_ms / 1e3)
    del src, dst
    env = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version()}
    return gemms, att, bw, env


def fake(args):
    """Made-up rates (bf16 700, FP8 1300, attention 400 TFLOP/s, 3 TB/s): the
    arithmetic and the JSON without a GPU."""
    L, H, C = SHAPES[args.model]
    n = args.batch * args.seq
    gemms = []
    for name, fin, fout, count in layers_of(L, C):
        flops = 2.0 * n * fin * fout
        for prod, shape in (("forward", f"{fout}x{n}x{fin}"), ("dX", f"{fin}x{n}x{fout}"),
                            ("dW", f"{fin}x{fout}x{n}")):
            gemms.append({"layer": name, "product": prod, "cublas_mnk": shape, "count": count, "flops": flops,
                          "bf16_ms": flops / 700e9, "fp8_ms": flops / 1300e9})
    f, b = attention_flops(args.batch, args.seq, C)
    att = {"fake": {"fwd_ms": f / 400e9, "fwd_bwd_ms": (f + b) / 400e9}}
    return gemms, att, 3.0e12, {"device": "none (--fake-rates)", "torch": None}


def bounds(args, gemms, att, bw):
    L, H, C = SHAPES[args.model]
    B, T = args.batch, args.seq
    f_fwd, f_bwd = attention_flops(B, T, C)
    ok = {k: v for k, v in att.items() if "fwd_bwd_ms" in v}
    best = min(ok, key=lambda k: ok[k]["fwd_bwd_ms"]) if ok else None
    att_ms = L * ok[best]["fwd_bwd_ms"] if best else float("nan")
    out, rates = {}, {}
    for bound, fp8_blocks, fp8_head in (("bf16", False, False), ("fp8_blocks", True, False),
                                        ("fp8_head", True, True)):
        g_ms, g_flops = 0.0, 0.0
        for g in gemms:
            use8 = fp8_head if g["layer"] == "lm_head" else fp8_blocks
            ms = g["fp8_ms"] if use8 and g["fp8_ms"] else g["bf16_ms"]
            g_ms += ms * g["count"]
            g_flops += g["flops"] * g["count"]
        parts = rest_bytes(L, C, B, T, ln_out=1 if fp8_blocks else 2, gelu_saved=1 if fp8_blocks else 2,
                           dlogits=1 if fp8_head else 2)
        nbytes = sum(parts.values())
        mem_ms = nbytes / bw * 1e3
        out[bound] = {"gemm_ms": g_ms, "gemm_flops": g_flops, "gemm_tflops": g_flops / g_ms / 1e9,
                      "attention_ms": att_ms, "attention_backend": best,
                      "memory_ms": mem_ms, "bytes": nbytes, "bytes_parts": parts,
                      "total_ms": g_ms + att_ms + mem_ms}
    rates["gemm_bf16_tflops"] = out["bf16"]["gemm_tflops"]
    rates["gemm_fp8_head_tflops"] = out["fp8_head"]["gemm_tflops"]
    rates["attention_tflops"] = (f_fwd + f_bwd) / ok[best]["fwd_bwd_ms"] / 1e9 if best else None
    rates["attention_backend"] = best
    rates["copy_bytes_per_s"] = bw
    return out, rates


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--model", required=True, choices=sorted(SHAPES))
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json", default="")
    ap.add_argument("--gptc-ms", default="", help="NAME=MS,...: print gptc's step against the bounds")
    ap.add_argument("--fake-rates", action="store_true", help="no GPU: made-up rates, for the plumbing")
    args = ap.parse_args(argv)
    t0 = time.time()
    gemms, att, bw, env = fake(args) if args.fake_rates else measure(args)
    res, rates = bounds(args, gemms, att, bw)
    L, H, C = SHAPES[args.model]
    print(f"sol: {args.model} B={args.batch} T={args.seq} on {env['device']}: copy {bw / 1e12:.2f} TB/s; "
          f"attention ({rates['attention_backend']}) "
          f"{rates['attention_tflops'] or float('nan'):.0f} TFLOP/s; {time.time() - t0:.1f} s")
    for k, v in att.items():
        print(f"sol: attention {k}: {v}")
    print(f"sol: {'bound':11s} {'GEMM ms':>9s} {'TFLOP/s':>8s} {'attn ms':>8s} {'rest ms':>8s} {'GB':>6s} {'total ms':>9s}")
    for name, b in res.items():
        print(f"sol: {name:11s} {b['gemm_ms']:9.2f} {b['gemm_tflops']:8.0f} {b['attention_ms']:8.2f} "
              f"{b['memory_ms']:8.2f} {b['bytes'] / 1e9:6.2f} {b['total_ms']:9.2f}")
    if args.gptc_ms:
        for item in args.gptc_ms.split(","):
            name, ms = item.split("=")
            bname = {"bf16": "bf16", "fp8": "fp8_blocks", "fp8best": "fp8_head"}.get(name, name)
            if bname in res:
                print(f"sol: gptc {name} {float(ms):.2f} ms: {100 * res[bname]['total_ms'] / float(ms):.1f}% "
                      f"of the {bname} speed of light")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "batch": args.batch, "seq": args.seq, "n_layer": L, "n_embd": C,
                       "device": env.get("device"), "env": env, "gemms": gemms, "attention": att,
                       "rates": rates, "bounds": res, "fake": args.fake_rates}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
