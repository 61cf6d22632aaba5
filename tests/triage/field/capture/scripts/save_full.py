"""Train a little, then torch.save model + optimizer into --dir (a volume too small for it)."""
import argparse
import os

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--dir", required=True)
args = p.parse_args()

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 512))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(1, 31):
    x = torch.randn(64, 512)
    loss = nn.functional.mse_loss(model(x), x)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 10 == 0:
        print(f"step {step}/30 loss {loss.item():.4f}")
path = os.path.join(args.dir, "checkpoint-30.pt")
print(f"saving checkpoint to {path}")
torch.save({"step": 30, "model": model.state_dict(), "optimizer": opt.state_dict()}, path)
print("saved")
