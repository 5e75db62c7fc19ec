"""The report's part for a torchrun trial's ranks: each rank's figures, and where the ranks compiled
apart (`trial.ranks`; its sentences are `trial_ranks_text`'s). Pure; no torch. Empty for a
one-process trial.
"""

from __future__ import annotations

from ..trial.figures import RankFigures, TrialFigures
from .html_parts import _e, _Page, _x
from .trial_ranks_text import ddp_text, divergence_words, run_words


def _run_cell(rank: RankFigures, run: str) -> str:
    text, failed = run_words(rank, run, missing="–")
    return _e(text) + (f'<br><span class="bad">{_e(failed)}</span>' if failed else "")


def ranks_part(page: _Page, figures: TrialFigures) -> str:
    """Per-rank table and the rank divergence errors ("" when the trial ran one process)."""
    ranks = figures.ranks
    if not ranks:
        return ""
    rows = []
    for rank in ranks:
        ratio = rank.speedup
        ct = rank.compile_time.total_s if rank.compile_time else None
        rows.append(f"<tr><td>rank {_e(rank.rank)}</td><td>{_run_cell(rank, 'eager')}</td>"
                    f"<td>{_run_cell(rank, 'compiled')}</td>"
                    f'<td class="num">{_x(ratio.ratio) + " (" + _e(ratio.verdict) + ")" if ratio else "–"}</td>'
                    f'<td class="num">{len(rank.recompiles)}</td>'
                    f'<td class="num">{len(rank.graph_breaks)}</td>'
                    f'<td class="num">{"–" if ct is None else f"{ct:.1f} s"}</td></tr>')
    out = [f"<h3>Ranks: {len(ranks)} (torchrun)</h3>",
           '<p class="muted">The run\'s step time above is, per step, the slowest rank\'s (ranks wait for each other '
           "in the all-reduce); its steady median is taken over those.</p>",
           '<div class="scroll"><table class="trial"><tr><th></th><th>eager</th><th>compiled</th><th>speedup</th>'
           "<th>recompiles</th><th>graph breaks</th><th>compile time</th></tr>" + "".join(rows) + "</table></div>"]
    splits = [(rank.rank, split) for rank in ranks for split in rank.ddp_splits]
    if splits:
        out.append('<ul class="muted">' + "".join(f"<li>rank {_e(r)}: {_e(ddp_text(s))}</li>" for r, s in splits)
                   + "</ul>")
    for d in figures.rank_divergence:
        guard = f" The guard that failed: <code>{_e(d.guard)}</code>." if d.guard else ""
        what = divergence_words(d, with_guard=False)
        out.append(f'<p class="bad"><b>Rank divergence (error)</b> {_e(what)}.{guard} '
                   f"Why it matters: {_e(d.why)}.</p>")
        if d.levers:
            out.append("<ul>" + "".join(f"<li>{_e(lever)}</li>" for lever in d.levers) + "</ul>")
    return "".join(out)
