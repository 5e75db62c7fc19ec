# ruff: noqa  (user code, written as people write it: config defaults in signatures, unused imports)
"""A sequence-to-sequence training script in one file, as research code is written: a config
dataclass, an encoder and a decoder built from the project's own package (`mylib`), the model that
joins them, a label-smoothed loss, a data loader of random tokens, and `main()` with argparse. The
decoder skips its cross-attention when every source token is padding: a data-dependent `if`."""

import argparse
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Iterator, Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from mylib.attention import SelfAttention
from mylib.config import ModelConfig
from mylib.layers import MLP, Residual
from mylib.utils import seed_everything

log = logging.getLogger("seq2seq")


@dataclass
class Seq2SeqConfig:
    vocab: int = 64
    width: int = 32
    heads: int = 4
    encoder_layers: int = 2
    decoder_layers: int = 2
    max_len: int = 16
    pad: int = 0
    label_smoothing: float = 0.1

    def model_config(self) -> ModelConfig:
        return ModelConfig(width=self.width, heads=self.heads)


def sinusoids(length: int, width: int) -> torch.Tensor:
    position = np.arange(length)[:, None]
    scale = np.exp(np.arange(0, width, 2) * (-math.log(10000.0) / width))
    table = np.zeros((length, width), dtype=np.float32)
    table[:, 0::2] = np.sin(position * scale)
    table[:, 1::2] = np.cos(position * scale)
    return torch.from_numpy(table)


class CrossAttention(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(width, width)
        self.kv = nn.Linear(width, 2 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x, memory, memory_mask: Optional[torch.Tensor] = None):
        B, T, C = x.shape
        S = memory.shape[1]
        q = self.q(x).view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k, v = self.kv(memory).split(C, dim=-1)
        k = k.view(B, S, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, S, self.heads, C // self.heads).transpose(1, 2)
        mask = None if memory_mask is None else memory_mask[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(y.transpose(1, 2).reshape(B, T, C))


class EncoderLayer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.attn = Residual(SelfAttention(config), config.width)
        self.mlp = Residual(MLP(config), config.width)

    def forward(self, x):
        return self.mlp(self.attn(x))


class Encoder(nn.Module):
    def __init__(self, config: Seq2SeqConfig = Seq2SeqConfig()):
        super().__init__()
        self.embed = nn.Embedding(config.vocab, config.width, padding_idx=config.pad)
        self.register_buffer("position", sinusoids(config.max_len, config.width), persistent=False)
        self.layers = nn.ModuleList(EncoderLayer(config.model_config()) for _ in range(config.encoder_layers))
        self.norm = nn.LayerNorm(config.width)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position[: tokens.shape[1]]
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.self_attn = Residual(SelfAttention(config), config.width)
        self.cross = CrossAttention(config.width, config.heads)
        self.cross_norm = nn.LayerNorm(config.width)
        self.mlp = Residual(MLP(config), config.width)

    def forward(self, x, memory, memory_mask=None):
        x = self.self_attn(x)
        if memory_mask is None or memory_mask.any():
            x = x + self.cross(self.cross_norm(x), memory, memory_mask)
        return self.mlp(x)


class Decoder(nn.Module):
    def __init__(self, config: Seq2SeqConfig = Seq2SeqConfig()):
        super().__init__()
        self.embed = nn.Embedding(config.vocab, config.width, padding_idx=config.pad)
        self.register_buffer("position", sinusoids(config.max_len, config.width), persistent=False)
        self.layers = nn.ModuleList(DecoderLayer(config.model_config()) for _ in range(config.decoder_layers))
        self.norm = nn.LayerNorm(config.width)
        self.lm_head = nn.Linear(config.width, config.vocab, bias=False)

    def forward(self, tokens, memory, memory_mask=None):
        x = self.embed(tokens) + self.position[: tokens.shape[1]]
        for layer in self.layers:
            x = layer(x, memory, memory_mask)
        return self.lm_head(self.norm(x))


class Seq2Seq(nn.Module):
    def __init__(self, config: Seq2SeqConfig = Seq2SeqConfig()):
        super().__init__()
        self.config = config
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)

    def forward(self, source, target):
        memory_mask = source != self.config.pad
        memory = self.encoder(source)
        return self.decoder(target, memory, memory_mask)


def smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float, pad: int) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                           ignore_index=pad, label_smoothing=smoothing)


def batches(config: Seq2SeqConfig, batch: int, steps: int, seed: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        source = torch.randint(1, config.vocab, (batch, config.max_len), generator=gen)
        lengths = torch.randint(config.max_len // 2, config.max_len + 1, (batch,), generator=gen)
        source[torch.arange(config.max_len)[None, :] >= lengths[:, None]] = config.pad
        target = source.flip(1)
        yield source, target


def train(config: Seq2SeqConfig, steps: int, batch: int, lr: float, compile_model: bool) -> float:
    seed_everything(0)
    model = Seq2Seq(config)
    step_model = torch.compile(model) if compile_model else model
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    loss = torch.tensor(0.0)
    started = time.perf_counter()
    for step, (source, target) in enumerate(batches(config, batch, steps)):
        logits = step_model(source, target[:, :-1])
        loss = smoothed_loss(logits, target[:, 1:], config.label_smoothing, config.pad)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 10 == 0:
            log.info("step %d loss %.3f (%.1f s)", step, loss.item(), time.perf_counter() - started)
    return float(loss)


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--compile", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    final = train(Seq2SeqConfig(), args.steps, args.batch, args.lr, args.compile)
    print(f"final loss {final:.3f}")


if __name__ == "__main__":
    main()
