"""What the later parts of a measurement should take, from its compile times: the budget's rule
(`benchmark` holds their time back from the timing rounds; `jobs` skips a deployment part that
would not fit and names it). Estimates only: each part's real seconds are in `stages_s`/`parts_s`."""

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
    cold = compile_s.get("cold_forward") or compile_s.get("cold") or 0.0
    # no warm compile seen (the budget had no room for it): a fifth of the cold one
    warm = compile_s.get("warm_forward") or compile_s.get("warm") or WARM_PER_COLD * cold
    return {"export": warm, "strict_export": 2.0 * warm, "fallback_ops": 0.0 if output_code else cold,
            "batch_sweep": cold + report_budget(max_seconds)}.get(part, 0.0)


WARM_PER_COLD = 0.2  # a warm compile ≈ 1/5 of a cold one (BENCHMARKS.md's runs)
TRAIN_PER_FORWARD = 1.5  # the train step's cold compile against the forward's (BENCHMARKS.md: 1.3–1.8×)


def later_s(part: str, cold_s: float, import_s: float = 0.0, first_look_s: float = 2.0) -> float:
    """What a later part of the benchmark should take (`budget`: it starts only where this fits), from
    the forward's cold compile (`cold_s`, a fresh process, `import_s` its imports): the forward's warm
    compile and accuracy check, a warm compile; the train step, a fresh process compiling forward and
    backward, its warm compile and its first look; the line costs `LINES_PER_COLD` of a cold compile;
    the drift, a warm compile; the warm-remote compile, two fresh processes; peak memory, a call a side."""
    fresh = import_s + cold_s
    return {"warm_forward": WARM_PER_COLD * cold_s,
            "train_step": TRAIN_PER_FORWARD * (fresh + WARM_PER_COLD * cold_s) + first_look_s,
            "lines": LINES_PER_COLD * cold_s, "drift": WARM_PER_COLD * cold_s,
            "warm_remote": 2.0 * fresh}.get(part, 0.0)
