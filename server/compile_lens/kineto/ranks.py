"""A profiler trace file, or a folder of them (what `tensorboard_trace_handler` writes: one
`*.pt.trace.json(.gz)` per rank and step), read into one `RankProfile` per file, in rank order.
The rank is the trace's own `distributedInfo.rank`, never guessed from a file name."""

from __future__ import annotations

import os
from typing import Any, Optional

from .fold import KINDS, fold
from .profile import RankProfile, summarise
from .stream import looks_like_kineto

SUFFIXES = (".json", ".json.gz")


def trace_files(path: str) -> list[str]:
    """The profiler traces at `path`: the file itself when it is one, else the folder's (sorted); [] when none."""
    if os.path.isfile(path):
        return [path] if looks_like_kineto(path) else []
    if not os.path.isdir(path):
        return []
    found = []
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if name.endswith(SUFFIXES) and os.path.isfile(full) and looks_like_kineto(full):
            found.append(full)
    return found


def read_profiles(path: str) -> list[RankProfile]:
    profiles = [summarise(fold(p)) for p in trace_files(path)]
    return sorted(profiles, key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.path))


def _round(x: Optional[float], digits: int = 4) -> Optional[float]:
    return round(x, digits) if x is not None else None


def profile_json(r: RankProfile, lines: Optional[list[dict[str, Any]]] = None) -> dict[str, Any]:
    """One rank as `compile-lens import --format json` gives it (`lines`: the kernels' GPU time on the
    workspace's lines, when the caller mapped the frames or the provenance onto it)."""
    return {
        "rank": r.rank, "file": r.path, "device": r.device, "clock": r.clock, "events": r.events, "kernels": r.kernels,
        "gpu_idle_share": _round(r.gpu_idle_share), "gpu_idle_note": r.idle_note,
        "busy_us": {k: round(r.busy_us[k], 1) for k in KINDS}, "span_us": round(r.span_us, 1),
        "scope": r.scope,
        "steps": [{"step": s.number, "host_us": round(s.host_us, 1), "busy_us": {k: round(s.busy_us[k], 1) for k in KINDS},
                   "span_us": round(s.span_us, 1), "gpu_idle_share": _round(s.gpu_idle_share), "kernels": s.kernels}
                  for s in r.steps],
        "launch_bound": r.launch_bound, "launch_bound_why": list(r.launch_why),
        "cudagraph_launches": r.cudagraph_launches, "cudagraph_kernels": r.cudagraph_kernels,
        "top_kernels": [{"name": k.name, "us": round(k.us, 1), "count": k.count, "share": _round(k.share),
                         "op": k.op, "lines": [{"path": fr.path, "line": fr.line, "function": fr.function,
                                                "us": round(us, 1)} for fr, us in k.frames]}
                        for k in r.top_kernels],
        "lines": lines if lines is not None else [],
        "with_stack": r.with_stack, "truncated": r.truncated,
    }
