"""Resume training from a checkpoint (which a killed save left truncated)."""
import argparse

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--resume", required=True)
p.add_argument("--epochs", type=int, default=10)
args = p.parse_args()

model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 10))
opt = torch.optim.AdamW(model.parameters())
print(f"=> loading checkpoint '{args.resume}'")
ckpt = torch.load(args.resume, map_location="cpu")
model.load_state_dict(ckpt["model"])
opt.load_state_dict(ckpt["optimizer"])
print(f"=> resumed from epoch {ckpt['epoch']}")
