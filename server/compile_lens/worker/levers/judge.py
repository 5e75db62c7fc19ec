"""A lever's figures to its verdict: "better", "worse", "no change" or "inconclusive", with the figure
that decided it.

Compile time is one fresh process per side (a cold compile cannot be repeated in one process), so
its noise is judged by two clocks: the wall time the user waits and the CPU time the compile used,
which load on a shared machine barely moves. A change counts when both say it (`CLEAR_DROP`), or
the wall time alone on an idle machine; a steady-state time counts when its interval says so."""

from __future__ import annotations

from typing import Any, Optional

from ...measured import Timing
from ...speed_words import pair_words

CLEAR_DROP = 0.8  # after/before at or below this: compiles faster; at or above 1/CLEAR_DROP: slower
SLOWER_OK = 0.9  # a lever whose forward is conclusively below this speedup costs more than it saves


def compile_change(before: dict[str, Any], after: dict[str, Any], busy: Optional[str]) -> Optional[float]:
    """after/before of the cold compile when the change is clear (or there is none: 1.0 band), None when
    the clocks disagree or the machine was busy and the CPU time cannot settle it."""
    wall = after["cold_s"] / before["cold_s"] if before.get("cold_s") else None
    cpu = (after.get("cold_cpu_s") or 0) / before["cold_cpu_s"] if before.get("cold_cpu_s") else None
    if wall is None:
        return None
    if cpu is None:
        return None if busy else wall
    if (wall <= CLEAR_DROP and cpu <= CLEAR_DROP) or (wall >= 1 / CLEAR_DROP and cpu >= 1 / CLEAR_DROP):
        return wall
    if not busy and CLEAR_DROP < wall < 1 / CLEAR_DROP:
        return wall
    return None


def forward_slower(timing: Optional[Timing]) -> bool:
    ci = timing.speedup_ci if timing is not None else None
    return bool(timing is not None and timing.conclusive and ci and ci[1] < SLOWER_OK)


def forward_faster(timing: Optional[Timing]) -> bool:
    ci = timing.speedup_ci if timing is not None else None
    return bool(timing is not None and timing.conclusive and ci and ci[0] > 1.0)


def ratio_words(forward: Optional[Timing]) -> str:
    return pair_words(forward, "forward")


def busy_unsure(timing: Optional[Timing]) -> Optional[str]:
    """Why a timing cannot tell, where the machine was busy (`Timing.busy`); None where it can, or was quiet."""
    return timing.busy if timing is not None and not timing.conclusive else None


def seconds_pair(compile_s: dict[str, Any]) -> str:
    """`10.2 s → 5.0 s`: a lever's before and after compile seconds as recorded (rounded once, to
    0.01 s), so its words and its card show the same tenth (the raw 10.2501 s would read 10.3 s)."""
    return f"{compile_s['before']:.1f} s → {compile_s['after']:.1f} s"


def figures_words(main: str, forward: Optional[Timing], train: Optional[Timing] = None) -> str:
    """A lever's figures in one phrase, for its `why` and its action's title alike: `cold compile 41.0 s
    → 7.0 s, forward 1.05× faster`, or with the timings that cannot tell in brackets: `cold compile
    41.0 s → 7.0 s (forward: no measurable change)`."""
    said = [pair_words(forward, "forward")] + ([pair_words(train, "train step")] if train else [])
    told = [w for w in said if ": " not in w]
    unsure = [w for w in said if ": " in w]
    text = ", ".join([main] + told if main else told)
    if unsure:
        text = f"{text} ({'; '.join(unsure)})" if text else "; ".join(unsure)
    return text
