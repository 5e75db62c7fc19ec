"""Run one file's targets through a worker lane and collect the results. Shared by the LSP and the CLI.

Each phase of a target (trace, recompile sweep, measurement) is its own result. A worker that
dies on one target (segfault, timeout, memory, os._exit) costs that target's phase only: the job
is sent again, to the replacement worker, for every phase not yet settled.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Optional

from ..discovery import Discovery, measure_order
from ..protocol import (
    LEVERS,
    PHASES,
    AnalyzeJob,
    Finding,
    Known,
    Phase,
    Problem,
    TargetResult,
    TargetSpec,
    WorkerEvent,
    from_dict,
    phase_of,
    with_phase,
)
from ..remote_cache import in_use as remote_cache_in_use
from ..settings import Settings
from ..timeline import Timeline
from .lanes import Limits, WorkerGone, WorkerSlot

log = logging.getLogger(__name__)
_job_ids = itertools.count(1)

OnTarget = Callable[[TargetResult], Awaitable[None] | None]
OnProgress = Callable[[str, Optional[str]], None]


@dataclass
class FileRun:
    """The outcome of analysing one saved file."""

    path: str
    fingerprint: str
    results: dict[str, TargetResult] = field(default_factory=dict)
    problem: Optional[Problem] = None  # the file could not be imported / the worker failed on it


def safe_lint(source: str, path: str) -> Optional[list[Finding]]:
    """Static lints, or None when the source does not parse. A lint bug never takes the caller down."""
    try:
        from ..lints import lint_source

        return lint_source(source, path)
    except Exception:  # noqa: BLE001
        log.exception("static lints failed on %s", path)
        return None


def forget_lints(path: str) -> None:
    """Free a closed file's incremental lint state."""
    try:
        from ..lints import forget

        forget(path)
    except Exception:  # noqa: BLE001
        log.exception("forgetting lint state of %s failed", path)


def limits_of(settings: Settings) -> Limits:
    return Limits(timeout_s=settings.timeout_s, memory_limit_mb=settings.memory_limit_mb)


def merge_result(old: Optional[TargetResult], new: TargetResult, kept: list[str]) -> TargetResult:
    """`new` (the latest of one job) with the phases in `kept`, settled by an earlier job on the
    same code, taken from `old`: a job re-sent after a worker died never erases what was found."""
    if old is None or not kept:
        return new
    merged = new
    for name in kept:
        phase = phase_of(old, name)
        if phase is None:
            continue
        merged = with_phase(merged, name, phase.status, phase.error)
        merged = dataclasses.replace(merged, **{f: getattr(old, f) for f in PHASE_FIELDS[name]})
    if old.status == "error" and merged.status != "error":
        merged = dataclasses.replace(merged, status=old.status, error=old.error)
    return merged


PHASE_FIELDS = {"trace": ("graph_count", "graph_breaks"), "sweep": ("recompiles",),
                "measure": ("benchmark", "export", "fallback_ops", "report", "unmeasured"), LEVERS: ("levers",)}


def _requested(trace: bool, recompiles: bool, benchmark: bool, levers: bool = False) -> list[str]:
    return [p for p, on in zip((*PHASES, LEVERS), (trace, recompiles, benchmark, levers)) if on]


async def analyze_file(
    slot: WorkerSlot,
    path: str,
    root: str,
    discovery: Discovery,
    settings: Settings,
    *,
    benchmark: bool = False,
    trace: bool = True,
    recompiles: Optional[bool] = None,  # default: with the trace
    on_target: Optional[OnTarget] = None,
    on_progress: Optional[OnProgress] = None,
    on_stall: Optional[OnProgress] = None,  # (where the quiet worker is, target): `worker.stall_watch`
    only: Optional[set[str]] = None,
    trace_dir: Optional[str] = None,  # the worker writes torch's structured trace here (tlparse)
    timeline: Optional[Timeline] = None,  # the worker's marks go here (`compile_lens.timeline`)
    levers: bool = False,  # the levers phase after the measurement (`worker/levers`)
    known: Optional[dict[str, Known]] = None,  # earlier phases' figures the levers read, from the cache
) -> FileRun:
    """Every requested phase of every target, each its own result. A worker that dies (crash,
    timeout, memory) fails the phase it was in, for that target; its later phases are not run
    (and say why); every other target's phases are sent again to the replacement worker."""
    run = FileRun(path, discovery.fingerprint)
    specs: list[TargetSpec] = [t for t in discovery.targets if t.inputs is not None and (only is None or t.name in only)]
    # the compiled model first, then the outer targets (`discovery.order`): the same in the CLI and the editor
    rank = {name: i for i, name in enumerate(measure_order(discovery).names)}
    specs.sort(key=lambda t: rank.get(t.name, len(rank)))
    wanted = _requested(trace, trace if recompiles is None else recompiles, benchmark, levers)
    limits = limits_of(settings)

    def settled(name: str) -> list[str]:
        return _settled(run, name)

    async def publish(result: TargetResult) -> None:
        run.results[result.name] = result
        if on_target:
            maybe = on_target(result)
            if maybe is not None:
                await maybe

    current: dict[str, Optional[str]] = {}  # where the worker is: target, phase, stage
    logged: set[str] = set()  # bug reports already in the log (a result is sent again as it grows)
    for _attempt in range(len(specs) * len(wanted) + 2):  # each worker death settles a phase
        pending = [t for t in specs if any(p not in settled(t.name) for p in wanted)]
        if not pending:
            return run
        current.update(target=None, phase=None, stage=None)
        skip = {t.name: [p for p in settled(t.name) if p in wanted] for t in pending if settled(t.name)}

        async def on_event(event: WorkerEvent, skip: dict[str, list[str]] = skip) -> None:
            if event.event == "progress":
                if event.target:
                    current.update(target=event.target, phase=event.phase, stage=event.stage)
                if on_progress:
                    on_progress(event.stage or "", event.target)
            elif event.event == "stall":  # quiet: where its stack is (`worker.stall_watch`)
                if on_stall:
                    on_stall(event.stage or "", event.target)
                if on_progress:
                    on_progress(f"{current.get('stage') or 'analysing'}: {event.stage}", event.target)
            elif event.event == "target" and event.result is not None:
                if timeline is not None:
                    timeline.extend(event.info.get("stamps", ()))
                name = event.result.name
                _log_bug_reports(event.result, path, logged)
                await publish(merge_result(run.results.get(name), event.result, skip.get(name, [])))

        job = _job(path, root, pending, wanted, skip, settings, stall_after(limits.timeout_s), trace_dir,
                   timeline is not None, known)
        try:
            problem = await slot.run(job, on_event, limits)
            run.problem = from_dict(Problem, problem) if isinstance(problem, dict) else problem
            if run.problem is not None:
                await _not_run(run, pending, wanted, run.problem, publish)
            return run
        except WorkerGone as gone:
            if await _after_death(run, gone, current, pending, wanted, path, publish):
                return run
    return run


def _job(path: str, root: str, pending: list[TargetSpec], wanted: list[str], skip: dict[str, list[str]],
         settings: Settings, stall_s: float, trace_dir: Optional[str], stamps: bool,
         known: Optional[dict[str, Known]]) -> AnalyzeJob:
    """One worker job for the targets still pending: the phases wanted, what each already settled."""
    return AnalyzeJob(
        id=next(_job_ids), path=path, root=root, targets=pending, trace="trace" in wanted,
        recompiles="sweep" in wanted, benchmark="measure" in wanted, device=settings.device,
        mode=settings.mode, max_seconds=settings.max_seconds,
        remote_cache=remote_cache_in_use(settings.remote_cache, os.environ), skip=skip, opt_in=list(settings.opt_in),
        trace_dir=trace_dir, stamps=stamps, stall_s=stall_s, levers=LEVERS in wanted,
        known={k: v for k, v in (known or {}).items() if k in {t.name for t in pending}},
    )


def stall_after(timeout_s: float) -> float:
    """How long a worker may be quiet before it says where it is: a third of the silence limit
    (so it is said before the limit ends the job), at least 1 s, at most 30 s."""
    return max(1.0, min(30.0, timeout_s / 3))


PHASE_WORDS = {"trace": "trace", "sweep": "recompile check", "measure": "measurement", LEVERS: "levers phase"}


def _log_bug_reports(result: TargetResult, path: str, logged: set[str]) -> None:
    """A phase, or an optional part of one, that failed in Compile Lens's own code
    (`Problem.kind == "internal"`, `TargetResult.bug_reports`): its bug report, traceback
    included, goes to the log once — the server's output channel, the CLI's stderr."""
    reports = [p.error.details or p.error.message for p in result.phases
               if p.status == "failed" and p.error is not None and p.error.kind == "internal"]
    for report in reports + result.bug_reports:
        if report not in logged:
            logged.add(report)
            log.error("`%s` in %s: %s", result.name, path, report)


def _settled(run: FileRun, name: str) -> list[str]:
    """The phases of target `name` that have an outcome so far."""
    result = run.results.get(name)
    return [p.name for p in result.phases] if result else []


async def _after_death(run: FileRun, gone: WorkerGone, current: dict[str, Optional[str]], pending: list[TargetSpec],
                       wanted: list[str], path: str, publish: Callable[[TargetResult], Awaitable[None]]) -> bool:
    """A worker died mid-job: the phase it was in fails for that target, and the target's later
    phases say they were not run. True when nothing more can run (no torch, or it died outside a
    target's phase); False when the rest runs again on a new worker."""
    failed, phase = current["target"], current["phase"]
    log.warning("worker failed on %s (%s %s): %s", path, failed or "import", phase or "", gone.problem.message)
    if gone.problem.kind == "no-torch" or failed is None or phase not in wanted:
        run.problem = gone.problem
        await _not_run(run, pending, wanted, gone.problem, publish)
        return True
    spec = next(t for t in pending if t.name == failed)
    result = run.results.get(spec.name) or TargetResult(spec.name, spec.kind, spec.line, inputs=spec.inputs)
    if (phase_of(result, phase) or Phase(phase, "")).status == "done":
        return False  # it died after that phase had ended: whatever is left runs again
    problem = gone.problem
    stage = current["stage"] or ""
    if phase != "trace" and stage and stage not in (f"measuring {failed}", f"checking recompiles of {failed}",
                                                    f"trying levers on {failed}"):
        # say what it was doing (compiling, checking torch.export…): the figures may be in
        problem = dataclasses.replace(problem, message=f"{problem.message} (while {_while(stage, spec.name)})")
    result = with_phase(result, phase, "failed", problem)
    if phase == "trace":  # nothing of it was found: the target itself failed
        result = dataclasses.replace(result, status="error", error=problem)
    skipped = Problem("skipped", f"not run: the {PHASE_WORDS[phase]} stopped the analysis process "
                                 f"({gone.problem.kind})", hint=gone.problem.hint)
    for later in wanted[wanted.index(phase) + 1:]:
        if later not in _settled(run, spec.name):
            result = with_phase(result, later, "not-run", skipped)
    await publish(result)
    return False


def _while(stage: str, name: str) -> str:
    stage = stage.rstrip("…. ")
    return stage if name in stage else f"{stage} ({name})"


async def _not_run(run: FileRun, pending: list[TargetSpec], wanted: list[str], why: Problem,
                   publish: Callable[[TargetResult], Awaitable[None]]) -> None:
    """Phases a file-level failure left undone: each says so, on its own target."""
    for spec in pending:
        result = run.results.get(spec.name)
        missing = [p for p in wanted if result is None or phase_of(result, p) is None]
        if not missing or result is None:
            continue  # a target the job never reached is covered by the file-level problem
        for phase in missing:
            result = with_phase(result, phase, "not-run", Problem("skipped", f"not run: {why.message}", hint=why.hint))
        await publish(result)
