"""`# compile-lens: ignore[CODE]` on the finding's line (added to an ignore already there)."""

from __future__ import annotations

import ast
from typing import Optional

from lsprotocol import types as lsp

from ..comments import IGNORE_COMMENT
from .source import QUICKFIX, Edit, Source, _action


def _ignore(src: Source, uri: str, d: lsp.Diagnostic, code: str) -> list[lsp.CodeAction]:
    line = d.range.start.line + 1
    text = src.row(line)
    if line > len(src.rows) or text.rstrip().endswith("\\"):
        return []
    match = IGNORE_COMMENT.search(text)
    if match and match["codes"] is None:
        return []  # everything on this line is ignored already
    return [_action(f"Ignore {code} on this line (# compile-lens: ignore[{code}])", QUICKFIX,
                    {"fix": "ignore", "uri": uri, "line": line, "code": code}, d)]


def _resolve_ignore(src: Source, data: dict) -> Optional[list[Edit]]:
    line, code = int(data["line"]), str(data["code"])
    text = src.row(line)
    match = IGNORE_COMMENT.search(text)
    if match:
        if match["codes"] is None:
            return None
        codes = [c.strip() for c in match["codes"].split(",") if c.strip()]
        if code.upper() in {c.upper() for c in codes}:
            return None
        new = f"# compile-lens: ignore[{', '.join(codes + [code])}]"
        return [Edit(line - 1, match.start(), line - 1, match.end(), new)]
    if _ends_inside_string(src, line):
        return None
    end = len(text.rstrip())
    return [Edit(line - 1, end, line - 1, len(text), f"  # compile-lens: ignore[{code}]")]


def _ends_inside_string(src: Source, line: int) -> bool:
    for node in src.walk_line(line):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) \
                and node.lineno <= line < (node.end_lineno or node.lineno):
            return True
        if isinstance(node, ast.JoinedStr) and node.lineno <= line < (node.end_lineno or node.lineno):
            return True
    return False
