"""The warm-remote compile in words: what a fresh machine served by the team's Redis cache pays."""

from __future__ import annotations

from typing import Any, Optional

from ..protocol import Benchmark


def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s >= 1 else f"{s * 1000:.0f} ms"


def hits_words(remote: Optional[dict[str, Any]]) -> str:
    """`fx_graph 3/3 hits, aot_autograd 2/2, autotune n/a`; '' when torch recorded nothing."""
    parts = []
    for cache, counts in (remote or {}).items():
        if isinstance(counts, dict):
            total = counts.get("hits", 0) + counts.get("misses", 0)
            parts.append(f"{cache} {counts.get('hits', 0)}/{total}" + (" hits" if not parts else ""))
        elif counts == "n/a":
            parts.append(f"{cache} n/a")
    return ", ".join(parts)


def warm_remote_words(b: Benchmark) -> Optional[str]:
    """`1.9 s from the remote cache (fx_graph 3/3 hits, …)`, None when no remote cache was measured."""
    s = b.compile_s.get("warm_remote")
    if s is None:
        return None
    hits = hits_words((b.warm_cache or {}).get("remote"))
    return f"{_seconds(s)} from the remote cache" + (f" ({hits})" if hits else "")
