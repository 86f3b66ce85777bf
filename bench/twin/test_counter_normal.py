#!/usr/bin/env python3
"""Checks bench/twin/counter_normal.py against gptc's C++ counterNormal.

    python3 bench/twin/test_counter_normal.py            # any python3: scalar version
    python3 bench/twin/test_counter_normal.py --torch    # also the torch version (CPU, and
                                                    # CUDA when present) and init_counter

1) The scalar version must give the C++ golden values bit for bit (float64).
2) With --torch (or whenever torch imports): counter_normal_torch must agree
   with the scalar version on sampled indices (small, large, chunk edges) to
   8 float64 ulps (torch's log/cos are not glibc's; the float32 values
   that @init stores must then agree almost always, and the count is printed);
   init_counter('tiny') must equal a scalar construction of every parameter;
   on CUDA, the 124M init is timed.
Exit status 0 when every check passes.
"""
import argparse
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import counter_normal as cn  # noqa: E402

# From compiler/Reference/Interpreter.cpp's counterNormal (seed 1337).
GOLDEN = {
    2: ["-0.30149110844023919", "0.12135803955908804", "1.2673591389666437"],
    3: ["1.0817561418612247", "-0.11009040722699993", "-0.76670602763341289"],
    17: ["0.51907189742441895", "0.79293446426879699", "0.83081972868578402"],
}

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def scalar_checks():
    # splitmix64 from state 0: the generator's well-known first output.
    check(cn.splitmix64(0) == 0xE220A8397B1DCDAF, "splitmix64(0) == 0xE220A8397B1DCDAF")
    for stream, values in GOLDEN.items():
        for i, text in enumerate(values):
            want, got = float(text), cn.counter_normal(1337, stream, i)
            check(got == want, f"counter_normal(1337, {stream}, {i}) = {got!r} "
                               f"(C++ {text}, {got.hex()} vs {want.hex()})")
    # Cheap sanity of the distribution: mean ~ 0, variance ~ 1.
    xs = [cn.counter_normal(7, 5, i) for i in range(20000)]
    mean = sum(xs) / len(xs)
    var = sum((x - mean) ** 2 for x in xs) / len(xs)
    check(abs(mean) < 0.03 and abs(var - 1) < 0.05, f"20000 samples: mean {mean:.4f} var {var:.4f}")


def torch_checks():
    import torch

    import gpt2_torch as g

    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    starts = [0, 1, 12345, (1 << 25) - 7, 3 * (1 << 31) + 11, (1 << 40) + 5]
    for dev in devices:
        worst, n, exact64, exact32 = 0.0, 0, 0, 0
        for seed in (0, 1337, (1 << 24) - 1):
            for stream in (0, 2, 3, 17, 147, 1000003):
                for s in starts:
                    z = counter_normal_torch_list(seed, stream, s, 64, dev)
                    for k, zt in enumerate(z):
                        ref = cn.counter_normal(seed, stream, s + k)
                        worst = max(worst, abs(zt - ref) / max(1.0, abs(ref)))
                        exact64 += zt == ref
                        exact32 += f32(zt) == f32(ref)
                        n += 1
        check(worst <= 8 * 2.0 ** -52, f"torch {dev}: {n} samples, worst |torch - scalar| / "
                                       f"max(1, |z|) = {worst:.3g} (<= 8 ulp)")
        print(f"     torch {dev}: bit-exact float64 {exact64}/{n}, float32 {exact32}/{n}")
        check(exact32 >= n - 2, f"torch {dev}: float32 values equal the scalar's ({exact32}/{n})")

        cfg = g.PRESETS["tiny"]
        params = g.init_counter(cfg, 1337, torch.float32, dev)
        bad = []
        for k, (name, shape) in enumerate(g.parameter_shapes(cfg)):
            std = g.counter_init_std(cfg, name)
            t = params[name].flatten().tolist()
            for i, v in enumerate(t):
                want = 1.0 if std == "one" else 0.0 if std == "zero" else \
                    f32(f32(std) * f32(cn.counter_normal(1337, k + 2, i)))
                if v != want:
                    bad.append((name, i, v, want))
        check(len(bad) <= 2, f"init_counter(tiny, 1337) on {dev} equals the scalar @init "
                             f"({len(bad)} mismatches{': ' + str(bad[:3]) if bad else ''})")

    if torch.cuda.is_available():
        for preset in ("124M", "1558M"):
            cfg = g.PRESETS[preset]
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            p = g.init_counter(cfg, 1337, torch.float32, "cuda")
            torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            n = sum(t.numel() for t in p.values())
            w = p["h.0.mlp.c_fc.weight"]
            check(abs(w.std().item() - 0.02) < 2e-4,
                  f"init_counter({preset}) on cuda: {n:,} parameters in {dt:.2f} s, "
                  f"c_fc std {w.std().item():.5f}")
            del p
            torch.cuda.empty_cache()


def counter_normal_torch_list(seed, stream, start, count, device):
    return cn.counter_normal_torch(seed, stream, start, count, device).cpu().tolist()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torch", action="store_true", help="require torch and check it too")
    args = ap.parse_args()
    scalar_checks()
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    if args.torch and not have_torch:
        check(False, "torch is not importable")
    elif have_torch:
        torch_checks()
    else:
        print("skip torch checks (no torch here)")
    print(f"{'FAILED' if failures else 'PASSED'}: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
