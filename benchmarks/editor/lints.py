"""Time the static lints on a generated 5,000-line file of realistic PyTorch modules.

The lints run in the language server on every keystroke, so the budget is 50 ms per run on a
5,000-line file. Run: `PYTHONPATH=server .venv/bin/python -m benchmarks.editor.lints [--lines N]`.
Prints the median (and spread) of 20 runs of each: a first lint (nothing cached), typing inside a
forward body, pressing Enter near the top (every statement below moves), and typing that leaves the
file unparseable (an open bracket); wall time, and CPU time, which a busy machine disturbs less.
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "server"))

from compile_lens.lints import lint_source  # noqa: E402

HEADER = '''"""Generated benchmark file: many small models, helpers and training loops."""

import logging
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

logger = logging.getLogger(__name__)

'''

# One block is ~50 lines: a helper, a module that calls it (some with the usual break patterns),
# a subclass of it, and a small training loop that compiles the model and varies a scalar.
BLOCK = '''
def scale_{i}(x, factor=2.0):
    """Scale and clamp, the kind of helper forward() calls."""
    y = x * factor
    if y.shape[0] > 1 and y.dim() == 2:
        y = y.clamp(min=-{i}.0, max={i}.0)
    return F.gelu(y)


class Block{i}(nn.Module):
    def __init__(self, hidden: int = 64, dropout: float = 0.1) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, hidden * 4)
        self.fc2 = nn.Linear(hidden * 4, hidden)
        self.drop = nn.Dropout(dropout)
        self.steps = 0

    def extra_repr(self) -> str:
        print("not compiled, not flagged")
        return f"hidden={{self.fc1.in_features}}"

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        h = self.norm(x)
        if mask is not None:
            h = h.masked_fill(mask.unsqueeze(-1), 0.0)
        h = scale_{i}(self.fc1(h))
        h = self.drop(self.fc2(h))
        if self.training and x.size(-1) == h.size(-1):
            h = h + x
        {maybe_break}
        return torch.tanh(h) * math.sqrt(2.0)


class Deep{i}(Block{i}):
    def forward(self, x):
        out = super().forward(x)
        return out.flatten(1).softmax(dim=-1)


def train_{i}(loader, epochs: int = 3):
    model = Block{i}()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    compiled = torch.compile(model)
    for epoch in range(epochs):
        for step, (x, y) in enumerate(loader):
            loss = F.mse_loss(compiled(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if step % 100 == 0:
                logger.info("epoch %d step %d loss %.4f", epoch, step, loss.item())
    return model
'''

BREAKS = [
    'print("h", h.shape)',
    "h = h / max(h.abs().max().item(), 1.0)",
    "if h.sum() > 0:\n            h = -h",
    "logger.debug('forward %s', tuple(h.shape))",
    "h = h + torch.from_numpy(np.ones(h.shape, dtype=np.float32))",
    "pass",
    "pass",
    "pass",
]


def generate(lines: int) -> str:
    parts = [HEADER]
    total = HEADER.count("\n")
    i = 0
    while total < lines:
        block = BLOCK.format(i=i, maybe_break=BREAKS[i % len(BREAKS)])
        parts.append(block)
        total += block.count("\n")
        i += 1
    return "".join(parts)


def edits(source: str, runs: int, kind: str) -> list[str]:
    """`runs` successive versions of `source`, each one keystroke away from the one before."""
    lines = source.split("\n")
    middle = next(i for i in range(len(lines) // 2, len(lines)) if "h = self.norm(x)" in lines[i])
    versions = []
    for k in range(runs):
        if kind == "type":  # type a character inside a forward body in the middle of the file
            lines[middle] = lines[middle] + ("  # " if k == 0 else "x")
        elif kind == "error":  # half-typed: an open bracket in the middle of the file
            lines[middle] = lines[middle] + (" + (" if k == 0 else "x")
        else:  # press Enter near the top: every statement below moves down a line
            lines.insert(12, "")
        versions.append("\n".join(lines))
    return versions


def median_ms(calls) -> tuple[float, float, float, float]:
    """Median, min and max wall time, and median CPU time (steadier on a busy machine), in ms."""
    wall, cpu = [], []
    for call in calls:
        start, start_cpu = time.perf_counter(), time.process_time()
        call()
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    return statistics.median(wall), min(wall), max(wall), statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()

    source = generate(args.lines)
    n_lines = source.count("\n")
    findings = lint_source(source, "bench.py") or []
    parse = median_ms([lambda: ast.parse(source)] * 5)
    cold = median_ms([lambda k=k: lint_source(source, f"cold-{k}.py") for k in range(args.runs)])
    rows = [("cold (first lint of the file, nothing cached)", cold)]
    for kind, label in (("type", "typing in a forward body"), ("enter", "Enter near the top"),
                        ("error", "typing that leaves a syntax error")):
        lint_source(source, f"{kind}.py")
        versions = edits(source, args.runs, kind)
        rows.append((label, median_ms([lambda v=v, k=kind: lint_source(v, f"{k}.py") for v in versions])))
    print(f"lint_source on a generated file of {n_lines} lines ({len(findings)} findings), "
          f"{args.runs} runs: median wall time (min, max), median CPU time")
    for label, (med, low, high, cpu) in rows + [("for reference: ast.parse of the whole file", parse)]:
        print(f"  {label:<48} {med:6.1f} ms  ({low:.1f}, {high:.1f})  cpu {cpu:6.1f} ms")
    from benchmarks.figures import Figure, Result, emit

    # the goal is a keystroke's (typing, Enter, a syntax error) on 5,000 lines; the first lint has none
    keys = ("cold", "typing", "enter", "syntax_error")
    emit(Result({"lines": Figure(n_lines, "count"), "findings": Figure(len(findings), "count"),
                 "runs": Figure(args.runs, "count"),
                 **{f"{k}_ms": Figure(r[1][0], "ms", "lower", None if k == "cold" else 50.0) for k, r in zip(keys, rows)},
                 **{f"{k}_cpu_ms": Figure(r[1][3], "ms", "lower") for k, r in zip(keys, rows)},
                 "ast_parse_ms": Figure(parse[0], "ms")}))

if __name__ == "__main__":
    main()
