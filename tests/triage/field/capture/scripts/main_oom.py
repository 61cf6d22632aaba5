"""Evaluation that keeps every batch's features (and their graphs) in a list: the main
process grows until the memory limit's killer ends it."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))
features = []
for step in range(1, 100001):
    x = torch.randn(256, 1024)
    features.append(model(x))          # forgot torch.no_grad() and .detach(): nothing is freed
    if step % 10 == 0:
        print(f"eval step {step}: kept {len(features)} batches")
print("done")
