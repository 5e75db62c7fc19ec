"""`compileLens.saveTrace [uri, folder?]`: analyse the saved file again (trace + recompile sweep)
with torch's structured trace on, for tlparse.

Never from the cache: the trace is of a run that happens now. Default folder: under the cache
folder, so nothing is written into the user's workspace unasked.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from ...jobs.analysis import analyze_file
from ..documents import read_saved
from ..state import CompileLensServer

log = logging.getLogger("compile_lens")

COMMAND = "compileLens.saveTrace"


async def save_trace(ls: CompileLensServer, uri: str, where: str) -> dict:
    if not ls.trusted:
        return {"started": False, "reason": "untrusted workspace: no code is run"}
    state = ls.doc(uri)
    saved = read_saved(ls, state)
    if saved is None:
        return {"started": False, "reason": "the saved file cannot be read or parsed"}
    if not any(t.inputs is not None for t in saved.discovery.targets):
        return {"started": False, "reason": "nothing in this file can be run (no target with inputs)"}
    stem = os.path.splitext(os.path.basename(state.path))[0]
    directory = os.path.abspath(where or os.path.join(
        ls.cache_dir, "torch-trace", f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"))
    from ...worker.torch_trace import trace_files  # torch-free: lists the folder

    ls.status("tracing", f"writing a torch trace of {os.path.basename(state.path)}", lane="deep")
    try:
        run = await analyze_file(ls.deep_lane(), state.path, ls.root_for(state.path), saved.discovery, ls.settings,
                                 trace=True, recompiles=True, trace_dir=directory)
    finally:
        ls.status("idle", lane="deep")
    files = trace_files(directory)
    answer: dict[str, Any] = {"started": True, "dir": directory, "files": files}
    if run.problem is not None:
        answer["problem"] = run.problem.message
    if not files:
        answer["reason"] = "torch wrote no trace (nothing was compiled, or this torch version cannot)"
    log.info("torch trace of %s: %s", state.path, files or "none written")
    return answer


def register(server: CompileLensServer) -> None:
    @server.command(COMMAND)
    async def save_trace_command(ls: CompileLensServer, uri: str, *where: str) -> dict:
        # the folder is optional (the palette passes none); pygls wants every declared argument, hence *where
        return await save_trace(ls, uri, (where[0] if where else "") or "")
