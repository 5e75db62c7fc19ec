# ruff: noqa  (user code, written as people write it: config defaults in signatures, unused imports)
import math

import torch
from torch import nn
import torch.nn.functional as F

from .config import ModelConfig
from .utils import fan_in_uniform


class MLP(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.up = nn.Linear(config.width, 4 * config.width)
        self.down = nn.Linear(4 * config.width, config.width)
        self.dropout = nn.Dropout(config.dropout)
        fan_in_uniform(self.up)

    def forward(self, x):
        return self.dropout(self.down(F.gelu(self.up(x))))


class Residual(nn.Module):
    def __init__(self, inner: nn.Module, width: int):
        super().__init__()
        self.inner = inner
        self.norm = nn.LayerNorm(width)
        self.scale = 1.0 / math.sqrt(2.0)

    def forward(self, x):
        return x + self.scale * self.inner(self.norm(x))
