"""The units of the GPU check (`scripts/gpu-check`, `python -m benchmarks --gpu`), what only a device
can answer first, each under its own limit; the limits (with the wheels' install) sum to 300 s, so
the check fits a 15-minute lent device slot with room to run it again. Each also rehearses on the
CPU (`--device cpu --dry`, every unit tiny).

1. `gpu_capture`: Kineto traces, TORCH_TRACE logs with provenance, an independent timing, the CLI's
   JSON (benchmarks/gpu/capture.py; committed as tests/data/cuda/ for the CPU replay);
2. `gpu_tests`: the device's tests (COMPILE_LENS_TEST_DEVICE), every outcome reported;
3. `gpu_busy`: the busy rule's verdict on this box, idle (and NVML's view of a load, where NVML is);
4. `gpu_autotune`: the max-autotune lever, once.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from .. import Context, unit
from ..common import last_json, py, run, tail

INSTALL_S = 15  # scripts/gpu-check's install of the wheels, before the harness starts
LIMITS = {"gpu_capture": 115, "gpu_tests": 90, "gpu_busy": 25, "gpu_autotune": 55}  # + INSTALL_S = 300


@unit("gpu_capture", "Kineto traces (MLPStack, GPT; forward, train step; fp32, bf16 autocast), TORCH_TRACE logs with "
      "provenance, CUDA-event timing and the CLI's JSON written to OUT/cuda with a manifest",
      "torch.profiler's own Kineto export", gpu=1, timeout_s=LIMITS["gpu_capture"])
def gpu_capture(ctx: Context) -> dict[str, Any]:
    # the child splits its own budget (captures, then the CLI); the margin is its start and the manifest
    args = py("gpu.capture", str(ctx.out / "cuda"), "--device", ctx.device, "--budget", str(max(10, int(ctx.timeout_s) - 8)))
    proc = run(ctx, args + (["--dry"] if ctx.dry else []))
    got = last_json(proc) or {}
    ok = proc.returncode == 0 and bool(got.get("ok"))
    return {"ok": ok, **got, **({} if ok else {"error": tail(proc)})}


# the device's tests, the GPU-only ones first (a run stopped at its limit has reported those)
GPU_TESTS = ("tests/worker/test_levers_cudagraphs.py", "tests/worker/test_line_costs.py",
             "tests/worker/test_benchmark_parts.py", "tests/worker/test_benchmark.py")
_OUTCOME = re.compile(r"^(\S+::\S.*?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")


def outcomes(text: str) -> dict[str, str]:
    """Each test's outcome from `pytest -v` lines (printed as each ends: a run cut at its limit keeps them)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        m = _OUTCOME.match(line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


@unit("gpu_tests", "the device's tests (CUDA-graphs lever, line costs, the benchmark) pass with "
      "COMPILE_LENS_TEST_DEVICE set to the device, each outcome reported", "the tests' own independent checks",
      gpu=2, timeout_s=LIMITS["gpu_tests"])
def gpu_tests(ctx: Context) -> dict[str, Any]:
    # the rehearsal: two tests that need no shared measurement (test_benchmark*.py are `alone`: slow)
    chosen = (["tests/worker/test_benchmark_parts.py", "-k", "test_resolve_device or test_oom_detection"] if ctx.dry
              else list(GPU_TESTS))
    proc = run(ctx, [sys.executable, "-m", "pytest", "-v", "-rA", "-p", "no:cacheprovider", *chosen],
               COMPILE_LENS_TEST_DEVICE=ctx.device)
    text = (proc.stdout or "") + "\n" + (proc.stderr or "")
    (ctx.out / "tests.log").write_text(text, encoding="utf-8")
    each = outcomes(text)
    (ctx.out / "tests.json").write_text(json.dumps({"rc": proc.returncode, "tests": each}, indent=1), encoding="utf-8")
    counts: dict[str, int] = {}
    for v in each.values():
        counts[v.lower()] = counts.get(v.lower(), 0) + 1
    bad = [k for k, v in each.items() if v in ("FAILED", "ERROR")]
    row: dict[str, Any] = {"ok": proc.returncode == 0 and bool(each), **counts, "failed_tests": bad[:10]}
    if proc.returncode == 124:
        row["stopped"] = f"at the unit's limit ({ctx.timeout_s:.0f} s) after {len(each)} tests; tests.log has the rest"
    elif proc.returncode not in (0, 1):
        row["error"] = tail(proc)
    return row


@unit("gpu_busy", "the busy rule reads this idle box as not busy (without schedstat too: gVisor); NVML sees a "
      "matmul load as another process's and our own tree's as ours", "nvidia-smi's utilisation",
      gpu=3, timeout_s=LIMITS["gpu_busy"])
def gpu_busy(ctx: Context) -> dict[str, Any]:
    proc = run(ctx, py("gpu.busy_check", "--device", ctx.device, "--limit", str(max(5, int(ctx.timeout_s) - 8))))
    got = last_json(proc) or {}
    return {"ok": proc.returncode == 0, **got, **({} if proc.returncode == 0 else {"error": tail(proc, 400)})}


@unit("gpu_autotune", "the max-autotune lever measured once (each side's cold compile, the steady forward)",
      "the default compile", gpu=4, timeout_s=LIMITS["gpu_autotune"])
def gpu_autotune(ctx: Context) -> dict[str, Any]:
    proc = run(ctx, py("gpu.autotune_once", "--device", ctx.device, *(["--dry"] if ctx.dry else [])))
    got = last_json(proc) or {}
    ok = proc.returncode == 0 and bool(got.get("verdict"))
    return {"ok": ok, **got, **({} if ok else {"error": tail(proc)})}
