"""A torchrun trial's rank lines in words: what `compile-lens trial` prints after the run's own
figures (`trial_text`), and the DDPOptimizer sentence the report reuses. Pure, no torch; the figures
come from `trial/rank_figures.py`.
"""

from __future__ import annotations

from .units import MISSING_TEXT, MS, duration


def ddp_text(split: dict) -> str:
    return (f"DDPOptimizer split the compiled graph into {split['buckets']} graphs at DDP's bucket boundaries "
            f"(step {split['step']}; bucket cap {split['bucket_cap_bytes']} bytes): expected, so that each bucket's "
            "all-reduce overlaps the backward; not a graph break in your code")


def render_text(figures: dict) -> str:
    """The rank lines of the trial's text ("" for a one-process run)."""
    ranks = figures.get("ranks") or []
    if not ranks:
        return ""
    lines = [f"  ranks: {len(ranks)} (torchrun); the run's step time above is, per step, the slowest rank's"]
    for r in ranks:
        parts = []
        for name in ("eager", "compiled"):
            f = r[name]
            steady = (f.get("steady") or {}).get("wall_s")
            state = f"{len(f['steps'])} steps" + (f", steady {duration(steady['median'], MS, MISSING_TEXT)}/step" if steady else "")
            if f.get("failure"):
                state += f", failed at step {f['failure'].get('step')}: {f['failure'].get('message')}"
            elif (r.get("killed") or {}).get(name):
                state += f", killed at step {r['killed'][name].get('step')}"
            parts.append(f"{name} {state}")
        ratio = r.get("speedup")
        ct = r.get("compile_time") or {}
        lines.append(f"    rank {r['rank']}: {'; '.join(parts)}"
                     + (f"; speedup {ratio['ratio']:.2f}x ({ratio['verdict']})" if ratio else "")
                     + f"; recompiles {len(r['recompiles'])}; graph breaks {len(r['graph_breaks'])}"
                     + (f"; compile time {ct['total_s']:.1f} s" if ct else ""))
        for split in r.get("ddp_splits") or []:
            lines.append(f"      {ddp_text(split)}")
    for d in figures.get("rank_divergence") or []:
        who = ", ".join(map(str, d["ranks"]))
        others = ", ".join(map(str, d.get("other_ranks") or []))
        guard = f" (guard: {d['guard']})" if d.get("guard") else ""
        lines.append(f"  RANK DIVERGENCE (error): from step {d['step']}, rank{'s' if len(d['ranks']) > 1 else ''} "
                     f"{who} ran compiled code rank{'s' if len(d.get('other_ranks') or []) > 1 else ''} {others} "
                     f"did not: {d['what']}{guard}; {d['steps_apart']} step(s) with compiles only they made")
        lines.append(f"    why it matters: {d['why']}")
        for lever in d.get("levers") or []:
            lines.append(f"    lever: {lever}")
    return "\n".join(lines)
