"""What a measurement's figures add up to so far, as a `Benchmark`: built after each part (the forward,
the train step, memory, line costs) and sent at once, so the user sees the forward's speedup while the
rest is still measured. Building one changes nothing: the notes are the job's plus those the
figures imply, computed afresh each time.
"""

from __future__ import annotations

import copy
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from ....protocol import (
    AccuracyDrift,
    Benchmark,
    CompileSeconds,
    CompileTime,
    ContentionReport,
    Errors,
    PeakMemory,
    Timing,
)
from ....torch_text import cache_keys
from ..compile.dynamo_watch import _short_reason
from ..compile.warm_remote import WarmRemote
from ..timing.verdict import _metric_notes, break_even, inconclusive_why, verdict
from ..workload import precision
from ..workload.devices import device_name
from ..workload.model import describe_inputs


@dataclass
class Figures:
    """What the workloads add up to, as they run."""

    memory: dict[str, Any]
    errors: dict[str, Any] = field(default_factory=lambda: {"output_abs": None, "output_rel": None, "grad_abs": None,
                                                            "grad_rel": None, "exceeds": False})
    timings: dict[str, Timing] = field(default_factory=dict)
    late: list[str] = field(default_factory=list)  # compiled again after its first call
    timed: list[str] = field(default_factory=list)  # recompiled while timing
    frames: int = 0
    warm_s: dict[str, float] = field(default_factory=dict)  # per workload: what a new process pays, warm
    busy_seen: Optional[ContentionReport] = None  # the busiest reading of the timings (`timing.rounds.busier`)
    guard_us: Optional[float] = None
    warm_cache: dict[str, dict[str, int]] = field(default_factory=dict)  # per workload: did it read the cold one's?
    miss_why: dict[str, list[str]] = field(default_factory=dict)  # per workload: what differed in the keys missed
    served: Optional[WarmRemote] = None  # the warm-remote compile, when a remote cache answered
    unmeasured: dict[str, str] = field(default_factory=dict)  # optional parts that failed: why (`isolated`)
    drift: Optional[AccuracyDrift] = None  # where a difference beyond tolerance starts (`drift`)
    output_code: list[str] = field(default_factory=list)  # the warm forward compile's (`compile.per_frame.output_code`)
    graphs: dict[str, Any] = field(default_factory=dict)  # per workload: its timed compile's provenance (`line_costs`)


def _frames(colds: dict[str, Any]) -> Optional[CompileTime]:
    """The cold compiles' frames, forward's first: each workload's child compiled only its own. The
    lines are the first child's that has them: the train step's child traces the same forward again
    (under the same compile ids), its lines would count the same code twice."""
    found = [c.compile_time for c in colds.values() if c.compile_time is not None]
    if not found:
        return None
    with_lines = next((ct for ct in found if ct.lines), found[0])
    return CompileTime(frames=[f for ct in found for f in ct.frames],
                       note=next((ct.note for ct in found if ct.note), None),
                       lines=list(with_lines.lines), lines_note=with_lines.lines_note)


def _warm_cache(figures: Figures, driver_wl: str, served: Optional[WarmRemote]) -> Optional[dict[str, Any]]:
    """The break-even workload's warm-compile cache counts; the forward's under "forward" when that is
    another workload (did each warm compile read its own cold child's cache?)."""
    found = figures.warm_cache.get(driver_wl)
    if found is None:
        return None
    found = dict(found)
    if driver_wl != "forward" and "forward" in figures.warm_cache:
        found["forward"] = dict(figures.warm_cache["forward"])
    if served:
        found["remote"] = served.counts
    return found


def build(job: Any, colds: dict[str, Any], figures: Figures, breaks: list[Any],
          calls_to_break_even: Callable[..., Optional[int]] = break_even) -> Benchmark:
    """The figures so far as a Benchmark, with the notes that say what they do not show by themselves.
    `colds`: the cold compiles measured so far by workload (`compile.children.Cold`); `calls_to_break_even`:
    `verdict.break_even`, as `benchmark` holds it."""
    notes = list(job.notes)
    # copies: a snapshot already sent keeps its figures while later parts fill in the timings' lines
    forward = copy.deepcopy(figures.timings["forward"])
    train = copy.deepcopy(figures.timings.get("train"))
    driver_wl = "train" if train is not None else "forward"
    driver = train if train is not None else forward
    for wl, t in figures.timings.items():
        if not t.conclusive:
            label = "forward" if wl == "forward" else "train step"
            notes.append(f"timing: the {label} is inconclusive after {t.rounds} paired rounds — "
                         f"{inconclusive_why(t, figures.busy_seen)}")
    # Break-even is driven by the training step when there is one: a training run is where a
    # compile is paid once and amortised over many calls; forward-only for plain functions.
    cold_s = colds[driver_wl].compile_s
    calls = calls_to_break_even(cold_s, driver)
    n_breaks = len(breaks)
    if n_breaks:
        named = "; ".join(f"{b.gb_id + ' ' if b.gb_id else ''}{_short_reason(b.gb_type)} at "
                          f"{os.path.basename(b.path)}:{b.line}" for b in breaks[:3])
        split = (f"{figures.frames} compiled frames with eager code between them" if figures.frames > 1
                 else "the whole function runs eagerly" if any(b.loop is not None for b in breaks)
                 else "the code after a break runs eagerly")
        notes.append(f"graph breaks: {n_breaks} — {split}" + (f" ({named})" if named else ""))
    for text in figures.late + figures.timed:
        notes.append(f"recompiles: {text}")
    warm_cache = figures.warm_cache.get(driver_wl)
    notes.extend(_metric_notes(forward, warm_cache, cache_keys.reason_words(figures.miss_why.get(driver_wl, []))))
    # "peak memory not measurable: …": a word of its own, never "accuracy:" (a difference found)
    notes.extend(f"{part} {why}" for part, why in figures.unmeasured.items())
    errors, device, served = figures.errors, job.device, figures.served
    # not compared yet: the forward's first look, sent before this process's warm compile (which
    # compares the outputs right after it sets `warm_s`)
    accuracy_ok = None if "forward" not in figures.warm_s else not errors["exceeds"]
    return Benchmark(
        device=device,
        device_name=device_name(device),
        mode=job.mode or "default",
        forward=forward,
        train_step=train,
        compile_s=CompileSeconds(cold_s, figures.warm_s.get(driver_wl), colds["forward"].compile_s,
                                 figures.warm_s.get("forward"), served.compile_s if served else None),
        guard_latency_us=figures.guard_us, compile_time=_frames(colds),
        warm_cache=_warm_cache(figures, driver_wl, served),
        break_even_calls=calls,
        peak_memory_bytes=PeakMemory(figures.memory.get("eager"), figures.memory.get("compiled"),
                                     figures.memory.get("method") or ""),
        max_abs_error=Errors(errors["output_abs"], errors["grad_abs"]),
        max_rel_error=Errors(errors["output_rel"], errors["grad_rel"]),
        verdict=verdict(device, forward, train, cold_s, calls, n_breaks, accuracy_ok, figures.busy_seen),
        torch=torch.__version__,
        inputs=describe_inputs(job.target.args),
        measured_at=time.time(),
        notes=notes,
        conclusive=driver.conclusive,
        contention=figures.busy_seen,
        stages_s={**{k: round(v, 3) for k, v in job.stages.items()}, "cold_compile": round(cold_s or 0.0, 3),
                  "total": round(time.perf_counter() - job.started, 3)},
        unmeasured=dict(figures.unmeasured), precision=precision.current(),
        accuracy_drift=copy.deepcopy(figures.drift),
    )
