"""A logging call as the first statement of forward: torch.explain misses this break; its log does not."""

import logging

import torch
from torch import nn

log = logging.getLogger(__name__)


class Logged(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        log.info("forward on %s", tuple(x.shape))
        return self.fc(x)
