# ruff: noqa  (user code, written as people write it: config defaults in signatures, unused imports)
"""A training script: argparse, a dataclass of hyperparameters, a model, a loop under __main__."""

import argparse
import logging
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

log = logging.getLogger("trainer")


@dataclass
class Hparams:
    lr: float = 3e-4
    steps: int = 100
    batch: int = 16
    width: int = 32


def parse() -> Hparams:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=Hparams.lr)
    parser.add_argument("--steps", type=int, default=Hparams.steps)
    args = parser.parse_args()
    return Hparams(lr=args.lr, steps=args.steps)


# compile-lens: inputs=(torch.randn(16, 32),)
class Model(nn.Module):
    def __init__(self, hp: Hparams = Hparams()):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(hp.width, hp.width), nn.Tanh(), nn.Linear(hp.width, 2))

    def forward(self, x):
        logits = self.net(x)
        if logits.std() < 1e-3:  # a collapsed model: data-dependent branch
            logits = logits + torch.randn_like(logits)
        return logits


def train(hp: Hparams) -> None:
    model = Model(hp)
    opt = torch.optim.AdamW(model.parameters(), lr=hp.lr)
    losses = []
    start = time.time()
    for step in range(hp.steps):
        x = torch.randn(hp.batch, hp.width)
        loss = model(x).logsumexp(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    log.info("done in %.1fs, loss %.3f", time.time() - start, float(np.mean(losses[-10:])))


if __name__ == "__main__":
    train(parse())
