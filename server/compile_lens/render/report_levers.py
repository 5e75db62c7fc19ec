"""The compile report's levers: one table per target whose levers phase ran (`check --levers`, the
editor's "Try levers"), a row per lever tried (`levers_text.table_rows`). Pure HTML."""

from __future__ import annotations

from typing import Any, Optional

from ..cost import CostInputs, restart_lines
from ..protocol import LEVERS, FileReport, phase_of
from .html_parts import _e
from .levers_text import TABLE_HEADER, table_rows


def levers_section(page: Any, reports: list[FileReport], bill: Optional[CostInputs] = None) -> str:
    """`bill`: the GPU bill's inputs, which price a restart at the fastest path the `aot_artifact` lever measured."""
    parts = []
    for r in reports:
        for t in sorted(r.targets, key=lambda t: t.line):
            if phase_of(t, LEVERS) is None:
                continue
            head = f"<h3>{_e(t.name)} · {page.loc(r.path, t.line)}</h3>"
            if not t.levers:
                parts.append(head + '<p class="muted">No lever applies to this target.</p>')
                continue
            rows = "".join("<tr>" + "".join(f"<td>{_e(cell)}</td>" for cell in row) + "</tr>" for row in table_rows(t))
            restarts = [line for lever in t.levers if lever.data.get("paths")
                        for line in restart_lines(lever.data["paths"], bill or CostInputs())]
            parts.append(head + '<div class="scroll"><table><tr>' + "".join(f"<th>{_e(h)}</th>" for h in TABLE_HEADER)
                         + "</tr>" + rows + "</table></div>" + "".join(f"<p>{_e(line)}</p>" for line in restarts))
    if not parts:
        return ""
    return ("<section><h2>Levers</h2><p class=\"muted\">Each lever against the default torch.compile: compiles in "
            "fresh processes with empty caches, the forward in paired rounds (lever/default: above 1× the lever is "
            "faster).</p>" + "".join(parts) + "</section>")
