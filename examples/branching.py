"""Data-dependent control flow: the branch depends on tensor values (GB0170)."""

import torch
from torch import nn


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, kernel_size=3, padding=1)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        if y.mean() > 0.5:
            y = y * 0.5
        return y
