"""What a Redis hit leaves to do on the CPU: compile the same small MLP in fresh processes, each with
an empty local Inductor folder (the first fills Redis, the next are served by it), then twice in one
local folder (cold, then warm from disk), and count the shared libraries each process's folder
holds afterwards (the C++ kernels and wrapper built there). The table is for people; the figures
go back as one JSON line (`figures.emit`), as each compiling child's own come back to it.

    .venv/bin/python -m benchmarks.cache.remote_kernels
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # the test suite's Redis helper

from benchmarks.figures import Figure, Result, emit  # noqa: E402
from redis_server import redis_server  # noqa: E402

COMPILE = textwrap.dedent("""\
    import json, time, torch
    from torch import nn
    from torch._dynamo.utils import counters
    m = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 32))
    start = time.perf_counter()
    torch.compile(m)(torch.randn(16, 32))
    print(json.dumps({"compile_s": time.perf_counter() - start, "hits": counters["inductor"]["fxgraph_cache_hit"],
                      "misses": counters["inductor"]["fxgraph_cache_miss"]}))
""")
FIGURES: dict[str, Figure] = {}


def compile_in(name: str, folder: str, env: dict[str, str]) -> str:
    """One fresh process's compile in `folder`: its figures kept under `name`, its table cells returned."""
    before = set(glob.glob(folder + "/**/*.so", recursive=True))
    done = subprocess.run([sys.executable, "-c", COMPILE], capture_output=True, text=True, timeout=600,
                          env={**env, "TORCHINDUCTOR_CACHE_DIR": folder})
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    built = len(set(glob.glob(folder + "/**/*.so", recursive=True)) - before)
    FIGURES.update({f"{name}.compile_s": Figure(got["compile_s"], "s", "lower"),
                    f"{name}.fx_graph_hits": Figure(got["hits"], "count"),
                    f"{name}.fx_graph_misses": Figure(got["misses"], "count"), f"{name}.so_built": Figure(built, "count")})
    return f"{got['compile_s']:.2f} | {got['hits']}/{got['misses']} | {built}"


def main() -> None:
    print("| process | local folder | Redis | compile s | fx_graph hits/misses | .so built in the folder |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp, redis_server(tmp) as url:
        host, port = url.removeprefix("redis://").rsplit(":", 1)
        remote = {**os.environ, "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE": "1", "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE": "1",
                  "TORCHINDUCTOR_REDIS_HOST": host, "TORCHINDUCTOR_REDIS_PORT": port}
        for name in ("fill", "served", "served again"):
            with tempfile.TemporaryDirectory() as folder:
                print(f"| {name} | empty | on | {compile_in(name, folder, remote)} |", flush=True)
    local = {k: v for k, v in os.environ.items() if "REMOTE_CACHE" not in k and "REDIS" not in k}
    with tempfile.TemporaryDirectory() as folder:
        print(f"| cold | empty | off | {compile_in('cold', folder, local)} |", flush=True)
        print(f"| warm | the cold one's | off | {compile_in('warm', folder, local)} |", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}")
    # the goals, what docs/team-cache.md says: each served process a hit (no miss) that still builds as many
    # .so as the cold compile; the warm local folder builds none
    served = ("served", "served again")
    v = {k: f.value for k, f in FIGURES.items()}
    emit(Result({**FIGURES,
                 "served_fx_graph_misses": Figure(sum(v[f"{n}.fx_graph_misses"] for n in served), "count", "lower", 0),
                 "served_fx_graph_hits_min": Figure(min(v[f"{n}.fx_graph_hits"] for n in served), "count", "higher", 1),
                 "served_so_short_of_cold": Figure(max(abs(v["cold.so_built"] - v[f"{n}.so_built"]) for n in served),
                                                   "count", "lower", 0),
                 "warm_so_built": Figure(v["warm.so_built"], "count", "lower", 0)}))


if __name__ == "__main__":
    main()
