# ruff: noqa  (user code, written as people write it: config defaults in signatures, unused imports)
"""A model built from the project's own package (`mylib`): config, residual MLP blocks."""

import logging

import torch
from torch import nn

from mylib import MLP, ModelConfig, Residual
from mylib.utils import seed_everything

logger = logging.getLogger("train")
seed_everything(0)


# compile-lens: inputs=(torch.randn(2, 8, 32),)
class Tower(nn.Module):
    def __init__(self, config: ModelConfig = ModelConfig()):
        super().__init__()
        self.blocks = nn.ModuleList([Residual(MLP(config), config.width) for _ in range(config.depth)])
        self.head = nn.Linear(config.width, 10)

    def forward(self, x):
        for i, block in enumerate(self.blocks):
            x = block(x)
            print(f"block {i}: {tuple(x.shape)}")
        return self.head(x.mean(dim=1))
