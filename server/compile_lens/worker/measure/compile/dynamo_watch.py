"""Dynamo's view of a measurement, from torch's compilation metrics: compiles per stage (a recompile
while timing is never silent), guard latency, Inductor's cache hits; and forgetting what this
process compiled (the warm compile then reads the on-disk caches as a new process does)."""

from __future__ import annotations

import contextlib
from typing import Any, Optional

import torch

from ... import dynamo

_CACHE_FIELDS = {"hits": ("inductor_fx_local_cache_hit_count", "aotautograd_local_cache_hit_count"),
                 "misses": ("inductor_fx_local_cache_miss_count", "aotautograd_local_cache_miss_count")}


# the private-torch shims are defined once, in dynamo.py
_metrics, _clear_metrics, _frame_compiles = dynamo.metrics, dynamo.clear_metrics, dynamo.frame_compiles


# Per-compile local cache counters in compilation metrics (filled since pytorch#171743, 2026-01);
# older torch: the process-wide `counters["inductor"]["fxgraph_cache_hit"/"_miss"]` (Inductor only)


def cache_counts() -> Optional[dict[str, int]]:
    """Inductor's and AOTAutograd's on-disk cache hits and misses of the compiles in this process,
    or None when this torch does not record them."""
    counts = {"hits": 0, "misses": 0}
    recorded = False
    for entry in _metrics():
        for key, names in _CACHE_FIELDS.items():
            for name in names:
                value = getattr(entry, name, None)
                if isinstance(value, int):
                    counts[key] += value
                    recorded = True
    if recorded:
        return counts
    with contextlib.suppress(Exception):
        inductor = torch._dynamo.utils.counters["inductor"]
        if "fxgraph_cache_hit" in inductor or "fxgraph_cache_miss" in inductor:
            return {"hits": int(inductor["fxgraph_cache_hit"]), "misses": int(inductor["fxgraph_cache_miss"])}
    return None


def _short_reason(text: str) -> str:
    first = (text or "").strip().splitlines()[0] if (text or "").strip() else "unknown reason"
    return first if len(first) <= 160 else first[:157] + "..."


class DynamoWatch:
    """Counts compiles per stage so that a compile after the first calls is never timed silently."""

    def __init__(self) -> None:
        torch._dynamo.reset()
        _clear_metrics()
        self.seen = 0
        self.frames: set[str] = set()
        self.guard_us: dict[str, float] = {}  # frame id -> its newest entry's guard check time

    def new(self) -> list[Any]:
        entries = _metrics()
        fresh = entries[self.seen:] if len(entries) >= self.seen else entries
        self.seen = len(entries)
        frames = _frame_compiles(fresh)
        for e in frames:
            frame = str(getattr(e, "compile_id", "?")).split("/")[0]
            self.frames.add(frame)
            latency = getattr(e, "guard_latency_us", None)  # absent on an older torch: not recorded
            if isinstance(latency, (int, float)) and latency >= 0:
                self.guard_us[frame] = float(latency)
        return frames

    def expect(self) -> None:
        """The calls since the last mark were first calls: compiles there are expected."""
        self.new()

    def unexpected(self, where: list[str], what: str) -> None:
        for e in self.new():
            reason = getattr(e, "recompile_reason", None) or "a new frame was compiled"
            where.append(f"{what}: {_short_reason(reason)}")


def _clear_in_memory_caches() -> None:
    """Forget what this process compiled, keeping the on-disk caches: the next compile reads them
    as a new process would (Dynamo's code cache, Inductor's loaded modules and memoised lookups)."""
    torch._dynamo.reset()
    with contextlib.suppress(Exception):
        from torch._inductor.utils import clear_inductor_caches
        clear_inductor_caches()
    with contextlib.suppress(Exception):
        from torch._inductor.codecache import PyCodeCache
        PyCodeCache.cache_clear(purge=False)
