"""The levers phase run on its own, for targets whose earlier phases are known (from the cache, or
held by the editor): the worker is handed what it reads of them (the figures' guard share, the
sweep's recompiles), and the outcome is merged into those results. Shared by the CLI and the LSP."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

from ..protocol import LEVERS, Known, TargetResult, phase_of, with_phase
from .analysis import analyze_file


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
