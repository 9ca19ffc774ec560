"""Time solutions.mixed_precision.mixed_precision_step against the same step written plainly.

    PYTHONPATH=. python scripts/measure/reference_training_step.py [--json results.jsonl] [--rounds 5]

The model is one pre-norm transformer block (LayerNorm, 16-head attention through
F.scaled_dot_product_attention, LayerNorm, 4x GELU MLP; d_model 1024, 8 x 1024 tokens) trained with
AdamW. Two copies with the same initial weights: one stepped by mixed_precision_step (bf16 autocast,
fp32 master weights), one by the plain PyTorch recipe (zero_grad, autocast forward, backward,
optimizer.step). Each step ends in loss.item(), a synchronisation, in both. Prints the median step
times and plain / ours (1.0 = no overhead), and both first-step losses (same weights, same batch),
which should agree to bf16 precision.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch import nn
from triton.testing import do_bench

from solutions import mixed_precision as reference

D_MODEL, HEADS, BATCH, SEQ = 1024, 16, 8, 1024


class TransformerBlock(nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv, self.proj = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
        self.up, self.down = nn.Linear(d_model, 4 * d_model), nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        batch, seq, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(batch, seq, 3, self.heads, width // self.heads).unbind(dim=2)
        attended = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, seq, width))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


def build(seed=0):
    torch.manual_seed(seed)
    model = TransformerBlock(D_MODEL, HEADS).cuda()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4)


def plain_step(model, optimizer, batch):
    inputs, targets = batch
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.mse_loss(model(inputs), targets)
    loss.float().backward()
    optimizer.step()
    return loss.item()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the result as one JSON line to this file")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_training_step: needs a CUDA GPU", file=sys.stderr)
        return 2
    gen = torch.Generator(device="cuda").manual_seed(7)
    batch = (torch.randn((BATCH, SEQ, D_MODEL), device="cuda", generator=gen),
             torch.randn((BATCH, SEQ, D_MODEL), device="cuda", generator=gen))
    ours_model, ours_optimizer = build()
    plain_model, plain_optimizer = build()
    steps = {
        "ours": lambda: reference.mixed_precision_step(ours_model, ours_optimizer, batch, F.mse_loss),
        "plain": lambda: plain_step(plain_model, plain_optimizer, batch),
    }
    # the first step of each starts from the same weights on the same batch: the losses should agree
    first_loss = {name: step() for name, step in steps.items()}
    times = {name: [] for name in steps}
    for index in range(args.rounds):
        order = ["ours", "plain"] if index % 2 == 0 else ["plain", "ours"]
        for name in order:
            times[name].append(do_bench(steps[name], warmup=50, rep=300, return_mode="median"))
    ours_ms, plain_ms = statistics.median(times["ours"]), statistics.median(times["plain"])
    ours_loss, plain_loss = first_loss["ours"], first_loss["plain"]
    params = sum(p.numel() for p in ours_model.parameters())
    row = {"device": torch.cuda.get_device_name(), "params": params, "tokens": BATCH * SEQ,
           "ours_ms": round(ours_ms, 3), "plain_ms": round(plain_ms, 3), "ratio": round(plain_ms / ours_ms, 3),
           "rounds": {name: [round(t, 3) for t in values] for name, values in times.items()},
           "ours_loss": ours_loss, "plain_loss": plain_loss,
           "master_dtypes": sorted({str(p.dtype) for p in ours_model.parameters()})}
    print(f"# {row['device']}  torch {torch.__version__}  block d={D_MODEL} heads={HEADS} "
          f"tokens={BATCH}x{SEQ} params={params / 1e6:.1f}M")
    print(f"mixed_precision_step {ours_ms:.3f} ms   plain autocast step {plain_ms:.3f} ms   "
          f"ratio plain/ours {row['ratio']:.3f}   losses {ours_loss:.5f} vs {plain_loss:.5f}")
    if args.json:
        with open(args.json, "w") as sink:
            sink.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
