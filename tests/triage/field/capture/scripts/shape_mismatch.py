"""An MLP sized for 28x28 greyscale fed 3x28x28 colour images: the first forward fails."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
images = torch.randn(512, 3, 28, 28)
labels = torch.randint(0, 10, (512,))
loader = DataLoader(TensorDataset(images, labels), batch_size=64, shuffle=True)
model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
print(f"model: {sum(p.numel() for p in model.parameters())} parameters")
for epoch in range(1, 6):
    print(f"Epoch {epoch}/5")
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"Epoch {epoch}/5 loss {loss.item():.4f}")
