"""Measure what Inductor does to one target: eager vs `torch.compile`, forward and a training step.

Where each figure comes from:

- **steady-state timings** — in this process, eager and compiled in paired rounds (`timing`): the
  speedup is the median of the rounds' ratios with a 95% bootstrap interval, *conclusive* (the
  direction certain; "imprecise" when wide) when it excludes 1× in rounds other processes left our
  cores alone; otherwise "inconclusive" with the reason. The forward is timed as a user times it:
  `with torch.no_grad(): model(*args)`, eval mode, the process's thread count. The first compiled
  calls run (and are checked for recompiles) before anything is timed.
- **cold compile** — `torch.compile()` (it imports Dynamo) plus the first compiled call of the
  training step (of the forward when there is no training step), in a *fresh process* with an
  *empty* Inductor cache dir (`bench_child`). A process that already compiled something pays far
  less (≈1.5 s instead of ≈10 s here: Inductor keeps most of its one-time cost in memory), so only
  a fresh one is honest.
- **warm compile** — in this process, after `torch._dynamo.reset()` with Inductor's in-memory
  caches cleared, so the compile reads the on-disk caches the cold run filled, as re-running an
  unchanged script does; plus the Dynamo/Inductor import time the fresh process measured. A new
  process pays somewhat more (it also starts Inductor's compile workers): 15% on the MLP of
  BENCHMARKS.md. The workload that drives break-even is compiled first, so its warm compile is this
  process's first since the cold one.
- **peak memory** — at the allocator, one call of the break-even workload (`memory`).
- **accuracy** — the compiled copy starts from a deepcopy of the eager model (same weights), gets
  the same inputs and the same RNG seed; outputs (forward, eval mode) and parameter gradients
  (one backward, train mode) are compared. `max_rel_error` is relative to the largest magnitude of
  the eager tensor (max|a-b| / max|b|): element-wise ratios blow up near zero and say nothing. The
  tolerance check is `torch.testing.assert_close`-style, |a-b| <= atol + rtol*|b| per element,
  with tolerances per dtype (`TOLERANCES`).
- **warm-remote compile** — only with a team's remote cache (Redis: a setting, a flag or the
  user's environment, `remote_cache`) that answers: one fill compile with it on, then a fresh
  process with an empty local cache served by it alone (`warm_remote`), in the same time budget.
  The cold child never sees a remote cache or a PGO profile (cold by construction).
- **guard cost per call** — the compiled forward with guard evaluation skipped, as a third block
  of the forward's paired rounds (`guard_cost`): `guard_us_per_call` with its interval and share.
- **optional parts** — guard cost, peak memory, accuracy, the warm-remote compile, the line costs:
  each `isolated`, a failure is "not measurable: <why>" on that figure alone (`Benchmark.unmeasured`).
- **graph breaks and recompiles** seen while benchmarking go into `notes` (prefixed "graph breaks:",
  "recompiles:"), and a recompile during a timed loop says the timing includes compiling.

`notes` entries start with a fixed word and a colon — "device:", "train step:", "accuracy:",
"accuracy not compared:", "accuracy drift:", "graph breaks:", "recompiles:", "timing:", "<part> not measurable:" — so a renderer can pick out
the ones it warns about ("accuracy:" is a difference beyond tolerance; "accuracy not compared:" a
model that draws random numbers, whose figures stay unset).

This module runs the phases in order; the parts: `devices`, `workload` (forward, training step),
`cold_compile` (the fresh process, the limits), `dynamo_watch` (compiles, guards, cache hits),
`timing`, `memory`, `accuracy`, `verdict`, `line_costs` and `compile_frames` (per line, per frame).
"""

from __future__ import annotations

import contextlib
import copy
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional

import torch
import torch.utils.benchmark as tbench

from ...protocol import AccuracyDrift, Benchmark, CompileTime, Problem, Timing
from ...remote_cache import Remote
from ...remote_cache import resolve as resolve_remote
from ...torch_text import cache_keys
from ..breaks.collector import collect as graph_break_log
from ..breaks.graph_breaks import distinct_breaks
from ..loader import BuiltTarget, TargetError, describe
from . import compile_frames, drift, line_costs, memory, precision
from .accuracy import _grads, compare_workload
from .cold_compile import (
    CACHE_PREFIX,
    _sweep_stale,
    cold_limit,
    inductor_cache,
    phase_limit,
    run_child,
    with_limits,
)
from .devices import device_name, free_memory, is_oom, resolve_device, sync, to_device
from .dynamo_watch import DynamoWatch, _clear_in_memory_caches, _short_reason, cache_counts
from .guard_cost import guard_block, record_guard_cost
from .guard_cost import supported as guards_supported
from .isolated import isolated
from .timing import Contention, busier, paired_rounds, settle, timer, timing_of
from .verdict import _metric_notes, break_even, inconclusive_why, verdict
from .warm_remote import WarmRemote, for_measurement
from .workload import (
    Model,
    _same_weights_copy,
    compile_kwargs,
    describe_inputs,
    scalar_loss,
    seeded,
    train_step_problem,
    uses_cudagraphs,
)

MIN_TIMING_FRACTION = 0.25  # the timing rounds get at least this share of the budget, whatever compiling took


def run_benchmark(
    target: BuiltTarget,
    *,
    path: str,
    root: str,
    device: str,
    mode: str = "default",
    max_seconds: float = 60.0,
    progress: Callable[..., None] = lambda stage, **kw: None,
    remote_cache: Optional[str] = None,
) -> Benchmark:
    """Eager vs `torch.compile(mode=mode)` for one built target on `device` ("cpu" | "cuda").

    Spends about `max_seconds` in all, compiles included: one cold compile in a fresh process,
    then in this process one warm compile per workload and the paired timing rounds, which get
    what is left (at least MIN_TIMING_FRACTION of the budget, and they stop early once the
    figure is conclusive). `progress(stage, limit_s=...)` says how long the next stage may be
    silent (see `jobs.lanes.Worker.run`).
    Raises TargetError for a target that cannot run, runs out of memory, whose compile fails,
    or a phase that goes past its limit.
    `remote_cache` (`redis://HOST:PORT`: the setting, flag or environment the server read,
    `remote_cache.in_use`; the worker's own environment has none) adds the warm-remote compile
    (`warm_remote`); one that does not answer is left out, and a note says so.
    """
    device, device_note = resolve_device(device)
    progress = with_limits(progress)
    state = {"stage": "building the model"}
    _sweep_stale()
    cache_dir = tempfile.mkdtemp(prefix=CACHE_PREFIX)
    remote, remote_note = resolve_remote(remote_cache, os.environ)
    try:  # in the user's precision (autocast, TF32), eager, compiled and the cold child alike
        with precision.applied(target.spec, device):
            return _measure(target, path, root, device, mode, max_seconds, progress, state, cache_dir,
                            [n for n in (device_note, remote_note) if n], remote)
    except TargetError:
        raise
    except Exception as exc:  # noqa: BLE001
        if not is_oom(exc):
            raise
        # _measure's frame (models, inputs, compiled code) is gone once the traceback is dropped
        message = describe(exc)
        exc.__traceback__ = None
        del exc
        free_memory()
        raise TargetError(Problem(
            "oom", f"out of memory on {device} while {state['stage']}: {message[:200]}", path,
            target.spec.line, "use smaller example inputs (a smaller batch), or measure on another device"
        )) from None
    finally:
        with contextlib.suppress(Exception):
            torch._dynamo.reset()
        free_memory()
        shutil.rmtree(cache_dir, ignore_errors=True)


def _user_forward(model: Model) -> tbench.Timer:
    """The forward timed as a user times it: `with torch.no_grad(): model(*args)`, nothing around it."""
    stmt = "with torch.no_grad():\n    f(*args)"
    if model.step_begin:
        stmt = "torch.compiler.cudagraph_mark_step_begin()\n" + stmt
    return timer(stmt, {"f": model.call, "args": model.args, "torch": torch})


@dataclass
class _Job:
    """One measurement: what is measured, its budget, and where it says how far it got."""

    target: BuiltTarget
    path: str
    root: str
    device: str
    mode: str
    max_seconds: float
    progress: Callable[..., None]
    state: dict[str, str]  # the stage, for the out-of-memory message
    cache_dir: str
    notes: list[str]
    remote: Optional[Remote] = None  # the team's cache that answered: the warm-remote compile
    started: float = field(default_factory=time.perf_counter)
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.target.spec.name

    @property
    def step_begin(self) -> bool:
        return uses_cudagraphs(self.mode) and self.device.startswith("cuda")

    def stage(self, stage: str, message: Optional[str] = None, **limit: Any) -> None:
        self.state["stage"] = stage
        if message:
            self.progress(message, **limit)

    def add_phase(self, name: str, since: float) -> None:
        self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - since


@dataclass
class _Eager:
    """The eager side, run once: the object, its Model, and the workloads it supports."""

    obj: Any
    model: Model
    is_module: bool
    args: Any
    workloads: list[str]  # the first drives break-even


@dataclass
class _Cold:
    compile_s: Optional[float]  # the cold compile of the first workload, fresh process
    import_s: float  # Dynamo and Inductor's import in that process
    limit: float  # how long a later stage may be silent
    child_job: dict[str, Any]  # what the fresh process was asked, for the warm-remote ones
    fx_keys: list[dict[str, Any]]  # its FX-graph cache lookups (`cache_keys`): why a later compile missed
    compile_time: Optional[CompileTime] = None  # its frames (`compile_frames`)


@dataclass
class _Figures:
    """What the workloads add up to, as they run."""

    memory: dict[str, Any]
    errors: dict[str, Any] = field(default_factory=lambda: {"output_abs": None, "output_rel": None, "grad_abs": None,
                                                            "grad_rel": None, "exceeds": False})
    timings: dict[str, Timing] = field(default_factory=dict)
    late: list[str] = field(default_factory=list)  # compiled again after its first call
    timed: list[str] = field(default_factory=list)  # recompiled while timing
    frames: int = 0
    warm_s: Optional[float] = None
    busy_seen: dict[str, Any] = field(default_factory=dict)
    guard_us: Optional[float] = None
    warm_cache: Optional[dict[str, int]] = None
    miss_why: list[str] = field(default_factory=list)  # what differed in the keys the warm compile missed
    served: Optional[WarmRemote] = None  # the warm-remote compile, when a remote cache answered
    unmeasured: dict[str, str] = field(default_factory=dict)  # optional parts that failed: why (`isolated`)
    drift: Optional[AccuracyDrift] = None  # where a difference beyond tolerance starts (`drift`)


def _measure(target: BuiltTarget, path: str, root: str, device: str, mode: str, max_seconds: float,
             progress: Callable[..., None], state: dict[str, str], cache_dir: str,
             notes: list[str], remote: Optional[Remote] = None) -> Benchmark:
    job = _Job(target, path, root, device, mode, max_seconds, progress, state, cache_dir, notes, remote)
    eager = _run_eagerly(job)  # a target that cannot run fails here, not after the compiles
    cold = _cold_compile(job, eager.workloads)
    figures = _Figures(memory={"eager": None, "compiled": None, "method": memory.method(device, eager.workloads[0])})
    with isolated("warm-remote compile", figures.unmeasured):
        figures.served = for_measurement(job, cold)
    unmeasurable = guards_supported()
    if unmeasurable:
        notes.append(f"guards: the cost per call is not measurable on this torch ({unmeasurable})")
    contention = Contention(device)
    # Breaks counted as everywhere else: distinct breaks at distinct locations (graph_breaks.py),
    # from torch's graph_breaks log; not message texts, not frames (a library adds frames of its own).
    with graph_break_log() as break_log, inductor_cache(cache_dir), line_costs.reading_timed_compiles():
        compiled_obj = _same_weights_copy(eager.obj, target, device) if eager.is_module else eager.obj
        # The workload that drives break-even first: its warm compile is then this process's
        # first since the cold one, the closest to a new process's (see docs/cli.md, "How a measurement is made"). The train
        # step's SGD steps move the weights (each side by its own number of calls): both models
        # get the starting weights back before the forward is compared.
        start_state = copy.deepcopy(eager.obj.state_dict()) if "train" in eager.workloads else None
        for i, wl in enumerate(eager.workloads):
            _measure_workload(job, eager, compiled_obj, wl, i, cold, figures, contention)
            if wl == "train" and start_state is not None:
                with torch.no_grad():
                    eager.obj.load_state_dict(start_state)  # in place: the compiled graphs keep their guards
                    compiled_obj.load_state_dict(start_state)
        if figures.errors["exceeds"] and eager.is_module:  # where the difference starts: one more compile
            with isolated("accuracy drift", figures.unmeasured):
                figures.drift = drift.after_accuracy(job, eager, compiled_obj, cold.limit)
    return _result(job, cold, figures, distinct_breaks(break_log.breaks, root))


def _run_eagerly(job: _Job) -> _Eager:
    """Build the target and run it eagerly once (forward, and a training step when it has one)."""
    target, device = job.target, job.device
    obj = target.make()
    is_module = isinstance(obj, torch.nn.Module)
    if is_module:
        eager_obj = (obj if target.spec.kind == "module" else copy.deepcopy(obj)).to(device)
    else:
        eager_obj = obj
    args = to_device(target.args, device)
    eager = Model(eager_obj, eager_obj if is_module else None, args, False)
    job.stage("running the model eagerly")
    try:
        eager.use(False)
        eager.forward()
        train_problem: Optional[str] = None
        if is_module:
            with torch.enable_grad():
                eager_obj.train()
                out = eager_obj(*args)
            train_problem = train_step_problem(eager_obj, out)
            if train_problem is None:
                scalar_loss(out).backward()
            del out
        else:
            train_problem = train_step_problem(eager_obj, None)
        eager.zero_grad()
    except TargetError:
        raise
    except Exception as exc:  # noqa: BLE001 - user code
        if is_oom(exc):
            raise
        raise TargetError(Problem("call", f"calling `{job.name}` eagerly failed: {describe(exc)}",
                                  job.path, target.spec.line, "check the example inputs")) from None
    if train_problem:
        job.notes.append(f"train step: {train_problem}")
    workloads = ["train", "forward"] if train_problem is None else ["forward"]
    return _Eager(eager_obj, eager, is_module, args, workloads)


def _cold_compile(job: _Job, workloads: list[str]) -> _Cold:
    """The cold compile, in a fresh process with an empty Inductor cache (it fills the cache)."""
    child_job = {"path": os.path.abspath(job.path), "root": os.path.abspath(job.root),
                 "spec": asdict(job.target.spec), "device": job.device,
                 "mode": job.mode, "workloads": workloads, "step_begin": job.step_begin}
    job.stage("compiling with a cold cache (fresh process)",
              f"compiling {job.name} with Inductor (cold cache, fresh process)…")
    job.phases["build"] = time.perf_counter() - job.started
    t_child = time.perf_counter()
    cold = run_child(dict(child_job, tasks=["compile"], what="the cold compile (fresh process)"),
                     cache_dir=job.cache_dir, timeout=cold_limit(job.max_seconds), progress=job.progress)
    job.phases["cold_child"] = time.perf_counter() - t_child
    cold_s = cold["compile_s"].get(workloads[0])
    job.notes.extend(n for n in cold.get("notes", []) if n not in job.notes)
    return _Cold(cold_s, float(cold.get("import_s") or 0.0), phase_limit(cold_s, job.max_seconds), child_job,
                 cold.get("fx_keys") or [], compile_frames.read(cold))


def _measure_workload(job: _Job, eager: _Eager, compiled_obj: Any, wl: str, i: int, cold: _Cold,
                      figures: _Figures, contention: Contention) -> None:
    """In this process, one workload: the warm compile (Dynamo reset and Inductor's in-memory
    caches cleared, the on-disk caches the cold run filled kept), accuracy, paired timing and, for
    the workload that drives break-even, peak memory. Dynamo is reset between workloads, so each is
    timed with only its own graphs cached (a second cache entry adds guard checks to every call,
    which shows on a small model)."""
    label = "forward" if wl == "forward" else "train step"
    compiled, watch = _warm_compile(job, eager, compiled_obj, wl, cold, figures)
    _time_workload(job, eager, compiled, wl, i, cold.limit, figures, contention)
    t_mem = time.perf_counter()
    figures.busy_seen = busier(figures.busy_seen, contention.report())
    watch.unexpected(figures.timed, f"recompiled while timing the {label} (the timing includes compiling)")
    figures.frames = max(figures.frames, len(watch.frames))
    if wl == eager.workloads[0]:  # the allocator peak of the workload that drives break-even
        job.stage(f"measuring the peak memory of the {label}", f"measuring the peak memory of the {label}…",
                  limit_s=cold.limit)
        memory.record_peaks(figures.memory, {"eager": (eager.model.run(wl), eager.model.zero_grad),
                                          "compiled": (compiled.run(wl), compiled.zero_grad)}, job.device, figures.unmeasured)
    if wl == "forward" and watch.guard_us:  # every call checks each compiled frame's guards
        figures.guard_us = round(sum(watch.guard_us.values()), 1)
    eager.model.zero_grad()
    job.add_phase("memory", t_mem)
    line_costs.after_timing(job, eager, compiled, wl, figures.timings[wl], cold.limit)  # time per line, from the timed compile


def _warm_compile(job: _Job, eager: _Eager, compiled_obj: Any, wl: str, cold: _Cold,
                  figures: _Figures) -> tuple[Model, DynamoWatch]:
    """Compile `wl` with warm caches, compare its first call with eager's, and warm it up: calls 2
    and 3 must not compile again."""
    label = "forward" if wl == "forward" else "train step"
    _clear_in_memory_caches()
    watch = DynamoWatch()
    job.stage(f"compiling the {label} with warm caches",
              f"compiling {job.name} {label} with Inductor (warm cache), checking accuracy…", limit_s=cold.limit)
    if eager.is_module:
        compiled_obj.train(wl == "train")
    sync(job.device)
    t0 = time.perf_counter()
    fn = torch.compile(compiled_obj, **compile_kwargs(job.target, job.mode))
    compiled = Model(fn, compiled_obj if eager.is_module else None, eager.args, job.step_begin)
    with cache_keys.recorded() as looked_up:
        if wl == "forward":
            first = seeded(compiled.forward)  # the first compiled call: the compile
        else:
            first = _grads(compiled, 0)
    sync(job.device)
    compile_s = time.perf_counter() - t0
    job.phases["warm_compiles"] = job.phases.get("warm_compiles", 0.0) + compile_s
    if wl == eager.workloads[0]:
        # what a new process pays: the imports it does on the first call, then this
        figures.warm_s = cold.import_s + compile_s
        figures.warm_cache = cache_counts()  # did it read what the cold compile wrote? (metrics cleared by the watch)
        figures.miss_why = cache_keys.reasons(cold.fx_keys, looked_up)
    t_acc = time.perf_counter()
    compare_workload(wl, eager.model, compiled, figures.errors, job.notes, first, figures.unmeasured)
    del first
    watch.expect()
    job.stage(f"warming up the {label}")
    for _ in range(2):  # calls 2 and 3 must not compile again
        compiled.run(wl)()
    eager.model.run(wl)()
    watch.unexpected(figures.late, f"the {label} compiled again after its first call")
    job.add_phase("accuracy_warmup", t_acc)
    return compiled, watch


def _time_workload(job: _Job, eager: _Eager, compiled: Model, wl: str, i: int, limit: float,
                   figures: _Figures, contention: Contention) -> None:
    """Eager and compiled in paired rounds, on this workload's share of what is left of the budget."""
    label = "forward" if wl == "forward" else "train step"
    workloads, max_seconds = eager.workloads, job.max_seconds
    left = max_seconds - (time.perf_counter() - job.started)
    share = left / (len(workloads) - i)
    budget = max(share, MIN_TIMING_FRACTION * max_seconds / len(workloads))
    if i == 0 and share < MIN_TIMING_FRACTION * max_seconds / len(workloads):
        job.notes.append(f"timing: compiling took most of the {max_seconds:.0f} s budget; the timing "
                         f"rounds got {budget:.0f} s each (raise compileLens.benchmark.maxSeconds "
                         "for more)")
    sides = {"eager": eager.model, "compiled": compiled}
    if wl == "forward":
        timers = {side: _user_forward(m) for side, m in sides.items()}
    else:
        timers = {side: timer("fn()", {"fn": m.run(wl)}) for side, m in sides.items()}
    job.stage(f"timing the {label}", f"timing {label} (eager and compiled in paired rounds)…", limit_s=limit)
    settle(min(0.1 * budget, 5.0))  # our compile workers quiet before the span's reading starts
    contention.start(gpu=True)
    t_timing = time.perf_counter()

    def on_round(n: int, p: Any) -> None:
        if n % 4 == 0:
            job.progress(f"timing {label}: {n} paired rounds…", limit_s=limit)

    # the forward's guard cost: a third block in the same rounds, guards skipped (`guard_cost`)
    extra = guard_block(timers["compiled"], figures.unmeasured) if wl == "forward" else None
    pairs = paired_rounds(timers["eager"], timers["compiled"], budget_s=budget, on_round=on_round,
                          watch=Contention(job.device), extra=extra)
    figures.timings[wl] = timing_of(pairs)
    if extra:
        record_guard_cost(pairs, figures.timings[wl], figures.unmeasured)
    job.add_phase("timing", t_timing)


def _result(job: _Job, cold: _Cold, figures: _Figures, breaks: list[Any]) -> Benchmark:
    """The figures as a Benchmark, with the notes that say what they do not show by themselves."""
    notes = job.notes
    forward = figures.timings["forward"]
    train = figures.timings.get("train")
    driver = train if train is not None else forward
    for wl, t in figures.timings.items():
        if not t.conclusive:
            label = "forward" if wl == "forward" else "train step"
            notes.append(f"timing: the {label} is inconclusive after {t.rounds} paired rounds — "
                         f"{inconclusive_why(t, figures.busy_seen)}")
    # Break-even is driven by the training step when there is one: a training run is where a
    # compile is paid once and amortised over many calls; forward-only for plain functions.
    calls = break_even(cold.compile_s, driver)
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
    notes.extend(_metric_notes(forward, figures.warm_cache, cache_keys.reason_words(figures.miss_why)))
    # "peak memory not measurable: …": a word of its own, never "accuracy:" (a difference found)
    notes.extend(f"{part} {why}" for part, why in figures.unmeasured.items())
    errors, device, served = figures.errors, job.device, figures.served
    accuracy_ok = not errors["exceeds"]
    return Benchmark(
        device=device,
        device_name=device_name(device),
        mode=job.mode or "default",
        forward=forward,
        train_step=train,
        compile_s={"cold": cold.compile_s, "warm": figures.warm_s, **({"warm_remote": served.compile_s} if served else {})},
        guard_latency_us=figures.guard_us, compile_time=cold.compile_time,
        warm_cache=({**(figures.warm_cache or {}), "remote": served.counts} if served else figures.warm_cache),
        break_even_calls=calls,
        peak_memory_bytes=figures.memory,
        max_abs_error={"output": errors["output_abs"], "grad": errors["grad_abs"]},
        max_rel_error={"output": errors["output_rel"], "grad": errors["grad_rel"]},
        verdict=verdict(device, forward, train, cold.compile_s, calls, n_breaks, accuracy_ok, figures.busy_seen),
        torch=torch.__version__,
        inputs=describe_inputs(job.target.args),
        measured_at=time.time(),
        notes=notes,
        conclusive=driver.conclusive,
        contention=figures.busy_seen,
        phases_s={**{k: round(v, 3) for k, v in job.phases.items()}, "cold_compile": round(cold.compile_s or 0.0, 3),
                  "total": round(time.perf_counter() - job.started, 3)},
        unmeasured=dict(figures.unmeasured), precision=precision.current(),
        accuracy_drift=figures.drift,
    )
