"""Linear regression with a learning rate far too high: the loss overflows to inf, then nan.
--guard stops the run the way many training scripts do (a NaN check that raises)."""
import argparse
import math

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, default=0.5)
p.add_argument("--epochs", type=int, default=12)
p.add_argument("--guard", action="store_true")
args = p.parse_args()

torch.manual_seed(0)
x = torch.randn(256, 8) * 10
y = x @ torch.randn(8, 1)
model = nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
for epoch in range(1, args.epochs + 1):
    for i in range(0, 256, 32):
        loss = nn.functional.mse_loss(model(x[i:i + 32]), y[i:i + 32])
        if args.guard and math.isnan(loss.item()):
            raise FloatingPointError(f"Loss is {loss.item()}, stopping training (epoch {epoch}, batch {i // 32})")
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"Epoch {epoch}/{args.epochs} loss {loss.item():.4f}")
torch.save(model.state_dict(), "model.pt")
print("Training finished, model saved to model.pt")
