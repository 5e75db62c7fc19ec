"""The report's section for `report --compare-with PYTHON`: the same table as the terminal's
(`torch_diff_text.row`), the breaks each torch adds or removes, and the verdict.

Pure: the dict of `torch_diff.compare` in, HTML out.
"""

from __future__ import annotations

from typing import Any

from .html_parts import _e
from .torch_diff_text import HEADER, row


def compare_section(diff: dict[str, Any]) -> str:
    base, other = diff["base"], diff["other"]
    out = ["<section><h2>The next torch: what changes (<code>--compare-with</code>)</h2>",
           f'<p class="meta">torch {_e(base["torch"])} (<code>{_e(base["python"])}</code>) → torch '
           f'{_e(other["torch"])} (<code>{_e(other["python"])}</code>)</p>',
           f"<p><strong>{_e(diff['verdict'])}</strong></p>"]
    head = "".join(f"<th>{_e(h)}</th>" for h in HEADER)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row(t)) + "</tr>" for t in diff["targets"])
    out.append(f'<div class="scroll"><table class="targets"><tr>{head}</tr>{body}</table></div>')
    moved = [(sign, b, t["name"]) for t in diff["targets"]
             for sign, key in (("+", "added"), ("−", "removed")) for b in t["graph_breaks"][key]]
    if moved:
        out.append("<ul>" + "".join(f"<li>{sign} {_e(b['path'])}:{b['line']} {_e(b['id'])}: {_e(b['type'])} "
                                    f"({_e(name)})</li>" for sign, b, name in moved) + "</ul>")
    out.append('<p class="muted">A speedup or guard cost counts as changed only when the two 95% intervals are '
               "apart; a cold compile (one run each) when it moved by more than 25% and neither side was taken while "
               "other processes used the machine. ? : inconclusive, or measured on a busy machine.</p>")
    return "".join(out) + "</section>"
