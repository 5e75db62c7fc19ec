"""How much `compile-lens record` slows a small training script down.

    .venv/bin/python -m benchmarks.trial.record [--runs 5] [--steps 1500] [--rounds 40]

Writes a training script into a temporary workspace (an MLP of workspace modules, eight
`Block`s deep so each step makes nine recorded forward calls, batch 32, on the CPU), then runs
it under the recorder with the wrappers switched on and off in turns inside one process (the
figure that is fair on a busy machine), then plainly and under `compile-lens record` as whole
processes, alternating: fastest and median loop times (measured inside the script) and the
median process wall time, start-up included.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TRAIN = '''
import sys, time
import torch
from torch import nn

torch.set_num_threads(1)


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return x + torch.relu(self.fc(x))


class Net(nn.Module):
    def __init__(self, dim=64, depth=8):
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))


def train(steps):
    start = time.perf_counter()
    for _ in range(steps):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return time.perf_counter() - start


if sys.argv[2] == "whole":
    print(f"loop {train(int(sys.argv[1])):.4f}")
else:  # interleaved: the recorder's wrappers on and off, in turns, in this one process
    wrapped = {cls: (cls.forward, getattr(cls.forward, "__wrapped__", cls.forward)) for cls in (Block, Net)}
    assert all(w is not o for w, o in wrapped.values()), "run me under the recorder"
    ratios = []
    train(50)
    for _ in range(int(sys.argv[1])):
        times = {}
        for state in (0, 1):
            for cls, pair in wrapped.items():
                cls.forward = pair[state]
            times[state] = train(100)
        ratios.append(times[0] / times[1])
    ratios.sort()
    print(f"ratio {ratios[len(ratios) // 2]:.4f} {ratios[len(ratios) // 4]:.4f} {ratios[3 * len(ratios) // 4]:.4f}")
'''


def run(command: list[str], cwd: str) -> tuple[float, float]:
    done, wall = _run(command, cwd)
    loop = float(next(line for line in done.stdout.splitlines() if line.startswith("loop ")).split()[1])
    return loop, wall


def _run(command: list[str], cwd: str) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "server")}
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return done, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=40, help="wrapper on/off rounds in one process")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-record-") as workspace:
        with open(os.path.join(workspace, "train.py"), "w") as f:
            f.write(TRAIN)
        plain = [sys.executable, "train.py", str(args.steps), "whole"]
        record = [sys.executable, "-m", "compile_lens.cli", "record", "-q", "--"]
        recorded = record + plain
        done, _ = _run(record + [sys.executable, "train.py", str(args.rounds), "interleaved"], workspace)
        median, low, high = (float(v) for v in done.stdout.split()[1:4])
        interleaved = median
        print(f"interleaved in one process, {args.rounds} rounds of 100 steps (9 recorded calls a step): "
              f"recorded/plain = {median:.3f} (quartiles {low:.3f}–{high:.3f}), "
              f"overhead {100 * (median - 1):+.1f}%")
        results: dict[str, list[tuple[float, float]]] = {"plain": [], "recorded": []}
        run(plain, workspace)  # warm the file cache
        for _ in range(args.runs):
            results["plain"].append(run(plain, workspace))
            results["recorded"].append(run(recorded, workspace))
        calls = args.steps * 9
        print(f"{args.steps} training steps, {calls} recorded forward calls, {args.runs} runs each")
        fastest = {k: min(r[0] for r in v) for k, v in results.items()}
        median = {k: statistics.median(r[0] for r in v) for k, v in results.items()}
        wall = {k: statistics.median(r[1] for r in v) for k, v in results.items()}
        for name in results:
            print(f"  {name:9} loop fastest {fastest[name]:6.3f} s {100 * (fastest[name] / fastest['plain'] - 1):+5.1f}%"
                  f"   median {median[name]:6.3f} s {100 * (median[name] / median['plain'] - 1):+5.1f}%"
                  f"   process median {wall[name]:6.3f} s {100 * (wall[name] / wall['plain'] - 1):+5.1f}%")
        per_call = (fastest["recorded"] - fastest["plain"]) / calls * 1e6
        print(f"  ≈ {per_call:.2f} µs per recorded call (fastest runs)")
        print(json.dumps({"interleaved_ratio": round(interleaved, 3), "steps": args.steps, "runs": args.runs,
                          "loop_fastest_overhead_pct": round(100 * (fastest["recorded"] / fastest["plain"] - 1), 1),
                          "loop_median_overhead_pct": round(100 * (median["recorded"] / median["plain"] - 1), 1),
                          "process_overhead_pct": round(100 * (wall["recorded"] / wall["plain"] - 1), 1),
                          "us_per_recorded_call": round(per_call, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
