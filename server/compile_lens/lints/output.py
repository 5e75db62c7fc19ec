"""Findings with document positions (1-based; columns in characters), once per place."""

from __future__ import annotations

import ast
from typing import Optional

from .. import codes
from ..protocol import Finding, Frame
from .facts import Facts

# code -> (severity, title) of the static lints, from the one registry in codes.py.
CODES: dict[str, tuple[str, str]] = {c: (codes.CODES[c].severity, codes.CODES[c].title) for c in codes.LINTS}


class Output:
    """Findings with document positions (1-based; columns in characters), once per place."""

    def __init__(self, path: str, lines: list[str]):
        self.path = path
        self.lines = lines
        self.found: dict[tuple, Finding] = {}
        self.recording: Optional[list[tuple[tuple, Finding]]] = None  # see `record`

    def add(self, node: ast.AST, facts: Facts, code: str, message: str, data: dict, chain=(),
            predicted=False) -> None:
        line, column, end_line, end_column = self.range_of(node, facts)
        key = (code, line, column, end_line, end_column)
        if key in self.found and self.recording is None:
            return
        related = [Frame(self.path, f.line, f.name) for f in chain]
        finding = Finding(self.path, line, column, end_line, end_column, CODES[code][0], code,
                          message, related=related, data=data, predicted=predicted)
        if self.recording is not None:
            self.recording.append((key, finding))
        else:
            self.found[key] = finding

    def record(self, into: list[tuple[tuple, Finding]]) -> None:
        """From now on, `add` appends to `into` instead of keeping (None: keep again): findings
        recorded once are `replay`ed by later lints, as if added again."""
        self.recording = into

    def replay(self, recorded: list[tuple[tuple, Finding]]) -> None:
        for key, finding in recorded:
            if key not in self.found:  # as `add` does: the first finding at a place stays
                self.found[key] = finding

    def sorted(self) -> list[Finding]:
        return sorted(self.found.values(), key=lambda f: (f.line, f.column, f.code))

    def range_of(self, node: ast.AST, facts: Facts) -> tuple[int, int, int, int]:
        line = node.lineno + facts.delta  # type: ignore[attr-defined]
        end_line = (node.end_lineno or node.lineno) + facts.delta  # type: ignore[attr-defined]
        end_col = node.end_col_offset  # type: ignore[attr-defined]
        if end_col is None:
            end_col = node.col_offset  # type: ignore[attr-defined]
        return (line, self._chars(line, node.col_offset) + 1,  # type: ignore[attr-defined]
                end_line, self._chars(end_line, end_col) + 1)

    def _chars(self, line: int, byte_offset: int) -> int:
        """ast columns are UTF-8 byte offsets; the contract's are characters."""
        text = self.line(line)
        if text.isascii():
            return byte_offset
        return len(text.encode("utf-8")[:byte_offset].decode("utf-8", "ignore"))

    def line(self, number: int) -> str:
        return self.lines[number - 1] if 0 < number <= len(self.lines) else ""

    def statement_of(self, call: ast.Call, facts: Facts) -> Optional[list[int]]:
        """The call's range when it is a statement on its own line (a fix can delete or guard it)."""
        line, column, end_line, end_column = self.range_of(call, facts)
        before = self.line(line)[:column - 1]
        after = self.line(end_line)[end_column - 1:].split("#", 1)[0]
        if before.strip() or after.strip():
            return None
        return [line, column, end_line, end_column]

    def text_of(self, node: ast.AST, facts: Facts) -> str:
        line, column, end_line, end_column = self.range_of(node, facts)
        text = self.line(line)
        return text[column - 1:end_column - 1] if end_line == line else text[column - 1:] + " …"
