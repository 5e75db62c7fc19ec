# ruff: noqa  (user code, written as people write it: config defaults in signatures, unused imports)
"""A transformer block from the project's package (`mylib.attention`, `mylib.layers`) with a logged mask."""

import logging

import numpy as np
import torch
from torch import nn

from mylib.attention import SelfAttention
from mylib.config import ModelConfig
from mylib.layers import MLP

log = logging.getLogger(__name__)
CONFIG = ModelConfig(width=32, heads=4)


def causal_mask(t: int) -> torch.Tensor:
    return torch.from_numpy(np.tril(np.ones((t, t), dtype=np.bool_)))


# compile-lens: inputs=(torch.randn(2, 8, 32),)
class Block(nn.Module):
    def __init__(self, config: ModelConfig = CONFIG):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(config.width), nn.LayerNorm(config.width)
        self.attn = SelfAttention(config)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        log.warning("after attention: %s", tuple(x.shape))
        return x + self.mlp(self.ln2(x))
