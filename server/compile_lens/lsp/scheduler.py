"""What runs in the workers, and when: a trace on open and save, then recompile sweeps and
measurements in the second lane, one file's work in order, newest code first.

Results are cached (`engine.cached`: the keys and phase entries the CLI's `check` uses too) and
merged into the document's state only while they describe its code; each phase emits an event
("traced", "swept", "measured", "changed") that the diagnostics feature publishes on, and once a
phase of a file is done (its diagnostics published) the client is told so (`compileLens/analyzed`,
`announce`). Saves that arrive during a trace collapse into one;
sweeps and measurements wait `FOLLOWUP_DELAY_S` after a trace so rapid saves skip them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
import uuid
from typing import Callable, Iterable, Optional

from lsprotocol import types as lsp

from .. import timeline
from ..discovery import measure_order
from ..engine.cached import FileCache, cached_figures
from ..jobs.analysis import analyze_file
from ..jobs.cache import deployment_of, settled, with_deployment, with_recompiles
from ..jobs.lanes import WorkerGone
from ..positions import moved
from ..protocol import Benchmark, Problem, TargetResult, TargetSpec
from ..protocol import phase_of as phase
from ..protocol import with_phase as set_phase
from ..render import lens_titles
from .documents import read_saved, version_on_disk
from .state import CompileLensServer, DocState, Saved, same_code

log = logging.getLogger("compile_lens")

STREAM_PUBLISH_S = 0.1  # while a file's targets stream in, publish at most this often
FOLLOWUP_DELAY_S = 1.0  # sweeps and measurements wait this long after a trace: rapid saves skip them


def schedule_trace(ls: CompileLensServer, uri: str) -> None:
    state = ls.doc(uri)
    if not ls.trusted:
        return
    state.wanted = True
    if state.runner is None or state.runner.done():
        state.runner = asyncio.get_running_loop().create_task(_trace_loop(ls, state))



def stalled_in(state: DocState) -> Callable[[str, Optional[str]], None]:
    """Keeps where a quiet worker is, per target, for the hover card (cleared when the run ends)."""
    def on_stall(where: str, target: Optional[str]) -> None:
        if target:
            state.stalled[target] = where
    return on_stall

async def _trace_loop(ls: CompileLensServer, state: DocState) -> None:
    """Trace the newest saved version; saves that arrive meanwhile collapse into one."""
    while state.open and state.wanted:
        state.wanted = False
        timeline.mark(state.timeline, "loop")
        saved = read_saved(ls, state)
        timeline.mark(state.timeline, "read")
        if saved is None or ls.traces is None:
            ls.emit("changed", state.uri)
            if saved is None and state.open:  # unreadable or does not parse: nothing is run
                ls.analyzed(state.uri, "traced", version_on_disk(ls, state), False)
            return
        if state.saved and state.saved.discovery.fingerprint == saved.discovery.fingerprint \
                and state.saved.deps_fingerprint == saved.deps_fingerprint and not state.problem:
            # same code as before (a comment or whitespace edit): nothing re-runs, positions move
            _rebase(ls, state, saved)
            continue
        try:
            await _trace_once(ls, state, saved)
        except Exception:  # noqa: BLE001 - keep the server alive whatever happens
            log.exception("analysis of %s failed", state.path)
            ls.status("error", f"analysis of {os.path.basename(state.path)} failed; see the log", lane="trace")
            announce(ls, state, saved, "traced", ok=False)


def _rebase(ls: CompileLensServer, state: DocState, saved: Saved) -> None:
    assert state.saved is not None
    old = state.saved.source
    state.traced = {k: moved(r, old, saved.source, state.path) or r for k, r in state.traced.items()}
    state.saved = saved
    ls.emit("traced", state.uri)
    announce(ls, state, saved, "traced", ok=True)  # the same code: its results hold, at their new lines


def announce(ls: CompileLensServer, state: DocState, saved: Saved, phase_done: str, ok: bool) -> None:
    """`compileLens/analyzed`: a phase of the work on `saved` is done and its diagnostics are out.
    The version is the save whose code was analysed; a later save of the same code (comments or
    formatting changed) shows these results too, so its version is given."""
    if state.open:
        shown = state.saved if same_code(state.saved, saved) else saved
        assert shown is not None
        ls.analyzed(state.uri, phase_done, shown.version, ok)


def _all_settled(found: Iterable[TargetResult], phase_name: str) -> bool:
    """No target's `phase_name` was ended by the worker dying (or left not run)."""
    return all(settled(r, phase_name) for r in found if phase(r, phase_name) is not None)


def file_cache(ls: CompileLensServer, saved: Saved, path: str) -> FileCache:
    """The saved code's entries in the result cache under the settings of now (`engine.cached`: the
    CLI's keys too). Keyed by the saved file's real path; its results name it `path`, as the worker did."""
    return FileCache(ls.cache, path, saved.source, saved.discovery.fingerprint, saved.deps_fingerprint, ls.settings,
                     ls.torch_version, key_path=saved.path)


def _cached_traces(ls: CompileLensServer, cached: FileCache, specs: list[TargetSpec]) -> dict[str, TargetResult]:
    """The traces the result cache holds for this code, by target."""
    found = {}
    for spec in specs:
        hit = cached.trace(spec)
        if hit is not None:
            found[spec.name] = hit
            ls.stats["trace_cache_hits"] += 1
    return found


async def _trace_once(ls: CompileLensServer, state: DocState, saved: Saved) -> None:
    assert ls.traces is not None
    started = time.perf_counter()
    cached = file_cache(ls, saved, state.path)
    runnable = [t for t in saved.discovery.targets if t.inputs]
    fresh = _cached_traces(ls, cached, runnable)

    benchmarks = cached_benchmarks(ls, saved, state.path)
    specs = {t.name: t for t in saved.discovery.targets}
    spec_of = specs.get
    state.last_stream_publish = 0.0  # the first target's result goes out the moment it arrives

    def current() -> bool:
        return state.open and ls.matches(state, saved)

    def accept(results: dict[str, TargetResult], problem: Optional[Problem]) -> None:
        if state.saved is not saved:
            state.benchmarks = dict(benchmarks)
        state.traced, state.saved, state.problem = dict(results), saved, problem
        now = file_cache(ls, saved, state.path)  # the figures' keys: the settings of now
        for name in state.benchmarks:  # export and fallback answers were measured with the figures
            spec = spec_of(name)
            if spec is not None and name in state.traced:
                state.traced[name] = now.with_deployment(spec, state.traced[name])
        state.last_stream_publish = time.monotonic()
        ls.emit("traced", state.uri)

    def on_target(result: TargetResult) -> None:
        fresh[result.name] = result
        # stream: show this target's breaks while the next one is traced (then write the cache); a
        # target that brings breaks goes out at once, whatever the last publish: that is the squiggle
        if current() and (result.graph_breaks or time.monotonic() - state.last_stream_publish > STREAM_PUBLISH_S):
            accept(fresh, None)
        cached.store_trace(specs[result.name], result)

    todo = {t.name for t in runnable if t.name not in fresh}
    problem = None
    if todo:
        ls.status("tracing", os.path.basename(state.path), lane="trace")
        ls.stats["traces"] += 1
        timeline.mark(state.timeline, "keys")
        try:
            run = await analyze_file(ls.traces, state.path, ls.root_for(state.path), saved.discovery, ls.settings,
                                     on_target=on_target, only=todo, recompiles=False, timeline=state.timeline,
                                     on_progress=lambda stage, target: ls.status("tracing", stage, lane="trace"),
                                     on_stall=stalled_in(state))
        except asyncio.CancelledError:  # the file was closed: this lane is free again
            ls.status("idle", lane="trace")
            raise
        finally:
            state.stalled.clear()
        problem = run.problem
    if not current():
        log.info("dropped results for %s: the file changed during the trace", state.path)
        ls.status("idle", lane="trace")
        return
    accept(fresh, problem)
    announce(ls, state, saved, "traced", ok=problem is None and _all_settled(fresh.values(), "trace"))
    log.info("traced %s: %d targets (%d from cache) in %.2fs", os.path.basename(state.path),
             len(fresh), len(fresh) - len(todo), time.perf_counter() - started)
    ls.status("error" if problem else "idle", problem.message if problem else "", lane="trace")
    ok = {n for n, r in fresh.items() if r.status == "ok"}
    sweep = {n for n in ok if not _merge_cached_sweep(ls, state, cached, specs[n])}
    if sweep != ok:
        ls.emit("swept", state.uri)  # recompile warnings from the cache
        if not sweep:
            announce(ls, state, saved, "swept", ok=True)  # every sweep came from the cache
    # an inner target whose lines the measurement of a traced outer one covers (`discovery.order`)
    # waits for a click on its "Measure" lens; the rest run compiled model first (`analyze_file`)
    within = measure_order(saved.discovery).within
    measure = {n for n in ok if n not in state.benchmarks and within.get(n) not in ok} \
        if ls.settings.benchmark_on_save else set()
    asked = state.pending_measure & ok  # "Measure" clicked before the trace was done
    state.measuring -= state.pending_measure
    state.pending_measure = set()
    measure |= asked
    schedule_followups(ls, state, saved, sweep=sweep, measure=measure, delay=FOLLOWUP_DELAY_S, replace=True,
                       wait_gpu=not asked)  # a click never waits for a busy GPU


# --- sweeps and measurements (the second lane) ----------------------------------------------

def cached_benchmarks(ls: CompileLensServer, saved: Saved, path: str) -> dict[str, Benchmark]:
    """The figures the cache holds for the saved code under the settings of now, by target."""
    found = cached_figures(file_cache(ls, saved, path), saved.discovery.targets)
    ls.stats["bench_cache_hits"] += len(found)
    return found


def _merge_cached_sweep(ls: CompileLensServer, state: DocState, cached: FileCache, spec: TargetSpec) -> bool:
    """The target's traced result with its cached sweep; False when there is none to merge."""
    if spec.name not in state.traced:
        return False
    swept = cached.with_sweep(spec, state.traced[spec.name])
    if swept is None:
        return False
    ls.stats["sweep_cache_hits"] = ls.stats.get("sweep_cache_hits", 0) + 1
    state.traced[spec.name] = swept
    return True


def _set_deployment(state: DocState, name: str, deployment: dict) -> None:
    if name in state.traced:
        state.traced[name] = with_deployment(state.traced[name], deployment)


def schedule_followups(ls: CompileLensServer, state: DocState, saved: Saved, *, sweep: set[str], measure: set[str],
                       delay: float = 0.0, replace: bool = False, wait_gpu: bool = True) -> None:
    """Recompile sweeps, then measurements, after `delay`. `replace`: what was queued for older
    code is dropped (a running measurement of it is stopped). `wait_gpu`: measurements wait while
    other processes use the GPU (not one the user asked for by name)."""
    if replace:  # everything queued for older code goes, a running measurement of it too
        for task in state.bench_tasks:
            task.cancel()
        state.bench_tasks = []
        state.measuring.clear()
    if not ls.trusted or not (sweep or measure):
        return
    previous = state.bench_tasks[-1] if state.bench_tasks else None
    measure = measure - state.measuring
    state.measuring |= measure

    async def run() -> None:
        if previous is not None:
            await asyncio.wait({previous})  # in order; its failure is its own, our cancel is ours
        try:
            await asyncio.sleep(delay)
            if sweep:
                await _sweep_once(ls, state, saved, sweep)
            if measure:
                if wait_gpu:
                    await ls.gpu_gate.wait(ls, state.uri, os.path.basename(state.path))
                await _benchmark_once(ls, state, saved, measure)
        except asyncio.CancelledError:
            raise
        except WorkerGone as gone:
            log.warning("sweep/measurement of %s stopped: %s", state.path, gone.problem.message)
        except Exception:  # noqa: BLE001 - a background task must say why it died
            log.exception("sweep/measurement of %s failed", state.path)
        finally:
            state.measuring -= measure
            ls.refresh_views()

    task = asyncio.get_running_loop().create_task(run())
    state.bench_tasks = [t for t in state.bench_tasks if not t.done()] + [task]
    log.debug("queued for %s: sweep %s, measure %s (replace=%s)", os.path.basename(state.path),
              sorted(sweep), sorted(measure), replace)
    if measure:
        ls.refresh_views()


async def _sweep_once(ls: CompileLensServer, state: DocState, saved: Saved, names: set[str]) -> None:
    swept: dict[str, TargetResult] = {}

    def on_target(result: TargetResult) -> None:
        swept[result.name] = result
        sweep = phase(result, "sweep")
        if result.status != "ok" or sweep is None:
            return  # the trace already said why it cannot run
        here = same_code(state.saved, saved) and result.name in state.traced
        if sweep.status != "done":  # failed or not run: said on the target, never cached
            if here:
                state.traced[result.name] = set_phase(state.traced[result.name], "sweep", sweep.status, sweep.error)
                ls.emit("swept", state.uri)
            return
        spec = next(t for t in saved.discovery.targets if t.name == result.name)
        file_cache(ls, saved, state.path).store_sweep(spec, result)
        if here:
            assert state.saved is not None
            found = moved(result, saved.source, state.saved.source, state.path) or result
            state.traced[result.name] = with_recompiles(state.traced[result.name], found.recompiles)
            ls.emit("swept", state.uri)

    ls.status("tracing", f"checking recompiles in {os.path.basename(state.path)}", lane="deep")
    ls.stats["sweeps"] = ls.stats.get("sweeps", 0) + 1
    try:
        run = await analyze_file(ls.deep_lane(), state.path, ls.root_for(state.path), saved.discovery, ls.settings,
                                 trace=False, recompiles=True, only=names, on_target=on_target)
    except asyncio.CancelledError:
        raise
    except Exception:
        announce(ls, state, saved, "swept", ok=False)
        raise
    finally:
        ls.status("idle", lane="deep")
    announce(ls, state, saved, "swept", ok=run.problem is None and _all_settled(swept.values(), "sweep"))


async def _benchmark_once(ls: CompileLensServer, state: DocState, saved: Saved, names: set[str]) -> None:
    token = str(uuid.uuid4())
    progress = ls.work_done_progress
    window = ls.client_capabilities.window
    shown = bool(window and window.work_done_progress)  # only a client that said it can show progress
    if shown:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(progress.create_async(token), 5)
        progress.begin(token, lsp.WorkDoneProgressBegin(title="Compile Lens", message="measuring torch.compile…",
                                                        cancellable=False))

    def on_progress(stage: str, target: Optional[str]) -> None:
        if shown:
            progress.report(token, lsp.WorkDoneProgressReport(message=stage))
        ls.status("benchmarking", stage, lane="deep")

    measured_results: dict[str, TargetResult] = {}

    def on_target(result: TargetResult) -> None:
        measured_results[result.name] = result
        measured = phase(result, "measure")
        if result.benchmark is not None or measured is not None:  # "measuring…" until the first figures
            state.measuring.discard(result.name)
        spec = next(t for t in saved.discovery.targets if t.name == result.name)
        log.info("measured %s: %s", result.name, lens_titles.lens_title(result.benchmark) if result.benchmark
                 else (result.error.message if result.error else "no figures"))
        if result.benchmark is not None:
            file_cache(ls, saved, state.path).store_measure(spec, result)  # keyed by the settings of now, as ever
            deployment = deployment_of(result)
            if same_code(state.saved, saved):
                state.benchmarks[result.name] = result.benchmark
                _set_deployment(state, result.name, deployment)
        if measured is None and same_code(state.saved, saved):  # parts still to come
            state.live[result.name] = result
        else:
            state.live.pop(result.name, None)
        if measured is not None and same_code(state.saved, saved) and result.name in state.traced:
            # the measurement's own outcome: a failure never hides what the trace found
            state.traced[result.name] = set_phase(state.traced[result.name], "measure", measured.status,
                                                   measured.error)
        if result.benchmark is not None or measured is not None:
            ls.emit("measured", state.uri)
        ls.refresh_views()

    for name in names & set(state.traced):  # a new measurement replaces the last one's outcome
        state.traced[name] = dataclasses.replace(
            state.traced[name], phases=[p for p in state.traced[name].phases if p.name != "measure"])
    try:
        ls.stats["benchmarks"] += 1
        run = await analyze_file(ls.deep_lane(), state.path, ls.root_for(state.path), saved.discovery, ls.settings,
                                 benchmark=True, trace=False, recompiles=False, only=names,
                                 on_target=on_target, on_progress=on_progress, on_stall=stalled_in(state))
    except asyncio.CancelledError:
        log.info("measurement of %s cancelled: the file changed", os.path.basename(state.path))
        raise
    except Exception:
        announce(ls, state, saved, "measured", ok=False)
        raise
    finally:
        for name in names:
            state.stalled.pop(name, None)
            state.live.pop(name, None)
        if shown:
            progress.end(token, lsp.WorkDoneProgressEnd(message="done"))
        ls.status("idle", lane="deep")
    announce(ls, state, saved, "measured",
             ok=run.problem is None and _all_settled(measured_results.values(), "measure"))
