"""The HTML report's small parts, shared by its sections (report_html, report_trial): escaping,
number formats, tick spacing, and how a location is written on the standalone page or the webview."""

from __future__ import annotations

import html
import math
from typing import Any, Callable, Optional

from .cli_output import display_path


def _e(text: Any) -> str:
    return html.escape("" if text is None else str(text), quote=True)


def code_spans(text: Any) -> str:
    """Escaped text with its `backticked` parts as <code> (the trial's sentences name code that way)."""
    parts = _e(text).split("`")
    if len(parts) % 2 == 0:  # an odd backtick: leave the text as it is
        return _e(text)
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _finite(x: Any) -> Optional[float]:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def _x(speedup: Optional[float]) -> str:
    return "–" if _finite(speedup) is None else f"{speedup:.2f}×"




def _sci(x: Optional[float]) -> str:
    x = _finite(x)
    return "–" if x is None else ("0" if x == 0 else f"{x:.1e}")


def _plural(n: int, one: str, many: Optional[str] = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-").lower() or "t"


class _Page:
    """What differs between the standalone page and the webview: how a location is written."""

    def __init__(self, cwd: str, for_webview: bool):
        self.cwd, self.for_webview = cwd, for_webview

    def loc(self, path: str, line: Optional[int], column: Optional[int] = None, label: Optional[str] = None) -> str:
        shown = display_path(path, self.cwd)
        text = label or (f"{shown}:{line}" + (f":{column}" if column and column > 1 else "") if line else shown)
        if not self.for_webview:
            return f'<code class="loc">{_e(text)}</code>'
        return (f'<a class="loc" href="#" data-path="{_e(path)}" data-line="{int(line or 1)}" '
                f'data-column="{int(column or 1)}" title="open {_e(shown)} at line {int(line or 1)}">{_e(text)}</a>')


def nice_ticks(top: float, count: int = 4) -> list[float]:
    """0 and round ticks, evenly spaced, up to at least `top`."""
    if not top > 0:
        return [0.0, 1.0]
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    spacing = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    ticks = [0.0]
    while ticks[-1] < top - 1e-12:
        ticks.append(round(ticks[-1] + spacing, 12))
    return ticks


def y_grid(ticks: list[float], y_at: Callable[[float], float], left: float, right: float,
           label: Callable[[float], str]) -> list[str]:
    """A chart's horizontal grid lines from `left` to `right`, each labelled at the left axis."""
    parts = []
    for tick in ticks:
        y = y_at(tick)
        parts.append(f'<line class="grid" x1="{left}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}"/>')
        parts.append(f'<text class="axis" x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_e(label(tick))}</text>')
    return parts
