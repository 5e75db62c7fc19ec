"""What a timing says, in the words every surface uses (verdict, lens, hint, hover, CLI, report).

A 95% interval wholly above 1× on a quiet machine says *faster*, wholly below says *slower*
(`Timing.conclusive`: the direction is certain), whatever its width: "faster: 1.90–2.42× (median
2.10×)". Wider than MAX_CI_WIDTH of the speedup it is also "imprecise" — the direction stands, the
figure is loose. Only an interval that contains 1× (or a busy machine: `timing_of`) is
"inconclusive", and then no ratio is shown at all. Pure: no torch.
"""

from __future__ import annotations

import math
from typing import Any, Optional

from .measured import Timing

MAX_CI_WIDTH = 0.2  # an interval wider than this fraction of the speedup: imprecise


def _interval(t: Any) -> Optional[tuple[float, float]]:
    ci = getattr(t, "speedup_ci", None)
    if not ci or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in ci):
        return None
    return float(ci[0]), float(ci[1])


def rel_width(t: Any) -> Optional[float]:
    """`Timing.ci_rel_width`, or computed from the interval for a result stored before it existed."""
    width = getattr(t, "ci_rel_width", None)
    if width is not None:
        return float(width)
    ci = _interval(t)
    speedup = getattr(t, "speedup", float("nan"))
    if ci is None or not math.isfinite(speedup) or speedup <= 0:
        return None
    return (ci[1] - ci[0]) / speedup


def direction(t: Any) -> Optional[str]:
    """"faster" | "slower" when the timing is conclusive, else None."""
    if t is None or not getattr(t, "conclusive", False) or not math.isfinite(t.speedup):
        return None
    return "slower" if t.speedup < 1.0 else "faster"


def imprecise(t: Any) -> bool:
    width = rel_width(t)
    return width is not None and width > MAX_CI_WIDTH


def speed_words(t: Any) -> str:
    """`faster: 1.90–2.42× (median 2.10×)`, `… (median 2.10×, imprecise)`, `slower: 0.84–0.90×
    (median 0.87×)`, or `inconclusive`: never a bare noisy ratio."""
    way = direction(t)
    if way is None:
        return "inconclusive"
    ci = _interval(t)
    if ci is None:  # conclusive without an interval: not from paired rounds
        return f"{way}: {t.speedup:.2f}×"
    loose = ", imprecise" if imprecise(t) else ""
    return f"{way}: {ci[0]:.2f}–{ci[1]:.2f}× (median {t.speedup:.2f}×{loose})"


def short_speed(t: Any) -> str:
    """The inlay hint's few characters: `2.10× faster`, `2.10× faster (imprecise)`, `0.87× slower`."""
    way = direction(t)
    if way is None:
        return "inconclusive"
    return f"{t.speedup:.2f}× {way}" + (" (imprecise)" if imprecise(t) else "")


def pair_words(timing: Optional[Timing], label: str = "forward") -> str:
    """A lever's timing against its default (`Lever.forward`/`train_step`), in the same words:
    `forward 1.05× faster`, `forward 0.87× slower`, else `forward: no measurable change`, or
    `forward: inconclusive, machine busy` (`Timing.busy`) — no bare noisy ratio."""
    if timing is None:
        return f"{label} not timed"
    if direction(timing) is not None:
        return f"{label} {short_speed(timing)}"
    return f"{label}: inconclusive, machine busy" if timing.busy else f"{label}: no measurable change"


def idle_words(shares: dict[str, Any]) -> Optional[str]:
    """The CUDA-graphs lever's GPU idle share of the compiled call, default → lever (`Lever.gpu_idle_share`,
    the figure `forward.gpu_idle_share` gives): `GPU idle 64% → 8% of the call`; None where a side has none."""
    before, after = shares.get("before"), shares.get("after")
    if before is None or after is None:
        return None
    return f"GPU idle {before:.0%} → {after:.0%} of the call"
