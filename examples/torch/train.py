"""A small, real PyTorch training job (CPU, a few seconds by default) for trying rgt out and for
its end-to-end tests: a tiny MLP on synthetic regression data, a DataLoader with worker
processes, a tqdm bar per epoch, `Epoch e/N loss ...` lines, and checkpoints written atomically
into ckpt/. Fault injection options make it fail the ways real jobs fail.

    python train.py                       # 3 epochs x 20 steps, ckpt/epoch_00N.pt + ckpt/final.pt
    python train.py --nan-at 30           # the loss turns NaN at step 30; still exits 0
    python train.py --nan-at 30 --nan-raise   # a NaN guard raises FloatingPointError
    python train.py --oom-mb 4096         # allocates until the memory killer strikes
    python train.py --oom-mb 4096 --oom-in worker   # ... inside a DataLoader worker
    python train.py --fail-at 25          # a code error (KeyError) at step 25
    python train.py --stall-after 2       # after 2 s: silent, CPU busy, stdout block-buffered
    python train.py --resume              # continue from ckpt/last.pt
    python train.py --eval ckpt/final.pt --out results/metrics.json

Needs torch and tqdm (`pip install torch tqdm`); no GPU.
"""
from __future__ import annotations

import argparse
import io
import json
import math
import os
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm

FEATURES = 32


class Synthetic(Dataset):
    """y = x . w + noise, made from a seed: every run (and every worker) sees the same data."""

    def __init__(self, n: int, seed: int, oom_mb: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, FEATURES, generator=g)
        w = torch.randn(FEATURES, 1, generator=torch.Generator().manual_seed(1234))
        self.y = self.x @ w + 0.1 * torch.randn(n, 1, generator=g)
        self.oom_mb = oom_mb
        self.hoard = []

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        if self.oom_mb:                     # --oom-in worker: a per-worker cache that never stops growing
            grab(self.hoard, self.oom_mb, 16)
        return {"x": self.x[i], "y": self.y[i]}


def grab(hoard: list, limit_mb: int, step_mb: int) -> None:
    """Allocate (and touch, so the memory is really charged) step_mb more, up to limit_mb."""
    if len(hoard) * step_mb < limit_mb:
        hoard.append(torch.ones(step_mb << 18))   # float32: 4 bytes x (step_mb << 18) = step_mb MiB


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, 1))


def save_atomic(obj, path: str) -> None:
    """tmp -> fsync -> rename: a kill or a full disk mid-save never leaves a truncated
    checkpoint under the real name (the `PytorchStreamReader failed` of the next resume)."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        torch.save(obj, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def stall_forever() -> None:
    """A hang as a stuck job shows it: the CPU busy, nothing new in the log. Output now goes
    to a block buffer (what a job run without PYTHONUNBUFFERED gets) and stays there."""
    sys.stdout.flush()
    sys.stdout = io.TextIOWrapper(open(sys.stdout.fileno(), "wb", buffering=1 << 16, closefd=False))
    n = 0
    while True:
        t_end = time.monotonic() + 1.0
        while time.monotonic() < t_end:
            n += 1
        print("still busy (%d spins)" % n)


def train(args) -> int:
    torch.manual_seed(args.seed)
    os.makedirs(args.ckpt_dir, exist_ok=True)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    first = 1
    last = os.path.join(args.ckpt_dir, "last.pt")
    if args.resume and os.path.exists(last):
        state = torch.load(last)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        first = state["epoch"] + 1
        print("Resumed from %s (epoch %d)" % (last, state["epoch"]), flush=True)
    oom_worker = args.oom_mb if args.oom_in == "worker" else 0
    data = Synthetic(args.steps * args.batch_size, args.seed, oom_worker)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, drop_last=True,
                        num_workers=args.workers, persistent_workers=args.workers > 0)
    hoard: list = []
    started = time.monotonic()
    step = (first - 1) * args.steps
    for epoch in range(first, args.epochs + 1):
        total = 0.0
        for batch in tqdm(loader, desc="epoch %d/%d" % (epoch, args.epochs), leave=True):
            step += 1
            if args.stall_after is not None and time.monotonic() - started >= args.stall_after:
                stall_forever()
            if args.oom_mb and args.oom_in == "main":
                while True:                                 # until the memory killer strikes
                    grab(hoard, args.oom_mb, 64)
                    if len(hoard) * 64 >= args.oom_mb:
                        break
            if args.fail_at is not None and step >= args.fail_at:
                batch = {"x": batch["x"]}                   # a collate change that lost the labels
            loss = nn.functional.mse_loss(model(batch["x"]), batch["y"])
            if args.nan_at is not None and step >= args.nan_at:
                loss = loss * float("nan")
            if args.nan_raise and not math.isfinite(loss.item()):
                raise FloatingPointError("loss is %s at step %d, stopping training" % (loss.item(), step))
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        mean = total / args.steps
        print("Epoch %d/%d loss %.4f" % (epoch, args.epochs, mean), flush=True)
        state = {"epoch": epoch, "step": step, "loss": mean, "model": model.state_dict(),
                 "optimizer": opt.state_dict()}
        save_atomic(state, os.path.join(args.ckpt_dir, "epoch_%03d.pt" % epoch))
        save_atomic(state, last)
    save_atomic({"model": model.state_dict(), "epochs": args.epochs, "features": FEATURES},
                os.path.join(args.ckpt_dir, "final.pt"))
    print("Training completed: %d epochs, %d steps, checkpoints in %s" % (args.epochs, step, args.ckpt_dir),
          flush=True)
    return 0


def evaluate(args) -> int:
    """Load a final checkpoint, score it on fresh data, write the metrics atomically."""
    state = torch.load(args.eval)
    model = make_model()
    model.load_state_dict(state["model"])
    data = Synthetic(1024, args.seed + 1)
    with torch.no_grad():
        mse = nn.functional.mse_loss(model(data.x), data.y).item()
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".tmp", "w") as fh:
        json.dump({"mse": mse, "checkpoint": args.eval, "epochs": state["epochs"]}, fh)
    os.replace(args.out + ".tmp", args.out)
    print("eval mse %.4f -> %s" % (mse, args.out), flush=True)
    return 0


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps", type=int, default=20, help="steps per epoch")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ckpt-dir", default="ckpt")
    p.add_argument("--resume", action="store_true", help="continue from CKPT_DIR/last.pt")
    p.add_argument("--eval", metavar="CKPT", help="evaluate this checkpoint instead of training")
    p.add_argument("--out", default="results/metrics.json", help="where --eval writes its metrics")
    p.add_argument("--nan-at", type=int, metavar="STEP", help="the loss becomes NaN from this step on")
    p.add_argument("--nan-raise", action="store_true", help="a NaN guard raises (exit 1)")
    p.add_argument("--oom-mb", type=int, metavar="N", help="allocate N MiB (the memory killer's work)")
    p.add_argument("--oom-in", choices=("main", "worker"), default="main")
    p.add_argument("--fail-at", type=int, metavar="STEP", help="a code error (KeyError) at this step")
    p.add_argument("--stall-after", type=float, metavar="S",
                   help="after S seconds: silent, busy, stdout block-buffered, forever")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    return evaluate(args) if args.eval else train(args)


if __name__ == "__main__":
    sys.exit(main())
