"""A compiled function and a model that needs constructor arguments: both say how to call them."""

import torch
from torch import nn


# compile-lens: inputs=(torch.randn(4, 8), 3)
@torch.compile
def top_values(x, k):
    values = x.topk(k, dim=-1).values
    return sum(values.tolist()[0])


# compile-lens: init=Residual(dim=24, hidden=48), inputs=(torch.randn(8, 24),)
class Residual(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))
