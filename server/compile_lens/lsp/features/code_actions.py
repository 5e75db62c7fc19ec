"""`textDocument/codeAction` and `codeAction/resolve`: the edits of `compile_lens.actions`.

Actions are listed with their `data`; the edit is computed on resolve, from the current text of
the file it changes (a helper in another file is read from disk when it is not open). An action is
listed only when it resolves to an edit that compiles; a client that cannot resolve edits gets
them at once.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Optional

from lsprotocol import types as lsp
from pygls.uris import to_fs_path

from ... import actions
from ...actions.levers import lever_actions, loop_actions
from ...render.assembly import in_workspace
from ..state import CompileLensServer

log = logging.getLogger("compile_lens")

KINDS = [lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.RefactorRewrite]


def figures(ls: CompileLensServer, uri: str) -> dict[str, str]:
    """Measured speedups by target name ("1.42×"), from what the server holds for this file."""
    state = ls.docs.get(uri)
    if state is None or not ls.is_current(state):
        return {}  # measured on older code: not a figure for what is in the editor
    found = {}
    for name, bench in state.benchmarks.items():
        timing = bench.train_step or bench.forward
        if timing is not None and isinstance(timing.speedup, (int, float)) and timing.conclusive:
            found[name] = f"{timing.speedup:.2f}×"  # as the lens and hint say it; under 1× is slower
        # an inconclusive measurement gives no figure to put in a title
    return found


def guesses(ls: CompileLensServer, uri: str) -> dict[str, Any]:
    """Input recipes the worker guessed after import (from a library's config), by target name."""
    state = ls.docs.get(uri)
    if state is None or not ls.is_current(state):
        return {}
    return {name: r.inputs for name, r in state.traced.items()
            if r.inputs is not None and r.inputs.after_import and r.inputs.text}


def _lever_actions(ls: CompileLensServer, uri: str, source: str, line0: int) -> list[lsp.CodeAction]:
    """The levers measured better on the target at the cursor, or on the loop line of its repeated block
    (`actions.levers`), on current results only."""
    state = ls.docs.get(uri)
    src = actions.Source.parse(source)
    if state is None or src is None or not ls.is_current(state):
        return []
    measured = {name: r.levers for name, r in state.traced.items() if r.levers}
    if not measured:
        return []
    targets = ls.targets_in_buffer(state)
    # and on a loop whose repeated block takes most of its frame's compile, the regional edit there too
    return lever_actions(src, uri, line0 + 1, measured, targets) + \
        loop_actions(src, uri, line0 + 1, measured, targets, state.benchmarks, state.path)


def _resolves_edits(ls: CompileLensServer) -> bool:
    text = ls.client_capabilities.text_document
    support = text.code_action.resolve_support if text and text.code_action else None
    return bool(support and "edit" in (support.properties or []))


def _source(ls: CompileLensServer, uri: str) -> Optional[str]:
    try:
        return ls.workspace.get_text_document(uri).source
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("code action: cannot read %s: %s", uri, exc)
        return None


def _editable(ls: CompileLensServer, action: lsp.CodeAction, uri: str) -> bool:
    """An edit to another file only when that file is the user's: under the workspace root, not an
    installed library."""
    data = action.data if isinstance(action.data, dict) else {}
    other = data.get("uri")
    if not isinstance(other, str) or other == uri or not ls.root:
        return True
    target = to_fs_path(other)
    return bool(target) and in_workspace(target, ls.root)


def _resolve(ls: CompileLensServer, action: lsp.CodeAction) -> lsp.CodeAction:
    data = action.data if isinstance(action.data, dict) else {}
    uri = data.get("uri")
    source = _source(ls, uri) if isinstance(uri, str) else None
    return actions.resolve(action, source) if source is not None else action


def register(server: CompileLensServer) -> None:

    @server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION,
                    lsp.CodeActionOptions(code_action_kinds=KINDS, resolve_provider=True))
    def code_action(ls: CompileLensServer, params: lsp.CodeActionParams) -> Optional[list[lsp.CodeAction]]:
        uri = params.text_document.uri
        source = _source(ls, uri)
        if source is None:
            return None
        state = ls.docs.get(uri)
        known = state.discovery if state is not None else None  # the buffer's targets, when the server has them
        if state is not None and state.discovery_stale:
            known = None
        found = actions.code_actions(source, uri, params.range, params.context.diagnostics,
                                     figures(ls, uri), only=params.context.only, discovery=known,
                                     guesses=guesses(ls, uri), hatches=ls.runtime.get("escape_hatches") or ())
        found += _lever_actions(ls, uri, source, params.range.start.line)
        # offered only when its edit is known: resolved now (the parse of this file is cached),
        # and an edit to another file only inside the workspace
        lazy = _resolves_edits(ls)
        offered = []
        for action in found:
            if not _editable(ls, action, uri):
                continue
            resolved = _resolve(ls, copy.deepcopy(action) if lazy else action)
            if resolved.edit is not None:
                offered.append(action if lazy else resolved)  # lazy clients still resolve it themselves
        return offered or None

    @server.feature(lsp.CODE_ACTION_RESOLVE)
    def code_action_resolve(ls: CompileLensServer, params: lsp.CodeAction) -> lsp.CodeAction:
        return _resolve(ls, params)
