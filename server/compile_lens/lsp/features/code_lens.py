"""`textDocument/codeLens`: one lens per runnable target: "Measure", "measuring…", "waiting: GPU
busy (…)", or its figures — an inner target the outer one's measurement covers (`discovery.order`)
says "Measure" with what that measurement says of its lines; then "Try levers" (`levers`) and the
captured graphs (`captured_graph`).

Answered from memory (never waits for torch); the text is `render.lens_titles.code_lens_title`.
"""

from __future__ import annotations

from lsprotocol import types as lsp

from ...discovery import measure_order
from ...protocol import phase_of
from ...render import lens_titles, progress_rows
from ...render.lsp import to_range
from ..gpu_gate import MEASURE_ANYWAY
from ..state import SHOW_OUTPUT, CompileLensServer, DocState
from .captured_graph import graph_lenses
from .levers import levers_lenses

MEASURE = "compileLens.measure"


def code_lenses(ls: CompileLensServer, uri: str) -> list[lsp.CodeLens]:
    state = ls.docs.get(uri)
    if state is None or not ls.trusted:
        return []
    lenses = []
    current = ls.is_current(state) and state.saved is not None
    within = measure_order(state.saved.discovery).within if current and state.saved else {}
    for spec in ls.targets_in_buffer(state):
        if spec.inputs is None or not ls.confirmed(state, spec):
            continue
        bench = state.benchmarks.get(spec.name) if ls.is_current(state) else None
        measuring = spec.name in state.measuring
        command = MEASURE
        if measuring:  # the log, where the client has it; else the server's own command (says "measuring")
            command = SHOW_OUTPUT if SHOW_OUTPUT in ls.client_commands else MEASURE
        live = state.live.get(spec.name) if ls.is_current(state) else None
        title = lens_titles.code_lens_title(bench, measuring, tuple(progress_rows.pending(live, in_flight=True)) if live else ())
        outer = within.get(spec.name)
        if bench is None and not measuring and outer is not None and _covers(ls, state, outer):
            # measured only when asked: what the outer target's measurement says of its lines meanwhile
            title = lens_titles.within_lens_title(outer, state.benchmarks.get(outer), state.path, spec.line,
                                            max(spec.end_line, spec.line))
        waiting = ls.gpu_gate.busy.get(uri) if measuring else None
        if waiting is not None:  # queued behind another process's use of the GPU: the lens lets it go
            title, command = lens_titles.waiting_lens_title(waiting.text), MEASURE_ANYWAY
        lenses.append(lsp.CodeLens(range=to_range(spec.line, 1, spec.line, 1), command=lsp.Command(
            title=title, command=command, arguments=[uri, spec.name])))
    return lenses + levers_lenses(ls, uri) + graph_lenses(ls, uri)


def _covers(ls: CompileLensServer, state: DocState, name: str) -> bool:
    """`name` traced fine and is measured (on save, or now, or already): its line costs cover what it builds."""
    result = state.traced.get(name)
    if result is None or result.status != "ok":
        return False
    ended = phase_of(result, "measure")
    if ended is not None and ended.status != "done" and name not in state.measuring:
        return False  # its measurement failed: no line costs stand for the inner target's lines
    return ls.settings.benchmark_on_save or name in state.measuring or name in state.benchmarks


def register(server: CompileLensServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_CODE_LENS)
    def code_lens(ls: CompileLensServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
        return code_lenses(ls, params.text_document.uri)
