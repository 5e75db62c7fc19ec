"""The warm-remote compile in words: what a fresh machine served by the team's Redis cache pays."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Union

from ..protocol import Benchmark
from ..torch_text.cache_keys import reason_words
from .units import duration

if TYPE_CHECKING:
    from ..trial.figures import ArtifactRun, RemoteRun


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
    s = b.compile_s.warm_remote
    if s is None:
        return None
    hits = hits_words((b.warm_cache or {}).get("remote"))
    return f"{duration(s)} from the remote cache" + (f" ({hits})" if hits else "")


def trial_miss_words(run: Optional[Union[ArtifactRun, RemoteRun]], what: str) -> Optional[str]:
    """Why the trial's `what` run ("cache artifact", "remote cache") missed FX-graph cache entries the
    compiled run had written (its `miss_reasons`), None when nothing differed or nothing was said."""
    found = run.miss_reasons if run else None
    if not found:
        return None
    return f"the {what} run compiled again the FX graphs the compiled run wrote{reason_words(found)} (compiled run → this run)"


def trial_remote_words(served: Optional[RemoteRun]) -> Optional[str]:
    """The trial's `--remote-cache` run in words (text and report), None when it was not asked for."""
    if not served:
        return None
    ct = served.compile_time
    if served.served and ct:
        hits = hits_words(served.remote)
        return (f"compile time served by the remote cache {served.url}, fresh process with an empty local cache: "
                f"{ct.total_s:.1f} s" + (f" ({hits})" if hits else ""))
    if ct and not served.note:
        return f"compile time with the remote cache {served.url}: {ct.total_s:.1f} s"
    return f"remote cache {served.url}: no served figure: {served.note or 'the run recorded no compile'}"
