"""A small training program that compiles its own model, run with `TORCH_TRACE=dir` by the import
tests: a character-level transformer block with a data-dependent `.item()` break in `forward` and
a shorter last batch part-way (step 5), which recompiles once. `--backend` picks the compiler
(default inductor); `--steps` the number of steps."""

import argparse
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    vocab_size: int = 32
    block_size: int = 8
    n_embd: int = 16


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class TinyLM(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.config = config
        self.tok = nn.Embedding(config.vocab_size, config.n_embd)
        self.pos = nn.Embedding(config.block_size, config.n_embd)
        self.norm = RMSNorm(config.n_embd)
        self.mlp = nn.Linear(config.n_embd, config.n_embd)
        self.head = nn.Linear(config.n_embd, config.vocab_size)

    def forward(self, idx, targets):
        B, T = idx.size()
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        x = x + self.mlp(self.norm(x))
        scale = x.abs().max().item()  # data-dependent: a graph break
        logits = self.head(x / scale)
        return F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = Config()
    model = torch.compile(TinyLM(config), backend=args.backend)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(args.steps):
        batch = 2 if step == 5 else 4  # the short last batch of an epoch
        idx = torch.randint(config.vocab_size, (batch, config.block_size))
        targets = torch.randint(config.vocab_size, (batch, config.block_size))
        loss = model(idx, targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
