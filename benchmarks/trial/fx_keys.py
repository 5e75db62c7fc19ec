"""What recording each compile's FX-graph cache key costs the trial's compiled run.

    .venv/bin/python -m benchmarks.trial.fx_keys [--runs 3] [--steps 2]

With `--cache-artifact` or `--remote-cache` the trial's compiled runs keep each compile's FX-graph
cache key (`fx_keys`, to say why a run meant to be served missed): a handler on torch's
structured trace, so torch builds every trace payload. This runs the compiled run of
tests/fixtures/trial/train_tiny.py (Inductor, empty caches each time) with and without the keys, in
turns, and prints per run the compile time the trial reports and torch's own
`structured_logging_overhead_s` (summed over the run's compiles); then its figures as one JSON line.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "server"))

from benchmarks.figures import Figure, Result, emit  # noqa: E402
from compile_lens.trial import runner, summary  # noqa: E402


def one(workspace: str, steps: int, keys: bool) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory(prefix="fx-keys-") as scratch:
        code, run = runner.run_once([sys.executable, "train_tiny.py"], mode="compiled", root=workspace,
                                    scratch=scratch, steps=steps, cold_cache=True, fx_keys=keys)
    assert code == 0 and run, code
    overhead = sum(c.get("structured_logging_overhead_s") or 0.0 for c in run.get("compiles") or [])
    return summary.compile_time(run).total_s, overhead, len(run.get("fx_keys") or [])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    workspace = tempfile.mkdtemp(prefix="fx-keys-ws-")
    shutil.copy(os.path.join(ROOT, "tests", "fixtures", "trial", "train_tiny.py"), workspace)
    cwd = os.getcwd()
    os.chdir(workspace)
    found: dict[bool, list[tuple[float, float, int]]] = {False: [], True: []}
    try:
        for _ in range(args.runs):
            for keys in (False, True):
                found[keys].append(one(workspace, args.steps, keys))
                total, overhead, lookups = found[keys][-1]
                print(f"keys={'on ' if keys else 'off'} compile {total:6.2f} s  structured logging {overhead:5.3f} s  "
                      f"lookups kept {lookups}", flush=True)
    finally:
        os.chdir(cwd)
        shutil.rmtree(workspace, ignore_errors=True)
    figures: dict[str, Figure] = {}
    for keys in (False, True):
        totals = [t for t, _, _ in found[keys]]
        overheads = [o for _, o, _ in found[keys]]
        print(f"keys {'on ' if keys else 'off'}: compile median {statistics.median(totals):.2f} s "
              f"(min {min(totals):.2f}), structured logging median {statistics.median(overheads):.3f} s")
        side = "keys_on" if keys else "keys_off"
        figures |= {f"{side}.compile_median_s": Figure(statistics.median(totals), "s", "lower"),
                    f"{side}.structured_logging_median_s": Figure(statistics.median(overheads), "s", "lower")}
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    # the compile times of two runs differ by more than the keys on a shared machine: torch's own
    # count of its structured logging is the figure the limit reads
    on = figures["keys_on.structured_logging_median_s"].value / figures["keys_on.compile_median_s"].value
    figures["logging_share_pct"] = Figure(100 * on, "%", "lower", 5.0)
    emit(Result(figures))


if __name__ == "__main__":
    main()
