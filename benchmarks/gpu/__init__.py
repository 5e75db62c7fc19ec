"""The units of the GPU check that only a device can answer (each also rehearses on the CPU):
the CUDA artifacts for the replay tests, the CUDA-graphs lever, the busy rule, the benchmark tests."""

from __future__ import annotations

import json
import sys
from typing import Any

from .. import Context, unit
from ..common import py, run, tail


@unit("cuda_capture", "a compiled forward's and train step's profile + provenance maps captured (replayed by "
      "tests/worker/test_cuda_replay.py)", "torch.profiler's own Chrome trace of the same calls", gpu=2, timeout_s=120)
def cuda_capture(ctx: Context) -> dict[str, Any]:
    proc = run(ctx, py("gpu.capture", str(ctx.out / "cuda"), "--device", ctx.device))
    got: dict[str, Any] = {}
    for line in (proc.stdout or "").splitlines():
        if line.startswith("{"):
            got.update(json.loads(line))
    return {"ok": proc.returncode == 0 and len(got) == 2, **got, **({} if proc.returncode == 0 else {"error": tail(proc)})}


def _pytest(ctx: Context, *tests_and_flags: str) -> dict[str, Any]:
    proc = run(ctx, [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests_and_flags],
               COMPILE_LENS_TEST_DEVICE=ctx.device)
    last = next((ln for ln in reversed((proc.stdout or "").splitlines()) if ln.strip()), "")
    return {"ok": proc.returncode == 0, "summary": last[-200:], **({} if proc.returncode == 0 else {"error": tail(proc)})}


@unit("cudagraphs_lever", "the CUDA-graphs lever's tests pass on the device (graphs CUDA-graphed, torch's skip on the user's line)",
      "torch's own reduce-overhead compile", gpu=4, timeout_s=120)
def cudagraphs_lever(ctx: Context) -> dict[str, Any]:
    return _pytest(ctx, "tests/worker/test_levers_cudagraphs.py")


@unit("busy_rule", "an idle box reads idle; a matmul load is busy; our own tree is not (NVML)",
      "nvidia-smi's utilisation", gpu=5, timeout_s=60, devices=("cuda",))
def busy_rule(ctx: Context) -> dict[str, Any]:
    proc = run(ctx, py("gpu.busy_check"))
    return {"ok": proc.returncode == 0, "out": tail(proc, 400)}


@unit("benchmark_tests", "tests/worker/test_benchmark.py, test_benchmark_parts.py and test_line_costs.py pass with COMPILE_LENS_TEST_DEVICE set to the device",
      "the tests' own independent checks", gpu=6, timeout_s=150)
def benchmark_tests(ctx: Context) -> dict[str, Any]:
    # the rehearsal: two tests that need no shared measurement (the file is marked `alone`: all of it is slow)
    if ctx.dry:
        return _pytest(ctx, "tests/worker/test_benchmark_parts.py", "-x", "-k", "test_resolve_device or test_oom_detection")
    return _pytest(ctx, "tests/worker/test_benchmark.py", "tests/worker/test_benchmark_parts.py", "tests/worker/test_line_costs.py")
