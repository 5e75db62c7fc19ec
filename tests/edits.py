"""LSP text edits applied to source text, as a client applies them: shared by the unit and end-to-end
code action tests."""

from __future__ import annotations

import ast
import difflib

from lsprotocol import types as lsp


def apply_edits(text: str, edits) -> str:
    """LSP text edits applied to `text` (positions refer to the original; last first)."""
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)

    def at(p: lsp.Position) -> int:
        return min(offsets[min(p.line, len(lines))] + p.character, len(text))

    spans = [(at(e.range.start), at(e.range.end), i, e.new_text) for i, e in enumerate(edits)]
    for start, end, _, new_text in sorted(spans, reverse=True):  # same position: array order kept
        text = text[:start] + new_text + text[end:]
    return text


def line_changes(before: str, after: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(replaced lines as (old, new), inserted lines): nothing may be deleted."""
    replaced, inserted = [], []
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    for op, a1, a2, b1, b2 in matcher.get_opcodes():
        old, new = before.splitlines()[a1:a2], after.splitlines()[b1:b2]
        if op == "insert":
            inserted += new
        elif op == "replace":
            assert len(old) == len(new), (old, new)
            replaced += list(zip(old, new))
        elif op == "delete":
            raise AssertionError(f"lines deleted: {old}")
    return replaced, inserted


def edited(action: lsp.CodeAction, uri: str, text: str) -> str:
    new = apply_edits(text, action.edit.changes[uri])
    ast.parse(new)
    return new
