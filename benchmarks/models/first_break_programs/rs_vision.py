# ruff: noqa  (user code, written as people write it: config defaults in signatures, unused imports)
"""A small conv classifier with a dataclass config and a numpy-computed anchor grid."""

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class VisionConfig:
    channels: list[int] = field(default_factory=lambda: [3, 8, 16])
    classes: int = 5
    image: int = 16


def anchor_grid(size: int) -> np.ndarray:
    ys, xs = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
    return np.stack([ys, xs], axis=0).astype(np.float32) / size


class ConvBlock(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm = nn.BatchNorm2d(cout)

    def forward(self, x):
        return F.max_pool2d(F.relu(self.norm(self.conv(x))), 2)


# compile-lens: inputs=(torch.randn(2, 3, 16, 16),)
class Classifier(nn.Module):
    def __init__(self, config: VisionConfig = VisionConfig()):
        super().__init__()
        chans = config.channels
        self.blocks = nn.Sequential(*[ConvBlock(a, b) for a, b in zip(chans, chans[1:])])
        self.fc = nn.Linear(chans[-1], config.classes)
        self.register_buffer("grid", torch.from_numpy(anchor_grid(config.image)))

    def forward(self, x):
        x = x + self.grid.mean()
        h = self.blocks(x)
        sizes = list(h.shape[-2:])
        pooled = h.mean(dim=(-2, -1))
        counts = (pooled > 0).sum(dim=1).tolist()
        return self.fc(pooled) * (1 + len(counts) + sizes[0])
