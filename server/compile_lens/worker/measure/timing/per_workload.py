"""The paired timing rounds of one workload in the measurement (`benchmark`), on its share of the budget.

The forward is timed in two legs: a *first look* of `FIRST_LOOK_S`, `FIRST_LOOK_MAX_S` at most (torch's own check of a
model, 10 eager/compiled pairs, takes about 1 s of timing) whose figure is sent at once as the
forward's, then — only when that figure is not settled (conclusive and precise, or no measurable
difference: `timing.settled`) — more rounds on the rest of its share, after the forward was sent
(`Refine`). The first look is as honest as any figure: the same busy rule per round, the same
bootstrap interval, at least `MIN_ROUNDS` pairs; a noisy one says "inconclusive" and is refined.

The first look is taken by the forward's cold child (`first_look`, in `bench_child`) right after its
cold compile, as torch's own check of a model is: a fresh process that compiled it times it, so the
first figure does not wait for the parent's warm compile and accuracy check. Where the child could
not (its rounds compiled again, or the look raised), the parent takes it as before. The train step
gets a first look too: the rest of its share is spent only when that did not settle its figure.
`job`, `eager`, `figures` are `benchmark`'s `_Job`, `_Eager` and `snapshot.Figures`.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Optional

import torch
import torch.utils.benchmark as tbench

from ....busy.contention import Contention, settle
from ..compile.children import Cold
from ..compile.cold_job import FirstLook
from ..run.estimates import LINES_PER_COLD, estimate_s
from ..workload.model import Model
from .guard_cost import guard_block, record_guard_cost
from .rounds import OVERRUN, Paired, busier, paired_rounds, settled, timer, timing_of

MIN_TIMING_FRACTION = 0.25  # the timing rounds get at least this share of the budget, whatever compiling took
ROUND_MARGIN_S = 1.0  # rounds end this long before the budget's stop point (a block runs on past its clock check)
FIRST_LOOK_S = 2.0  # the forward's first figure: this long in rounds (MIN_ROUNDS pairs at least, time allowing)
# ... and never longer than this, whatever the budget: the headline is the figure the user waits for, so
# a slow call or a busy machine sends a figure of fewer pairs (wider, said so) that the worker refines
FIRST_LOOK_MAX_S = OVERRUN * FIRST_LOOK_S

# more rounds of the forward after its first figure was sent; None when the first look settled it
Refine = Optional[Callable[[], None]]


def user_forward(model: Model) -> tbench.Timer:
    """The forward timed as a user times it: `with torch.no_grad(): model(*args)`, nothing around it."""
    stmt = "with torch.no_grad():\n    f(*args)"
    if model.step_begin:
        stmt = "torch.compiler.cudagraph_mark_step_begin()\n" + stmt
    return timer(stmt, {"f": model.call, "args": model.args, "torch": torch})


def first_look(eager: Model, compiled: Model, device: str) -> FirstLook:
    """In the forward's cold child, right after its compile: the first look's rounds, the busy
    reading over them, what was not measurable, its seconds, and the frames calls 2 and 3 compiled
    again (`warmup_compiles`: none, unless the user's code recompiles) — or its `why` when the
    rounds cannot stand (they compiled: the parent then times the forward)."""
    from ..compile.dynamo_watch import _frame_compiles, _metrics

    timers = {side: user_forward(m) for side, m in (("eager", eager), ("compiled", compiled))}
    unmeasured: dict[str, str] = {}
    # compiles counted from torch's metrics, as `DynamoWatch` does, without its Dynamo reset: that
    # would throw away the compile just made, and the next call would compile again
    seen = len(_metrics())
    for _ in range(2):  # calls 2 and 3 (the parent's warm-up, here)
        compiled.forward()
    warmup = len(_frame_compiles(_metrics()[seen:]))
    extra = guard_block(timers["compiled"], unmeasured)
    seen = len(_metrics())
    contention = Contention(device)
    contention.start(gpu=True)
    t0 = time.perf_counter()
    pairs = paired_rounds(timers["eager"], timers["compiled"], budget_s=FIRST_LOOK_S, watch=Contention(device),
                          extra=extra, max_s=FIRST_LOOK_MAX_S, keep_max=True)
    seconds = time.perf_counter() - t0
    if _frame_compiles(_metrics()[seen:]):
        return FirstLook(why="compiled again while timing", warmup_compiles=warmup)
    return FirstLook(pairs, contention.report(), unmeasured, seconds, warmup)


def budget_cap(job: Any, wl: str = "forward") -> float:
    """The most a workload's rounds may take once the forward's headline is out: until the budget's stop
    point, less a margin (`budget.Budget`: their pairs then stand on their own, not stopped mid-round);
    unbounded before it (the forward's figure is never cut), without a budget, or for a train step asked for."""
    bound = getattr(job, "budget", None)
    if bound is None or bound.forward_s is None or (wl == "train" and "train_step" in job.opt_in):
        return math.inf
    return max(0.0, bound.left_s() - ROUND_MARGIN_S)


def later_parts_s(job: Any, cold: Cold, workloads: int) -> float:
    """The later parts' time from this workload's cold compile (`LINES_PER_COLD`, `estimates.estimate_s`;
    a warm compile ≈ 1/5 of a cold one in BENCHMARKS.md's runs)."""
    seen = {"cold": cold.compile_s, "warm": cold.compile_s and cold.compile_s / 5}
    sweep = estimate_s("batch_sweep", seen, job.max_seconds) if "batch_sweep" in job.opt_in else 0.0  # asked only
    return LINES_PER_COLD * (cold.compile_s or 0.0) * workloads + estimate_s("export", seen, job.max_seconds) + sweep


def looked(figures: Any, cold: Cold) -> Optional[Paired]:
    """The forward's first look as its cold child took it (`first_look`), set as the forward's timing
    in `figures`; None when the child took none (the parent times it: `time_workload`)."""
    found = cold.first_look
    if found is None or found.pairs is None:
        return None
    pairs = found.pairs
    figures.timings["forward"] = timing_of(pairs)
    for part, why in found.unmeasured.items():
        figures.unmeasured.setdefault(part, why)
    record_guard_cost(pairs, figures.timings["forward"], figures.unmeasured)
    figures.busy_seen = busier(figures.busy_seen, found.busy)
    return pairs


def looked_s(cold: Cold) -> float:
    """The seconds the cold child's first look took (0: it took none)."""
    return cold.first_look.s if cold.first_look is not None else 0.0


def time_workload(job: Any, eager: Any, compiled: Model, wl: str, i: int, limit: float,
                  figures: Any, contention: Contention, reserve: float = 0.0,
                  first_look: Optional[tuple[Paired, float]] = None) -> Refine:
    """Eager and compiled in paired rounds, on this workload's share of what is left of the budget:
    a first look, and the rest of its share — spent by the returned `Refine` only when the first look
    did not settle the figure (the forward's after it was sent, the train step's at once).
    `first_look`: the forward's rounds its cold child took, and their seconds (`looked`): the
    first look is not taken again, only refined."""
    label = "forward" if wl == "forward" else "train step"
    workloads, max_seconds = eager.workloads, job.max_seconds  # as many as `order`
    # what the later parts should take stays out of the timing's share (`later_parts_s`)
    left = max_seconds - (time.perf_counter() - job.started) - reserve
    share = left / (len(workloads) - i)
    budget = min(max(share, MIN_TIMING_FRACTION * max_seconds / len(workloads)), budget_cap(job, wl))
    if i == 0 and share < MIN_TIMING_FRACTION * max_seconds / len(workloads):
        job.notes.append(f"timing: compiling took most of the {max_seconds:.0f} s budget; the timing "
                         f"rounds got {budget:.0f} s each (raise compileLens.benchmark.maxSeconds "
                         "for more)")
    sides = {"eager": eager.model, "compiled": compiled}
    if wl == "forward":
        timers = {side: user_forward(m) for side, m in sides.items()}
    else:
        timers = {side: timer("fn()", {"fn": m.run(wl)}) for side, m in sides.items()}
    first = min(budget, FIRST_LOOK_S)  # the train step's too: once settled, its rest is not spent

    def on_round(n: int, p: Any) -> None:
        if n % 4 == 0:
            job.progress(f"timing {label}: {n} paired rounds…", limit_s=limit)

    def rounds(budget_s: float, extra: Any, resume: Optional[Paired] = None, max_s: Optional[float] = None) -> Paired:
        if resume is not None:  # a block the first look had and this process cannot time: left out from here
            for name in [n for n in resume.extra if not extra or n not in extra]:
                resume.dropped.setdefault(name, "not measurable: not timed beside the later rounds")
                del resume.extra[name]
        pairs = paired_rounds(timers["eager"], timers["compiled"], budget_s=budget_s, on_round=on_round,
                              watch=Contention(job.device), extra=extra, resume=resume, max_s=max_s)
        figures.timings[wl] = timing_of(pairs)
        if extra or pairs.dropped:
            record_guard_cost(pairs, figures.timings[wl], figures.unmeasured)
        return pairs

    def guards() -> Any:  # the forward's guard cost: a third block in the same rounds, guards skipped (`guard_cost`)
        return guard_block(timers["compiled"], figures.unmeasured) if wl == "forward" else None

    if first_look is not None:
        (pairs, spent), extra = first_look, None
        rest = budget - spent
        if settled(figures.timings[wl]) or rest < 1.0:
            return None
    else:
        job.stage(f"timing the {label}", f"timing {label} (eager and compiled in paired rounds)…", limit_s=limit)
        settle(min(0.1 * first, 5.0))  # our compile workers quiet before the span's reading starts
        contention.start(gpu=True)
        t_timing = time.perf_counter()
        extra = guards()
        # the first look goes on to its minimum rounds within the whole share (a slow call, a busy machine)
        pairs = rounds(first, extra, max_s=min(max(budget, OVERRUN * first), budget_cap(job, wl)))
        job.add_stage("timing", t_timing)
        rest = budget - (time.perf_counter() - t_timing)
        if first >= budget or settled(figures.timings[wl]) or rest < 1.0:
            return None

    def refine() -> None:
        left = min(rest, budget_cap(job, wl))  # what the budget left by now (the forward was sent meanwhile)
        if left < 1.0:
            return
        job.stage(f"timing the {label}", f"timing {label}: more paired rounds…", limit_s=limit)
        t_more = time.perf_counter()
        more_extra = extra if extra is not None or not pairs.extra else guards()
        contention.start(gpu=True)
        rounds(left, more_extra, resume=pairs, max_s=min(OVERRUN * left, budget_cap(job, wl)))
        job.add_stage("timing", t_more)
        figures.busy_seen = busier(figures.busy_seen, contention.report())

    return refine
