"""The report's table of a trial per input-shape signature (`trial.shapes.by_shape`) and what it
shows (`trial.shapes.findings`). Pure; no torch."""

from __future__ import annotations

from ..trial.figures import TrialFigures
from .html_parts import _e, _x, code_spans
from .units import MS, duration


def shapes_part(figures: TrialFigures) -> str:
    """`<h3>` and table, or one line when the run saw one shape; "" when it saw none."""
    rows = figures.by_shape
    if len(rows) < 2:
        only = rows[0] if rows else None
        return (f"<h3>Input shapes</h3><p>One input shape in all {only.step_count} steps: "
                f"<code>{_e(only.signature)}</code>.</p>") if only else ""
    graphs = any(r.cudagraph_records is not None for r in rows)
    head = ("<tr><th>input shapes</th><th>steps</th><th>compiles</th><th>recompiles</th><th>compile time</th>"
            "<th>eager median</th><th>compiled median</th><th>speedup</th>"
            + ("<th>CUDA-graph records</th>" if graphs else "") + "</tr>")
    body = []
    for r in rows:
        if r.note:
            times = f'<td colspan="3" class="muted">{_e(r.note)}</td>'
        else:
            cls = {"faster": "good", "slower": "bad"}.get(r.verdict, "muted")
            times = (f"<td>{duration(r.eager_median_s, MS)}</td><td>{duration(r.compiled_median_s, MS)}</td>"
                     f'<td class="{cls}">{_x(r.speedup)} <span class="sub">({_e(r.verdict)})</span></td>')
        graph = (f"<td>{r.cudagraph_records or 0}"
                 + (f" <span class=\"sub\">({r.cudagraph_rerecords} re-records)</span>" if r.cudagraph_rerecords else "")
                 + "</td>") if graphs else ""
        body.append(f"<tr><td><code>{_e(r.signature)}</code></td><td>{r.step_count}</td><td>{r.compiles}</td>"
                    f"<td>{r.recompiles}</td><td>{duration(r.compile_s) if r.compiles else '–'}</td>{times}{graph}</tr>")
    out = [f"<h3>By input shape: {len(rows)} shapes</h3>",
           f'<div class="scroll"><table class="shapes">{head}{"".join(body)}</table></div>']
    for finding in figures.shape_findings:
        options = "".join(f"<li>{code_spans(o)}</li>" for o in finding.get("options") or [])
        out.append(f'<p class="warn">{code_spans(finding["text"])}</p>' + (f"<ul>{options}</ul>" if options else ""))
    return "".join(out)
