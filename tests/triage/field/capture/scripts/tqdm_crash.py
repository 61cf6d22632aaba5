"""A training loop under a manually updated tqdm bar; batch 37 comes from a collate that lost
its labels. The traceback keeps the function's frame (and so the bar) alive: the bar is never
closed before Python prints the traceback, which starts right after its last \r redraw."""
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm


class Samples(Dataset):
    def __len__(self):
        return 6400

    def __getitem__(self, i):
        item = {"image": torch.randn(64), "label": i % 10}
        if i == 37 * 64:                 # one bad record in the shard
            del item["label"]
        return item


def collate(items):
    out = {"image": torch.stack([it["image"] for it in items])}
    if all("label" in it for it in items):
        out["label"] = torch.tensor([it["label"] for it in items])
    return out


def train_one_epoch(model, loader, opt, epoch):
    pbar = tqdm(total=len(loader), desc=f"Epoch {epoch}")
    for batch in loader:
        loss = nn.functional.cross_entropy(model(batch["image"]), batch["label"])
        opt.zero_grad()
        loss.backward()
        opt.step()
        pbar.set_postfix(loss=f"{loss.item():.3f}")
        pbar.update(1)
        time.sleep(0.02)                 # a real step takes a while: the bar redraws
    pbar.close()


torch.manual_seed(0)
loader = DataLoader(Samples(), batch_size=64, collate_fn=collate)
model = nn.Linear(64, 10)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(1, 3):
    train_one_epoch(model, loader, opt, epoch)
