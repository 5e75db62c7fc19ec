"""The measurement's parts after its workloads (`benchmark`): peak memory, the line costs, where an
accuracy difference starts (drift), the warm-remote compile — each started only where it fits the
budget and stopped at its stop point (`budget.run_part`; no budget: each runs), each sent as it lands.
And, when the forward's warm compile itself had no room, every later part named not run (`cut_short`).
`job`, `eager`, `colds`, `figures` are `benchmark`'s `_Job`, `_Eager`, `ColdChildren`, `snapshot.Figures`."""

from __future__ import annotations

import time
from typing import Any, Callable

from ..accuracy import drift
from ..compile.warm_remote import for_measurement
from ..lines import part as lines_part
from ..memory import peak as memory
from .budget import part_status, run_part
from .estimates import later_s
from .isolated import isolated


def bound(job: Any, *parts: str) -> Any:
    """The budget a part runs within (`budget.Budget`): none where it was asked for (`opt_in`), as its needs are."""
    return None if any(part in job.opt_in for part in parts) else job.budget


def cost(colds: Any, part: str) -> float:
    """What a later part should take, from the forward's cold compile (`estimates.later_s`)."""
    cold = colds.cold["forward"]
    return later_s(part, cold.compile_s or 0.0, cold.import_s)


def after_workloads(job: Any, eager: Any, compiled: dict[str, Any], compiled_obj: Any, order: list[str],
                    colds: Any, figures: Any, restore: Callable[[], None], publish: Callable[..., Any],
                    profiled: tuple[str, ...]) -> None:
    driver = "train" if "train" in figures.timings else "forward"
    figures.memory["method"] = memory.method(job.device, driver)

    def peaks() -> None:  # the allocator peak of the break-even workload: the last one timed, its graphs cached
        job.stage("measuring the peak memory", f"measuring the peak memory of the {_label(driver)}…",
                  limit_s=colds.cold[driver].limit)
        memory.record_peaks(figures.memory, {"eager": (eager.model.run(driver), eager.model.zero_grad),
                                             "compiled": (compiled[driver].run(driver), compiled[driver].zero_grad)},
                            job.device, figures.unmeasured)

    t_mem = time.perf_counter()
    stopped = run_part(bound(job, "memory"), cost(colds, "memory"), peaks)
    eager.model.zero_grad()
    restore()
    job.add_stage("memory", t_mem)
    if stopped is not None:  # one side's peak alone is no figure
        figures.memory["eager"] = figures.memory["compiled"] = None
        figures.unmeasured["peak memory"] = stopped
        publish("memory", *part_status(stopped))
    else:
        mem_why = figures.unmeasured.get("peak memory")
        publish("memory", "failed" if mem_why else "done", mem_why)
    _lines(job, eager, compiled, order, colds, figures, restore, publish, profiled)
    if figures.errors["exceeds"] and eager.is_module:  # where the difference starts: one more compile
        with isolated("accuracy drift", figures.unmeasured):
            stopped = run_part(job.budget, cost(colds, "drift"), lambda: setattr(
                figures, "drift", drift.after_accuracy(job, eager, compiled_obj, colds.cold[driver].limit)))
        if stopped is not None:
            figures.drift = None
            figures.unmeasured["accuracy drift"] = stopped
    if job.remote is not None:
        with isolated("warm-remote compile", figures.unmeasured):
            stopped = run_part(bound(job, "warm_remote"), cost(colds, "warm_remote"),
                               lambda: setattr(figures, "served", for_measurement(job, colds.cold[driver])))
        if stopped is not None:
            figures.served = None
            figures.unmeasured["warm-remote compile"] = stopped


def _lines(job: Any, eager: Any, compiled: dict[str, Any], order: list[str], colds: Any, figures: Any,
           restore: Callable[[], None], publish: Callable[..., Any], profiled: tuple[str, ...]) -> None:
    """The last workload's line costs (`lines.part.measure`, which sends the part), where they fit."""
    timed = [wl for wl in order if wl in figures.timings]
    live = timed[-1] if timed else None
    if live is None or live in profiled:
        lines_part.measure(job, eager, compiled, order, colds, figures, restore, publish, profiled)
        return
    sent: list[str] = []
    stopped = run_part(bound(job, "lines"), cost(colds, "lines"), lambda: lines_part.measure(
        job, eager, compiled, order, colds, figures, restore, lambda *a: sent.append(publish(*a)), profiled))
    if stopped is not None:
        restore()
        timing = figures.timings[live]
        timing.lines, timing.lines_note = [], stopped  # a profile cut short is no table
        if not sent:
            publish("lines", *part_status(stopped))


def cut_short(job: Any, order: list[str], figures: Any, why: str, publish: Callable[..., Any]) -> None:
    """The forward's warm compile did not fit (or was stopped): its headline stands; the accuracy check
    and every part after it are named, none run (each needs that compile)."""
    figures.unmeasured["accuracy"] = why
    not_run = job.budget.not_run
    figures.timings["forward"].lines_note = not_run
    publish("forward")
    status, said = part_status(not_run)
    if len(order) > 1:
        figures.unmeasured["train step"] = not_run
        publish("train_step", status, said)
    figures.unmeasured["peak memory"] = not_run
    publish("memory", status, said)
    publish("lines", status, said)


def _label(wl: str) -> str:
    return "forward" if wl == "forward" else "train step"
