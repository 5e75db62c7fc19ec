"""The trial's per-shape view as text (`compile-lens trial`'s summary on stderr): a table of
`trial.shapes.by_shape`, one line a shape, and its findings with their options. Pure; no torch."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..trial.figures import ShapeRow, TrialFigures


def shape_lines(summary: TrialFigures) -> list[str]:
    """The per-shape table (`shapes.by_shape`) and what it shows, when the run saw more than one shape."""
    rows = summary.by_shape
    if len(rows) < 2:
        return [f"  input shapes: one, {rows[0].signature}, in all {rows[0].step_count} steps"] if rows else []
    lines = shape_table(rows)
    for finding in summary.shape_findings:
        lines.append(f"  ! {finding['text']}")
        lines += [f"      option: {o}" for o in finding.get("options") or []]
    return lines


def shape_table(rows: list[ShapeRow]) -> list[str]:
    """The text table of `shapes.by_shape`, one line per shape."""
    if not rows:
        return []
    graphs = any(r.cudagraph_records is not None for r in rows)
    lines = ["  by input shape (steps, compiles, recompiles, eager / compiled steady median, speedup"
             + (", CUDA-graph records" if graphs else "") + "):"]
    for r in rows:
        if r.note:
            times = r.note
        else:
            times = (f"{r.eager_median_s * 1000:.1f} / {r.compiled_median_s * 1000:.1f} ms, "
                     f"{r.speedup:.2f}x ({r.verdict})")
        graph = f", {r.cudagraph_records or 0} records" if graphs else ""
        lines.append(f"    {r.signature}: {_n(r.step_count, 'step')}, {_n(r.compiles, 'compile')}, "
                     f"{_n(r.recompiles, 'recompile')}; {times}{graph}")
    return lines


def _n(count: int, what: str) -> str:
    return f"{count} {what}{'' if count == 1 else 's'}"
