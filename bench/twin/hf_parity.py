#!/usr/bin/env python3
"""The Hugging Face side of bench/device/hf_parity.sh (torch, transformers, safetensors).

  make     a seeded random GPT2LMHeadModel (config tiny or 124M) saved with
           save_pretrained (model.safetensors + config.json), an llm.c token
           file of random ids, and HF's fp32 loss on its first batch
  loss     HF's fp32 loss on the token file's first batch for a saved model
           (the model gptc exported after training)
  logits   HF's logits for the ids in a `gptrun --sample --logits-out` file,
           against gptc's, on an exported model
  fixture  the committed CI fixture: the tiny model as transformers wrote it,
           a batch, and HF's fp64 loss and row-0 logits (expected.json)
  compare  two losses within a relative tolerance; exit 1 otherwise

Batch w of the token file is tokens[w*B*T : w*B*T + B*T + 1], inputs its
first B*T and targets the next B*T, as gptrun's DataLoader reads it; the
loss is the mean cross-entropy over the first vocab_size logits. fp32 runs
with TF32 off and eager attention.
"""
import argparse
import json
import struct
import sys

CONFIGS = {
    # n_layer, n_head, n_embd, vocab_size, n_positions: models/gpt2.mlir's presets.
    "tiny": (2, 2, 16, 60, 16),
    "mini": (2, 4, 64, 50257, 128),
    "124M": (12, 12, 768, 50257, 1024),
}


def torch_setup():
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


def hf_config(name):
    from transformers import GPT2Config

    n_layer, n_head, n_embd, vocab, n_pos = CONFIGS[name]
    return GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=n_embd, vocab_size=vocab,
                      n_positions=n_pos, activation_function="gelu_new", layer_norm_epsilon=1e-5,
                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)


def load(path, device, dtype):
    torch = torch_setup()
    from transformers import GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(path, attn_implementation="eager")
    return model.to(device=device, dtype=dtype).eval(), torch


def read_tokens(path):
    with open(path, "rb") as f:
        head = struct.unpack("<256i", f.read(1024))
        assert head[0] == 20240520 and head[1] == 1, f"{path}: not an llm.c token file"
        n = head[2]
        return list(struct.unpack(f"<{n}H", f.read(2 * n)))


def batch(tokens, b, t, window=0):
    start = window * b * t
    w = tokens[start:start + b * t + 1]
    assert len(w) == b * t + 1, "token file too short"
    return w[:-1], w[1:]


def loss_of(model, torch, inputs, targets, b, t, device):
    x = torch.tensor(inputs, device=device).view(b, t)
    y = torch.tensor(targets, device=device).view(b, t)
    with torch.no_grad():
        logits = model(x).logits
        v = model.config.vocab_size
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, v).double(), y.reshape(-1))
    return float(loss), logits


def cmd_make(a):
    torch = torch_setup()
    from transformers import GPT2LMHeadModel

    torch.manual_seed(a.seed)
    model = GPT2LMHeadModel(hf_config(a.config)).eval()
    model.save_pretrained(a.out, safe_serialization=True)
    vocab = CONFIGS[a.config][3]
    g = torch.Generator().manual_seed(a.seed + 1)
    n = a.batch * a.seq * a.windows + 1
    ids = torch.randint(0, vocab, (n,), generator=g).tolist()
    with open(a.tokens, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        f.write(struct.pack(f"<{n}H", *ids))
    # The loss of the saved file, as from_pretrained reads it back.
    model, torch = load(a.out, a.device, torch.float32)
    x, y = batch(ids, a.batch, a.seq)
    loss, _ = loss_of(model, torch, x, y, a.batch, a.seq, a.device)
    print(json.dumps({"config": a.config, "hf_loss": loss, "seed": a.seed}))


def cmd_loss(a):
    model, torch = load(a.model, a.device, torch_setup().float32)
    x, y = batch(read_tokens(a.tokens), a.batch, a.seq, a.window)
    loss, _ = loss_of(model, torch, x, y, a.batch, a.seq, a.device)
    print(json.dumps({"hf_loss": loss}))


def cmd_logits(a):
    from safetensors.numpy import load_file

    model, torch = load(a.model, a.device, torch_setup().float32)
    got = load_file(a.gptc)
    ids = got["tokens"].astype("int64").tolist()
    ours = torch.tensor(got["logits"], dtype=torch.float64)
    with torch.no_grad():
        theirs = model(torch.tensor([ids], device=a.device)).logits[0].double().cpu()
    theirs = theirs[:, :ours.shape[1]]
    diff = (ours - theirs).abs().max().item()
    scale = theirs.abs().max().item()
    ok = diff <= a.tol
    print(json.dumps({"tokens": len(ids), "max_abs_diff": diff, "max_abs_logit": scale,
                      "tol": a.tol, "pass": ok}))
    sys.exit(0 if ok else 1)


def cmd_fixture(a):
    # fp64 on the CPU: the reference the CI test's fp32 Host run is held to.
    model, torch = load(a.model, "cpu", torch_setup().float64)
    import transformers

    x, y = batch(read_tokens(a.tokens), a.batch, a.seq)
    loss, logits = loss_of(model, torch, x, y, a.batch, a.seq, "cpu")
    out = {
        "config": a.config, "batch": a.batch, "seq": a.seq, "tokens": x, "targets": y,
        "loss": loss, "logits_row0": logits[0].tolist(),
        "made_by": f"bench/twin/hf_parity.py fixture: transformers {transformers.__version__}, "
                   f"torch {torch.__version__}, fp64 on the CPU",
    }
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {a.out}: loss {loss:.9f}")


def cmd_compare(a):
    rel = abs(a.ours - a.theirs) / abs(a.theirs)
    ok = rel <= a.tol
    print(json.dumps({"what": a.what, "gptc": a.ours, "hf": a.theirs, "rel_diff": rel,
                      "tol": a.tol, "pass": ok}))
    sys.exit(0 if ok else 1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--config", choices=sorted(CONFIGS), required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--tokens", required=True)
    m.add_argument("--batch", type=int, required=True)
    m.add_argument("--seq", type=int, required=True)
    m.add_argument("--windows", type=int, default=16, help="batches in the token file")
    m.add_argument("--seed", type=int, default=42)
    m.add_argument("--device", default="cuda")
    for name in ("loss", "fixture"):
        s = sub.add_parser(name)
        s.add_argument("--model", required=True)
        s.add_argument("--tokens", required=True)
        s.add_argument("--batch", type=int, required=True)
        s.add_argument("--seq", type=int, required=True)
        if name == "loss":
            s.add_argument("--window", type=int, default=0)
            s.add_argument("--device", default="cuda")
        else:
            s.add_argument("--config", required=True)
            s.add_argument("--out", required=True)
    lg = sub.add_parser("logits")
    lg.add_argument("--model", required=True)
    lg.add_argument("--gptc", required=True, help="gptrun --logits-out file")
    lg.add_argument("--tol", type=float, default=1e-4)
    lg.add_argument("--device", default="cuda")
    c = sub.add_parser("compare")
    c.add_argument("--what", required=True)
    c.add_argument("--ours", type=float, required=True)
    c.add_argument("--theirs", type=float, required=True)
    c.add_argument("--tol", type=float, default=1e-5)
    a = p.parse_args()
    {"make": cmd_make, "loss": cmd_loss, "logits": cmd_logits, "fixture": cmd_fixture,
     "compare": cmd_compare}[a.cmd](a)


if __name__ == "__main__":
    main()
