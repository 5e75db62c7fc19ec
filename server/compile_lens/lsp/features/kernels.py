"""The code behind a line, read-only (`render.kernels_text`): the kernels a measured line became and
their generated source. A costly line's hover links it where the client shows it itself
(`compileLens.showKernels`, the VS Code extension's, in `clientCommands`); the text comes from
`compileLens.kernelsAt [uri, line]` (1-based), answered from what the server holds for the file."""

from __future__ import annotations

import dataclasses
import urllib.parse

from ...render.kernels_text import kernels_text, line_costs_at
from ..state import CompileLensServer
from .report import _remap

KERNELS_AT = "compileLens.kernelsAt"
SHOW_KERNELS = "compileLens.showKernels"  # the VS Code extension's own (a virtual document)


def link(ls: CompileLensServer, uri: str, line: int) -> str:
    """A hover's link to the line's kernels ("" where the client cannot show them)."""
    if SHOW_KERNELS not in ls.client_commands:
        return ""
    args = urllib.parse.quote(f'["{uri}", {line}]')
    return f"[Show the kernels behind this line](command:{SHOW_KERNELS}?{args})"


def kernels_at(ls: CompileLensServer, uri: str, line: int) -> dict:
    state = ls.docs.get(uri)
    if state is None or not ls.is_current(state):
        return {"started": False, "reason": "the file changed since its measurement: save and measure it again"}
    for name, bench in state.benchmarks.items():
        result = state.traced.get(name)
        if result is None:
            continue
        result = _remap(ls, state, dataclasses.replace(result, benchmark=bench))
        found = line_costs_at(result, state.path, line)
        if found:
            return {"text": kernels_text(result, state.path, line, found), "target": name}
    return {"started": False, "reason": f"no measured kernel comes from line {line}"}


def register(server: CompileLensServer) -> None:
    @server.command(KERNELS_AT)
    def kernels_at_command(ls: CompileLensServer, uri: str, line: int) -> dict:
        return kernels_at(ls, uri, int(line))
