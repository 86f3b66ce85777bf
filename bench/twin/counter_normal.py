"""gptc's counter-based normal generator (gpt.random_normal), in Python.

The same function as counterNormal in compiler/Reference/Interpreter.cpp:

    splitmix64(x): x += 0x9E3779B97F4A7C15
                   x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
                   x = (x ^ (x >> 27)) * 0x94D049BB133111EB
                   return x ^ (x >> 31)          (mod 2^64, logical shifts)
    key = splitmix64(seed) ^ splitmix64(stream * 0xD1B54A32D192ED03)
    a = splitmix64(key + 2 i), b = splitmix64(key + 2 i + 1)
    u1 = ((a >> 11) + 1) 2^-53 in (0, 1],  u2 = (b >> 11) 2^-53 in [0, 1)
    z  = sqrt(-2 ln u1) cos(2 pi u2)             (float64)

Element i of a tensor is its row-major index; @init uses the parameter's
argument index in @forward as the stream (see gpt2_torch.init_counter).

Two versions: `counter_normal` (pure Python, one value; the reference) and
`counter_normal_torch` (torch int64 tensors, any device). This module
imports torch only inside the torch version, so the scalar one and
test_counter_normal.py run with a bare python3.
"""
import math

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
STREAM_MUL = 0xD1B54A32D192ED03
TWO_POW_M53 = 2.0 ** -53


# --- Scalar reference ------------------------------------------------------

def splitmix64(x: int) -> int:
    x = (x + GOLDEN) & MASK64
    x = ((x ^ (x >> 30)) * MIX1) & MASK64
    x = ((x ^ (x >> 27)) * MIX2) & MASK64
    return x ^ (x >> 31)


def stream_key(seed: int, stream: int) -> int:
    """The per-(seed, stream) key, an unsigned 64-bit integer."""
    return splitmix64(seed & MASK64) ^ splitmix64((stream * STREAM_MUL) & MASK64)


def counter_normal(seed: int, stream: int, index: int) -> float:
    """One standard normal sample, bit-identical to the C++ counterNormal."""
    key = stream_key(seed, stream)
    a = splitmix64((key + 2 * index) & MASK64)
    b = splitmix64((key + 2 * index + 1) & MASK64)
    u1 = (float(a >> 11) + 1.0) * TWO_POW_M53
    u2 = float(b >> 11) * TWO_POW_M53
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


# --- Vectorised (torch) ----------------------------------------------------

def _signed(x: int) -> int:
    """An unsigned 64-bit constant as the int64 with the same bits."""
    x &= MASK64
    return x - (1 << 64) if x >= (1 << 63) else x


def _lsr(x, k: int):
    """Logical right shift of an int64 tensor (torch's >> is arithmetic)."""
    return (x >> k) & ((1 << (64 - k)) - 1)


def _splitmix64_(x):
    """splitmix64 in place on an int64 tensor; multiplies wrap mod 2^64."""
    x.add_(_signed(GOLDEN))
    x.bitwise_xor_(_lsr(x, 30)).mul_(_signed(MIX1))
    x.bitwise_xor_(_lsr(x, 27)).mul_(_signed(MIX2))
    x.bitwise_xor_(_lsr(x, 31))
    return x


def counter_normal_torch(seed: int, stream: int, start: int, count: int, device="cpu"):
    """Float64 tensor of counter_normal(seed, stream, i) for i in [start, start+count)."""
    import torch

    key = _signed(stream_key(seed, stream))
    i = torch.arange(start, start + count, dtype=torch.int64, device=device)
    a = i.mul_(2).add_(key)          # key + 2 i  (wraps)
    b = a + 1                        # key + 2 i + 1
    a = _splitmix64_(a)
    b = _splitmix64_(b)
    u1 = (_lsr(a, 11) + 1).to(torch.float64).mul_(TWO_POW_M53)   # exact: < 2^53 + 1
    u2 = _lsr(b, 11).to(torch.float64).mul_(TWO_POW_M53)
    del a, b
    return u1.log_().mul_(-2.0).sqrt_().mul_(u2.mul_(2.0 * math.pi).cos_())


def fill_counter_normal_(out, seed: int, stream: int, std: float, chunk: int = 1 << 25):
    """out (any float dtype, contiguous) = std * counter_normal over its row-major index.

    The sample is rounded to out's dtype (float32: float(std) * float(z), as
    the fp32 interpreter does; for bf16, the float32 value is rounded once
    more). Works in chunks so 1.5B parameters need only a few GB of scratch.
    """
    import torch

    flat = out.view(-1)
    n = flat.numel()
    work = torch.float64 if out.dtype == torch.float64 else torch.float32
    scale = torch.tensor(std, dtype=work, device=out.device)  # float(std), not double
    for s in range(0, n, chunk):
        c = min(chunk, n - s)
        z = counter_normal_torch(seed, stream, s, c, out.device).to(work)
        flat[s:s + c].copy_(z.mul_(scale))
    return out
