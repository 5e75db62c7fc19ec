"""Guard evaluation per compiled forward call, measured as the benchmark measures it (the compiled
forward with guards and with them skipped, in the speedup's paired rounds).

    .venv/bin/python -m benchmarks.measure.guard_cost [MAX_SECONDS]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from benchmarks.figures import Figure, Result, emit
from compile_lens.protocol import InputRecipe, TargetSpec
from compile_lens.worker.loader import build_target, import_file
from compile_lens.worker.measure.run.benchmark import run_benchmark

ROOT = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "remote"
MODEL = str(ROOT / "mlp.py")


def main(max_seconds: float) -> None:
    spec = TargetSpec("MLP", "module", 14, inputs=InputRecipe("directive", "(torch.randn(16, 32),)"))
    target = build_target(import_file(MODEL, str(ROOT)), spec, MODEL)
    b = run_benchmark(target, path=MODEL, root=str(ROOT), device="cpu", max_seconds=max_seconds)
    f = b.forward
    share = "not measurable" if f.guard_share is None else f"{100 * f.guard_share:.1f}%"
    print(f"| MLP forward | {f.rounds} | {f.compiled_ms * 1e3:.1f} | {f.guard_us_per_call} | {f.guard_us_ci} | {share} "
          f"| {b.guard_latency_us} |")
    print("notes:", [n for n in b.notes if n.startswith("guards:")], f"load average {os.getloadavg()[0]:.1f}")
    # measured, no limit: the guard's share is a figure the speedup's notes read
    emit(Result({"rounds": Figure(f.rounds, "count"), "compiled_us": Figure(f.compiled_ms * 1e3, "µs", "lower"),
                 "guard_us_per_call": Figure(f.guard_us_per_call, "µs", "lower"),
                 "guard_share_pct": Figure(None if f.guard_share is None else 100 * f.guard_share, "%", "lower"),
                 "guard_latency_us": Figure(b.guard_latency_us, "µs", "lower")},
                notes={"guard_us_ci": f.guard_us_ci}))


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 30.0)
