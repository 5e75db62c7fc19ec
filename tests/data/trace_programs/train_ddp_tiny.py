"""A DDP training program for `torchrun --nproc-per-node 2` on gloo (CPU), run with `TORCH_TRACE=dir`
by the import tests: each rank compiles its own DDP model; at step 3 rank 1 alone gets a shorter
shard (its batch is 2, rank 0's stays 4), so rank 1 alone recompiles."""

import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class MLP(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.fc1 = nn.Linear(width, width)
        self.fc2 = nn.Linear(width, 1)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x))).mean()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.compile(DDP(MLP()), backend=args.backend)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(args.steps):
        batch = 2 if (step == 3 and rank == 1) else 4  # rank 1's shard is short at step 3
        loss = model(torch.randn(batch, 16))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    if rank == 0:
        print(f"rank {rank} done, loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
