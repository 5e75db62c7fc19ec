"""Eager vs compiled steady-state timing in paired rounds, with an interval that says when it
does not know, and a measure of what else was running meanwhile.

- **paired rounds**: each round times a block of eager calls and a block of compiled calls back
  to back (the order alternates between rounds), with `torch.utils.benchmark.Timer.timeit` (it
  sets the thread count, synchronises the accelerator, and warms up a few calls first). A slow
  second on a shared machine hits one pair, not one side: the speedup is the median of the
  per-round ratios eager/compiled.
- **interval**: a percentile bootstrap of that median over the rounds (95%). The figure is
  *conclusive* (its direction is certain) when the interval excludes 1.0, and *precise* when it
  is also at most `MAX_CI_WIDTH` of the speedup wide (wider: "imprecise"); rounds go on (at least
  `MIN_ROUNDS`, until the budget is spent) until it is both.
- **contention**: what else ran while we timed, judged per round by the device's busy rule
  (`busy.rule`: on the CPU others' and our own other processes' CPU time; on CUDA other processes
  on the GPU and our launching thread's wait for a core); a busy round does not count. On two cores
  a small eager model runs its matmuls on two OpenMP threads that wait for each other: one thread
  pre-empted by someone else stalls the call for a scheduler slice, so load makes timings wrong by
  100× here, not by 2×. Before the rounds, our own processes are let settle (`busy.contention.settle`).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch
import torch.utils.benchmark as tbench

from ....busy.contention import Contention, round_clock, settle
from ....busy.rule import busy_words
from ....protocol import ContentionReport, Timing
from ....speed_words import MAX_CI_WIDTH  # noqa: F401 - wider: imprecise (the direction may still be certain)

MIN_ROUNDS = 8  # fewer pairs than this and a bootstrap interval means little
MAX_ROUNDS = 400
TARGET_ROUNDS = 16  # the block length is chosen so that the budget holds about this many rounds
MIN_BLOCK_S, MAX_BLOCK_S = 0.05, 0.5  # a round of 0.1 s still spans 20 ticks of the CPU clocks psutil reads
SUB_BLOCK_S = 0.02  # a block is timed in pieces this long, checking the clock between them
BLOCK_GUARD = 4.0  # a block that has run this many times its length stops with what it has
NO_DIFFERENCE_WIDTH = 0.04  # an interval this narrow around 1.0: "no measurable difference", stop
RESAMPLES = 2000
SETTLE_SHARE = 0.1  # at most this share of the timing budget waiting for our own processes to go quiet
ROUND_SPREAD = 1.25  # a round may take this much longer than the longest before it (a limit's margin)
OVERRUN = 2.0  # stop here even before MIN_ROUNDS: on a machine this slow the figure is inconclusive anyway


@dataclass
class Paired:
    """Per-call seconds of each round, eager and compiled (same index: same round), and whether
    other processes stayed off our cores during the round (None: not measured)."""

    eager: list[float] = field(default_factory=list)
    compiled: list[float] = field(default_factory=list)
    quiet: list[Optional[bool]] = field(default_factory=list)
    # more variants timed in the same rounds (e.g. "no_guards": the compiled call, guards skipped)
    extra: dict[str, list[float]] = field(default_factory=dict)
    # extra variants whose block failed, and why ("not measurable: …"): left out of every round
    dropped: dict[str, str] = field(default_factory=dict)

    def quiet_rounds(self) -> Paired:
        keep = [i for i, q in enumerate(self.quiet) if q is not False]
        return Paired([self.eager[i] for i in keep], [self.compiled[i] for i in keep], [True] * len(keep),
                      {k: [v[i] for i in keep] for k, v in self.extra.items()})

    @property
    def ratios(self) -> list[float]:
        return [e / c for e, c in zip(self.eager, self.compiled) if c > 0]


def bootstrap_ci(values: list[float], *, level: float = 0.95, resamples: int = RESAMPLES,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the median of `values` (seeded: the same data give the
    same interval)."""
    if len(values) < 2:
        return (float("nan"), float("nan"))
    gen = torch.Generator().manual_seed(seed)
    data = torch.tensor(values, dtype=torch.float64)
    idx = torch.randint(len(values), (resamples, len(values)), generator=gen)
    medians = data[idx].quantile(0.5, dim=1)
    tail = (1 - level) / 2
    lo, hi = medians.quantile(torch.tensor([tail, 1 - tail], dtype=torch.float64)).tolist()
    return (float(lo), float(hi))


def is_conclusive(speedup: float, ci: Optional[list[float]]) -> bool:
    """The direction is certain: the interval lies wholly above 1× or wholly below it."""
    if not ci or not all(math.isfinite(v) for v in ci) or not math.isfinite(speedup) or speedup <= 0:
        return False
    lo, hi = ci
    return not (lo <= 1.0 <= hi)


def rel_width(speedup: float, ci: Optional[list[float]]) -> Optional[float]:
    """The interval's width relative to the speedup, (hi - lo) / speedup; None without one."""
    if not ci or not all(math.isfinite(v) for v in ci) or not math.isfinite(speedup) or speedup <= 0:
        return None
    return round((ci[1] - ci[0]) / speedup, 4)


def is_precise(t: Timing) -> bool:
    """Narrow enough to quote as a figure: at most MAX_CI_WIDTH of the speedup wide."""
    return t.ci_rel_width is not None and t.ci_rel_width <= MAX_CI_WIDTH


def timing_of(p: Paired) -> Timing:
    """Medians, IQRs of the per-round times, the speedup (median ratio) and its interval — from the
    quiet rounds when there are at least MIN_ROUNDS of them; otherwise from all, and inconclusive
    (other processes took our cores: the figure is not the one an idle machine gives)."""
    if p.quiet and any(q is False for q in p.quiet):
        quiet = p.quiet_rounds()
        if len(quiet.eager) >= MIN_ROUNDS:
            return _timing(quiet)
        t = _timing(Paired(p.eager, p.compiled))
        t.conclusive = False
        return t
    return _timing(p)


def _timing(p: Paired) -> Timing:
    def q(values: list[float]) -> tuple[float, float, float]:
        s = sorted(values)
        return tuple(statistics.quantiles(s, n=4, method="inclusive")) if len(s) > 1 else (s[0], s[0], s[0])  # type: ignore[return-value]

    e25, e50, e75 = q(p.eager)
    c25, c50, c75 = q(p.compiled)
    ratios = p.ratios
    speedup = statistics.median(ratios) if ratios else float("nan")
    ci = list(bootstrap_ci(ratios)) if len(ratios) >= 2 else None
    return Timing(eager_ms=e50 * 1e3, compiled_ms=c50 * 1e3, speedup=speedup,
                  eager_iqr_ms=max(0.0, e75 - e25) * 1e3, compiled_iqr_ms=max(0.0, c75 - c25) * 1e3,
                  speedup_ci=ci, conclusive=is_conclusive(speedup, ci), rounds=len(ratios),
                  ci_rel_width=rel_width(speedup, ci))


def settled(t: Timing) -> bool:
    """More rounds would add nothing: conclusive and precise, or an interval around 1× so narrow
    that it says "no measurable difference" (`NO_DIFFERENCE_WIDTH`)."""
    lo, hi = t.speedup_ci or (0.0, math.inf)
    return (t.conclusive and is_precise(t)) or hi - lo <= NO_DIFFERENCE_WIDTH * t.speedup


# --- the rounds ------------------------------------------------------------------------------

def busier(a: Optional[ContentionReport], b: Optional[ContentionReport]) -> Optional[ContentionReport]:
    """The busier of two contention readings (the one to report): busy by the rule first."""
    if a is None or b is None:
        return b if a is None else a
    key = lambda c: (busy_words(c) is not None, c.gpu_other_processes or 0,  # noqa: E731
                     (c.other_cpu_percent or 0.0) + (c.own_cpu_percent or 0.0))
    return a if key(a) >= key(b) else b


def timer(stmt: str, env: dict[str, Any], label: Optional[str] = None) -> tbench.Timer:
    # The process's own thread count: Timer's default of 1 thread is not what the user runs.
    # (Not one thread for a CPU clock: Dynamo guards on the thread count, and the call compiles again.)
    clock = _round_clock()
    return tbench.Timer(stmt, globals=env, label=label, num_threads=torch.get_num_threads(),
                        **({"timer": clock} if clock is not None else {}))


def _round_clock() -> Optional[Callable[[], float]]:
    return round_clock("cuda" if torch.cuda.is_available() else "cpu")


def _block(t: Any, per_call: float, block_s: float) -> float:
    """Mean seconds per call over about `block_s` of calls, run as short `timeit`s so that a block
    whose calls turn 100× slower midway (another process took a core) ends near `block_s` anyway."""
    step = max(1, int(SUB_BLOCK_S / per_call))
    # Timer.timeit warms up 2 calls before each piece (3× the work for a slow model's single
    # call); its inner `_timeit` times exactly `number` calls, with the same statement, timer
    # (synchronising CUDA) and globals. The thread count it would set is the process's own.
    raw = getattr(t, "_timeit", None)
    spent, calls = 0.0, 0
    started = time.perf_counter()
    while spent < block_s:
        spent += raw(step) if raw is not None else t.timeit(step).mean * step
        calls += step
        if time.perf_counter() - started > BLOCK_GUARD * block_s:
            break
    return spent / calls


def _first_per_call(timers: dict[str, Any], p: Paired) -> dict[str, float]:
    """Each side's seconds per call from one call (the caller warmed them up; each round renews it:
    `timeit(3)` was five calls a side with its warm-up, most of a first look's seconds on a loaded
    machine). An extra that fails is dropped, with why (`p.dropped`)."""
    per_call = {}
    for side, t in timers.items():
        if side in p.dropped:
            continue
        try:
            raw = getattr(t, "_timeit", None)
            per_call[side] = max(raw(1) if raw is not None else t.timeit(1).mean, 1e-7)
        except Exception as exc:  # noqa: BLE001 - an extra is optional (see the rounds)
            if side not in p.extra:
                raise
            p.dropped[side] = f"not measurable: {type(exc).__name__}: {str(exc).strip()[:160]}"
            del p.extra[side]
    return per_call


def paired_rounds(eager: tbench.Timer, compiled: tbench.Timer, *, budget_s: float,
                  on_round: Callable[[int, Paired], None] = lambda n, p: None,
                  min_rounds: int = MIN_ROUNDS, clock: Optional[Callable[[], float]] = None,
                  watch: Optional[Contention] = None, extra: Optional[dict[str, Any]] = None,
                  resume: Optional[Paired] = None, max_s: Optional[float] = None, keep_max: bool = False) -> Paired:
    """Rounds of (eager block, compiled block), until conclusive or `budget_s` is spent (at least
    `min_rounds`). Each block runs about `budget_s / (2 * TARGET_ROUNDS)` seconds. `extra` timers
    get a block of their own in each round, right beside the compiled one (`Paired.extra`).
    `resume`: the rounds of an earlier call on the same timers (the forward's first look), extended
    in place: the stop rules count all of them (each round is a pair: its ratio stands on its own,
    whatever the block length). `max_s`: where the rounds stop at the latest, minimum or not
    (default `OVERRUN` × `budget_s`): the budget's keeps its bound. `keep_max`: no round starts that would
    end past `max_s`, judged by the longest yet (the first look's `timing.per_workload.FIRST_LOOK_MAX_S`, a
    documented limit). A slow call or a busy machine then gets fewer than `min_rounds`, said by the figure.
    `clock`: what the budget and `max_s` are counted on; by default the rounds' own (wall time; a
    test's declared quiet: the thread's CPU time, so that a loaded test machine gets the rounds an
    idle one would, in more wall time)."""
    declared = _round_clock()  # a test's declared quiet: the thread's CPU clock
    cpu_clock = clock is None and declared is not None
    clock = clock or declared or time.perf_counter
    started = clock()
    timers = {"eager": eager, "compiled": compiled, **(extra or {})}
    # per-call estimates (after the caller's warm-up), renewed every round: under load a call
    # can take 100× longer, and a block sized from a quiet moment would then run for minutes
    p = resume if resume is not None else Paired(extra={name: [] for name in extra or {}})
    if watch is not None:  # our own compile workers and parent quiet before the first round
        settle(min(SETTLE_SHARE * budget_s, 5.0))
        if cpu_clock:  # it counts the rounds alone, not the settling's polls
            started = clock()
    per_call = _first_per_call(timers, p)
    block_s = min(MAX_BLOCK_S, max(MIN_BLOCK_S, budget_s / (2 * TARGET_ROUNDS)))
    forward_order = ["eager", "compiled", *(extra or {})]
    longest = 0.0  # the longest round so far: whether the next would end past `max_s` (`keep_max`)
    last_spent = clock() - started if keep_max else 0.0
    for r in range(len(p.eager), MAX_ROUNDS):
        order = forward_order if r % 2 == 0 else forward_order[::-1]
        got = {}
        if watch is not None:
            watch.start()
        for side in order:
            if side in p.dropped:
                continue
            if side in p.extra:  # an extra is optional: its failure drops it, the speedup goes on
                try:
                    got[side] = _block(timers[side], per_call[side], block_s)
                except Exception as exc:  # noqa: BLE001
                    p.dropped[side] = f"not measurable: {type(exc).__name__}: {str(exc).strip()[:160]}"
                    del p.extra[side]
                    continue
            else:
                got[side] = _block(timers[side], per_call[side], block_s)
            per_call[side] = max(got[side], 1e-7)
        p.eager.append(got["eager"])
        p.compiled.append(got["compiled"])
        for name in p.extra:
            p.extra[name].append(got[name])
        if watch is not None:  # a round the busy rule calls busy does not count
            p.quiet.append(watch.round_quiet())
        on_round(r + 1, p)
        spent = clock() - started
        if spent >= (OVERRUN * budget_s if max_s is None else max_s):
            break  # minimum rounds or not: the budget is a promise
        if keep_max and max_s is not None:  # the clock read no more often than without it (a test's ticks)
            longest, last_spent = max(longest, spent - last_spent), spent
            if spent + ROUND_SPREAD * longest > max_s:
                break  # a round like the longest yet would end past the limit: a limit is kept, not overrun
        if r + 1 >= min_rounds:
            if spent >= budget_s:
                break
            if settled(timing_of(p)):
                break  # a figure to stand behind, or an interval so narrow that more rounds add nothing
    return p
