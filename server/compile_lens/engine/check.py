"""The batch sequence: each file's targets, then from the result cache what it has, the trace, the
recompile sweep, the measurement and the levers in a worker for the rest, then the file's findings.

Each file's workspace root is found like ruff finds its project (`config.find_root`) unless one is
given: pyproject targets, `.compile-lens/recorded.json` and the paths shown are the root's. One
worker at a time, started in the root of the files it analyses, only when the cache lacks a part.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, NamedTuple, Optional

from ..config import find_root
from ..discovery import Discovery, dependency_fingerprint, discover, note_importers
from ..discovery.inputs import resolve_inputs
from ..interpreters import is_own
from ..jobs.analysis import analyze_file
from ..jobs.cache import ResultCache, cache_dir, cache_key, torch_version
from ..jobs.lanes import WorkerGone, WorkerSlot, default_python, worker_env
from ..jobs.levers import levers_only
from ..jobs.template import Templates
from ..protocol import FileReport, Problem, TargetResult, TargetSpec
from ..render.cli_output import render_json
from ..settings import Settings
from .cached import FileCache, cached_whole
from .findings import fill, static_part, syntax_error

Note = Optional[Callable[[str], None]]
OnResult = Optional[Callable[[str, TargetResult], None]]


class Checked(NamedTuple):
    """`check`'s answer: a report per file, and the worker's runtime facts (torch, cuda, escape
    hatches: the worker's `info`, open since each torch answers with what it has)."""

    reports: list[FileReport]
    runtime: dict[str, Any]


@dataclass
class TargetPick:
    """One `--target NAME` or `path.py:NAME`."""

    name: str
    path: Optional[str] = None  # real path, when given as path.py:Name

    @classmethod
    def parse(cls, text: str) -> TargetPick:
        where, sep, name = text.rpartition(":")
        if sep and where.endswith(".py"):
            return cls(name, os.path.realpath(where))
        return cls(text)

    def matches(self, path: str, spec: TargetSpec) -> bool:
        return spec.name == self.name and (self.path is None or os.path.realpath(path) == self.path)


def _picked(picks: Optional[list[TargetPick]], path: str, targets: list[TargetSpec]) -> Optional[set[str]]:
    """Names of the targets picked in this file; None: all of them."""
    if picks is None:
        return None
    return {t.name for t in targets if any(p.matches(path, t) for p in picks)}


class _Workers:
    """One worker at a time, started in the root of the files it analyses, only when needed."""

    def __init__(self, settings: Settings, cache: Optional[ResultCache], python: Optional[str] = None):
        self.settings, self.cache, self.python = settings, cache, python
        self.slot: Optional[WorkerSlot] = None
        self.root: Optional[str] = None
        self.runtime: dict = {}
        self.templates = Templates()  # a replaced worker (a crash, a timeout) is forked, not imported again

    async def get(self, root: str) -> WorkerSlot:
        if self.slot is not None and self.root != root:
            await self.stop()
        if self.slot is None:
            self.slot, self.root = WorkerSlot("cli", self.python or default_python(), root, worker_env(cache_dir()),
                                              spare=False, templates=self.templates), root
            info = await self.slot.info(self.settings.timeout_s)
            if not self.runtime:
                self.runtime = info
                if self.cache is not None:
                    self.cache.put(_runtime_key(self.python), "runtime", info)
        return self.slot

    async def stop(self) -> None:
        if self.slot is not None:
            await self.slot.stop()
        self.slot = self.root = None

    async def close(self) -> None:
        await self.stop()
        await self.templates.stop()


def _runtime_key(python: Optional[str] = None) -> str:
    return cache_key("runtime", python or default_python(), torch_version(python))


@dataclass
class _Run:
    """What every file of one `check` shares."""

    settings: Settings
    benchmark: bool
    recompiles: bool
    root: Optional[str]
    targets: Optional[list[TargetPick]]
    cache: Optional[ResultCache]
    trace_dir: Optional[str]
    python: Optional[str]
    version: Optional[str]
    levers: bool
    note: Note
    static_only: bool
    on_result: OnResult
    gpu_free: Optional[Callable[[str], Awaitable[None]]]
    workers: _Workers


async def check(files: list[str], settings: Settings, *, benchmark: bool, recompiles: bool = True,
                root: Optional[str] = None, targets: Optional[list[TargetPick]] = None,
                cache: Optional[ResultCache] = None, trace_dir: Optional[str] = None,
                python: Optional[str] = None, levers: bool = False, on_progress: Note = None,
                static_only: bool = False, on_result: OnResult = None,
                gpu_free: Optional[Callable[[str], Awaitable[None]]] = None) -> Checked:
    """Analyse `files`; each in its own workspace root unless `root` is given. Results come from
    `cache` when it has every part asked for (no worker starts when it has them all). `python`: the
    workers' interpreter when not this one (`--compare-with`), already probed. `on_progress`: where
    the progress lines go (stderr for the CLI, the MCP server's progress notifications);
    `static_only`: the lints and what needs no torch, no code of the user's run (an untrusted folder);
    `on_result(path, result)`: each target's growing result as the worker sends it, then each final one
    (those from the cache too) — `cli/stream.py`. `gpu_free(name)`: awaited before a file's worker
    runs (`--wait-gpu`)."""
    python = None if is_own(python) else python
    run = _Run(settings, benchmark, recompiles, root, targets, cache, trace_dir, python, torch_version(python),
               levers, on_progress, static_only, on_result, gpu_free, _Workers(settings, cache, python))
    reports: list[FileReport] = []
    try:
        for path in files:
            if not await _check_file(run, path, reports):
                return Checked(reports, run.workers.runtime)
        runtime = run.workers.runtime
        if not runtime and cache is not None:
            hit = cache.get(_runtime_key(python))
            runtime = hit[0] if hit else {}
        return Checked(reports, runtime or {"torch": run.version})
    finally:
        await run.workers.close()


async def _check_file(run: _Run, path: str, reports: list[FileReport]) -> bool:
    """One file's report appended to `reports` (none for a file without a picked target); False when
    its worker could not start (the run stops there)."""
    report = FileReport(path)
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        report.error = Problem("read", f"cannot read the file: {exc}", path)
        reports.append(report)
        return True
    file_root = os.path.abspath(run.root) if run.root else find_root(path)
    discovery = discover(source, path=path, root=file_root)
    if discovery is None:
        if run.targets is None:
            report.findings += syntax_error(source, path)
            reports.append(report)
        return True
    discovery.targets = resolve_inputs(path, file_root, discovery.targets, source=source,
                                       precision=run.settings.precision)
    picked = _picked(run.targets, path, discovery.targets)
    if picked is not None and not picked:
        return True  # --target: not in this file
    if not run.static_only:  # the model a workspace file compiles runs first (`discovery.order`)
        note_importers(discovery, path, file_root)
    reports.append(report)
    chosen = [t for t in discovery.targets if picked is None or t.name in picked]
    lints, statics = static_part(source, path, chosen, discovery, picked)
    report.findings = lints + statics
    runnable = [] if run.static_only else [t for t in chosen if t.inputs is not None]
    if not runnable:
        return True
    cached = _file_cache(run, path, source, file_root, discovery)
    results, levers_todo = cached_whole(cached, runnable, recompiles=run.recompiles, benchmark=run.benchmark,
                                        levers=run.levers)
    todo = {t.name for t in runnable if t.name not in results}
    if todo or levers_todo:
        try:
            slot = await run.workers.get(file_root)
        except WorkerGone as gone:
            report.error = gone.problem
            return False
        if run.gpu_free is not None:
            await run.gpu_free(os.path.relpath(path))
        note = run.note
        if note:
            note(f"tracing {os.path.relpath(path)}"
                 + (f" ({len(results)} of {len(runnable)} targets from the cache)" if results else ""))
        writer = cached.writer(runnable) if cached is not None else None
        told = (note and (lambda stage, target: note(f"  {stage}")))
        if todo:
            done = await analyze_file(
                slot, path, file_root, discovery, run.settings, benchmark=run.benchmark, recompiles=run.recompiles,
                only=todo, on_target=_both(writer, run.on_result, path), on_progress=told, trace_dir=run.trace_dir,
                levers=run.levers,
            )
            results.update(done.results)
            report.error = done.problem
        if levers_todo and report.error is None:
            done = await levers_only(slot, path, file_root, discovery, run.settings, results, levers_todo,
                                     writer, told)
            report.error = done.problem
    elif run.note:
        run.note(f"{os.path.relpath(path)}: from the cache")
    fill(report, discovery, results, runnable, lints, statics, file_root)
    for result in report.targets if run.on_result else ():  # what no event said (the cache's, a part never sent)
        run.on_result(path, result)  # type: ignore[misc]
    return True


def _file_cache(run: _Run, path: str, source: str, file_root: str, discovery: Discovery) -> Optional[FileCache]:
    """The file's entries in the run's cache; none without a cache."""
    if run.cache is None:
        return None
    deps, _ = dependency_fingerprint(path, source, file_root)
    return FileCache(run.cache, path, source, discovery.fingerprint, deps, run.settings, run.version, run.python)


def json_document(reports: list[FileReport], runtime: dict, settings: Settings, *, recompiles: bool,
                  benchmark: bool, graph_breaks: bool = True) -> dict[str, Any]:
    """`check --format json`'s document (the MCP server's `check` returns it too): `check`'s reports,
    with the phases that ran."""
    device = "cuda" if runtime.get("cuda") and settings.device != "cpu" else "cpu"
    checks = {"graph_breaks": graph_breaks, "recompiles": recompiles, "benchmark": benchmark}
    return render_json(reports, torch_version=runtime.get("torch"), device=device, checks=checks)


def _both(writer: Optional[Callable[[TargetResult], None]], on_result: OnResult,
          path: str) -> Optional[Callable[[TargetResult], None]]:
    """The worker's results to the cache, then to `on_result`."""
    if on_result is None:
        return writer

    def to_both(result: TargetResult) -> None:
        if writer is not None:
            writer(result)
        on_result(path, result)
    return to_both
