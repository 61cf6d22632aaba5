"""Inference that writes one small prediction file per sample into --out."""
import argparse
import os

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--samples", type=int, default=2000)
args = p.parse_args()

torch.manual_seed(0)
model = nn.Linear(16, 4).eval()
os.makedirs(args.out, exist_ok=True)
print(f"writing {args.samples} predictions to {args.out}")
with torch.no_grad():
    for i in range(args.samples):
        pred = model(torch.randn(1, 16))
        torch.save(pred, os.path.join(args.out, f"pred_{i:06d}.pt"))
        if (i + 1) % 100 == 0:
            print(f"[{i + 1}/{args.samples}] saved")
print("done")
