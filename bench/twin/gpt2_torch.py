"""PyTorch twin of models/gpt2.mlir: same parameters, names, layouts and loss.

Parameter names and shapes match the `gpt.param` names that
gpt-instantiate-model gives the arguments of @forward: wte (Vp, C),
wpe (maxT, C), h.<i>.{ln_1,attn.c_attn,attn.c_proj,ln_2,mlp.c_fc,mlp.c_proj}.*,
ln_f.*; linear weights are (out, in) as in torch.nn.Linear. The LM head is
tied to wte and the loss reads only the first vocab_size logits, so padded
vocabulary rows do not matter.
"""
import math
import os
import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from counter_normal import counter_normal, fill_counter_normal_  # noqa: E402,F401


@dataclass
class Config:
    n_layer: int
    n_head: int
    n_embd: int
    vocab_size: int
    block_size: int
    vocab_multiple: int = 128

    @property
    def padded_vocab_size(self) -> int:
        m = self.vocab_multiple
        return (self.vocab_size + m - 1) // m * m


# Same presets as the gpt.models dictionary of models/gpt2.mlir.
PRESETS = {
    "124M": Config(12, 12, 768, 50257, 1024),
    "350M": Config(24, 16, 1024, 50257, 1024),
    "774M": Config(36, 20, 1280, 50257, 1024),
    "1558M": Config(48, 25, 1600, 50257, 1024),
    "tiny": Config(2, 2, 16, 60, 16, vocab_multiple=16),
    "mini": Config(2, 4, 64, 50257, 128),
}


def parameter_shapes(cfg: Config):
    """(name, shape) for every parameter, in @forward's argument order."""
    C, Vp = cfg.n_embd, cfg.padded_vocab_size
    shapes = [("wte", (Vp, C)), ("wpe", (cfg.block_size, C)),
              ("ln_f.weight", (C,)), ("ln_f.bias", (C,))]
    for i in range(cfg.n_layer):
        p = f"h.{i}."
        shapes += [
            (p + "ln_1.weight", (C,)), (p + "ln_1.bias", (C,)),
            (p + "attn.c_attn.weight", (3 * C, C)), (p + "attn.c_attn.bias", (3 * C,)),
            (p + "attn.c_proj.weight", (C, C)), (p + "attn.c_proj.bias", (C,)),
            (p + "ln_2.weight", (C,)), (p + "ln_2.bias", (C,)),
            (p + "mlp.c_fc.weight", (4 * C, C)), (p + "mlp.c_fc.bias", (4 * C,)),
            (p + "mlp.c_proj.weight", (C, 4 * C)), (p + "mlp.c_proj.bias", (C,)),
        ]
    return shapes


def init_gpt2(cfg: Config, generator=None, dtype=torch.float32):
    """GPT-2 init: N(0, 0.02), residual projections / sqrt(2 L), LN 1, bias 0."""
    params = {}
    for name, shape in parameter_shapes(cfg):
        if name.endswith(".bias"):
            t = torch.zeros(shape, dtype=dtype)
        elif "ln_" in name:
            t = torch.ones(shape, dtype=dtype)
        else:
            std = 0.02 / math.sqrt(2 * cfg.n_layer) if name.endswith("c_proj.weight") else 0.02
            t = torch.randn(shape, generator=generator, dtype=dtype) * std
        params[name] = t
    return params


# @forward's arguments are tokens, targets, then the parameters in
# parameter_shapes order: parameter k is argument k + 2, and gpt-insert-init
# uses the argument index as the random stream.
FIRST_PARAM_STREAM = 2


def counter_init_std(cfg: Config, name: str):
    """gpt-insert-init's rule for one parameter: "zero", "one" or the std.

    Biases 0; LayerNorm weights (``ln_`` in the name, ending .weight) 1;
    ``*c_proj.weight`` N(0, 0.02 / sqrt(2 n_layer)); other weights N(0, 0.02).
    The checks run in this order, as in compiler/Transforms/InsertInit.cpp.
    """
    if name.endswith(".bias"):
        return "zero"
    if "ln_" in name and name.endswith(".weight"):
        return "one"
    if name.endswith("c_proj.weight"):
        return 0.02 / math.sqrt(2.0 * cfg.n_layer)
    return 0.02


def init_counter(cfg: Config, seed: int, dtype=torch.float32, device="cpu"):
    """Exactly gptc's @init(seed): the same parameters the compiled program makes.

    Parameter k (parameter_shapes order) uses stream k + 2; element i (row-major)
    is std * counter_normal(seed, k + 2, i), rounded to float32 as the fp32
    program does (float64 for dtype=float64; bf16 rounds the float32 value).
    Vectorised on `device` (torch int64 arithmetic, in chunks): meant to make
    1.5B parameters in seconds on a GPU (bench/twin/test_counter_normal.py --torch
    times the 124M and 1558M inits there); 124M takes about 16 s on 2 CPU cores.
    Returns {name: tensor} in parameter_shapes order.
    """
    params = {}
    for k, (name, shape) in enumerate(parameter_shapes(cfg)):
        rule = counter_init_std(cfg, name)
        if rule == "zero":
            t = torch.zeros(shape, dtype=dtype, device=device)
        elif rule == "one":
            t = torch.ones(shape, dtype=dtype, device=device)
        else:
            t = torch.empty(shape, dtype=dtype, device=device)
            fill_counter_normal_(t, seed, FIRST_PARAM_STREAM + k, rule)
        params[name] = t
    return params


def num_parameters(cfg: Config) -> int:
    """Parameter count with the padded vocabulary (gpt.num_parameters)."""
    return sum(math.prod(s) for _, s in parameter_shapes(cfg))


def attention(qkv, n_head, fused=True):
    B, T, C3 = qkv.shape
    C = C3 // 3
    q, k, v = qkv.split(C, dim=2)
    q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
    if fused:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        mask = torch.ones(T, T, dtype=torch.bool, device=qkv.device).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        y = att @ v
    return y.transpose(1, 2).contiguous().view(B, T, C)


def quantize_fp8(t, dtype):
    """t as FP8 with a per-tensor scale taken from its own amax (current
    scaling), and the scale that undoes it."""
    amax = t.abs().amax().float().clamp(min=1e-12)
    scale = torch.finfo(dtype).max / amax
    return (t.float() * scale).to(dtype), (1.0 / scale).reshape(())


class Fp8Linear(torch.autograd.Function):
    """y = x W^T + b with FP8 products (torch._scaled_mm, cuBLASLt), the
    recipe a gptc FP8 policy would compile: forward E4M3 x E4M3 with fast
    accumulation; dX and dW from the E5M2 gradient and the saved E4M3
    operands, each tensor scaled by its own amax; bf16 out, the bias
    gradient from the bf16 gradient. Numerics study only: the casts and
    transposed copies are separate torch ops, not fused."""

    @staticmethod
    def forward(ctx, x, w, b):
        bf, e4m3 = torch.bfloat16, torch.float8_e4m3fn
        x2 = x.reshape(-1, x.shape[-1]).to(bf)
        x8, sx = quantize_fp8(x2, e4m3)
        w8, sw = quantize_fp8(w.to(bf), e4m3)
        y = torch._scaled_mm(x8, w8.t(), sx, sw, bias=None if b is None else b.to(bf),
                             out_dtype=bf, use_fast_accum=True)
        ctx.save_for_backward(x8, sx, w8, sw)
        ctx.x_shape, ctx.w_dtype, ctx.has_bias = x.shape, w.dtype, b is not None
        return y.view(*x.shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx, dy):
        x8, sx, w8, sw = ctx.saved_tensors
        bf = torch.bfloat16
        dy2 = dy.reshape(-1, dy.shape[-1]).to(bf)
        dy8, sdy = quantize_fp8(dy2, torch.float8_e5m2)
        # sm_90 FP8 GEMMs take the first operand row-major, the second
        # column-major: dX = dY W needs W^T stored, dW = dY^T X needs both.
        dx = torch._scaled_mm(dy8, w8.t().contiguous().t(), sdy, sw, out_dtype=bf)
        dw = torch._scaled_mm(dy8.t().contiguous(), x8.t().contiguous().t(), sdy, sx, out_dtype=bf)
        db = dy2.float().sum(0) if ctx.has_bias else None
        return dx.view(ctx.x_shape), dw.to(ctx.w_dtype), db


def forward(cfg: Config, p, tokens, targets, fused_attention=True, linear=F.linear):
    """Mean cross-entropy loss of GPT-2 on (B, T) tokens and targets.
    `linear` computes the blocks' four linear layers (Fp8Linear.apply for
    the FP8 study); the LM head is x @ wte^T in the autocast type."""
    B, T = tokens.shape
    C = cfg.n_embd
    x = p["wte"][tokens] + p["wpe"][:T]
    for i in range(cfg.n_layer):
        h = f"h.{i}."
        a = F.layer_norm(x, (C,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], 1e-5)
        a = linear(a, p[h + "attn.c_attn.weight"], p[h + "attn.c_attn.bias"])
        a = attention(a, cfg.n_head, fused_attention)
        x = x + linear(a, p[h + "attn.c_proj.weight"], p[h + "attn.c_proj.bias"])
        m = F.layer_norm(x, (C,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], 1e-5)
        m = F.gelu(linear(m, p[h + "mlp.c_fc.weight"], p[h + "mlp.c_fc.bias"]),
                   approximate="tanh")
        x = x + linear(m, p[h + "mlp.c_proj.weight"], p[h + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    logits = x @ p["wte"].t()
    V = cfg.vocab_size
    return F.cross_entropy(logits[..., :V].reshape(-1, V).float()
                           if logits.dtype in (torch.bfloat16, torch.float16)
                           else logits[..., :V].reshape(-1, V),
                           targets.reshape(-1))
