"""The warm-remote compile: what a fresh machine served by the team's Redis cache pays.

After the cold compile (remote caches off), one fill compile with the remote cache on (torch has no
write-only mode: it reads first, then writes what it missed), then the measured compile: a fresh
process with an empty local cache folder, served by the remote cache alone. Both children count
in the measurement's time budget like the cold one.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional

from ....remote_cache import Remote
from ....torch_text.cache_keys import reason_words, reasons
from .cold import run_child
from .cold_job import ColdJob


@dataclass
class WarmRemote:
    compile_s: Optional[float] = None  # the served compile of the first workload, imports included
    counts: Optional[dict[str, Any]] = None  # remote_cache.remote_counts of the served compile
    notes: list[str] = field(default_factory=list)


def measure(child_job: ColdJob, *, cache_dir: str, remote: Remote, timeout: float,
            progress: Callable[..., None]) -> WarmRemote:
    """Fill `remote` from a fresh process, then time a fresh process with an empty local cache
    that only `remote` can serve. Each child gets its own empty folder under `cache_dir`."""
    first = child_job.workloads[0]
    progress(f"filling the remote cache {remote.url} (fresh process)…", limit_s=timeout)
    fill = run_child(replace(child_job, tasks=["compile"], what="the remote cache's fill compile"),
                     cache_dir=tempfile.mkdtemp(prefix="fill-", dir=cache_dir), timeout=timeout,
                     progress=progress, remote=remote)
    progress(f"compiling with the remote cache {remote.url} and an empty local cache (fresh process)…",
             limit_s=timeout)
    served = run_child(replace(child_job, tasks=["compile"], what="the warm-remote compile"),
                       cache_dir=tempfile.mkdtemp(prefix="served-", dir=cache_dir), timeout=timeout,
                       progress=progress, remote=remote)
    found = WarmRemote(served.compile_s.get(first), served.remote_cache)
    counts = [c for c in (found.counts or {}).values() if isinstance(c, dict)]
    hits, misses = sum(c.get("hits", 0) for c in counts), sum(c.get("misses", 0) for c in counts)
    why = reason_words(reasons(fill.fx_keys, served.fx_keys))
    if found.counts is not None and not hits:
        found.notes.append(f"remote cache: {remote.url} served no hits to a fresh process; its warm-remote "
                           "compile is a cold compile" + (why or " (is torch's `redis` client installed in this "
                                                                 "environment?)"))
    elif misses:
        found.notes.append(f"remote cache: the warm-remote compile missed {misses} time(s) ({hits} hits){why}")
    return found


def for_measurement(job: Any, cold: Any) -> Optional[WarmRemote]:
    """`benchmark`'s step (`job`, `cold`: its `_Job` and `_Cold`): a fresh machine served by the team's
    cache, two more fresh processes; None without a remote cache that answered."""
    if job.remote is None:
        return None
    job.stage("compiling with the remote cache (fresh processes)")
    t_remote = time.perf_counter()
    served = measure(cold.child_job, cache_dir=job.cache_dir, remote=job.remote, timeout=cold.limit,
                     progress=job.progress)
    job.add_stage("warm_remote_children", t_remote)
    job.notes.extend(served.notes)
    return served
