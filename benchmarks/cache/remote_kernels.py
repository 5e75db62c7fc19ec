"""What a Redis hit leaves to do on the CPU: compile the same small MLP in fresh processes, each with
an empty local Inductor folder (the first fills Redis, the next are served by it), then twice in one
local folder (cold, then warm from disk), and count the shared libraries each process's folder
holds afterwards (the C++ kernels and wrapper built there).

    .venv/bin/python -m benchmarks.cache.remote_kernels
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # the test suite's Redis helper

from redis_server import redis_server  # noqa: E402

COMPILE = textwrap.dedent("""\
    import time, torch
    from torch import nn
    from torch._dynamo.utils import counters
    m = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 32))
    start = time.perf_counter()
    torch.compile(m)(torch.randn(16, 32))
    print(f"{time.perf_counter() - start:.2f}", counters["inductor"]["fxgraph_cache_hit"],
          counters["inductor"]["fxgraph_cache_miss"])
""")


def compile_in(folder: str, env: dict[str, str]) -> str:
    before = set(glob.glob(folder + "/**/*.so", recursive=True))
    done = subprocess.run([sys.executable, "-c", COMPILE], capture_output=True, text=True, timeout=600,
                          env={**env, "TORCHINDUCTOR_CACHE_DIR": folder})
    assert done.returncode == 0, done.stderr[-2000:]
    seconds, hits, misses = done.stdout.split()
    built = len(set(glob.glob(folder + "/**/*.so", recursive=True)) - before)
    return f"{seconds} | {hits}/{misses} | {built}"


def main() -> None:
    print("| process | local folder | Redis | compile s | fx_graph hits/misses | .so built in the folder |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp, redis_server(tmp) as url:
        host, port = url.removeprefix("redis://").rsplit(":", 1)
        remote = {**os.environ, "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE": "1", "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE": "1",
                  "TORCHINDUCTOR_REDIS_HOST": host, "TORCHINDUCTOR_REDIS_PORT": port}
        for name in ("fill", "served", "served again"):
            with tempfile.TemporaryDirectory() as folder:
                print(f"| {name} | empty | on | {compile_in(folder, remote)} |", flush=True)
    local = {k: v for k, v in os.environ.items() if "REMOTE_CACHE" not in k and "REDIS" not in k}
    with tempfile.TemporaryDirectory() as folder:
        print(f"| cold | empty | off | {compile_in(folder, local)} |", flush=True)
        print(f"| warm | the cold one's | off | {compile_in(folder, local)} |", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
