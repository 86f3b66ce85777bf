#!/usr/bin/env python3
"""Trains the PyTorch twin of models/gpt2.mlir with gptc's train-step semantics.

Same init (`--init counter`: gptc's @init, bit for bit in fp32), same batches
(an llm.c .bin file read in windows of B*T+1 as gptrun and `gptc
run-reference` do), same optimizer (gpt-insert-optimizer):

  * loss and gradient are means over `--accum-steps` micro-batches; micro-batch
    j of step s reads window (s * accum + j) mod W, W = (ntok - 1) // (B*T),
    window w = tokens[w*B*T : w*B*T + B*T + 1], inputs its first B*T tokens,
    targets the same shifted by one;
  * grad_norm = ||mean gradient||_2; with --grad-clip c > 0 the update uses
    the gradient scaled by c / max(norm, c) (llm.c's rule);
  * lr = gpt.lr_schedule(step) (0-based step; constant ignores warm-up;
    cosine/linear: lr * (s+1)/warmup during warm-up, then decay to --min-lr
    at --total-steps);
  * AdamW with bias correction at t = step + 1, decoupled weight decay
    p -= lr * (update + wd * p), weight decay only on parameters of rank >= 2
    (and not in --no-decay).

Modes: --mode eager | compile (torch.compile of the loss function; forward +
backward, the optimizer stays fused eager), --dtype fp32 | bf16 (bf16 =
autocast to bfloat16 with fp32 master weights, moments and loss), --tf32
off | on (fp32 matmuls and cuDNN on TF32 tensor cores). --float8 tensorwise |
rowwise | rowwise_with_gw_hp: torchao's float8 training (the peer a user would
pick for FP8; needs --dtype bf16, a CUDA sm_89+ GPU and torchao importable,
e.g. its source on PYTHONPATH with TORCHAO_FORCE_SKIP_LOADING_SO_FILES=1):
each block's four linear layers (c_attn, attn.c_proj, c_fc, mlp.c_proj)
become torchao Float8Linear modules over the same parameter tensors,
`convert_to_float8_training` with `Float8LinearConfig.from_recipe_name`;
the LM head (x @ wte^T, tied, vocabulary-sized) stays bf16, as torchao's
auto filter and gptc's default FP8 recipe keep it. --float8-filter auto
applies torchao's size heuristic (`_auto_filter_for_recipe`) on top.

Prints one line per step, in gptrun's format:
  step i/N | loss X | norm Y | lr Z | T ms | R tok/s | MFU M%
and with --json PATH writes a summary: per-step losses/norms/lrs/times,
median ms and tok/s over the steps after --timing-warmup, MFU, peak GPU
memory (torch.cuda.max_memory_allocated), compile time, environment.

MFU = flops_per_token * tok/s / peak with flops_per_token = 6 N + 12 L T C
(N = all parameters, padded vocabulary included) and peak = --peak-tflops
(the H200's dense bf16 peak, 989.5 TFLOP/s), whatever --dtype is.

Example (device machine):
  python3 bench/twin/train_torch.py --model 124M --batch 16 --seq 1024 --steps 200 \\
      --data data/austen_train.bin --mode compile --dtype bf16 --json out.json
"""
import argparse
import contextlib
import json
import math
import os
import platform
import signal
import statistics
import struct
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_torch as g  # noqa: E402

H200_BF16_DENSE_TFLOPS = 989.5  # H100/H200 SXM datasheet, dense (no sparsity)
TOKEN_MAGIC, TOKEN_VERSION = 20240520, 1


# --- Data ------------------------------------------------------------------

def read_token_file(path):
    """llm.c GPT-2 token file -> int64 tensor of its tokens (CPU)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 1024:
        raise SystemExit(f"{path}: shorter than the 1024-byte header")
    if sys.byteorder != "little":
        raise SystemExit("big-endian hosts are not supported")
    magic, version, count = struct.unpack_from("<3i", blob, 0)
    if magic != TOKEN_MAGIC or version != TOKEN_VERSION:
        raise SystemExit(f"{path}: not an llm.c GPT-2 token file (magic {magic}, "
                         f"version {version}; want {TOKEN_MAGIC}, {TOKEN_VERSION})")
    if len(blob) != 1024 + 2 * count:
        raise SystemExit(f"{path}: {len(blob)} bytes, header says {count} tokens")
    body = bytearray(blob[1024:])
    # uint16 little-endian via int16 (fully supported by every torch), then unsigned.
    return torch.frombuffer(body, dtype=torch.int16).to(torch.int64) & 0xFFFF


class Windows:
    """Batches of a token stream, as gptrun's DataLoader (no shuffling)."""

    def __init__(self, tokens, B, T, device):
        self.B, self.T, self.bt = B, T, B * T
        self.count = (tokens.numel() - 1) // self.bt
        if self.count < 1:
            raise SystemExit(f"{tokens.numel()} tokens are too few for one batch "
                             f"(B={B} T={T} needs {self.bt + 1})")
        self.tokens = tokens[: self.count * self.bt + 1].to(device)

    def batch(self, k):
        w = k % self.count
        s = w * self.bt
        x = self.tokens[s: s + self.bt].view(self.B, self.T)
        y = self.tokens[s + 1: s + self.bt + 1].view(self.B, self.T)
        return x, y


# --- Optimizer semantics -----------------------------------------------------

def lr_schedule(step, kind, max_lr, min_lr, warmup, total):
    """gpt.lr_schedule (compiler/Reference/Interpreter.cpp), step 0-based."""
    lr = max_lr
    if kind != "constant":
        if step < warmup:
            lr = max_lr * (step + 1) / warmup
        else:
            r = (step - warmup) / (total - warmup) if total > warmup else 1.0
            r = min(1.0, max(0.0, r))
            if kind == "cosine":
                lr = min_lr + 0.5 * (1.0 + math.cos(math.pi * r)) * (max_lr - min_lr)
            else:
                lr = max_lr - r * (max_lr - min_lr)
    return lr


def global_norm(grads):
    try:
        norms = torch._foreach_norm(grads)
    except (AttributeError, RuntimeError):
        norms = [x.norm() for x in grads]
    return torch.linalg.vector_norm(torch.stack(norms))


def scale_(tensors, factor):
    """tensors *= factor (a 0-d tensor), without a host sync."""
    try:
        torch._foreach_mul_(tensors, factor)
    except (TypeError, RuntimeError):
        for t in tensors:
            t.mul_(factor)


class ExactAdamW:
    """gpt.adamw as the interpreter writes it (slow; for parity runs).

    m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; u = (m/c1) / (sqrt(v/c2) + eps);
    p = p - lr (u + wd p), with c1 = 1 - b1^t, c2 = 1 - b2^t, t = step + 1.
    """

    def __init__(self, params, decays, beta1, beta2, eps):
        self.params, self.decays = params, decays
        self.b1, self.b2, self.eps = beta1, beta2, eps
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]

    @torch.no_grad()
    def step(self, step, lr):
        t = step + 1.0
        c1, c2 = 1.0 - self.b1 ** t, 1.0 - self.b2 ** t
        for p, m, v, wd in zip(self.params, self.m, self.v, self.decays):
            gr = p.grad
            m.mul_(self.b1).add_(gr, alpha=1.0 - self.b1)
            v.mul_(self.b2).addcmul_(gr, gr, value=1.0 - self.b2)
            update = (m / c1) / ((v / c2).sqrt_().add_(self.eps))
            p.sub_(lr * (update + wd * p))


class TorchAdamW:
    """torch.optim.AdamW (fused on CUDA by default) with the same groups."""

    def __init__(self, params, decays, beta1, beta2, eps, impl):
        groups = {}
        for p, wd in zip(params, decays):
            groups.setdefault(wd, []).append(p)
        kw = {"fused": True} if impl == "fused" else {"foreach": True}
        self.opt = torch.optim.AdamW(
            [{"params": ps, "weight_decay": wd} for wd, ps in groups.items()],
            lr=1e-3, betas=(beta1, beta2), eps=eps, **kw)

    def step(self, step, lr):
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.step()


# --- Run ------------------------------------------------------------------------

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    a = ap.add_argument
    a("--model", default="124M", choices=sorted(g.PRESETS))
    a("--batch", type=int, default=16, help="B (micro-batch)")
    a("--seq", type=int, default=1024, help="T (<= block_size)")
    a("--steps", type=int, default=10)
    a("--data", default="", help="llm.c .bin token file (default: seeded random tokens)")
    a("--val-data", default="", help="token file for a validation loss after training")
    a("--val-batches", type=int, default=0, help="windows of --val-data to average (0: none)")
    a("--mode", choices=["eager", "compile"], default="eager")
    a("--compile-mode", default="default",
      help="torch.compile mode: default, reduce-overhead, max-autotune, ...")
    a("--dtype", choices=["fp32", "bf16", "fp64"], default="fp32",
      help="fp64: float64 everywhere (a CPU reference, comparable with gptc run-reference)")
    a("--tf32", choices=["off", "on"], default="off")
    a("--linear", choices=["default", "fp8"], default="default",
      help="fp8: the blocks' linear layers as FP8 products (gpt2_torch.Fp8Linear; needs "
           "--dtype bf16 and an sm_89+ GPU), for the FP8 numerics study")
    a("--float8", choices=["none", "tensorwise", "rowwise", "rowwise_with_gw_hp"], default="none",
      help="torchao float8 training of the blocks' linear layers with this recipe "
           "(needs --dtype bf16 and torchao; the LM head stays bf16)")
    a("--float8-filter", choices=["all", "auto"], default="all",
      help="all: every block linear layer; auto: torchao's _auto_filter_for_recipe size heuristic")
    a("--attention", choices=["sdpa", "math"], default="sdpa",
      help="F.scaled_dot_product_attention or the explicit softmax(QK^T)V")
    a("--init", choices=["counter", "torch"], default="counter",
      help="counter: gptc's @init(seed); torch: torch.randn with the same stds")
    a("--seed", type=int, default=1337)
    # Train-step flags, named as gptc compile's.
    a("--accum-steps", type=int, default=1)
    a("--lr", type=float, default=3.0e-4)
    a("--min-lr", type=float, default=0.0)
    a("--warmup-steps", type=int, default=0)
    a("--total-steps", type=int, default=0)
    a("--schedule", choices=["constant", "cosine", "linear"], default="constant")
    a("--beta1", type=float, default=0.9)
    a("--beta2", type=float, default=0.95)
    a("--adam-epsilon", type=float, default=1.0e-8)
    a("--weight-decay", type=float, default=0.1)
    a("--no-decay", default="", help="comma-separated parameters without weight decay")
    a("--grad-clip", type=float, default=1.0)
    a("--adamw", choices=["auto", "fused", "foreach", "exact"], default="auto",
      help="auto: fused on CUDA, foreach on CPU; exact: the interpreter's formula")
    # Measurement.
    a("--timing-warmup", type=int, default=5, help="first steps left out of the medians")
    a("--peak-tflops", type=float, default=H200_BF16_DENSE_TFLOPS)
    a("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a("--json", default="", help="write the summary here")
    a("--label", default="", help="name of this run in the summary")
    a("--quiet", action="store_true", help="print only every 10th step")
    a("--profile-steps", type=int, default=0,
      help="after training, run this many more steps under torch.profiler and print "
           "the GPU kernels by total time (the peer's side of GPTC_PROFILE=1)")
    a("--time-limit", type=float, default=0,
      help="stop after this many seconds (from start-up) and still write the summary; "
           "SIGTERM does the same")
    args = ap.parse_args(argv)
    if args.schedule != "constant" and args.total_steps <= args.warmup_steps:
        ap.error(f"a {args.schedule} schedule needs --total-steps > --warmup-steps")
    if args.linear == "fp8" and args.dtype != "bf16":
        ap.error("--linear fp8 needs --dtype bf16")
    if args.float8 != "none" and (args.dtype != "bf16" or args.linear != "default"):
        ap.error("--float8 needs --dtype bf16 and --linear default")
    if args.accum_steps < 1 or args.steps < 1:
        ap.error("--steps and --accum-steps must be >= 1")
    return args


def set_precision(args):
    """TF32 on or off for fp32 matmuls and cuDNN; returns what is in force.

    PyTorch >= 2.9 has fp32_precision ("tf32" / "ieee") and warns about (and
    must not be mixed with) the older allow_tf32 flags, so use the newer API
    where it exists.
    """
    tf32 = args.tf32 == "on"
    b = torch.backends
    if hasattr(b.cuda.matmul, "fp32_precision"):
        mode = "tf32" if tf32 else "ieee"
        b.cuda.matmul.fp32_precision = mode
        b.cudnn.conv.fp32_precision = mode
        if hasattr(b.cudnn, "rnn"):
            b.cudnn.rnn.fp32_precision = mode
        return {"matmul": b.cuda.matmul.fp32_precision, "cudnn_conv": b.cudnn.conv.fp32_precision}
    b.cuda.matmul.allow_tf32 = tf32
    b.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    return {"matmul_allow_tf32": b.cuda.matmul.allow_tf32, "cudnn_allow_tf32": b.cudnn.allow_tf32}


def flops_per_token(cfg, T):
    return 6 * g.num_parameters(cfg) + 12 * cfg.n_layer * T * cfg.n_embd


class Timer:
    """CUDA events on a GPU, perf_counter elsewhere."""

    def __init__(self, device):
        self.cuda = device.startswith("cuda")

    def start(self):
        if self.cuda:
            self.e0 = torch.cuda.Event(enable_timing=True)
            self.e1 = torch.cuda.Event(enable_timing=True)
            self.e0.record()
        self.t0 = time.perf_counter()

    def stop_ms(self):
        if self.cuda:
            self.e1.record()
            self.e1.synchronize()
            return self.e0.elapsed_time(self.e1)
        return (time.perf_counter() - self.t0) * 1e3


class Stop(Exception):
    pass


def _on_sigterm(signum, frame):
    raise Stop()


def profile_steps(train_step, first, count, cuda):
    """Runs steps first..first+count-1 under torch.profiler and prints each
    GPU kernel's total and per-step time, largest first."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        for step in range(first, first + count):
            train_step(step)
        if cuda:
            torch.cuda.synchronize()
    rows = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    rows.sort(key=lambda e: e.self_device_time_total, reverse=True)
    total = sum(e.self_device_time_total for e in rows)
    print(f"profile: {count} steps, GPU time {total / 1e3 / count:.2f} ms/step")
    for e in rows[:40]:
        print(f"profile: {e.self_device_time_total / 1e3 / count:8.3f} ms/step "
              f"x{e.count // count:<4d} {e.key[:110]}")


BLOCK_LINEARS = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")


def torchao_float8(cfg, params, recipe, filter_mode):
    """torchao float8 training for the blocks' linear layers.

    Wraps each block linear's weight and bias in an nn.Linear (the same
    storage: the entries of `params` are replaced by the nn.Parameter objects,
    so the optimizer and the global norm see exactly the tensors the modules
    train), converts them with torchao's convert_to_float8_training under
    Float8LinearConfig.from_recipe_name(recipe), and returns (overrides, info):
    `overrides` maps "<layer>.weight" to the layer's module (Float8Linear, or
    nn.Linear where the filter kept it) and "<layer>.bias" to None, for
    `float8_linear` below; `info` says what was converted.
    """
    os.environ.setdefault("TORCHAO_FORCE_SKIP_LOADING_SO_FILES", "1")
    try:
        import torchao  # noqa: F401
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
        from torchao.float8 import _auto_filter_for_recipe
    except Exception as e:  # ImportError, or an incompatible torch
        raise SystemExit(f"train_torch: --float8 needs torchao: {type(e).__name__}: {e}")
    config = Float8LinearConfig.from_recipe_name(recipe)
    layers = torch.nn.ModuleDict()
    for i in range(cfg.n_layer):
        for lin in BLOCK_LINEARS:
            name = f"h.{i}.{lin}"
            w, b = params[name + ".weight"], params[name + ".bias"]
            mod = torch.nn.Linear(w.shape[1], w.shape[0], bias=True, device="meta")
            mod.weight = torch.nn.Parameter(w.detach(), requires_grad=True)
            mod.bias = torch.nn.Parameter(b.detach(), requires_grad=True)
            params[name + ".weight"], params[name + ".bias"] = mod.weight, mod.bias
            layers[name.replace(".", "_")] = mod
    module_filter = (_auto_filter_for_recipe(recipe, filter_fqns=[])
                     if filter_mode == "auto" else None)
    convert_to_float8_training(layers, module_filter_fn=module_filter, config=config)
    overrides, converted = {}, []
    for i in range(cfg.n_layer):
        for lin in BLOCK_LINEARS:
            name = f"h.{i}.{lin}"
            mod = layers[name.replace(".", "_")]
            assert mod.weight is params[name + ".weight"] and mod.bias is params[name + ".bias"]
            overrides[name + ".weight"], overrides[name + ".bias"] = mod, None
            if type(mod).__name__ == "Float8Linear":
                converted.append(name)
    info = {"recipe": recipe, "filter": filter_mode,
            "converted": len(converted), "of": len(overrides) // 2,
            "converted_kinds": sorted({n.split(".", 2)[2] for n in converted}),
            "config": repr(config), "torchao": os.path.dirname(torchao.__file__),
            "torchao_version": getattr(torchao, "__version__", "unknown")}
    return overrides, info


def float8_linear(x, mod, b):
    """`linear` for gpt2_torch.forward under --float8: the params entry of the
    weight is the layer's module (see torchao_float8), the bias's is None."""
    return mod(x)


def main(argv=None):
    started = time.perf_counter()
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    dev = args.device
    cfg = g.PRESETS[args.model]
    B, T, A = args.batch, args.seq, args.accum_steps
    if T > cfg.block_size:
        raise SystemExit(f"--seq {T} > block_size {cfg.block_size}")
    cuda = dev.startswith("cuda")
    precision_flags = None
    if cuda:
        precision_flags = set_precision(args)
        torch.cuda.reset_peak_memory_stats()

    # Parameters (fp32 master weights, also under bf16 autocast).
    pdtype = torch.float64 if args.dtype == "fp64" else torch.float32
    t0 = time.perf_counter()
    if args.init == "counter":
        params = g.init_counter(cfg, args.seed, pdtype, dev)
    else:
        gen = torch.Generator().manual_seed(args.seed)
        params = {k: v.to(dev) for k, v in g.init_gpt2(cfg, gen, pdtype).items()}
    for p in params.values():
        p.requires_grad_(True)
    float8_info, float8_overrides = None, {}
    if args.float8 != "none":
        float8_overrides, float8_info = torchao_float8(cfg, params, args.float8, args.float8_filter)
        print(f"train_torch: torchao float8 {args.float8} ({args.float8_filter}): "
              f"{float8_info['converted']} of {float8_info['of']} block linear layers converted "
              f"({', '.join(float8_info['converted_kinds']) or 'none'}); LM head bf16; "
              f"torchao {float8_info['torchao_version']} from {float8_info['torchao']}", flush=True)
    if cuda:
        torch.cuda.synchronize()
    init_s = time.perf_counter() - t0

    # Data.
    if args.data:
        tokens = read_token_file(args.data)
    else:
        gen = torch.Generator().manual_seed(args.seed + 1)
        tokens = torch.randint(0, cfg.vocab_size, (args.steps * A * B * T + 1,), generator=gen)
    if int(tokens.max()) >= cfg.vocab_size:
        raise SystemExit(f"token {int(tokens.max())} >= vocab_size {cfg.vocab_size}")
    data = Windows(tokens, B, T, dev)

    # Loss function and optimizer.
    fused = args.attention == "sdpa"
    linear = g.Fp8Linear.apply if args.linear == "fp8" else F.linear

    if float8_overrides:
        linear = float8_linear

        def loss_fn(p, x, y):
            return g.forward(cfg, {**p, **float8_overrides}, x, y, fused_attention=fused,
                             linear=linear)
    else:
        def loss_fn(p, x, y):
            return g.forward(cfg, p, x, y, fused_attention=fused, linear=linear)

    eval_fn = loss_fn  # uncompiled: a no_grad call would make torch.compile recompile
    if args.mode == "compile":
        loss_fn = torch.compile(loss_fn, mode=args.compile_mode)
    autocast = (torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16)
                if args.dtype == "bf16" else contextlib.nullcontext())
    names = list(params)
    plist = [params[k] for k in names]
    no_decay = set(filter(None, args.no_decay.split(",")))
    decays = [args.weight_decay if p.dim() >= 2 and k not in no_decay else 0.0
              for k, p in zip(names, plist)]
    impl = args.adamw if args.adamw != "auto" else ("fused" if cuda else "foreach")
    opt = (ExactAdamW(plist, decays, args.beta1, args.beta2, args.adam_epsilon)
           if impl == "exact" else
           TorchAdamW(plist, decays, args.beta1, args.beta2, args.adam_epsilon, impl))

    fpt = flops_per_token(cfg, T)
    tokens_per_step = A * B * T
    n_params = g.num_parameters(cfg)
    print(f"train_torch: {args.model} ({n_params:,} parameters) B={B} T={T} accum={A} "
          f"steps={args.steps} mode={args.mode} dtype={args.dtype} linear={args.linear} "
          f"float8={args.float8} tf32={args.tf32} "
          f"attention={args.attention} adamw={impl} init={args.init} seed={args.seed} "
          f"device={dev}; data {args.data or 'random'}: {data.count} windows; "
          f"init {init_s:.2f} s", flush=True)

    # Made once: a host-to-device copy inside the step would synchronize.
    clip = torch.tensor(args.grad_clip, dtype=pdtype, device=dev)
    losses, norms, lrs, step_ms = [], [], [], []
    timer = Timer(dev)

    def train_step(step):
        timer.start()
        loss_sum = None
        for j in range(A):
            x, y = data.batch(step * A + j)
            with autocast:
                loss = loss_fn(params, x, y)
            if A > 1:
                (loss / A).backward()
            else:
                loss.backward()
            loss_sum = loss.detach() if loss_sum is None else loss_sum + loss.detach()
        with torch.no_grad():
            grads = [p.grad for p in plist]
            norm = global_norm(grads)
            if args.grad_clip > 0:
                scale_(grads, clip / torch.maximum(norm, clip))
            lr = lr_schedule(step, args.schedule, args.lr, args.min_lr,
                             args.warmup_steps, args.total_steps)
            opt.step(step, lr)
        for p in plist:
            p.grad = None
        ms = timer.stop_ms()
        loss_v, norm_v = (loss_sum / A).item(), norm.item()
        losses.append(loss_v)
        norms.append(norm_v)
        lrs.append(lr)
        step_ms.append(ms)
        tok_s = tokens_per_step / (ms / 1e3)
        mfu = 100.0 * fpt * tok_s / (args.peak_tflops * 1e12)
        if not args.quiet or step % 10 == 0 or step == args.steps - 1:
            print(f"step {step + 1}/{args.steps} | loss {loss_v:.6f} | norm {norm_v:.4f} | "
                  f"lr {lr:.4e} | {ms:.2f} ms | {tok_s:.0f} tok/s | MFU {mfu:.1f}%", flush=True)
        if not math.isfinite(loss_v):
            raise Stop("loss is not finite")

    wall0 = time.perf_counter()
    stopped = None
    try:
        for step in range(args.steps):
            if args.time_limit and step > 0 and time.perf_counter() - started > args.time_limit:
                stopped = f"time limit {args.time_limit:g} s"
                break
            train_step(step)
    except Stop as e:
        stopped = str(e) or "SIGTERM"
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # let the summary be written
    if stopped:
        print(f"train_torch: stopped after {len(losses)} of {args.steps} steps ({stopped})",
              flush=True)
    wall_s = time.perf_counter() - wall0
    if not losses:
        raise SystemExit("train_torch: no step finished")

    timed = step_ms[args.timing_warmup:] if len(step_ms) > args.timing_warmup else step_ms[-1:]
    median_ms = statistics.median(timed)
    median_tok_s = tokens_per_step / (median_ms / 1e3)
    summary = {
        "runner": "torch",
        "label": args.label or f"torch {args.mode}",
        "mode": args.mode, "compile_mode": args.compile_mode if args.mode == "compile" else None,
        "dtype": args.dtype, "linear": args.linear, "tf32": args.tf32, "precision_flags": precision_flags,
        "float8": float8_info,
        "attention": args.attention, "adamw": impl,
        "model": args.model, "batch": B, "seq": T, "accum_steps": A, "steps": len(losses),
        "init": args.init, "seed": args.seed, "data": args.data or "random",
        "optimizer": {k: getattr(args, k) for k in (
            "lr", "min_lr", "warmup_steps", "total_steps", "schedule", "beta1", "beta2",
            "adam_epsilon", "weight_decay", "no_decay", "grad_clip")},
        "num_parameters": n_params, "tokens_per_step": tokens_per_step,
        "flops_per_token": fpt, "peak_tflops": args.peak_tflops,
        "losses": losses, "grad_norms": norms, "lrs": lrs, "step_ms": step_ms,
        "timing_warmup": args.timing_warmup, "timed_steps": len(timed),
        "median_ms": median_ms, "median_tok_s": median_tok_s,
        "mfu": fpt * median_tok_s / (args.peak_tflops * 1e12),
        "first_step_ms": step_ms[0],
        # Lazy compilation happens in the first step: its extra time over a normal step.
        "compile_s": (step_ms[0] - median_ms) / 1e3 if args.mode == "compile" else None,
        "init_s": init_s, "wall_s": wall_s,
        "final_loss": losses[-1],
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
    }
    if cuda:
        summary["device_name"] = torch.cuda.get_device_name()
        summary["peak_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30
        summary["peak_reserved_gib"] = torch.cuda.max_memory_reserved() / 2**30

    summary["stopped"] = stopped
    if args.val_data and args.val_batches > 0 and not stopped:
        val = Windows(read_token_file(args.val_data), B, T, dev)
        with torch.no_grad(), autocast:
            vl = [eval_fn(params, *val.batch(k)).item()
                  for k in range(min(args.val_batches, val.count))]
        summary["val_loss"] = sum(vl) / len(vl)
        summary["val_batches"] = len(vl)
        print(f"val loss {summary['val_loss']:.6f} over {len(vl)} windows of {args.val_data}")

    print(f"train_torch: median {median_ms:.2f} ms/step, {median_tok_s:.0f} tok/s, "
          f"MFU {100 * summary['mfu']:.1f}% over {len(timed)} steps"
          + (f", peak {summary['peak_mem_gib']:.2f} GiB" if cuda else "")
          + (f", compile {summary['compile_s']:.1f} s" if summary["compile_s"] is not None else "")
          + f"; final loss {losses[-1]:.6f}", flush=True)
    if args.profile_steps > 0 and not stopped:
        profile_steps(train_step, len(losses), args.profile_steps, cuda)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0 if all(math.isfinite(x) for x in losses) else 1


if __name__ == "__main__":
    sys.exit(main())
