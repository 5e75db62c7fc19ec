# ruff: noqa  (user code, written as people write it: config defaults in signatures, unused imports)
import logging
import random

import numpy as np
import torch

log = logging.getLogger(__name__)


def seed_everything(seed: int = 0) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def fan_in_uniform(layer: torch.nn.Linear) -> None:
    bound = 1.0 / np.sqrt(layer.in_features)
    with torch.no_grad():
        layer.weight.uniform_(-bound, bound)
    log.debug("init %s with bound %.3f", layer, bound)
