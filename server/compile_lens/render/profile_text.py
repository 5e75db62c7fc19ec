"""An imported profile in words, for someone facing a 4,000-kernel trace: per rank, first what
decides (the GPU idle share and whether launches set the pace, with why), then where the GPU time
went (busy by kind, the few costliest kernels with the op that launched them) and, where the
profile reaches the workspace, the lines; the steps only when they disagree with each other."""

from __future__ import annotations

import os
from typing import Any

from ..kineto.fold import KINDS
from .units import FINE, SHORT, duration

KERNELS_SHOWN = 5
LINES_SHOWN = 8
STEP_SPREAD = 0.10  # steps whose idle shares differ by more than this are listed one by one


def _us(us: float) -> str:
    return duration(ms=us / 1000, style=FINE)


def _short(name: str, width: int = 72) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def rank_text(r: dict[str, Any], display: Any) -> list[str]:
    name = os.path.basename(r["file"])
    who = f"rank {r['rank']}: {r['device'] or 'no GPU named'}, {name}" if r["rank"] is not None else f"{name}: {r['device'] or 'no GPU named'}"
    out = [who]
    if r["gpu_idle_share"] is None:
        out.append(f"  {r['gpu_idle_note'] or 'no GPU idle share'}")
        if not r["kernels"]:
            return out + _lines(r, display)
    else:
        bound = ("launch-bound" if r["launch_bound"] else "not launch-bound")
        out.append(f"  GPU idle {r['gpu_idle_share']:.0%} of {duration(ms=r['span_us'] / 1000, style=SHORT)}: {bound} — "
                   + "; ".join(r["launch_bound_why"]))
        if r["gpu_idle_note"]:
            out.append(f"  note: {r['gpu_idle_note']}")
    busy = r["busy_us"]
    out.append(f"  busy {_us(sum(busy.values()))}: " + ", ".join(f"{k} {_us(busy[k])}" for k in KINDS if busy[k])
               + f" · {r['kernels']} kernels, copies and sets" + (f" · {r['scope']}" if r["scope"] else ""))
    if r["cudagraph_launches"] and r["gpu_idle_share"] is not None:
        out.append(f"  CUDA graphs: {r['cudagraph_launches']} launches, {r['cudagraph_kernels']} of their kernels recorded")
    for k in r["top_kernels"][:KERNELS_SHOWN]:
        line = f"    {k['share']:>4.0%} {_us(k['us']):>9} ×{k['count']:<5} {_short(k['name'])}"
        out.append(line + (f"  ← {k['op']}" if k["op"] else ""))
    shares = [s["gpu_idle_share"] for s in r["steps"] if s["gpu_idle_share"] is not None]
    if shares and max(shares) - min(shares) > STEP_SPREAD:
        out.append("  steps: " + ", ".join(f"#{s['step']} idle {s['gpu_idle_share']:.0%}" for s in r["steps"]
                                           if s["gpu_idle_share"] is not None))
    elif shares:
        out.append(f"  {len(r['steps'])} steps, idle {min(shares):.0%}–{max(shares):.0%} each")
    return out + _lines(r, display)


def _lines(r: dict[str, Any], display: Any) -> list[str]:
    out = []
    for e in r["lines"][:LINES_SHOWN]:
        where = f" (in {e['function']})" if e["from"] == "stack" else ""
        out.append(f"  {display(e['path'])}:{e['line']}: {e['clock'].upper()} {_us(e['us'])} ({e['share']:.0%}){where}: "
                   + ", ".join(_short(k, 48) for k in e["kernels"][:3]))
    if len(r["lines"]) > LINES_SHOWN:
        out.append(f"  … {len(r['lines']) - LINES_SHOWN} more lines (--format json lists them all)")
    return out


def profiles_text(doc: dict[str, Any], display: Any) -> str:
    ranks = doc["ranks"]
    lines = [f"Imported profile: {len(ranks)} trace{'s' if len(ranks) != 1 else ''}"
             + (f", kernels put on lines by the provenance in {doc['provenance']}" if doc["provenance"] else "")]
    for r in ranks:
        lines += rank_text(r, display)
    lines += [f"note: {n}" for n in doc["notes"]]
    return "\n".join(lines) + "\n"
