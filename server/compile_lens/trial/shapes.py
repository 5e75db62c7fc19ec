"""The trial per input-shape signature: the real stream of shapes a training loop feeds its model.

Pure: no torch. A step's *shape signature* is the input shapes of its first model call (the hook
notes them); every step has exactly one, so the step counts per shape add up to the run's steps.
Per shape: its steps in the compiled run, the frame compiles and recompiles that happened in its
steps (compiles are Dynamo's compilation metrics, recompiles the `recompiles` log, both tagged
with the step), and eager/compiled steady medians over its steps that are no run's warm-up
(null, with `note`, for a shape seen only in warm-up steps), judged by the trial's own rule
(`summary.speedup`: quartile ranges apart).

Two statements follow when the figures show them (`findings`): the minority shapes' compile time
exceeds what the compiled steps saved in the run, and the main shape's per-step speedups are told
apart from the other shapes' (which is what moves the whole run's from the main shape's). With
`--mode reduce-overhead` on CUDA, CUDA-graph records per shape come from torch's `cudagraphs` log
(`cudagraph_events`), and a third statement counts them.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from .figures import Quartiles, RunFigures, RunRecompile, ShapeRow, Speedup, Step
from .summary import MIN_STEADY, busy_during, judge, quartiles

OPTIONS = ("mark the varying dimension dynamic (`torch._dynamo.mark_dynamic(x, 0)` before the first call, "
           "or `--dynamic true` / `torch.compile(..., dynamic=True)`)",
           "pad or bucket the inputs to fewer shapes (pad to the block size, `drop_last=True`, length buckets)")


def signature(shapes: Any) -> str:
    """`[8, 16] [8, 16]`: one string per distinct list of input shapes; `no model call` without one."""
    if not shapes:
        return "no model call"
    return " ".join(json.dumps(s) for s in shapes)


def _steady_of(run: RunFigures, steps: list[Step]) -> Optional[Quartiles]:
    """A run's steady wall times (as `summary.run_figures` has them) restricted to `steps`."""
    warm = set(run.warmup_steps)
    return quartiles([s.wall_s for s in steps if s.index not in warm and not s.profiled and s.wall_s is not None])


def _compile_seconds(entry: dict) -> float:
    if entry.get("co_name"):
        return entry.get("entire_frame_compile_time_s") or 0.0
    return entry.get("inductor_compile_time_s") or entry.get("backend_compile_time_s") or 0.0


def by_shape(eager: RunFigures, compiled: RunFigures, compiled_run: Optional[dict],
             recompiles: list[RunRecompile]) -> list[ShapeRow]:
    """One row per shape signature, the most frequent first (`summary.run_figures` of both runs, the
    compiled run's record for its compile entries and CUDA-graph events, `summary.recompiles`)."""
    base = compiled if compiled.steps else eager
    groups: dict[str, list[Step]] = {}
    shapes_of: dict[str, Any] = {}
    for step in base.steps:
        key = signature(step.shapes)
        groups.setdefault(key, []).append(step)
        shapes_of.setdefault(key, step.shapes)
    eager_by_index = {s.index: s for s in eager.steps}
    step_shape = {s.index: signature(s.shapes) for s in compiled.steps}
    entries = (compiled_run or {}).get("compiles") or []
    events = (compiled_run or {}).get("events") or []
    rows = []
    for key, steps in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0].index)):
        indexes = {s.index for s in steps}
        mine = [e for e in entries if step_shape.get(e.get("step")) == key]
        eager_steps = [eager_by_index[i] for i in sorted(indexes) if i in eager_by_index]
        e_steady = _steady_of(eager, eager_steps)
        c_steady = _steady_of(compiled, steps) if base is compiled else None
        ratio = judge(e_steady, c_steady, busy_during(eager, compiled)) if compiled.failure is None else None
        row = ShapeRow(shapes_of[key], key, len(steps), sorted(indexes),
                       compiles=sum(1 for e in mine if e.get("co_name")),
                       recompiles=sum(1 for r in recompiles if signature(r.shapes) == key),
                       compile_s=sum(_compile_seconds(e) for e in mine),
                       eager_median_s=e_steady.median if e_steady else None,
                       compiled_median_s=c_steady.median if c_steady else None,
                       eager_steady=e_steady, compiled_steady=c_steady,
                       speedup=ratio.ratio if ratio else None, verdict=ratio.verdict if ratio else None)
        if row.eager_median_s is None or row.compiled_median_s is None:
            row.note = ("seen only in warm-up steps (step 0 or steps that compiled): no steady time"
                        if base is compiled else "the compiled run has no steps: no steady time")
        records = [e for e in events if e.get("kind") == "cudagraph_record" and signature(e.get("shapes")) == key]
        if records:
            row.cudagraph_records = len(records)
            row.cudagraph_rerecords = sum(1 for e in records if e.get("rerecord"))
        rows.append(row)
    return rows


def _apart(a: Optional[Quartiles], b: Optional[Quartiles]) -> bool:
    return bool(a and b and (a.q3 < b.q1 or b.q3 < a.q1))


def _ratios(steps: list[int], eager: RunFigures, compiled: RunFigures) -> list[float]:
    """eager / compiled wall time of each step steady in both runs (the same step index: same data)."""
    def steady(run: RunFigures) -> dict:
        warm = set(run.warmup_steps)
        return {s.index: s.wall_s for s in run.steps if s.index not in warm and not s.profiled and s.wall_s}

    e, c = steady(eager), steady(compiled)
    return [e[i] / c[i] for i in steps if i in e and i in c]


def _speedups_apart(main: ShapeRow, others: list[ShapeRow], eager: RunFigures, compiled: RunFigures) -> Optional[Quartiles]:
    """The other shapes' per-step speedups (quartiles) when they and the main shape's are told apart by
    the trial's rule: at least MIN_STEADY steps each, quartile ranges that do not overlap."""
    a = quartiles(_ratios(main.steps, eager, compiled))
    b = quartiles(_ratios([i for r in others for i in r.steps], eager, compiled))
    if not a or not b or a.n < MIN_STEADY or b.n < MIN_STEADY or busy_during(eager, compiled):
        return None
    return b if _apart(a, b) else None


def findings(rows: list[ShapeRow], whole: Optional[Speedup], compiled: RunFigures, eager: RunFigures) -> list[dict]:
    """What the per-shape figures say about the run, each `{kind, text, estimate}` with the options."""
    if len(rows) < 2:
        return []
    main, minority = rows[0], rows[1:]
    out = []
    minority_compile = sum(r.compile_s for r in minority)
    saved, estimated = 0.0, False
    main_gain = (main.eager_median_s - main.compiled_median_s
                 if main.eager_median_s is not None and main.compiled_median_s is not None else None)
    for r in rows:
        if r.eager_median_s is not None and r.compiled_median_s is not None:
            saved += r.step_count * (r.eager_median_s - r.compiled_median_s)
        elif main_gain is not None:
            saved += r.step_count * main_gain  # no steady time of its own: the main shape's gain per step
            estimated = True
    steps = sum(r.step_count for r in rows)
    if minority_compile > 0 and minority_compile > saved:
        shapes = ", ".join(f"{r.signature} ({r.step_count} step{'s' if r.step_count != 1 else ''})"
                           for r in minority)
        est = " (an estimate: steady medians × steps; shapes seen only in warm-up counted at the main shape's gain)" \
            if estimated else " (steady medians × steps)"
        if not any(r.verdict in ("faster", "slower") for r in rows):
            est += "; the per-shape speedups are inconclusive, so the saving is uncertain"
        gained = (f"more than the compiled steps saved over these {steps} steps: {saved:.2f} s" if saved > 0 else
                  f"and the compiled steps saved nothing over these {steps} steps: they took {-saved:.2f} s more")
        out.append({"kind": "minority-shapes-cost", "estimate": estimated,
                    "figures": {"minority_compile_s": minority_compile, "saved_s": saved, "steps": steps},
                    "text": f"the minority shapes {shapes} cost {minority_compile:.1f} s of compiling (measured), "
                            f"{gained}{est}",
                    "options": list(OPTIONS)})
    differs = _speedups_apart(main, rows[1:], eager, compiled)
    if whole and main.speedup is not None and differs:
        out.append({"kind": "main-shape-speedup-differs", "estimate": False,
                    "figures": {"main": main.speedup, "whole": whole.ratio, "others": differs.median},
                    "text": f"the main shape {main.signature} ({main.step_count} of {steps} steps) runs "
                            f"{main.speedup:.2f}x per step, the other shapes {differs.median:.2f}x and the whole "
                            f"run {whole.ratio:.2f}x: the per-step speedups of the main shape and of the others "
                            "have quartile ranges apart, so the other shapes change what compiling gives",
                    "options": list(OPTIONS)})
    rerecords = sum(r.cudagraph_rerecords or 0 for r in rows)
    records = sum(r.cudagraph_records or 0 for r in rows)
    if records > len(rows):
        out.append({"kind": "cudagraph-records", "estimate": False,
                    "figures": {"records": records, "rerecords": rerecords, "shapes": len(rows)},
                    "text": f"CUDA graphs were recorded {records} times for {len(rows)} input shapes"
                            + (f" ({rerecords} re-records)" if rerecords else "")
                            + ": each new shape records (and keeps) a graph of its own; with many shapes "
                              "reduce-overhead spends its time recording",
                    "options": list(OPTIONS)})
    return out
