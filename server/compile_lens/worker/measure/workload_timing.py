"""The paired timing rounds of one workload in the measurement (`benchmark`), on its share of the budget.

The forward is timed in two legs: a *first look* of at most `FIRST_LOOK_S` (torch's own check of a
model, 10 eager/compiled pairs, takes about 1 s of timing) whose figure is sent at once as the
forward's, then — only when that figure is not settled (conclusive and precise, or no measurable
difference: `timing.settled`) — more rounds on the rest of its share, after the forward was sent
(`Refine`). The first look is as honest as any figure: the same busy rule per round, the same
bootstrap interval, at least `MIN_ROUNDS` pairs; a noisy one says "inconclusive" and is refined.
`job`, `eager`, `figures` are `benchmark`'s `_Job`, `_Eager` and `snapshot.Figures`.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

import torch
import torch.utils.benchmark as tbench

from .cold_children import Cold
from .estimates import LINES_PER_COLD, estimate_s
from .guard_cost import guard_block, record_guard_cost
from .timing import (
    OVERRUN,
    Contention,
    Paired,
    busier,
    paired_rounds,
    settle,
    settled,
    timer,
    timing_of,
)
from .workload import Model

MIN_TIMING_FRACTION = 0.25  # the timing rounds get at least this share of the budget, whatever compiling took
FIRST_LOOK_S = 2.0  # the forward's first figure: this long in rounds at most (MIN_ROUNDS pairs at least)

# more rounds of the forward after its first figure was sent; None when the first look settled it
Refine = Optional[Callable[[], None]]


def user_forward(model: Model) -> tbench.Timer:
    """The forward timed as a user times it: `with torch.no_grad(): model(*args)`, nothing around it."""
    stmt = "with torch.no_grad():\n    f(*args)"
    if model.step_begin:
        stmt = "torch.compiler.cudagraph_mark_step_begin()\n" + stmt
    return timer(stmt, {"f": model.call, "args": model.args, "torch": torch})


def later_parts_s(job: Any, cold: Cold, workloads: int) -> float:
    """The later parts' time from this workload's cold compile (`LINES_PER_COLD`, `estimates.estimate_s`;
    a warm compile ≈ 1/5 of a cold one in BENCHMARKS.md's runs)."""
    seen = {"cold": cold.compile_s, "warm": cold.compile_s and cold.compile_s / 5}
    return (LINES_PER_COLD * (cold.compile_s or 0.0) * workloads + estimate_s("export", seen, job.max_seconds)
            + estimate_s("batch_sweep", seen, job.max_seconds))


def time_workload(job: Any, eager: Any, compiled: Model, wl: str, i: int, limit: float,
                  figures: Any, contention: Contention, reserve: float = 0.0) -> Refine:
    """Eager and compiled in paired rounds, on this workload's share of what is left of the budget
    (the forward: its first look; the rest of its share is what the returned `Refine` spends)."""
    label = "forward" if wl == "forward" else "train step"
    workloads, max_seconds = eager.workloads, job.max_seconds  # as many as `order`
    # what the later parts should take stays out of the timing's share (`later_parts_s`)
    left = max_seconds - (time.perf_counter() - job.started) - reserve
    share = left / (len(workloads) - i)
    budget = max(share, MIN_TIMING_FRACTION * max_seconds / len(workloads))
    if i == 0 and share < MIN_TIMING_FRACTION * max_seconds / len(workloads):
        job.notes.append(f"timing: compiling took most of the {max_seconds:.0f} s budget; the timing "
                         f"rounds got {budget:.0f} s each (raise compileLens.benchmark.maxSeconds "
                         "for more)")
    sides = {"eager": eager.model, "compiled": compiled}
    if wl == "forward":
        timers = {side: user_forward(m) for side, m in sides.items()}
    else:
        timers = {side: timer("fn()", {"fn": m.run(wl)}) for side, m in sides.items()}
    first = min(budget, FIRST_LOOK_S) if wl == "forward" else budget
    job.stage(f"timing the {label}", f"timing {label} (eager and compiled in paired rounds)…", limit_s=limit)
    settle(min(0.1 * first, 5.0))  # our compile workers quiet before the span's reading starts
    contention.start(gpu=True)
    t_timing = time.perf_counter()

    def on_round(n: int, p: Any) -> None:
        if n % 4 == 0:
            job.progress(f"timing {label}: {n} paired rounds…", limit_s=limit)

    # the forward's guard cost: a third block in the same rounds, guards skipped (`guard_cost`)
    extra = guard_block(timers["compiled"], figures.unmeasured) if wl == "forward" else None

    def rounds(budget_s: float, resume: Optional[Paired] = None, max_s: Optional[float] = None) -> Paired:
        pairs = paired_rounds(timers["eager"], timers["compiled"], budget_s=budget_s, on_round=on_round,
                              watch=Contention(job.device), extra=extra, resume=resume, max_s=max_s)
        figures.timings[wl] = timing_of(pairs)
        if extra:
            record_guard_cost(pairs, figures.timings[wl], figures.unmeasured)
        return pairs

    # the first look goes on to its minimum rounds within the whole share (a slow call, a busy machine)
    pairs = rounds(first, max_s=max(budget, OVERRUN * first))
    job.add_phase("timing", t_timing)
    rest = budget - (time.perf_counter() - t_timing)
    if first >= budget or settled(figures.timings[wl]) or rest < 1.0:
        return None

    def refine() -> None:
        job.stage(f"timing the {label}", f"timing {label}: more paired rounds…", limit_s=limit)
        t_more = time.perf_counter()
        contention.start(gpu=True)
        rounds(rest, resume=pairs)
        job.add_phase("timing", t_more)
        figures.busy_seen = busier(figures.busy_seen, contention.report())

    return refine
