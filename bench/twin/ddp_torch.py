"""PyTorch DDP + torch.compile peer of `gptrun --gpus N`: tokens/s per GPU.

Run under torchrun (one process per GPU):

    torchrun --standalone --nproc_per_node N bench/twin/ddp_torch.py --model 124M --batch 64

Each rank trains the twin (gpt2_torch: the same parameters, layouts and
loss as models/gpt2.mlir) on its own window of every step's tokens, under
bf16 autocast with fp32 master weights, fused AdamW and global-norm clipping,
as gptc's bf16 step does; DistributedDataParallel all-reduces the gradients
in buckets overlapped with the backward. Rank 0 prints one line per step
and writes the summary (--json): median ms/step over the steps after
--timing-warmup, tokens/s in all and per GPU. No gradient accumulation,
no eval: a throughput peer, not a training recipe.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_torch as g  # noqa: E402


class Twin(nn.Module):
    """The twin's parameters as a module (DDP needs one); forward = the loss."""

    def __init__(self, cfg, params):
        super().__init__()
        self.cfg = cfg
        self.names = list(params)
        # ParameterDict keys cannot hold dots.
        self.p = nn.ParameterDict({k.replace(".", "/"): nn.Parameter(v) for k, v in params.items()})

    def forward(self, x, y):
        p = {k: self.p[k.replace(".", "/")] for k in self.names}
        return g.forward(self.cfg, p, x, y)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a = ap.add_argument
    a("--model", default="124M", choices=sorted(g.PRESETS))
    a("--batch", type=int, default=16, help="B per GPU")
    a("--seq", type=int, default=1024)
    a("--steps", type=int, default=20)
    a("--timing-warmup", type=int, default=5)
    a("--compile", choices=["on", "off"], default="on")
    a("--lr", type=float, default=3.0e-4)
    a("--seed", type=int, default=1337)
    a("--json", default="")
    a("--time-limit", type=float, default=0, help="stop after this many seconds")
    args = ap.parse_args(argv)
    started = time.perf_counter()

    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dev = f"cuda:{local}"
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True

    cfg = g.PRESETS[args.model]
    B, T = args.batch, args.seq
    model = Twin(cfg, g.init_counter(cfg, args.seed, torch.float32, dev))
    ddp = DDP(model, device_ids=[local], bucket_cap_mb=25)
    step_fn = torch.compile(ddp) if args.compile == "on" else ddp
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    gen = torch.Generator().manual_seed(args.seed + 1 + rank)
    tokens = torch.randint(0, cfg.vocab_size, (args.steps, B * T + 1), generator=gen).to(dev)

    ms = []
    for step in range(args.steps):
        if args.time_limit and step > 0 and time.perf_counter() - started > args.time_limit:
            break
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        x = tokens[step, :-1].view(B, T)
        y = tokens[step, 1:].view(B, T)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = step_fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - t0) * 1e3)
        if rank == 0:
            print(f"step {step + 1}/{args.steps} | loss {loss.item():.4f} | {ms[-1]:.2f} ms",
                  flush=True)
    timed = ms[args.timing_warmup:] if len(ms) > args.timing_warmup else ms[-1:]
    median = statistics.median(timed)
    tok_s = world * B * T / (median / 1e3)
    if rank == 0:
        summary = {
            "runner": "torch-ddp", "compile": args.compile, "model": args.model, "batch": B,
            "seq": T, "world_size": world, "steps": len(ms), "timed_steps": len(timed),
            "median_ms": median, "tok_s": tok_s, "tok_s_per_gpu": tok_s / world,
            "first_step_ms": ms[0], "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30,
            "device_name": torch.cuda.get_device_name(), "torch": torch.__version__,
        }
        print(f"ddp_torch: {args.model} B={B} x {world} GPUs: median {median:.2f} ms/step, "
              f"{tok_s:.0f} tok/s ({tok_s / world:.0f} per GPU)", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(summary, f, indent=1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
