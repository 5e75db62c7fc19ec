"""The line costs as a part of the measurement (`benchmark`): each timed workload's time per line,
read from its own timed compile (`line_costs.after_timing`) while it is loaded — the forward's right
after its timing when a train step follows (`profile`: before that compile resets Dynamo), the last
one after the peak memory (`measure`) — each where the budget has room (`later_parts`; they compile nothing of their own).
`job`, `eager`, `colds` and `figures` are `benchmark`'s `_Job`, `_Eager`, `ColdChildren` and
`snapshot.Figures`."""

from __future__ import annotations

from typing import Any, Callable

from ..compile.cold import inductor_cache
from . import costs as line_costs


def profile(job: Any, eager: Any, compiled: Any, wl: str, cold: Any, figures: Any) -> None:
    """Workload `wl`'s time per line now, while its timed compile is loaded (`benchmark` calls it for
    the forward before the train step's compile resets Dynamo: no compile again to read it later)."""
    with inductor_cache(cold.cache_dir):
        line_costs.after_timing(job, eager, compiled, wl, figures.timings[wl], cold.limit, figures.graphs.get(wl))


def measure(job: Any, eager: Any, compiled: dict[str, Any], order: list[str], colds: Any,
            figures: Any, restore: Callable[[], None], publish: Callable[..., Any],
            profiled: tuple[str, ...] = ()) -> None:
    """Time per line of the last workload timed, its compile still loaded, unless `profiled` already
    (an earlier one was, before the next compile); then the part is sent. Run where the budget has room, as
    the peak memory is: a profile of each side, ≈ `LINES_PER_COLD` of the cold compiles."""
    order = [wl for wl in order if wl in figures.timings]
    if not order:
        return
    live = order[-1]
    if live not in profiled:
        profile(job, eager, compiled[live], live, colds.cold[live], figures)
        restore()
    notes = [figures.timings[wl].lines_note for wl in order if figures.timings[wl].lines_note]
    failed = next((n for n in notes if n.startswith("not measurable")), None)
    publish("lines", "failed" if failed else "done", failed.split(":", 1)[1].strip() if failed else None)
