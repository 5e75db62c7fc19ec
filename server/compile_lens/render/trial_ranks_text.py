"""A torchrun trial's ranks in words: the rank lines `compile-lens trial` prints after the run's own
figures (`trial_text`), and the sentences the report's HTML (`report_ranks`) reuses: the
DDPOptimizer split, a rank's run, where ranks part. Pure, no torch; the figures come from `trial/ranks.py`.
"""

from __future__ import annotations

from typing import Optional

from ..ranks import RankParting
from ..trial.figures import RankFigures, TrialFigures
from .units import MISSING_TEXT, MS, duration


def ddp_text(split: dict) -> str:
    return (f"DDPOptimizer split the compiled graph into {split['buckets']} graphs at DDP's bucket boundaries "
            f"(step {split['step']}; bucket cap {split['bucket_cap_bytes']} bytes): expected, so that each bucket's "
            "all-reduce overlaps the backward; not a graph break in your code")


def run_words(rank: RankFigures, run: str, missing: str = MISSING_TEXT) -> tuple[str, Optional[str]]:
    """A rank's `run` ("eager" | "compiled"): `12 steps, steady 8.1 ms/step` (with how a kill ended it),
    and its failure, None when it did not fail."""
    figures = rank.eager if run == "eager" else rank.compiled
    steady = figures.steady.wall_s.median if figures.steady else None
    text = f"{len(figures.steps)} steps, steady {duration(steady, MS, missing)}/step"
    if figures.failure:
        return text, f"failed at step {figures.failure.step}: {figures.failure.message}"
    killed = (rank.killed or {}).get(run)
    if killed:
        text += f", ended by {killed.get('signal')} at step {killed.get('step')}"
    return text, None


def divergence_words(parting: RankParting, with_guard: bool = True) -> str:
    """One rank parting in words, without its why and levers."""
    who = ", ".join(map(str, parting.ranks))
    others = ", ".join(map(str, parting.other_ranks))
    guard = f" (guard: {parting.guard})" if parting.guard and with_guard else ""
    return (f"from step {parting.step}, rank{'s' if len(parting.ranks) > 1 else ''} {who} ran compiled code "
            f"rank{'s' if len(parting.other_ranks) > 1 else ''} {others} did not: {parting.what}"
            f"{guard}; {parting.steps_apart} step(s) with compiles only they made")


def render_text(figures: TrialFigures) -> str:
    """The rank lines of the trial's text ("" for a one-process run)."""
    ranks = figures.ranks
    if not ranks:
        return ""
    lines = [f"  ranks: {len(ranks)} (torchrun); the run's step time above is, per step, the slowest rank's"]
    for r in ranks:
        parts = []
        for name in ("eager", "compiled"):
            text, failed = run_words(r, name)
            parts.append(f"{name} {text}" + (f", {failed}" if failed else ""))
        ratio = r.speedup
        ct = r.compile_time
        lines.append(f"    rank {r.rank}: {'; '.join(parts)}"
                     + (f"; speedup {ratio.ratio:.2f}x ({ratio.verdict})" if ratio else "")
                     + f"; recompiles {len(r.recompiles)}; graph breaks {len(r.graph_breaks)}"
                     + (f"; compile time {ct.total_s:.1f} s" if ct else ""))
        for split in r.ddp_splits:
            lines.append(f"      {ddp_text(split)}")
    for d in figures.rank_divergence:
        lines.append(f"  RANK DIVERGENCE (error): {divergence_words(d)}")
        lines.append(f"    why it matters: {d.why}")
        for lever in d.levers:
            lines.append(f"    lever: {lever}")
    return "\n".join(lines)
