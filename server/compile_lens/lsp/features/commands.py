"""`workspace/executeCommand`: analyse again, measure a target (or, waiting for a busy GPU, anyway), clear the cache, and the two the
tests and the extension read (worker pids, counters). Commands without parameters accept (and
ignore) arguments: some clients always send a list."""

from __future__ import annotations

import logging
from typing import Any

import psutil

from .. import scheduler
from ..gpu_gate import MEASURE_ANYWAY
from ..state import CompileLensServer

log = logging.getLogger("compile_lens")

UNTRUSTED = {"started": False, "reason": "untrusted workspace: no code is run"}


def measure(ls: CompileLensServer, uri: str, target: str) -> dict:
    """The lens's command: measure now, or right after the trace of the saved file."""
    if not ls.trusted:
        return dict(UNTRUSTED)
    state = ls.docs.get(uri)
    if state is None:
        return {"started": False, "reason": "the file is not open"}
    if target in state.measuring:  # what the "⏳ measuring" lens runs in a client without the log command
        return {"started": False, "reason": f"measuring `{target}` already; the figures replace this lens when done"}
    if state.saved is None or target not in state.traced or not ls.is_current(state):
        if state.discovery is None or target not in {t.name for t in state.discovery.targets}:
            return {"started": False, "reason": f"no target `{target}` in this file"}
        state.pending_measure.add(target)  # measured right after the trace of the saved file
        state.measuring.add(target)
        scheduler.schedule_trace(ls, uri)
        return {"started": True, "queued": True}
    if state.traced[target].status != "ok":
        return {"started": False, "reason": f"`{target}` cannot run: {state.traced[target].error.message}"}
    state.benchmarks.pop(target, None)
    scheduler.schedule_followups(ls, state, state.saved, sweep=set(), measure={target}, wait_gpu=False)
    return {"started": True}


def register(server: CompileLensServer) -> None:
    @server.command("compileLens.analyzeFile")
    def analyze_file_command(ls: CompileLensServer, uri: str) -> dict:
        if not ls.trusted:
            return dict(UNTRUSTED)
        state = ls.doc(uri)
        state.saved = None  # force a fresh trace of the saved file
        scheduler.schedule_trace(ls, uri)
        return {"started": True}

    @server.command("compileLens.measure")
    def measure_command(ls: CompileLensServer, uri: str, target: str) -> dict:
        return measure(ls, uri, target)

    @server.command(MEASURE_ANYWAY)
    def measure_anyway_command(ls: CompileLensServer, *args: Any) -> dict:
        released = ls.gpu_gate.measure_anyway()
        if not released:
            return {"started": False, "reason": "no measurement is waiting for the GPU"}
        return {"started": True, "released": released}

    @server.command("compileLens.clearCache")
    def clear_cache_command(ls: CompileLensServer, *args: Any) -> dict:
        removed = ls.cache.clear()
        log.info("cache cleared: %d results", removed)
        return {"removed": removed}

    @server.command("compileLens.workerPids")
    def worker_pids_command(ls: CompileLensServer, *args: Any) -> list[int]:
        return ls.worker_pids()

    @server.command("compileLens.stats")
    def stats_command(ls: CompileLensServer, *args: Any) -> dict:
        return {**ls.stats, "server_rss": psutil.Process().memory_info().rss, "worker_pids": ls.worker_pids()}
