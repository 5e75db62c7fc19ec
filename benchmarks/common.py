"""The parts every unit shares: the machine and its load, the commit, a subprocess under the
unit's limit, loading the shared models, and the independent timing in a fresh process."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional

from . import REPO, Context

MODELS = REPO / "scripts" / "speedup_models.py"
SHARED = ("MLPStack", "GPT", "ConvNet")


def env(ctx: Context, **more: str) -> dict[str, str]:
    """The environment of a child: the checkout's server first on the path, the model sizes of the device."""
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "server"), e.get("PYTHONPATH", "")) if p)
    e["COMPILE_LENS_BENCH_DEVICE"] = ctx.device
    e.update(more)
    return e


def run(ctx: Context, args: list[str], timeout: Optional[float] = None, **more: str) -> subprocess.CompletedProcess:
    """A child under the unit's limit; its output kept (the tail goes into the figures on failure)."""
    try:
        return subprocess.run(args, cwd=REPO, env=env(ctx, **more), capture_output=True, text=True,
                              timeout=timeout or ctx.timeout_s)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return subprocess.CompletedProcess(args, 124, out, f"timed out after {exc.timeout:.0f} s")


def tail(proc: subprocess.CompletedProcess, n: int = 600) -> str:
    return ((proc.stdout or "") + (proc.stderr or ""))[-n:]


def busy() -> dict[str, Any]:
    """The load as the figure was taken: load average, other processes' CPU, cores."""
    import psutil

    me = os.getpid()
    psutil.cpu_percent(None)
    procs = list(psutil.process_iter(["pid"]))
    for p in procs:
        try:
            p.cpu_percent(None)
        except psutil.Error:
            pass
    time.sleep(0.5)
    others = 0.0
    for p in procs:
        try:
            if p.pid != me:
                others += p.cpu_percent(None)
        except psutil.Error:
            pass
    return {"load": [round(x, 2) for x in os.getloadavg()], "others_cpu_pct": round(others, 1),
            "cores": os.cpu_count()}


def machine(device: str) -> dict[str, Any]:
    out: dict[str, Any] = {"host": platform.node(), "python": platform.python_version(), "cores": os.cpu_count()}
    try:
        import torch

        out["torch"] = torch.__version__
        if device.startswith("cuda") and torch.cuda.is_available():
            out["gpu"] = torch.cuda.get_device_name(0)
            out["cuda"] = torch.version.cuda
    except ImportError:
        out["torch"] = None
    return out


def commit() -> Optional[str]:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


# --- the independent timing: torch's own floor, in a fresh process --------------------------------
# Eager vs torch.compile(model) as a user writes it: the first compiled call timed (the cold
# compile), then alternating eager/compiled pairs (which goes first alternates), CUDA events on a GPU.
_FRESH = r'''
import json, statistics, sys, time, torch
sys.path.insert(0, {models_dir!r})
import speedup_models as m
name, device, pairs = {name!r}, {device!r}, {pairs}
t0 = time.perf_counter()
model = getattr(m, name)().to(device).eval()
spec = {{"MLPStack": lambda: (torch.randn(m.MLP_BATCH, m.MLP_WIDTH),),
        "GPT": lambda: (torch.randint(0, m.GPT_VOCAB, (m.GPT_BATCH, m.GPT_SEQ)),),
        "ConvNet": lambda: (torch.randn(m.CONV_BATCH, 3, m.CONV_SIDE, m.CONV_SIDE),)}}[name]
x = tuple(t.to(device) for t in spec())
cuda = device.startswith("cuda")
def sync():
    if cuda: torch.cuda.synchronize()
compiled = torch.compile(model)
with torch.no_grad():
    c0 = time.perf_counter(); compiled(*x); sync(); cold = time.perf_counter() - c0
    first = time.perf_counter() - t0
    def clock(fn, n):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(n): fn(*x)
            b.record(); b.synchronize(); return a.elapsed_time(b) / 1e3 / n
        s = time.perf_counter()
        for _ in range(n): fn(*x)
        return (time.perf_counter() - s) / n
    for fn in (model, compiled):
        clock(fn, 3)
    n = max(1, int(0.05 / max(clock(model, 3), 1e-6)))
    ratios, es, cs = [], [], []
    for i in range(pairs):
        order = (model, compiled) if i % 2 == 0 else (compiled, model)
        got = {{id(f): clock(f, n) for f in order}}
        e, c = got[id(model)], got[id(compiled)]
        es.append(e); cs.append(c); ratios.append(e / c)
print("RESULT " + json.dumps({{"cold_compile_s": cold, "to_first_figure_s": first, "whole_s": time.perf_counter() - t0,
      "eager_ms": statistics.median(es) * 1e3, "compiled_ms": statistics.median(cs) * 1e3,
      "speedup": statistics.median(ratios), "pairs": pairs}}))
'''


def fresh_torch(ctx: Context, name: str, pairs: int = 10) -> dict[str, Any]:
    """Torch's own compile + timing of one shared model in a fresh process (its figures, or an error)."""
    code = _FRESH.format(models_dir=str(MODELS.parent), name=name, device=ctx.device, pairs=3 if ctx.dry else pairs)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-inductor-") as cache:  # cold, as the tool's cold compile is
        proc = run(ctx, [sys.executable, "-c", code], TORCHINDUCTOR_CACHE_DIR=cache)
    line = next((ln for ln in (proc.stdout or "").splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        return {"error": f"rc {proc.returncode}: {tail(proc)}"}
    out = json.loads(line[len("RESULT "):])
    out["process_s"] = time.perf_counter() - started
    return out
