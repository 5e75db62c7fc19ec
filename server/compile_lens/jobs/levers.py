"""The levers phase run on its own, for targets whose earlier phases are known (from the cache, or
held by the editor): the worker is handed what it reads of them (the figures' guard share, the
sweep's recompiles), and the outcome is merged into those results. Shared by the engine (`engine/check.py`) and the LSP; `with_cached_levers`: a cached result with
the levers measured on the same code."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

from ..protocol import LEVERS, Known, TargetResult, phase_of, with_phase
from .analysis import analyze_file
from .cache import ResultCache, TargetKeys, read_levers


def known_of(result: TargetResult) -> Known:
    """What the levers phase reads of a result's earlier phases."""
    return Known(result.benchmark, list(result.recompiles))


async def levers_only(slot: Any, path: str, root: str, discovery: Any, settings: Any,
                      results: dict[str, TargetResult], names: set[str],
                      on_target: Optional[Callable[[TargetResult], None]],
                      on_progress: Optional[Callable[[str, Optional[str]], None]]) -> Any:
    """Run the levers phase alone for `names`, whose other phases are in `results`; merge its outcome in."""
    run = await analyze_file(slot, path, root, discovery, settings, trace=False, recompiles=False, benchmark=False,
                             levers=True, only=names, known={n: known_of(results[n]) for n in names},
                             on_progress=on_progress)
    for name, found in run.results.items():
        if name not in results:
            continue
        phase = phase_of(found, LEVERS)
        merged = dataclasses.replace(results[name], levers=found.levers)
        if phase is not None:
            merged = with_phase(merged, LEVERS, phase.status, phase.error)
        results[name] = merged
        if on_target:
            on_target(merged)
    return run


def with_cached_levers(cache: Optional[ResultCache], keys: Optional[TargetKeys],
                       hit: TargetResult) -> Optional[TargetResult]:
    """`hit` with its cached levers, or None when they are not cached."""
    if cache is None or keys is None:
        return None
    levers = read_levers(cache, keys)
    if levers is None:
        return None
    return with_phase(dataclasses.replace(hit, levers=levers), LEVERS, "done")
