"""The graphs TorchDynamo captured for a target, as a read-only document (`render.graph_text`): a lens
on each traced target ("⊞ 2 graphs captured, 1 break: show") opens it.

- `compileLens.capturedGraph [uri, target]` answers `{"text", "target"}` (or `{"started": false,
  "reason"}`) from what the server holds for the file (the trace, moved to the buffer's lines): the VS
  Code extension shows it as a `compile-lens:` virtual document (`compileLens.showCapturedGraph`, its
  own command, listed in `clientCommands`).
- `compileLens.openCapturedGraph [uri, target]`, for other clients: the same text written to a file
  under the cache folder and opened with `window/showDocument`.
"""

from __future__ import annotations

import os
import re
from typing import Optional

from lsprotocol import types as lsp
from pygls.uris import from_fs_path

from ...protocol import TargetResult
from ...render.graph_text import graph_text
from ...render.lsp import to_range
from ..state import CompileLensServer
from .report import _remap

CAPTURED_GRAPH = "compileLens.capturedGraph"
OPEN_CAPTURED_GRAPH = "compileLens.openCapturedGraph"
SHOW_CAPTURED_GRAPH = "compileLens.showCapturedGraph"  # the VS Code extension's own (a virtual document)


def lens_title(result: TargetResult) -> str:
    n, breaks = len(result.captured_graphs), len(result.graph_breaks)
    return (f"⊞ {n} graph{'s' if n != 1 else ''} captured"
            + (f", {breaks} break{'s' if breaks != 1 else ''}" if breaks else "") + ": show")


def graph_lenses(ls: CompileLensServer, uri: str) -> list[lsp.CodeLens]:
    """A lens on each target the current trace captured graphs for."""
    state = ls.docs.get(uri)
    if state is None or not ls.trusted or not ls.is_current(state):
        return []
    command = SHOW_CAPTURED_GRAPH if SHOW_CAPTURED_GRAPH in ls.client_commands else OPEN_CAPTURED_GRAPH
    lenses = []
    for spec in ls.targets_in_buffer(state):
        result = state.traced.get(spec.name)
        if result is not None and result.status == "ok" and result.captured_graphs:
            lenses.append(lsp.CodeLens(range=to_range(spec.line, 1, spec.line, 1), command=lsp.Command(
                title=lens_title(result), command=command, arguments=[uri, spec.name])))
    return lenses


def _result(ls: CompileLensServer, uri: str, target: str) -> tuple[Optional[TargetResult], str]:
    state = ls.docs.get(uri)
    if state is None:
        return None, "the file is not open"
    if not ls.is_current(state):
        return None, "the file changed since its trace: save it to trace it again"
    result = state.traced.get(target)
    if result is None:
        return None, f"`{target}` has not been traced yet"
    return _remap(ls, state, result), ""


def captured_graph(ls: CompileLensServer, uri: str, target: str) -> dict:
    result, why = _result(ls, uri, target)
    if result is None:
        return {"started": False, "reason": why}
    return {"text": graph_text(result, ls.root or os.path.dirname(ls.docs[uri].path)), "target": target}


async def open_captured_graph(ls: CompileLensServer, uri: str, target: str) -> dict:
    answer = captured_graph(ls, uri, target)
    if "text" not in answer:
        return answer
    folder = os.path.join(ls.cache_dir, "graphs")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, re.sub(r"[^\w.-]", "_", f"{os.path.basename(ls.docs[uri].path)}-{target}") + ".graphs.py")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(answer["text"])
    window = ls.client_capabilities.window
    if not (window and window.show_document and window.show_document.support):
        return {"started": True, "path": path, "shown": False}  # a client that cannot open it: the path
    shown = await ls.window_show_document_async(lsp.ShowDocumentParams(uri=from_fs_path(path) or path, take_focus=True))
    return {"started": True, "path": path, "shown": bool(shown and shown.success)}


def register(server: CompileLensServer) -> None:
    @server.command(CAPTURED_GRAPH)
    def captured_graph_command(ls: CompileLensServer, uri: str, target: str) -> dict:
        return captured_graph(ls, uri, target)

    @server.command(OPEN_CAPTURED_GRAPH)
    async def open_captured_graph_command(ls: CompileLensServer, uri: str, target: str) -> dict:
        return await open_captured_graph(ls, uri, target)
