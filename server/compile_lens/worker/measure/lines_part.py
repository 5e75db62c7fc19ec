"""The line costs as a part of the measurement (`benchmark`): each timed workload's time per line,
read from its own timed compile (`line_costs.after_timing`) while it is loaded — the forward's right
after its timing (`profile`: before the train step's compile resets Dynamo), the last one after the
peak memory; an earlier one not read then is compiled again from the disk cache so its provenance
comes with it — whatever the budget (they compile nothing of their own). `job`, `eager`, `colds` and
`figures` are `benchmark`'s `_Job`, `_Eager`, `ColdChildren` and `snapshot.Figures`."""

from __future__ import annotations

from typing import Any, Callable

from . import line_costs, provenance
from .cold_compile import inductor_cache
from .dynamo_watch import _clear_in_memory_caches


def profile(job: Any, eager: Any, compiled: Any, wl: str, cold: Any, figures: Any) -> None:
    """Workload `wl`'s time per line now, while its timed compile is loaded (`benchmark` calls it for
    the forward before the train step's compile resets Dynamo: no compile again to read it later)."""
    with inductor_cache(cold.cache_dir):
        line_costs.after_timing(job, eager, compiled, wl, figures.timings[wl], cold.limit, figures.graphs.get(wl))


def measure(job: Any, eager: Any, compiled: dict[str, Any], order: list[str], colds: Any,
            figures: Any, restore: Callable[[], None], publish: Callable[..., Any],
            profiled: tuple[str, ...] = ()) -> None:
    """Time per line of each workload timed (those not `profiled` already). Run whatever the budget,
    as the peak memory is: they compile nothing of their own (a profile of each side, and an earlier
    workload's warm compile again), ≈ `LINES_PER_COLD` of the cold compiles."""
    order = [wl for wl in order if wl in figures.timings]
    if not order:
        return
    live = order[-1]  # the last compiled: its graphs are still loaded; an earlier one compiles again
    for wl in [w for w in [live] + [w for w in order if w != live] if w not in profiled]:
        with inductor_cache(colds.cold[wl].cache_dir):
            graphs = figures.graphs.get(wl)
            if wl != live and graphs is not None:  # from the disk cache, its provenance replayed with it
                _clear_in_memory_caches()
                provenance.take()
                compiled[wl].run(wl)()
                graphs = provenance.take()
            # time per line, from the timed compile
            line_costs.after_timing(job, eager, compiled[wl], wl, figures.timings[wl], colds.cold[wl].limit, graphs)
        restore()
    notes = [figures.timings[wl].lines_note for wl in order if figures.timings[wl].lines_note]
    failed = next((n for n in notes if n.startswith("not measurable")), None)
    publish("lines", "failed" if failed else "done", failed.split(":", 1)[1].strip() if failed else None)
