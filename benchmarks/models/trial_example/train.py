"""A small training script to try `compile-lens trial` on (the report screenshots in docs/trial.md):

    compile-lens trial --steps 60 --gpu-price 2.5 --gpus 8 --hours-per-month 300 \
        --migration-days 10 --day-rate 1000 -- python train.py

Pointwise-heavy blocks (a hand-written RMSNorm, Mish, a sigmoid gate, a residual) that Inductor
fuses on CPU too; the last batch of each epoch is smaller, so the compiled run recompiles once for it.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Block(nn.Module):
    def __init__(self, width: int, expand: int = 2):
        super().__init__()
        self.norm = RMSNorm(width)
        self.up = nn.Linear(width, width * expand)
        self.down = nn.Linear(width * expand, width)

    def forward(self, x):
        h = self.up(self.norm(x))
        h = h * torch.tanh(nn.functional.softplus(h))  # Mish, written out
        return x + self.down(h) * torch.sigmoid(x)


class Classifier(nn.Module):
    def __init__(self, features: int, width: int = 128, depth: int = 3, classes: int = 10):
        super().__init__()
        self.inp = nn.Linear(features, width)
        self.blocks = nn.Sequential(*(Block(width) for _ in range(depth)))
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        return self.head(self.blocks(self.inp(x)))


def main() -> None:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(2000, 64), torch.randint(0, 10, (2000,)))
    loader = DataLoader(data, batch_size=256, shuffle=True, generator=torch.Generator().manual_seed(1))
    model = Classifier(64)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(100):
        for x, y in loader:  # seven batches of 256, then one of 208
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
