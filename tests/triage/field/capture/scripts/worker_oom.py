"""A multi-crop Dataset (8 views per image, the DINO/SwAV style) that caches every decoded
image in each DataLoader worker (num_workers=2): the workers grow until the memory limit's
killer picks one of them."""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class CachedImages(Dataset):
    def __init__(self, n):
        self.n = n
        self.cache = {}

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i not in self.cache:
            self.cache[i] = torch.ones(3, 512, 512)     # "decoded" once, kept forever: 3 MiB each
        img = self.cache[i]
        crops = [img[:, k * 32:(k + 1) * 32, :32].clone() for k in range(8)]
        return crops, i % 10


torch.manual_seed(0)
loader = DataLoader(CachedImages(4096), batch_size=32, shuffle=True, num_workers=2)
model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(1, 4):
    for step, (crops, y) in enumerate(loader, 1):
        loss = sum(nn.functional.cross_entropy(model(x), y) for x in crops) / len(crops)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 20 == 0:
            print(f"Epoch {epoch}/3 step {step}/{len(loader)} loss {loss.item():.4f}")
print("done")
