"""A clean model: no graph breaks. Inputs are inferred from the first layer (Linear(64, ...))."""

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, width: int = 64, hidden: int = 128):
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(width, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
        )
        self.head = nn.Linear(hidden, 10)

    def forward(self, x):
        return self.head(self.body(x))


if __name__ == "__main__":
    print(MLP()(torch.randn(8, 64)).shape)
