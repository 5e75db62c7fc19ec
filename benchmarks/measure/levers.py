"""What the levers phase costs and finds, per target: `python -m benchmarks.measure.levers FILE:Target ...
[--measure] [--max-seconds S]` (the `levers_phase` unit). Prints each lever's verdict, figures and wall time, the phase's wall
time, and with --measure the measurement's own wall time (the phase must stay under 3× of it).
A file given without `:Target` runs every target discovery finds in it. Prints the load average."""

from __future__ import annotations

import argparse
import os
import sys
import time

from benchmarks.common import load_targets
from benchmarks.figures import Figure, Result, emit
from compile_lens.protocol import TargetResult
from compile_lens.render.levers_text import lever_line


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("targets", nargs="+")
    parser.add_argument("--measure", action="store_true")
    parser.add_argument("--max-seconds", type=float, default=20.0)
    args = parser.parse_args()
    from compile_lens.worker.levers.phase import run_levers
    from compile_lens.worker.measure.run.benchmark import run_benchmark

    figures: dict[str, Figure] = {}
    unbuilt: list[str] = []
    for path, root, spec, target in load_targets(args.targets):
        head = f"{os.path.basename(path)}:{spec.name}"
        if isinstance(target, Exception):
            print(f"{head}: cannot build: {target}")
            unbuilt.append(f"{head}: {target}")
            continue
        result = TargetResult(spec.name, spec.kind, spec.line)
        if args.measure:
            t0 = time.perf_counter()
            result.benchmark = run_benchmark(target, path=path, root=root, device="cpu",
                                             max_seconds=args.max_seconds)
            figures[f"{head}.measurement_s"] = Figure(time.perf_counter() - t0, "s", "lower")
            print(f"{os.path.basename(path)}:{spec.name}: measurement {time.perf_counter() - t0:.1f} s "
                  f"(cold compile {result.benchmark.compile_s.get('cold') or 0:.1f} s)")
        t0 = time.perf_counter()
        levers = run_levers(result, target, path=path, root=root, device="cpu", mode="default",
                            max_seconds=args.max_seconds, progress=lambda stage, **kw: None)
        took = time.perf_counter() - t0
        for lever in levers:
            print(f"  {lever_line(lever)}  [{lever.wall_s:.1f} s]")
        print(f"{head}: levers phase {took:.1f} s, {len(levers)} lever(s) applied; load {os.getloadavg()[0]:.1f}")
        sys.stdout.flush()
        figures[f"{head}.phase_s"] = Figure(took, "s", "lower")
        figures[f"{head}.levers"] = Figure(len(levers), "count")
        if f"{head}.measurement_s" in figures:  # the goal: the phase ≤ 3× the measurement (BUDGET_FACTOR)
            figures[f"{head}.phase_over_measurement"] = Figure(took / figures[f"{head}.measurement_s"].value, "x",
                                                               "lower", 3.0)
    emit(Result(figures, notes={"cannot_build": unbuilt} if unbuilt else {}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
