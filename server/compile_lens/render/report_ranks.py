"""The report's part for a torchrun trial: each rank's figures, and where the ranks compiled apart
(`trial.rank_figures`; the DDPOptimizer sentence is `trial_ranks_text`'s). Pure; no torch. Empty for a
one-process trial.
"""

from __future__ import annotations

from typing import Any

from .html_parts import _e, _Page, _x
from .trial_ranks_text import ddp_text
from .units import MS, duration


def _run_cell(rank: dict[str, Any], run: str) -> str:
    figures = rank.get(run) or {}
    steady = ((figures.get("steady") or {}).get("wall_s") or {}).get("median")
    text = f"{len(figures.get('steps') or [])} steps, steady {duration(steady, MS)}"
    failure = figures.get("failure")
    if failure:
        return f'{_e(text)}<br><span class="bad">failed at step {_e(failure.get("step"))}: {_e(failure.get("message"))}</span>'
    killed = (rank.get("killed") or {}).get(run)
    if killed:
        text += f"; ended by {killed.get('signal')} at step {killed.get('step')}"
    return _e(text)


def ranks_part(page: _Page, figures: dict[str, Any]) -> str:
    """Per-rank table and the rank divergence errors ("" when the trial ran one process)."""
    ranks = figures.get("ranks") or []
    if not ranks:
        return ""
    rows = []
    for rank in ranks:
        ratio = rank.get("speedup")
        ct = (rank.get("compile_time") or {}).get("total_s")
        rows.append(f"<tr><td>rank {_e(rank['rank'])}</td><td>{_run_cell(rank, 'eager')}</td>"
                    f"<td>{_run_cell(rank, 'compiled')}</td>"
                    f'<td class="num">{_x(ratio["ratio"]) + " (" + _e(ratio["verdict"]) + ")" if ratio else "–"}</td>'
                    f'<td class="num">{len(rank.get("recompiles") or [])}</td>'
                    f'<td class="num">{len(rank.get("graph_breaks") or [])}</td>'
                    f'<td class="num">{"–" if ct is None else f"{ct:.1f} s"}</td></tr>')
    out = [f"<h3>Ranks: {len(ranks)} (torchrun)</h3>",
           '<p class="muted">The run\'s step time above is, per step, the slowest rank\'s (ranks wait for each other '
           "in the all-reduce); its steady median is taken over those.</p>",
           '<div class="scroll"><table class="trial"><tr><th></th><th>eager</th><th>compiled</th><th>speedup</th>'
           "<th>recompiles</th><th>graph breaks</th><th>compile time</th></tr>" + "".join(rows) + "</table></div>"]
    splits = [(rank["rank"], split) for rank in ranks for split in rank.get("ddp_splits") or []]
    if splits:
        out.append('<ul class="muted">' + "".join(f"<li>rank {_e(r)}: {_e(ddp_text(s))}</li>" for r, s in splits)
                   + "</ul>")
    for d in figures.get("rank_divergence") or []:
        guard = f" The guard that failed: <code>{_e(d['guard'])}</code>." if d.get("guard") else ""
        out.append(f'<p class="bad"><b>Rank divergence (error) from step {_e(d["step"])}</b>: rank(s) '
                   f"{_e(', '.join(map(str, d['ranks'])))} ran compiled code rank(s) "
                   f"{_e(', '.join(map(str, d.get('other_ranks') or [])))} did not: {_e(d['what'])} "
                   f"({_e(d['steps_apart'])} step(s) with compiles only they made).{guard} "
                   f"Why it matters: {_e(d.get('why'))}.</p>")
        if d.get("levers"):
            out.append("<ul>" + "".join(f"<li>{_e(lever)}</li>" for lever in d["levers"]) + "</ul>")
    return "".join(out)
