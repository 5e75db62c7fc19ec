"""`textDocument/inlayHint`: a measured target's speedup after each `torch.compile(...)` call of it."""

from __future__ import annotations

from lsprotocol import types as lsp

from ...render import cards
from ..state import CompileLensServer


def inlay_hints(ls: CompileLensServer, uri: str, rng: lsp.Range) -> list[lsp.InlayHint]:
    state = ls.docs.get(uri)
    if state is None or not ls.is_current(state) or not state.benchmarks:
        return []
    hints = []
    for site in state.discovery.call_sites if state.discovery else []:  # found with the targets
        bench = state.benchmarks.get(site.target)
        if bench is None or not (rng.start.line <= site.end_line - 1 <= rng.end.line):
            continue
        hints.append(lsp.InlayHint(
            position=lsp.Position(site.end_line - 1, site.end_column - 1),
            label=" " + cards.hint_label(bench), kind=lsp.InlayHintKind.Type, padding_left=True,
            tooltip=cards.lens_title(bench)))
    return hints


def register(server: CompileLensServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_INLAY_HINT)
    def inlay_hint(ls: CompileLensServer, params: lsp.InlayHintParams) -> list[lsp.InlayHint]:
        return inlay_hints(ls, params.text_document.uri, params.range)
