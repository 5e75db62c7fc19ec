"""From figures to words: the verdict, break-even, why a timing is inconclusive, the notes torch's
metrics are worth, and pooled medians of unpaired times (the report's batch sweep)."""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

import torch.utils.benchmark as tbench

from ....busy.rule import busy_words
from ....protocol import ContentionReport, Timing
from ....speed_words import speed_words
from .guard_cost import SAY_SHARE, guard_words
from .rounds import MAX_CI_WIDTH, timer

MIN_ROUND_S, MAX_ROUND_S = 0.05, 2.0  # min_run_time of one round, whatever the budget says
SPEEDUP_REAL = 1.1  # below this (or inside the spread) a speedup is not worth a compile
PAYBACK_REALISTIC = 10_000  # calls: more than this and compiling rarely pays back in one run
FEW_BREAKS = 2
NOISY_IQR = 0.5  # an IQR above this fraction of the median gets a note
GUARD_SHARE = SAY_SHARE  # guard evaluation above this share of the compiled forward is worth saying


def quantile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation, as numpy and torch.quantile do."""
    if not sorted_values:
        return float("nan")
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


class Stats:
    """Per-call times (seconds) of one variant, merged over rounds."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def add(self, m: tbench.Measurement) -> None:
        self.times.extend(m.times)

    @property
    def ms(self) -> tuple[float, float, float]:
        s = sorted(self.times)
        return quantile(s, 0.25) * 1e3, quantile(s, 0.5) * 1e3, quantile(s, 0.75) * 1e3


def _timer(fn: Callable[[], Any], label: str) -> tbench.Timer:
    return timer("fn()", {"fn": fn}, label)


def _timing(eager: Stats, compiled: Stats) -> Timing:
    """Pooled medians of two unpaired sets of times (the report's batch sweep)."""
    e25, e50, e75 = eager.ms
    c25, c50, c75 = compiled.ms
    return Timing(eager_ms=e50, compiled_ms=c50, speedup=e50 / c50 if c50 > 0 else float("nan"),
                  eager_iqr_ms=max(0.0, e75 - e25), compiled_iqr_ms=max(0.0, c75 - c25))


def _is_real(t: Timing) -> bool:
    """Conclusively faster, by at least SPEEDUP_REAL at the low end of the interval (an imprecise
    interval counts: its low end is what can be stood behind)."""
    if t.speedup_ci:
        return t.conclusive and t.speedup_ci[0] >= SPEEDUP_REAL
    return (t.speedup >= SPEEDUP_REAL
            and t.compiled_ms + t.compiled_iqr_ms / 2 < t.eager_ms - t.eager_iqr_ms / 2)


def _metric_notes(forward: Timing, cache: Optional[dict[str, Any]], miss_why: str = "") -> list[str]:
    """What the guard timing and torch's compilation metrics say that matters here: only then is it
    a note. Guards: the steady-state cost per call measured in the paired rounds (`guard_cost`)."""
    notes = []
    said = guard_words(forward.guard_us_per_call, forward.guard_us_ci, forward.guard_share, forward.compiled_ms)
    if said:
        notes.append(said)
    if cache and cache.get("misses"):
        notes.append(f"warm compile: Inductor's caches missed {cache['misses']} time(s) ({cache.get('hits', 0)} hits): "
                     "the warm compile time includes compiling again" + miss_why)
    return notes


def break_even(compile_s: Optional[float], t: Timing) -> Optional[int]:
    """Calls after which the compile time is paid back; None when compiled is not (conclusively) faster."""
    saved_s = (t.eager_ms - t.compiled_ms) / 1000.0
    if compile_s is None or not saved_s > 0 or (_timed_in_rounds(t) and not t.conclusive):
        return None
    return max(1, math.ceil(compile_s / saved_s))


def _timed_in_rounds(t: Timing) -> bool:
    """Measured in paired rounds: an interval, or a single round (no interval to judge it by)."""
    return t.speedup_ci is not None or t.rounds == 1


def inconclusive_why(t: Timing, contention: Optional[ContentionReport]) -> str:
    """Why a timing has no direction: the machine was busy (on average, or in most rounds), one
    round only, no difference to measure, or rounds that disagree both ways (an interval that
    contains 1×, and wide)."""
    busy = busy_words(contention)
    if busy:
        return f"{busy} — re-measure when idle"
    if t.speedup_ci is None and t.rounds == 1:  # a big model: the compile took the budget
        return "one timing round fitted in the budget after the compile — raise compileLens.benchmark.maxSeconds"
    if t.speedup_ci and not t.speedup_ci[0] <= 1.0 <= t.speedup_ci[1]:
        # `timing_of`: too few rounds had our cores to themselves, though the run's average load
        # stayed under the busy line; the interval (of all rounds) is not an idle machine's
        if contention is not None and contention.rule == "cuda":  # the CUDA rule: the GPU, or our launching thread's core
            return ("machine busy: other processes used the GPU or kept our launching thread off a core in most "
                    "timing rounds (too few quiet ones) — re-measure when idle")
        return ("machine busy: other processes took our cores in most timing rounds (too few quiet ones)"
                " — re-measure when idle")
    if t.speedup_ci and t.speedup_ci[0] <= 1.0 <= t.speedup_ci[1] and (
            t.speedup_ci[1] - t.speedup_ci[0]) <= MAX_CI_WIDTH * max(t.speedup, 1e-9):
        return "no measurable difference (the 95% interval contains 1×)"
    # no numbers here: this text heads the lens and hint, where a noisy bound would read as a figure
    # (the hover's table shows the interval beside it)
    return (f"the rounds disagreed too much (the 95% interval contains 1× and is wider than {MAX_CI_WIDTH:.0%} "
            "of the speedup) — re-measure when idle")


def verdict(device: str, forward: Timing, train: Optional[Timing], cold_s: Optional[float],
            calls: Optional[int], breaks: int, accuracy_ok: Optional[bool],
            contention: Optional[ContentionReport] = None) -> str:
    t, what = (train, "train step") if train is not None else (forward, "forward")
    extras = []
    if breaks > FEW_BREAKS:
        extras.append(f"{breaks} graph breaks")
    elif breaks:
        extras.append(f"{breaks} graph break{'s' if breaks > 1 else ''}")
    if accuracy_ok is False:
        extras.append("outputs differ beyond tolerance — check accuracy first")
    elif accuracy_ok is None:  # the first look, sent before the outputs were compared
        extras.append("accuracy not checked yet")
    tail = ("; " + "; ".join(extras)) if extras else ""
    if _timed_in_rounds(t) and not t.conclusive:
        return f"inconclusive ({what} on {device}): {inconclusive_why(t, contention)}{tail}"
    # a timing from paired rounds says its direction and interval (`speed_words`); an older one its ratio
    said = speed_words(t) if _timed_in_rounds(t) else f"{t.speedup:.2f}×"
    if t.speedup < 1.0:
        if t.speedup_ci:
            return f"not worth it: {what} {said} on {device}{tail}"
        return f"not worth it: compiled is {t.speedup:.2f}× (slower) on {device} ({what}){tail}"
    if not _is_real(t):
        if t.conclusive and t.speedup_ci:  # faster for certain, but not by SPEEDUP_REAL at the low end
            return (f"little gain: {what} {said} on {device}, under {SPEEDUP_REAL:.1f}× at the low end of the "
                    f"interval{tail}")
        return f"no clear gain: {t.speedup:.2f}× {what} on {device} is within the timing spread{tail}"
    cold = f", compile {cold_s:.1f} s" if cold_s is not None else ""
    if calls is not None and calls > PAYBACK_REALISTIC:
        return (f"only for long runs: {what} {said} on {device}{cold}, "
                f"pays back after {calls:,} calls{tail}")
    if breaks > FEW_BREAKS or accuracy_ok is not True:
        return f"faster but check first: {what} {said} on {device}{cold}{tail}"
    payback = f", pays back after {calls:,} calls" if calls is not None else ""
    return f"worth it: {what} {said} on {device}{cold}{payback}{tail}"
