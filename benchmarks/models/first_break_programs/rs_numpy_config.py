# ruff: noqa  (user code, written as people write it: config defaults in signatures, unused imports)
"""A regression head with a dataclass config, numpy constants and a logged sanity check."""

import logging
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

log = logging.getLogger(__name__)
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


@dataclass
class HeadConfig:
    features: int = 24
    hidden: int = 32
    clip: float = 5.0


def normalise(x: torch.Tensor) -> torch.Tensor:
    mean = torch.from_numpy(np.tile(MEAN, 8))
    std = torch.from_numpy(np.tile(STD, 8))
    return (x - mean) / std


# compile-lens: inputs=(torch.randn(4, 24),)
class Head(nn.Module):
    def __init__(self, config: HeadConfig = HeadConfig()):
        super().__init__()
        self.config = config
        self.body = nn.Sequential(nn.Linear(config.features, config.hidden), nn.ReLU(), nn.Linear(config.hidden, 1))

    def forward(self, x):
        y = self.body(normalise(x))
        worst = y.abs().max().item()
        if worst > self.config.clip:
            log.warning("clipping output %.2f", worst)
        return y.clamp(-self.config.clip, self.config.clip)
