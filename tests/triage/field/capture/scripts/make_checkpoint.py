"""Setup for load_truncated: a real checkpoint, then cut short the way a killed save leaves it."""
import os
import sys

import torch
from torch import nn

path, keep = sys.argv[1], float(sys.argv[2])
os.makedirs(os.path.dirname(path), exist_ok=True)
model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 10))
opt = torch.optim.AdamW(model.parameters())
torch.save({"epoch": 7, "model": model.state_dict(), "optimizer": opt.state_dict()}, path)
size = os.path.getsize(path)
with open(path, "r+b") as fh:
    fh.truncate(int(size * keep))
