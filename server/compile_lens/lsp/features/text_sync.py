"""`textDocument/didOpen|didChange|didSave|didClose`: lint on every change, trace on open and save
(files that import the saved one are traced again too), forget on close."""

from __future__ import annotations

import os

from lsprotocol import types as lsp
from pygls.uris import to_fs_path

from ... import timeline
from .. import documents, scheduler
from ..state import CompileLensServer


def register(server: CompileLensServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: CompileLensServer, params: lsp.DidOpenTextDocumentParams) -> None:
        state = ls.doc(params.text_document.uri)
        state.open, state.timeline = True, timeline.start("open")
        documents.relint(ls, params.text_document.uri)
        timeline.mark(state.timeline, "linted")
        scheduler.schedule_trace(ls, params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: CompileLensServer, params: lsp.DidChangeTextDocumentParams) -> None:
        documents.relint(ls, params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: CompileLensServer, params: lsp.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        document, state = ls.workspace.get_text_document(uri), ls.doc(uri)
        state.saved_version, state.saved_text = document.version, document.source
        state.timeline = timeline.start("open")
        documents.relint(ls, uri)
        timeline.mark(state.timeline, "linted")
        scheduler.schedule_trace(ls, uri)
        saved_path = os.path.realpath(to_fs_path(uri) or uri)
        for other in list(ls.docs.values()):  # files importing this one are re-traced too
            if other.uri != uri and other.saved and saved_path in other.saved.deps:
                scheduler.schedule_trace(ls, other.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: CompileLensServer, params: lsp.DidCloseTextDocumentParams) -> None:
        documents.close(ls, params.text_document.uri)
