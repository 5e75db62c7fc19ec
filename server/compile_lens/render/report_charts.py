"""The report's charts, drawn as inline SVG: forward latency vs batch size, and the compile-time
breakdown (cold, warm, compile stages). Pure; no torch."""

from __future__ import annotations

from typing import Any, Optional

from .html_parts import _e, _finite, nice_ticks, y_grid
from .units import FINE, duration

STAGES = [  # compile-time breakdown by torch's compile stage: key in report["compile_breakdown"], label, CSS class
    ("dynamo_s", "Dynamo (tracing)", "c1"),
    ("aot_autograd_s", "AOTAutograd", "c2"),
    ("inductor_s", "Inductor (lowering, scheduling)", "c3"),
    ("codegen_s", "Inductor code generation + C++/Triton compile", "c4"),
]


def _tick_label(value: float, unit: str) -> str:
    if unit == "ms":
        return duration(style=FINE, ms=value) if value else "0"
    return duration(value) if value else "0"


def latency_chart(sweep: dict[str, Any], *, title: str = "Forward latency vs batch size") -> str:
    """Eager and compiled median latency per batch size (IQR as whiskers): an inline <svg>."""
    points = [p for p in sweep.get("points", []) if _finite(p.get("eager_ms")) is not None
              and _finite(p.get("compiled_ms")) is not None]
    width, height = 560, 280
    left, right, top, bottom = 64, 16, 40, 44
    plot_w, plot_h = width - left - right, height - top - bottom
    if not points:
        return f'<svg class="chart" viewBox="0 0 {width} 60" role="img"><text x="8" y="30">no points measured</text></svg>'
    highest = max(max(p["eager_ms"] + p.get("eager_iqr_ms", 0) / 2, p["compiled_ms"] + p.get("compiled_iqr_ms", 0) / 2)
                  for p in points)
    ticks = nice_ticks(highest * 1.05)
    y_max = ticks[-1]

    def x_at(i: int) -> float:
        return left + (plot_w * (i + 0.5) / len(points))

    def y_at(ms: float) -> float:
        return top + plot_h * (1 - ms / y_max)

    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="{_e(title)}">',
             f'<text class="title" x="{left}" y="18">{_e(title)}</text>']
    parts += y_grid(ticks, y_at, left, width - right, lambda tick: _tick_label(tick, "ms"))
    example = sweep.get("example_batch")
    for i, p in enumerate(points):
        cls = "axis strong" if p["batch"] == example else "axis"
        parts.append(f'<text class="{cls}" x="{x_at(i):.1f}" y="{top + plot_h + 16}" text-anchor="middle">{p["batch"]}</text>')
    parts.append(f'<text class="axis" x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle">batch size'
                 + (" (bold: the example input)" if example in [p["batch"] for p in points] else "") + "</text>")
    for side, cls in (("eager", "s-eager"), ("compiled", "s-compiled")):
        coords = [(x_at(i), y_at(p[f"{side}_ms"])) for i, p in enumerate(points)]
        parts.append(f'<polyline class="line {cls}" points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in coords)}"/>')
        for (x, y), p in zip(coords, points):
            iqr = _finite(p.get(f"{side}_iqr_ms")) or 0.0
            if iqr > 0:
                lo, hi = y_at(max(0.0, p[f"{side}_ms"] - iqr / 2)), y_at(min(y_max, p[f"{side}_ms"] + iqr / 2))
                parts.append(f'<line class="whisker {cls}" x1="{x:.1f}" x2="{x:.1f}" y1="{lo:.1f}" y2="{hi:.1f}"/>')
            tip = f"batch {p['batch']}, {side}: {duration(style=FINE, ms=p[f'{side}_ms'])} (IQR {duration(style=FINE, ms=iqr)})"
            if side == "compiled" and _finite(p.get("speedup")) is not None:
                tip += f", {p['speedup']:.2f}× eager"
            parts.append(f'<circle class="dot {cls}" cx="{x:.1f}" cy="{y:.1f}" r="3.5"><title>{_e(tip)}</title></circle>')
    lx = width - right - 170
    parts.append(f'<rect class="swatch s-eager" x="{lx}" y="9" width="12" height="4"/>'
                 f'<text class="axis" x="{lx + 16}" y="15">eager</text>'
                 f'<rect class="swatch s-compiled" x="{lx + 70}" y="9" width="12" height="4"/>'
                 f'<text class="axis" x="{lx + 86}" y="15">compiled</text>')
    parts.append("</svg>")
    return "".join(parts)


def breakdown_chart(breakdown: Optional[dict[str, Any]], cold_s: Optional[float], warm_s: Optional[float],
                    *, title: str = "Where the compile time goes") -> str:
    """Horizontal bars: the in-worker compile split by stage, and the cold and warm compiles of the
    benchmark (fresh processes) as totals. An inline <svg>."""
    width = 560
    left, right, top = 150, 70, 40
    bar_h, gap = 22, 14
    rows: list[tuple[str, list[tuple[str, str, float]]]] = []
    if breakdown:
        segments = [(label, cls, _finite(breakdown.get(key)) or 0.0) for key, label, cls in STAGES]
        rows.append(("by stage, in the worker", segments))
    for label, value in (("cold (fresh process)", cold_s), ("warm caches", warm_s)):
        if _finite(value) is not None:
            rows.append((label, [(label, "c-total", float(value))]))  # type: ignore[arg-type]
    height = top + len(rows) * (bar_h + gap) + 44
    if not rows:
        return f'<svg class="chart" viewBox="0 0 {width} 60" role="img"><text x="8" y="30">no compile times measured</text></svg>'
    total_max = max(sum(v for _, _, v in segs) for _, segs in rows) or 1.0
    ticks = nice_ticks(total_max)
    x_max = ticks[-1]
    plot_w = width - left - right

    def x_at(seconds: float) -> float:
        return left + plot_w * seconds / x_max

    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="{_e(title)}">',
             f'<text class="title" x="8" y="18">{_e(title)}</text>']
    axis_y = top + len(rows) * (bar_h + gap)
    for tick in ticks:
        x = x_at(tick)
        parts.append(f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{top - 6}" y2="{axis_y - gap + 4}"/>')
        parts.append(f'<text class="axis" x="{x:.1f}" y="{axis_y + 8}" text-anchor="middle">{_e(_tick_label(tick, "s"))}</text>')
    for r, (label, segments) in enumerate(rows):
        y = top + r * (bar_h + gap)
        parts.append(f'<text class="axis" x="{left - 8}" y="{y + bar_h / 2 + 4:.1f}" text-anchor="end">{_e(label)}</text>')
        x = left
        for seg_label, cls, value in segments:
            w = plot_w * value / x_max
            if w > 0:
                parts.append(f'<rect class="bar {cls}" x="{x:.1f}" y="{y}" width="{max(w, 1.0):.1f}" height="{bar_h}">'
                             f'<title>{_e(seg_label)}: {_e(duration(value))}</title></rect>')
            x += w
        total = sum(v for _, _, v in segments)
        parts.append(f'<text class="axis" x="{x + 6:.1f}" y="{y + bar_h / 2 + 4:.1f}">{_e(duration(total))}</text>')
    if breakdown:
        lx, ly = 8, axis_y + 26
        for _key, label, cls in STAGES:
            short = label.split(" (")[0].replace("Inductor code generation + C++/Triton compile", "codegen + C++/Triton compile")
            parts.append(f'<rect class="bar {cls}" x="{lx}" y="{ly - 9}" width="10" height="10"/>'
                         f'<text class="axis" x="{lx + 14}" y="{ly}">{_e(short)}</text>')
            lx += 24 + 6.3 * len(short)
    parts.append("</svg>")
    return "".join(parts)
