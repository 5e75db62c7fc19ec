# ruff: noqa  (user code, written as people write it: config defaults in signatures, unused imports)
"""A scoring module with module-level logging setup, numpy tables and helper functions."""

import logging
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

logging.basicConfig(level=os.environ.get("LOG_LEVEL", "WARNING"), stream=sys.stderr)
log = logging.getLogger(__name__)
BUCKETS = np.linspace(-3.0, 3.0, num=9).astype(np.float32)
WEIGHTS = np.exp(-np.abs(BUCKETS))


def bucketise(x: torch.Tensor) -> torch.Tensor:
    edges = torch.from_numpy(BUCKETS)
    return torch.bucketize(x, edges)


def report(name: str, value: torch.Tensor) -> None:
    log.info("%s mean=%.3f", name, float(value.mean()))


# compile-lens: inputs=(torch.randn(8, 16),)
class Scorer(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.register_buffer("table", torch.from_numpy(WEIGHTS.copy()))

    def forward(self, x):
        h = F.silu(self.proj(x))
        report("hidden", h)
        idx = bucketise(h)
        return h * self.table[idx]
