"""Run one file's targets through a worker lane and collect the results. Shared by the LSP and the CLI.

A worker that dies on one target (segfault, timeout, memory, os._exit) costs that target only:
the job is sent again, to the replacement worker, for the targets not yet done.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Optional

from .discovery import Discovery
from .pool import Limits, WorkerGone, WorkerSlot
from .protocol import AnalyzeJob, Finding, Problem, TargetResult, TargetSpec, WorkerEvent, from_dict
from .settings import Settings

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
        from .lints import lint_source

        return lint_source(source, path)
    except Exception:  # noqa: BLE001
        log.exception("static lints failed on %s", path)
        return None


def forget_lints(path: str) -> None:
    """Free a closed file's incremental lint state."""
    try:
        from .lints import forget

        forget(path)
    except Exception:  # noqa: BLE001
        log.exception("forgetting lint state of %s failed", path)


def limits_of(settings: Settings) -> Limits:
    return Limits(timeout_s=settings.timeout_s, memory_limit_mb=settings.memory_limit_mb)


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
    only: Optional[set[str]] = None,
    trace_dir: Optional[str] = None,  # the worker writes torch's structured trace here (tlparse)
) -> FileRun:
    run = FileRun(path, discovery.fingerprint)
    pending: list[TargetSpec] = [t for t in discovery.targets if t.inputs is not None and (only is None or t.name in only)]
    limits = limits_of(settings)
    current: dict[str, Optional[str]] = {"target": None}  # the target the worker is on
    while pending:
        current["target"] = None

        async def on_event(event: WorkerEvent) -> None:
            if event.event == "progress":
                current["target"] = event.target
                if on_progress:
                    on_progress(event.stage or "", event.target)
            elif event.event == "target" and event.result is not None:
                result = event.result
                run.results[result.name] = result
                current["target"] = None
                if on_target:
                    maybe = on_target(result)
                    if maybe is not None:
                        await maybe

        job = AnalyzeJob(
            id=next(_job_ids), path=path, root=root, targets=pending, trace=trace,
            recompiles=trace if recompiles is None else recompiles,
            benchmark=benchmark, device=settings.device, mode=settings.mode, max_seconds=settings.max_seconds,
            trace_dir=trace_dir,
        )
        try:
            problem = await slot.run(job, on_event, limits)
            run.problem = from_dict(Problem, problem) if isinstance(problem, dict) else problem
            return run
        except WorkerGone as gone:
            failed = current["target"]
            log.warning("worker failed on %s (%s): %s", path, failed or "import", gone.problem.message)
            if gone.problem.kind == "no-torch" or failed is None:
                run.problem = gone.problem
                return run
            spec = next(t for t in pending if t.name == failed)
            result = TargetResult(spec.name, spec.kind, spec.line, inputs=spec.inputs, status="error",
                                  error=gone.problem)
            run.results[spec.name] = result
            if on_target:
                maybe = on_target(result)
                if maybe is not None:
                    await maybe
            pending = [t for t in pending if t.name not in run.results]
    return run
