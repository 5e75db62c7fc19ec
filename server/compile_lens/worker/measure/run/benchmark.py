"""Measure what Inductor does to one target: eager vs `torch.compile`, forward and a training step.

Where each figure comes from:

- **steady-state timings** — in this process, eager and compiled in paired rounds (`timing`): the
  speedup is the median of the rounds' ratios with a 95% bootstrap interval, *conclusive* (the
  direction certain; "imprecise" when wide) when it excludes 1× in rounds other processes left our
  cores alone; otherwise "inconclusive" with the reason. The forward is timed as a user times it:
  `with torch.no_grad(): model(*args)`, eval mode, the process's thread count. The first compiled
  calls run (and are checked for recompiles) before anything is timed.
- **cold compile** — `torch.compile()` (it imports Dynamo) plus the first compiled call of each
  workload, each in a *fresh process* with an *empty* Inductor cache dir of its own (`bench_child`,
  `compile.children`); `compile_s.cold` is the training step's (the forward's when there is none),
  `compile_s.cold_forward` the forward's. A process that already compiled something pays far
  less (≈1.5 s instead of ≈10 s here: Inductor keeps most of its one-time cost in memory), so only
  a fresh one is honest.
- **warm compile** — in this process, after `torch._dynamo.reset()` with Inductor's in-memory
  caches cleared, so the compile reads the on-disk caches the cold run filled, as re-running an
  unchanged script does; plus the Dynamo/Inductor import time the fresh process measured. A new
  process pays somewhat more (it also starts Inductor's compile workers): 15% on the MLP of
  BENCHMARKS.md. Each workload's warm compile reads its own cold child's cache folder.
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

The order is what the user waits for: the forward — its cold child (started as the job arrived, its
imports beside the worker's, `compile.children.Early`) compiles it and takes the first look at its
timing right after (`timing.per_workload.first_look`), sent at once (`on_part`, a `snapshot` of the
figures so far, "accuracy not checked yet"); then this process's warm compile and accuracy check,
sent again; more forward rounds only when the figure is not settled —; then the train step (its own
cold child, started when the forward's was done: each workload's cold compile is a fresh process's
first), peak memory, the line costs, each sent as it lands, and after the forward's headline each only where
the budget has room (`budget`: no figure past its bound). A train step that fails fails alone.

This module runs the stages in order; the parts live by concern beside it (`measure/__init__`): `workload`,
`compile` (the cold children, Dynamo's metrics), `timing`, `memory`, `accuracy`, `lines`, `snapshot`.
"""

from __future__ import annotations

import contextlib
import copy
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from ....busy.contention import Contention
from ....protocol import Benchmark, Problem
from ....remote_cache import Remote
from ....remote_cache import resolve as resolve_remote
from ....torch_text import cache_keys
from ...breaks.collector import collect as graph_break_log
from ...breaks.graph_breaks import distinct_breaks
from ...loader import BuiltTarget, TargetError, describe
from ..accuracy.compare import _grads, compare_workload
from ..compile import per_frame as compile_frames
from ..compile.children import Cold, ColdChildren, Early
from ..compile.cold import CACHE_PREFIX, _sweep_stale, inductor_cache, run_child, with_limits
from ..compile.dynamo_watch import DynamoWatch, _clear_in_memory_caches, cache_counts
from ..lines import costs as line_costs
from ..lines import part as lines_part
from ..lines import provenance
from ..memory import peak as memory
from ..timing.guard_cost import supported as guards_supported
from ..timing.per_workload import Refine, later_parts_s, looked, looked_s, time_workload
from ..timing.per_workload import user_forward as _user_forward  # noqa: F401 - read here by the guard-cost test
from ..timing.rounds import Paired, busier
from ..timing.verdict import break_even
from ..workload import precision
from ..workload.devices import free_memory, is_oom, resolve_device, sync, to_device
from ..workload.model import (
    Model,
    _same_weights_copy,
    compile_kwargs,
    scalar_loss,
    seeded,
    train_step_problem,
    uses_cudagraphs,
)
from . import snapshot
from .budget import Budget, part_status, run_part
from .isolated import isolated
from .later_parts import after_workloads, bound, cost, cut_short
from .snapshot import Figures

# `on_part(part, benchmark, status, why)`: a part of the measurement (`protocol.PARTS`) has landed:
# its figures are in `benchmark` (None for a part settled before any figure), status as `PartStatus`
OnPart = Callable[[str, Optional[Benchmark], str, Optional[str]], None]


def _no_part(part: str, benchmark: Optional[Benchmark], status: str, why: Optional[str]) -> None:
    pass


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
    on_part: OnPart = _no_part,
    output_code: Optional[list[str]] = None,
    opt_in: tuple[str, ...] = (),
    early: Optional[Early] = None,
    budget: Optional[Budget] = None,
) -> Benchmark:
    """Eager vs `torch.compile(mode=mode)` for one built target on `device` ("cpu" | "cuda").

    Spends about `max_seconds` in all, compiles included: one cold compile in a fresh process,
    then in this process one warm compile per workload and the paired timing rounds, which get
    what is left (at least `timing.per_workload.MIN_TIMING_FRACTION` of the budget, and they stop early once the
    figure is conclusive). `progress(stage, limit_s=...)` says how long the next stage may be
    silent (see `jobs.lanes.Worker.run`).
    Raises TargetError for a target that cannot run, runs out of memory, whose compile fails,
    or a stage that goes past its limit.
    `remote_cache` (`redis://HOST:PORT`: the setting, flag or environment the server read,
    `remote_cache.in_use`; the worker's own environment has none) adds the warm-remote compile
    (`warm_remote`); one that does not answer is left out, and a note says so.
    Parts in the order the user waits for them: the forward (its own cold child, warm compile,
    timing), the train step, peak memory, the line costs; each is sent to `on_part` as it lands.
    `output_code` (a list) receives the warm forward compile's output code (the fallback ops).
    `opt_in`: parts (`protocol.OPT_IN`) that run whatever the budget.
    `early`: the forward's cold child, started as the job arrived (`compile.children.Early`): used when it
    was asked what this measurement asks; its folder is this measurement's, removed at the end.
    `budget`: the bound (`budget.Budget`, the job's): every part after the forward's headline starts
    only where it fits and is stopped at the stop point; None: no bound (every part runs).
    """
    device, device_note = resolve_device(device)
    progress = with_limits(progress)
    state = {"stage": "building the model"}
    _sweep_stale()
    cache_dir = early.base if early is not None else tempfile.mkdtemp(prefix=CACHE_PREFIX)
    remote, remote_note = resolve_remote(remote_cache, os.environ)
    try:  # in the user's precision (autocast, TF32), eager, compiled and the cold children alike
        with precision.applied(target.spec, device):
            return _measure(target, path, root, device, mode, max_seconds, progress, state, cache_dir,
                            [n for n in (device_note, remote_note) if n], remote, on_part, output_code, opt_in, early,
                            budget)
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
    opt_in: tuple[str, ...] = ()  # parts run whatever the budget
    started: float = field(default_factory=time.perf_counter)
    budget: Optional[Budget] = None  # the bound on the later parts (`budget`); None: every part runs
    stages: dict[str, float] = field(default_factory=dict)  # seconds per stage (`Benchmark.stages_s`)

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

    def add_stage(self, name: str, since: float) -> None:
        self.stages[name] = self.stages.get(name, 0.0) + time.perf_counter() - since


@dataclass
class _Eager:
    """The eager side, run once: the object, its Model, and the workloads it supports."""

    obj: Any
    model: Model
    is_module: bool
    args: Any
    workloads: list[str]  # the first drives break-even


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


def _measure(target: BuiltTarget, path: str, root: str, device: str, mode: str, max_seconds: float,
             progress: Callable[..., None], state: dict[str, str], cache_dir: str,
             notes: list[str], remote: Optional[Remote] = None, on_part: OnPart = _no_part,
             output_code: Optional[list[str]] = None, opt_in: tuple[str, ...] = (),
             early: Optional[Early] = None, budget: Optional[Budget] = None) -> Benchmark:
    job = _Job(target, path, root, device, mode, max_seconds, progress, state, cache_dir, notes, remote,
               opt_in=tuple(opt_in), budget=budget)
    eager = _run_eagerly(job)  # a target that cannot run fails here, not after the compiles
    # what the user waits for first: the forward's cold and warm compile and its speedup
    order = ["forward"] + [wl for wl in eager.workloads if wl != "forward"]
    on_part("train_step", None, "not-run" if len(order) == 1 else "pending",
            next((n.split(":", 1)[1].strip() for n in notes if n.startswith("train step:")), None))
    # run_child looked up when called: a test replaces this module's (canned cold compiles)
    colds = ColdChildren(job, order, torch.get_num_threads(), lambda child, **kw: run_child(child, **kw), early)
    try:
        return _parts(job, eager, order, colds, on_part, output_code)
    finally:
        colds.stop()


def _parts(job: _Job, eager: _Eager, order: list[str], colds: ColdChildren, on_part: OnPart,
           output_code: Optional[list[str]]) -> Benchmark:
    """Each part in turn, its figures sent (`on_part`) the moment they exist."""
    figures = Figures(memory={"eager": None, "compiled": None, "method": memory.method(job.device, eager.workloads[0])})
    unmeasurable = guards_supported()
    if unmeasurable:
        job.notes.append(f"guards: the cost per call is not measurable on this torch ({unmeasurable})")
    contention = Contention(job.device)
    # Breaks counted as everywhere else: distinct breaks at distinct locations (graph_breaks.py),
    # from torch's graph_breaks log; not message texts, not frames (a library adds frames of its own).
    with graph_break_log() as break_log, line_costs.reading_timed_compiles():
        def publish(part: str, status: str = "done", why: Optional[str] = None) -> Benchmark:
            found = snapshot.build(job, colds.cold, figures, distinct_breaks(break_log.breaks, job.root), break_even)
            on_part(part, found, status, why)
            return found

        compiled_obj = _same_weights_copy(eager.obj, job.target, job.device) if eager.is_module else eager.obj
        # The train step's SGD steps move the weights (each side by its own number of calls): both
        # models get the starting weights back after it, before anything else compares them.
        start_state = copy.deepcopy(eager.obj.state_dict()) if "train" in order else None

        def restore() -> None:
            if start_state is not None:
                with torch.no_grad():
                    eager.obj.load_state_dict(start_state)  # in place: the compiled graphs keep their guards
                    compiled_obj.load_state_dict(start_state)

        compiled: dict[str, Model] = {}
        profiled: list[str] = []  # workloads whose line costs were read before the next one's compile
        for i, wl in enumerate(order):
            if wl == "forward":  # the forward failing fails the measurement: nothing to show without it
                cut = _forward(job, eager, compiled_obj, order, colds, figures, contention, compiled, publish,
                               restore, output_code, profiled)
                if cut is not None:  # its warm compile did not fit the budget: nothing later can run
                    cut_short(job, order, figures, cut, publish)
                    return snapshot.build(job, colds.cold, figures, distinct_breaks(break_log.breaks, job.root),
                                          break_even)
                continue
            # a later workload fails alone (its child timed out or crashed, its compile raised, the budget
            # had no room or stopped it): the forward's figures stand, and break-even falls back to the forward
            stopped = None
            with isolated("train step", figures.unmeasured) as part:
                stopped = run_part(bound(job, "train_step"), cost(colds, "train_step"),
                                   lambda wl=wl, i=i: _train_step(job, eager, compiled_obj, wl, i, colds, figures,
                                                                  contention, compiled))
            restore()
            if stopped is not None:  # its figures do not stand on their own: its compile without its timing
                figures.timings.pop(wl, None), compiled.pop(wl, None)
                figures.unmeasured["train step"] = stopped
            status, why = part_status(stopped)
            if part.why:
                status, why = "failed", part.why.split(":", 1)[1].strip()
            publish("train_step", status, why)
        after_workloads(job, eager, compiled, compiled_obj, order, colds, figures, restore, publish, tuple(profiled))
        return snapshot.build(job, colds.cold, figures, distinct_breaks(break_log.breaks, job.root), break_even)


def _forward(job: _Job, eager: _Eager, compiled_obj: Any, order: list[str], colds: ColdChildren,
             figures: Figures, contention: Contention, compiled: dict[str, Model], publish: Callable[..., Any],
             restore: Callable[[], None], output_code: Optional[list[str]], profiled: list[str]) -> Optional[str]:
    """The forward: its headline, then (where the budget has room: None, else why not) this process's
    warm compile and accuracy check, more rounds where its first look was not settled, its line costs."""
    wl = "forward"
    # the headline: the figure the cold child timed right after its compile, sent before this process's
    # warm compile and accuracy check, which follow in a second send
    first = looked(figures, colds.get(wl))
    found: dict[str, Any] = {}

    def warm() -> None:
        compiled[wl], found["refine"] = _workload(job, eager, compiled_obj, wl, 0, colds, figures, contention,
                                                  None if first is None else (first, looked_s(colds.cold[wl])))

    if first is not None:
        job.stages["to_forward"] = time.perf_counter() - job.started
        job.stages["first_look"] = looked_s(colds.cold[wl])  # the child's rounds (within `to_forward`)
        publish("forward")  # "accuracy not checked yet": no warm compile yet (`snapshot`)
        if job.budget is not None:
            job.budget.forward_landed()
        # the next child's imports beside the warm compile here (no timing rounds: the child took the
        # first look), not on the way to its own timed compile
        for later in order[1:]:
            if job.budget is None or "train_step" in job.opt_in or job.budget.fits(cost(colds, "train_step")):
                colds.prestart(later)  # not where the budget has no room for it: its imports would slow ours
        # asked for whatever the budget where a part asked for needs it (the fallback ops: its output code)
        stopped = run_part(bound(job, "train_step", "memory", "lines", "fallback_ops"), cost(colds, "warm_forward"), warm)
        if stopped is not None:
            return stopped
    else:  # the child took no first look: this is the forward's figure, which no budget cuts
        warm()
    figures.graphs[wl] = provenance.take()  # its compile's provenance, for its line costs
    job.stages.setdefault("to_forward", time.perf_counter() - job.started)
    if job.budget is not None:
        job.budget.forward_landed()
    if output_code is not None:  # the caller's: the fallback ops are read from it
        output_code[:] = figures.output_code
    restore()
    publish("forward")
    if found["refine"] is not None:  # its first look was not settled: more rounds, sent with the next part
        # failing, the first look stands; a child still importing waits, stopped; its rounds end
        # before the budget's stop point (`timing.per_workload`), their pairs standing on their own
        with isolated("forward's more rounds", figures.unmeasured), colds.paused():
            run_part(job.budget, 0.0, found["refine"])  # its rounds end before the stop point
    if len(order) > 1 and wl in figures.timings:  # its lines now, while its compile is loaded
        with colds.paused():
            stopped = run_part(bound(job, "lines"), cost(colds, "lines"),
                               lambda: lines_part.profile(job, eager, compiled[wl], wl, colds.cold[wl], figures))
        if stopped is None:
            profiled.append(wl)
        else:
            figures.timings[wl].lines, figures.timings[wl].lines_note = [], stopped
    return None


def _train_step(job: _Job, eager: _Eager, compiled_obj: Any, wl: str, i: int, colds: ColdChildren,
                figures: Figures, contention: Contention, compiled: dict[str, Model]) -> None:
    compiled[wl], more = _workload(job, eager, compiled_obj, wl, i, colds, figures, contention)
    if more is not None:  # its first look did not settle it: the rest of its share now
        more()
    figures.graphs[wl] = provenance.take()


def _label(wl: str) -> str:
    return "forward" if wl == "forward" else "train step"


def _workload(job: _Job, eager: _Eager, compiled_obj: Any, wl: str, i: int, colds: ColdChildren,
              figures: Figures, contention: Contention,
              first_look: Optional[tuple[Paired, float]] = None) -> tuple[Model, Refine]:
    cold = colds.get(wl)
    with inductor_cache(cold.cache_dir):
        return _measure_workload(job, eager, compiled_obj, wl, i, cold, figures, contention, first_look)


def _measure_workload(job: _Job, eager: _Eager, compiled_obj: Any, wl: str, i: int, cold: Cold,
                      figures: Figures, contention: Contention,
                      first_look: Optional[tuple[Paired, float]] = None) -> tuple[Model, Refine]:
    """In this process, one workload: the warm compile (Dynamo reset and Inductor's in-memory
    caches cleared, the on-disk cache its cold child filled kept), accuracy and paired timing.
    Dynamo is reset between workloads, so each is timed with only its own graphs cached (a second
    cache entry adds guard checks to every call, which shows on a small model). The forward's
    more rounds (`timing.per_workload.Refine`), when its first look left it unsettled, come back to run
    after its figures are sent."""
    compiled, watch = _warm_compile(job, eager, compiled_obj, wl, cold, figures)
    more = time_workload(job, eager, compiled, wl, i, cold.limit, figures, contention,
                         reserve=later_parts_s(job, cold, len(eager.workloads)), first_look=first_look)
    figures.busy_seen = busier(figures.busy_seen, contention.report())
    what = f"recompiled while timing the {_label(wl)} (the timing includes compiling)"
    watch.unexpected(figures.timed, what)
    figures.frames = max(figures.frames, len(watch.frames))
    if wl == "forward" and watch.guard_us:  # every call checks each compiled frame's guards
        figures.guard_us = round(sum(watch.guard_us.values()), 1)
    eager.model.zero_grad()
    if more is None:
        return compiled, None

    def refine() -> None:
        with inductor_cache(cold.cache_dir):
            more()
        watch.unexpected(figures.timed, what)
        eager.model.zero_grad()

    return compiled, refine


def _warm_compile(job: _Job, eager: _Eager, compiled_obj: Any, wl: str, cold: Cold,
                  figures: Figures) -> tuple[Model, DynamoWatch]:
    """Compile `wl` with warm caches, compare its first call with eager's, and warm it up: calls 2
    and 3 must not compile again. The forward's output code is kept (`figures.output_code`): the
    fallback ops are read from it, no compile of their own."""
    label = _label(wl)
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
    with cache_keys.recorded() as looked_up, compile_frames.output_code() as codes:
        if wl == "forward":
            first = seeded(compiled.forward)  # the first compiled call: the compile
        else:
            first = _grads(compiled, 0)
    sync(job.device)
    compile_s = time.perf_counter() - t0
    job.stages["warm_compiles"] = job.stages.get("warm_compiles", 0.0) + compile_s
    if wl == "forward":
        figures.output_code = list(codes)
    # what a new process pays: the imports it does on the first call, then this
    figures.warm_s[wl] = cold.import_s + compile_s
    figures.warm_cache[wl] = cache_counts()  # did it read what the cold compile wrote? (metrics cleared by the watch)
    figures.miss_why[wl] = cache_keys.reasons(cold.fx_keys, looked_up)
    t_acc = time.perf_counter()
    compare_workload(wl, eager.model, compiled, figures.errors, job.notes, first, figures.unmeasured)
    del first
    watch.expect()
    job.stage(f"warming up the {label}")
    for _ in range(2):  # calls 2 and 3 must not compile again
        compiled.run(wl)()
    eager.model.run(wl)()
    watch.unexpected(figures.late, f"the {label} compiled again after its first call")
    job.add_stage("accuracy_warmup", t_acc)
    return compiled, watch
