"""Code actions: findings and model constructions → edits. Pure: source text in, lsprotocol out.

`code_actions` answers `textDocument/codeAction` cheaply: it decides which actions apply and puts
what each needs in `data`; `resolve` computes the edit (`codeAction/resolve`) from the current
text of the file the edit goes to. No torch, no server state. Positions are characters, as in the
rest of the server's output.

What each fix does to torch 2.13's trace (checked with `torch._dynamo.explain`):
- `capture_scalar_outputs = True` removes the `.item()` break (GB0124) — unless the value is then
  branched on (the break moves to the branch), so it is not offered then;
- `reorderable_logging_functions.add(print)` removes a print break only when every argument is a
  tensor, a constant or a format string (else GB0296); otherwise `ignore_logging_functions`
  (print does not run under torch.compile) is offered instead;
- `ignore_logging_functions.add(logging.Logger.warning)` removes a logger-method break (GB0291);
- `@torch.compiler.disable` on a helper removes the breaks inside it, but the graph still breaks
  once where it is called (GB0098): the title says so;
- `dynamic=True` stops size recompiles (CL210), not specializations (CL211: ints in `range()`,
  strings, dtypes), so it is offered for CL210 only; `mark_dynamic(x, dim)` before each call marks
  the first input too (one graph instead of two).

`registry` says which fix family answers which finding and how each family's edit is made; one
module per family (`ignore`, `scalars`, `print_logging`, `disable`, `hatches`, `dynamic`, `wrap`,
`directive`) over `source` (the parsed file) and `header` (imports and config lines).
"""

from __future__ import annotations

import re
from typing import Any, Optional, Sequence

from lsprotocol import types as lsp

from .registry import _RESOLVERS, _fixes_for, _rewrites_at
from .source import SOURCE, Edit, Source


def code_actions(source: str, uri: str, rng: lsp.Range, diagnostics: Sequence[lsp.Diagnostic],
                 figures: Optional[dict[str, str]] = None,
                 only: Optional[Sequence[str]] = None, discovery: Any = None,
                 guesses: Optional[dict[str, Any]] = None,
                 hatches: Sequence[str] = ()) -> list[lsp.CodeAction]:
    """The actions for `rng` in this file, unresolved (no edit; `data` says how to make it).

    `diagnostics`: the request context's (only Compile Lens' are used); `figures`: measured
    speedups by target name ("1.42×"); `only`: the kinds the client asked for; `discovery`: the
    targets of exactly this text, when the caller has them (else they are found here); `guesses`:
    the input recipes the worker guessed after import, by target name (from its last results);
    `hatches`: the escape hatches the worker's torch has (its hello's `escape_hatches`)."""
    src = Source.parse(source)
    actions: list[lsp.CodeAction] = []
    if src is not None:
        if discovery is not None:
            src.memo("discovery", lambda: discovery)
        for d in diagnostics:
            if d.source == SOURCE and d.code:
                actions += _fixes_for(src, uri, d, frozenset(hatches))
        fixed = {a.data.get("target") for a in actions if isinstance(a.data, dict) and a.data.get("fix") == "directive"}
        actions += [a for a in _rewrites_at(src, uri, rng.start.line, figures or {}, guesses)
                    if not (isinstance(a.data, dict) and a.data.get("fix") == "directive" and a.data.get("target") in fixed)]
    if only:
        actions = [a for a in actions if any(a.kind == k or (a.kind or "").startswith(f"{k}.") for k in only)]
    return actions


def resolve(action: lsp.CodeAction, source: str) -> lsp.CodeAction:
    """Fill in `action.edit` from `source`, the current text of the file `action.data["uri"]`.

    Returns the action unchanged (no edit) when it no longer applies to that text, or when the
    edited file would not parse."""
    data = action.data if isinstance(action.data, dict) else {}
    make = _RESOLVERS.get(data.get("fix", ""))
    src = Source.parse(source)
    if make is None or src is None or not data.get("uri"):
        return action
    try:
        edits = make(src, data)
    except (KeyError, TypeError, ValueError, IndexError):
        edits = None
    if not edits:
        return action
    text_edits = [e.to_lsp() for e in _merge_inserts(edits)]
    try:  # compiled, not only parsed: a `return` or `nonlocal` out of place fails here too
        compile(apply_edits(source, text_edits), "<edited>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return action
    action.edit = lsp.WorkspaceEdit(changes={data["uri"]: text_edits})
    return action


def _merge_inserts(edits: list[Edit]) -> list[Edit]:
    """Insertions at one position become one edit: not every client keeps their order."""
    merged: list[Edit] = []
    for e in edits:
        same = next((m for m in merged if (m.line, m.col) == (m.end_line, m.end_col) == (e.line, e.col)
                     and (e.end_line, e.end_col) == (e.line, e.col)), None)
        if same is not None:
            same.text += e.text
        else:
            merged.append(Edit(e.line, e.col, e.end_line, e.end_col, e.text))
    return merged


def apply_edits(source: str, edits: Sequence[lsp.TextEdit]) -> str:
    """The text after `edits` (LSP semantics: positions refer to the original text)."""
    starts = [0]
    for m in re.finditer(r"\r\n|\r|\n", source):
        starts.append(m.end())

    def offset(p: lsp.Position) -> int:
        if p.line >= len(starts):
            return len(source)
        line_end = starts[p.line + 1] if p.line + 1 < len(starts) else len(source)
        return min(starts[p.line] + p.character, line_end)

    spans = sorted(((offset(e.range.start), offset(e.range.end), i, e.new_text) for i, e in enumerate(edits)),
                   key=lambda s: (s[0], s[2]))
    out, at = [], 0
    for start, end, _, text in spans:
        out.append(source[at:start])
        out.append(text)
        at = max(at, end)
    out.append(source[at:])
    return "".join(out)
