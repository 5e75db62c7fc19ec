"""What the later parts of a measurement should take, from its compile times: the budget's rule
(`benchmark` holds their time back from the timing rounds; `jobs` skips a deployment part that
would not fit and names it). Estimates only: each part's real seconds are in `phases_s`/`parts_s`."""

from __future__ import annotations

from typing import Any

# line costs ÷ cold compiles: the line costs read the timed compile (no compile of their own), so a
# profile of each side, ≈ 4.5 s against MLP's ≈ 30 s cold compile under load (BENCHMARKS.md, line costs)
LINES_PER_COLD = 0.15


def report_budget(benchmark_seconds: float) -> float:
    """Seconds the report's batch sweep gets next to a benchmark of `benchmark_seconds`."""
    return min(30.0, max(3.0, benchmark_seconds / 3))


def estimate_s(part: str, compile_s: dict[str, Any], max_seconds: float, output_code: bool = True) -> float:
    """What a deployment part should take, from the benchmark's compile times (`Benchmark.compile_s`):
    an export traces the model about as a warm compile's Dynamo and AOTAutograd do (strict: one
    trace more); the batch sweep compiles the forward afresh in this process (batch dynamic, about
    a cold compile less its imports) and times it for `report_budget`. The fallback ops cost
    nothing more: they are read from the warm compile's `output_code` (without it, a compile)."""
    warm = compile_s.get("warm_forward") or compile_s.get("warm") or 0.0
    cold = compile_s.get("cold_forward") or compile_s.get("cold") or 0.0
    return {"export": warm, "strict_export": 2.0 * warm, "fallback_ops": 0.0 if output_code else cold,
            "batch_sweep": cold + report_budget(max_seconds)}.get(part, 0.0)
