"""Durations and sizes in words, for every renderer: one formatter, so a figure has one unit rule
and a missing one (None, or not finite) one mark. Each output keeps its own precision by naming a
style: a hover's "1.5 s / 12 ms" is not a trial's "12.8 ms", which must not read 13 ms beside 12.8."""

from __future__ import annotations

import math
from typing import Any, Optional

MISSING = "–"
MISSING_TEXT = "-"  # what the trial's terminal lines have always written for a missing time

# The styles, with what each writes for 1.5 s, 0.128 s, 0.0128 s and 0.00064 s:
SHORT = "short"  # 1.5 s · 128 ms · 13 ms · 1 ms (cards, the HTML report, the remote-cache words)
STEP = "step"  # 1.5 s · 128 ms · 12.8 ms · 640 µs: three figures (a trial's step times)
FINE = "fine"  # 1500 ms · 128 ms · 12.80 ms · 640 µs: milliseconds, µs below 1 ms (eager and compiled medians)
MS = "ms"  # 1500.0 ms · 128.0 ms · 12.8 ms · 0.6 ms (the per-rank and per-shape tables)
MS_UNDER_10S = "ms<10s"  # as MS, but 12.5 s from 10 s on (a trial's terminal lines)
SECONDS = "s"  # 1.5 s · 0.13 s · 0.01 s · 0.00 s: always seconds (the terminal's stage times)
STYLES = (SHORT, STEP, FINE, MS, MS_UNDER_10S, SECONDS)


def finite(x: Any) -> Optional[float]:
    """`x` as a float, or None when it is not a finite number."""
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def duration(seconds: Any = None, style: str = SHORT, missing: str = MISSING, *, ms: Any = None) -> str:
    """`seconds` (or `ms`, a figure kept in milliseconds) in words, in one of STYLES; `missing` for
    None or a figure that is not finite."""
    if ms is not None:
        seconds = None if finite(ms) is None else finite(ms) / 1000
    s = finite(seconds)
    if s is None:
        return missing
    ms = s * 1000
    if style == SHORT:
        return f"{s:.1f} s" if s >= 1 else f"{ms:.0f} ms"
    if style == STEP:
        if s >= 1:
            return f"{s:.1f} s"
        return f"{ms:.0f} ms" if ms >= 100 else f"{ms:.1f} ms" if ms >= 1 else f"{ms * 1000:.0f} µs"
    if style == FINE:
        if ms >= 100:
            return f"{ms:.0f} ms"
        if ms >= 1:
            return f"{ms:.2f} ms"
        us = round(ms * 1000, 9)  # the figure came in milliseconds: no float dust in "3 µs"
        return f"{us:.0f} µs" if us >= 100 or us == int(us) else f"{us:.1f} µs"
    if style == MS:
        return f"{ms:.1f} ms"
    if style == MS_UNDER_10S:
        return f"{ms:.1f} ms" if s < 10 else f"{s:.1f} s"
    if style == SECONDS:
        return f"{s:.1f} s" if s >= 1 else f"{s:.2f} s"
    raise ValueError(f"no duration style {style!r}: one of {', '.join(STYLES)}")


def format_bytes(n: Any) -> str:
    """Bytes in words: 512 B, 1.5 KB, 12.0 MB, 3.2 GB (1024 each); MISSING when not known."""
    n = finite(n)
    if n is None:
        return MISSING
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"
