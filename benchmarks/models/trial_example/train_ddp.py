"""A small DDP training script (gloo, CPU) to try `compile-lens trial` under torchrun:

    OMP_NUM_THREADS=1 compile-lens trial --steps 8 -- torchrun --nproc-per-node 2 train_ddp.py

A nanoGPT-shaped character model (config dataclass, `B, T, C = x.size()`, a hand-written LayerNorm).
Every rank reads its own shard; at step 5 rank 1's shard is short (a shorter sequence), so rank 1
alone recompiles there: the two ranks then run different compiled code.

Options (after the script): `--steps N` (default 20), `--compile BACKEND` (the model compiled as
the trial compiles it, `model.compile(backend=...)`: run it with TORCH_LOGS=recompiles to compare),
`--own-compile` (the program compiles its DDP model itself: `torch.compile(DDP(model))`, with
`--compile`'s backend), `--crash-at STEP` (rank 1 raises there),
`--hang-at STEP` (rank 1 stops answering there: rank 0 waits in the next all-reduce).
"""

import argparse
import os
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


@dataclass
class GPTConfig:
    vocab_size: int = 64
    block_size: int = 16
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 32


class LayerNorm(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.bias = nn.Parameter(torch.zeros(width))

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.n_head = config.n_head

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd)
        self.mlp = nn.Sequential(nn.Linear(config.n_embd, 4 * config.n_embd), nn.GELU(),
                                 nn.Linear(4 * config.n_embd, config.n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

    def forward(self, idx, targets):
        B, T = idx.size()
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def batch(config: GPTConfig, rank: int, step: int, generator: torch.Generator):
    """This rank's shard of the step: rank 1's is short (half the sequence) at step 5."""
    T = config.block_size // 2 if (rank == 1 and step == 5) else config.block_size
    data = torch.randint(0, config.vocab_size, (4, T + 1), generator=generator)
    return data[:, :-1], data[:, 1:]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--compile", metavar="BACKEND")
    parser.add_argument("--own-compile", action="store_true")
    parser.add_argument("--crash-at", type=int, default=-1)
    parser.add_argument("--hang-at", type=int, default=-1)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)  # the same initial weights on every rank
    config = GPTConfig()
    gpt = GPT(config)
    if args.compile and not args.own_compile:
        gpt.compile(backend=args.compile)
    model = DDP(gpt)
    if args.own_compile:
        model = torch.compile(model, backend=args.compile or "inductor")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(1 + rank)  # each rank its own data
    times = []
    for step in range(args.steps):
        start = time.perf_counter()
        x, y = batch(config, rank, step, generator)
        if rank == 1 and step == args.crash_at:
            raise RuntimeError(f"rank 1 read a corrupt shard at step {step}")
        if rank == 1 and step == args.hang_at:
            time.sleep(3600)  # stuck (a dead data loader, a deadlock): rank 0 waits in the all-reduce
        optimizer.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
        if rank == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
    steady = sorted(times[1:5] + times[6:]) or [0.0]  # step 0 and step 5 compile
    print(f"rank {rank}: {len(times)} steps in {sum(times):.3f} s; steady median {steady[len(steady) // 2] * 1000:.1f} ms "
          f"(its own clock)", flush=True)
    dist.destroy_process_group()
    if os.environ.get("LOCAL_RANK") == "0":
        print("done", flush=True)


if __name__ == "__main__":
    main()
