"""`compileLens.tryLevers` (the "Try levers" CodeLens on a measured target): the levers phase for one
target, in the measurements' lane, never on save (it costs minutes). Its levers go on the target's
result (`TargetResult.levers`), which the hover lists and the code actions read; the cache keeps
them with the figures' key. Cancelled with the rest of the file's queued work when its code changes.
Done: `compileLens/analyzed` with phase "levers"."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

from lsprotocol import types as lsp

from ...jobs.analysis import analyze_file
from ...jobs.levers import known_of
from ...protocol import LEVERS, TargetResult, phase_of, with_phase
from ...render.levers_text import lever_line
from ...render.lsp import to_range
from .. import scheduler
from ..state import CompileLensServer, DocState

log = logging.getLogger("compile_lens")

TRY_LEVERS = "compileLens.tryLevers"
LENS_TITLE = "Try levers (measures regional compilation, dynamic shapes, guard filters, restart paths, CUDA graphs, max-autotune: minutes)"


def levers_lenses(ls: CompileLensServer, uri: str) -> list[lsp.CodeLens]:
    """A "Try levers" lens on each measured target (after its figures: a lever is judged against them)."""
    state = ls.docs.get(uri)
    if state is None or not ls.trusted or not ls.is_current(state):
        return []
    lenses = []
    for spec in ls.targets_in_buffer(state):
        if spec.name in state.benchmarks and spec.name in state.traced:
            result = state.traced[spec.name]
            title = "trying levers…" if spec.name in _running(state) else (
                LENS_TITLE if phase_of(result, LEVERS) is None else f"levers: {_summary(result)}")
            lenses.append(lsp.CodeLens(range=to_range(spec.line, 1, spec.line, 1), command=lsp.Command(
                title=title, command=TRY_LEVERS, arguments=[uri, spec.name])))
    return lenses


def _summary(result: TargetResult) -> str:
    better = [lever.lever for lever in result.levers if lever.verdict == "better"]
    return (f"{', '.join(better)} measured better" if better else
            f"{len(result.levers)} tried, none better" if result.levers else "none applies")


def hover_lines(result: TargetResult) -> list[str]:
    """What the levers phase tried, one line each, for the target's hover card."""
    if phase_of(result, LEVERS) is None:
        return []
    if not result.levers:
        return ["**Levers**: none applies to this target"]
    return ["**Levers tried**"] + [f"- {lever_line(lever)}" for lever in result.levers]


def _running(state: DocState) -> set[str]:
    return getattr(state, "levers_running", set())


def try_levers(ls: CompileLensServer, uri: str, target: str) -> dict:
    if not ls.trusted:
        return {"started": False, "reason": "untrusted workspace: no code is run"}
    state = ls.docs.get(uri)
    if state is None or state.saved is None or not ls.is_current(state):
        return {"started": False, "reason": "save the file and let it be analysed first"}
    if target not in state.benchmarks or target not in state.traced:
        return {"started": False, "reason": f"measure `{target}` first: a lever is judged against its figures"}
    if target in _running(state):
        return {"started": False, "reason": f"trying levers on `{target}` already"}
    saved = state.saved
    spec = next(t for t in saved.discovery.targets if t.name == target)
    cached = scheduler.file_cache(ls, saved, state.path)
    with_levers = cached.with_levers(spec, state.traced[target])
    if with_levers is not None:
        _accept(ls, state, target, with_levers)
        ls.analyzed(uri, LEVERS, saved.version, True)
        return {"started": False, "cached": True}
    state.levers_running = _running(state) | {target}  # type: ignore[attr-defined]
    result = dataclasses.replace(state.traced[target], benchmark=state.benchmarks[target])

    async def run() -> None:
        ok = False
        try:
            found = await analyze_file(ls.deep_lane(), state.path, ls.root_for(state.path), saved.discovery,
                                       ls.settings, trace=False, recompiles=False, benchmark=False, levers=True,
                                       only={target}, known={target: known_of(result)},
                                       on_progress=lambda stage, t: ls.status("benchmarking", stage, lane="deep"))
            done = found.results.get(target)
            if done is not None:
                cached.store_levers(spec, done)
                phase = phase_of(done, LEVERS)
                if ls.matches(state, saved) and target in state.traced:
                    merged = dataclasses.replace(state.traced[target], levers=done.levers)
                    _accept(ls, state, target, with_phase(merged, LEVERS, phase.status, phase.error) if phase else merged)
                ok = found.problem is None and phase is not None and phase.status == "done"
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a background task must say why it died
            log.exception("levers of %s in %s failed", target, state.path)
        finally:
            state.levers_running = _running(state) - {target}  # type: ignore[attr-defined]
            ls.status("idle", lane="deep")
            ls.refresh_views()
            if state.open:
                ls.analyzed(uri, LEVERS, saved.version, ok)

    task = asyncio.get_running_loop().create_task(run())
    state.bench_tasks = [t for t in state.bench_tasks if not t.done()] + [task]  # cancelled when the code changes
    ls.refresh_views()
    return {"started": True}


def _accept(ls: CompileLensServer, state: DocState, target: str, result: TargetResult) -> None:
    state.traced[target] = result
    ls.emit("measured", state.uri)


def register(server: CompileLensServer) -> None:
    @server.command(TRY_LEVERS)
    def try_levers_command(ls: CompileLensServer, uri: str, target: str, *args: Any) -> dict:
        return try_levers(ls, uri, target)
