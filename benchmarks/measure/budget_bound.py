#!/usr/bin/env python3
"""Wall time against `--max-seconds`: is the budget a bound? (issue 51, items 2–3)

    .venv/bin/python -m benchmarks.measure.budget_bound FILE [--budgets 15,30,60] [--server DIR]

For each budget, `compile-lens check FILE --no-recompiles --no-cache --max-seconds B --stream`, each
stream line timed as it arrives: the measurement runs from the trace's line (the last phase before it)
to its last part's line, the forward's figure arrives with the "forward" line, and the bound is
max(B, that) × 1.1 + 5 s (`worker/measure/run/budget.py`). One row per budget and target: the whole run's
wall, the measurement's, the time to the forward's figure, the bound, the first look's seconds
(`stages_s.first_look`), and the parts the budget left out. `--server DIR`: another checkout's server
(the figures before a change). Exit 1 when a measurement ran past its bound.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ..common import timed_stream

REPO = Path(__file__).resolve().parents[2]
MEASURE = ("forward", "train_step", "memory", "lines", "export", "fallback_ops", "batch_sweep")


def run(path: Path, budget: float, server: Path) -> list[dict[str, Any]]:
    """One `check --stream` on `budget`: a row per target."""
    lines, wall, _ = timed_stream(path, server, "--no-recompiles", "--no-cache", "--max-seconds", f"{budget:g}",
                                  PYTHONSAFEPATH="1", COMPILE_LENS_CACHE_DIR=f"/tmp/budget-bound-cache-{os.getpid()}")
    document = lines[-1][1] if lines else {}
    rows = []
    for entry in document.get("files", []):
        for target in entry["targets"]:
            at = {d["part"]: t for t, d in lines if d.get("target") == target["name"] and "part" in d}
            if "trace" not in at or "forward" not in at:
                continue
            start = at["trace"]
            end = max(t for part, t in at.items() if part in MEASURE)
            to_forward = at["forward"] - start
            bound = max(budget, to_forward) * 1.1 + 5.0
            bench = target.get("benchmark") or {}
            stages = bench.get("stages_s") or bench.get("phases_s") or {}  # phases_s: a checkout before 0.2.0
            left_out = {p: s.get("why") for p, s in (target.get("parts") or {}).items() if s.get("status") != "done"}
            rows.append({"target": target["name"], "budget": budget, "wall": round(wall, 1),
                         "measurement": round(end - start, 1), "to_forward": round(to_forward, 1),
                         "bound": round(bound, 1), "within": end - start <= bound,
                         "first_look": stages.get("first_look"), "left_out": left_out})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", type=Path)
    parser.add_argument("--budgets", default="15,30,60")
    parser.add_argument("--server", type=Path, default=REPO / "server")
    args = parser.parse_args()
    from benchmarks.figures import Figure, Result, emit

    ok, figures, notes = True, {}, {}
    for budget in (float(b) for b in args.budgets.split(",")):
        for row in run(args.file.resolve(), budget, args.server.resolve()):
            print(json.dumps(row), flush=True)
            ok &= row["within"]
            key = f"{row['target']} at {budget:g} s"  # the goal: each measurement ends within its own bound
            figures |= {f"{key}.measurement_s": Figure(row["measurement"], "s", "lower", row["bound"]),
                        f"{key}.to_forward_s": Figure(row["to_forward"], "s", "lower"),
                        f"{key}.first_look_s": Figure(row["first_look"], "s", "lower")}
            notes[f"{key}.left_out"] = row["left_out"]
    emit(Result(figures, ok=None if figures else False, notes=notes or {"error": "no target reached its forward"}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
