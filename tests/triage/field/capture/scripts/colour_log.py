"""Training logged through a coloured console formatter (the colorlog style), with Python
warnings routed into it; torch warns about the scheduler order. --fail makes the dataset
path wrong, logged with logger.exception in red."""
import argparse
import logging
import sys
import warnings

import torch
from torch import nn

COLOURS = {"DEBUG": "\x1b[36m", "INFO": "\x1b[32m", "WARNING": "\x1b[33m",
           "ERROR": "\x1b[31m", "CRITICAL": "\x1b[1;31m"}


class ColourFormatter(logging.Formatter):
    def format(self, record):
        text = super().format(record)
        return f"{COLOURS.get(record.levelname, '')}{text}\x1b[0m"


handler = logging.StreamHandler(sys.stdout)
handler.setFormatter(ColourFormatter("%(asctime)s [%(levelname)s] %(name)s: %(message)s"))
logging.basicConfig(level=logging.INFO, handlers=[handler])
logging.captureWarnings(True)
warnings.simplefilter("always")
log = logging.getLogger("train")

p = argparse.ArgumentParser()
p.add_argument("--data", default=None)
p.add_argument("--epochs", type=int, default=4)
args = p.parse_args()

torch.manual_seed(0)
model = nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2)
log.info("model: %d parameters, lr=%s", sum(p.numel() for p in model.parameters()), 0.05)
try:
    if args.data:
        x, y = torch.load(args.data)
    else:
        x = torch.randn(128, 16)
        y = x.sum(1, keepdim=True)
except Exception:
    log.exception("could not load the training data")
    sys.exit(1)
sched.step()                     # called before optimizer.step(): torch warns
for epoch in range(1, args.epochs + 1):
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    log.info("Epoch %d/%d loss %.4f lr %.4f", epoch, args.epochs, loss.item(), sched.get_last_lr()[0])
log.info("Training completed")
