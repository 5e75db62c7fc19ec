"""What guard evaluation costs per compiled call, in the steady state: the compiled forward timed
with its guards and with them skipped (`torch.compiler.set_stance(..., skip_guard_eval_unsafe=True)`),
as a third block in the speedup's own paired rounds (`timing.paired_rounds(extra=...)`).

Per round, guards = compiled − skipped; the figure is the median over the rounds with a 95%
bootstrap interval, "not measurable" when the interval contains 0 (the difference drowns in the
noise), and its share of the compiled call. Skipping is safe while timing: the inputs never change,
so the one cache entry is always the right one. Not in the trial: extra calls change a program's state.
"""

from __future__ import annotations

import inspect
import statistics
from typing import Any, Optional

import torch

from ..run.isolated import isolated
from .rounds import MIN_ROUNDS, Paired, bootstrap_ci

NO_GUARDS = "no_guards"  # the name of the extra block in `Paired.extra`
SAY_SHARE = 0.05  # the hover and report say the guard cost when it is more than this share of the call


def supported() -> Optional[str]:
    """None when this torch can skip guard evaluation, else why not (for the note)."""
    set_stance = getattr(getattr(torch, "compiler", None), "set_stance", None)
    if set_stance is None:
        return f"torch {torch.__version__} has no torch.compiler.set_stance"
    try:
        if "skip_guard_eval_unsafe" in inspect.signature(set_stance).parameters:
            return None
    except (TypeError, ValueError):
        pass
    return f"torch {torch.__version__}'s set_stance cannot skip guard evaluation"


NEEDS_COMPILE = "this call needs another compile with guards skipped"
PART = "guard cost"  # its name in `Benchmark.unmeasured`


class SkippingGuards:
    """A `torch.utils.benchmark.Timer` whose calls run with guard evaluation skipped: the stance is
    set around each piece of timed calls, never inside the timed loop."""

    def __init__(self, timer: Any):
        self._timer = timer

    def warmed(self, unmeasured: dict[str, str], part: str) -> Optional[SkippingGuards]:
        """Itself once the timed statement ran on exactly its timed inputs, first with guards (any
        compile it still needs happens now), then with them skipped; None when torch still wants
        to compile with guards skipped (a frame with no cache entry to run, e.g. one Dynamo gave
        up on after a break it could not resume from): the figure is then not measurable."""
        self._timer.timeit(1)
        try:
            self.timeit(1)
        except RuntimeError as exc:
            if "skip_guard_eval_unsafe" not in str(exc):
                raise
            unmeasured[part] = f"not measurable ({NEEDS_COMPILE})"
            return None
        return self

    def _stance(self) -> Any:
        return torch.compiler.set_stance("default", skip_guard_eval_unsafe=True)

    def _timeit(self, number: int) -> float:
        with self._stance():
            return self._timer._timeit(number)

    def timeit(self, number: int) -> Any:
        with self._stance():
            return self._timer.timeit(number)


def guard_block(timer: Any, unmeasured: dict[str, str]) -> Optional[dict[str, SkippingGuards]]:
    """The forward's third block for `timing.paired_rounds(extra=...)`, warmed on exactly the timed
    inputs; None on a torch that cannot skip guards (the benchmark notes it) or when not measurable
    (`unmeasured[PART]` says why)."""
    if supported() is not None:
        return None
    with isolated(PART, unmeasured):
        skipping = SkippingGuards(timer).warmed(unmeasured, PART)
        return {NO_GUARDS: skipping} if skipping is not None else None
    return None


def record_guard_cost(p: Paired, timing: Any, unmeasured: dict[str, str]) -> None:
    """The figures of `guard_cost` set on `timing`, or why not when the block failed midway."""
    for name, why in p.dropped.items():
        unmeasured.setdefault(PART if name == NO_GUARDS else name, why)
    if NO_GUARDS in p.extra:
        with isolated(PART, unmeasured):
            for k, v in guard_cost(p).items():
                setattr(timing, k, v)


def guard_cost(p: Paired) -> dict[str, Any]:
    """{guard_us_per_call, guard_us_ci, guard_share} of the rounds in `p` (guard_share None when
    the interval is not wholly above 0: not measurable). From the rounds the speedup used: the quiet ones
    when some were busy and enough were quiet (`timing.timing_of`)."""
    if p.quiet and any(q is False for q in p.quiet) and len(p.quiet_rounds().eager) >= MIN_ROUNDS:
        p = p.quiet_rounds()
    skipped = p.extra.get(NO_GUARDS) or []
    diffs = [(c - s) * 1e6 for c, s in zip(p.compiled, skipped)]
    if len(diffs) < 2:
        return {"guard_us_per_call": None, "guard_us_ci": None, "guard_share": None}
    median = statistics.median(diffs)
    lo, hi = bootstrap_ci(diffs)
    compiled_us = statistics.median(p.compiled) * 1e6
    # only an interval wholly above 0 is a cost: one wholly below (skipping guards made the call
    # slower) is the machine's noise, not a negative cost, and is no figure either
    measurable = lo > 0.0 and compiled_us > 0
    return {"guard_us_per_call": round(median, 2), "guard_us_ci": [round(lo, 2), round(hi, 2)],
            "guard_share": round(median / compiled_us, 4) if measurable else None}


def guard_words(us: Optional[float], ci: Optional[list[float]], share: Optional[float], compiled_ms: float) -> Optional[str]:
    """The hover's and report's line when guards are more than SAY_SHARE of the compiled call."""
    if us is None or share is None or share <= SAY_SHARE or not ci:
        return None
    return (f"guards: evaluating the guards costs {us:.1f} µs per call (95% interval {ci[0]:.1f}–{ci[1]:.1f}), "
            f"{100 * share:.0f}% of a compiled forward call ({compiled_ms:.3g} ms); fewer graph breaks and "
            "fewer recompiled variants mean fewer guards to check")
