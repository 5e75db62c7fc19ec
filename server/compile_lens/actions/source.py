"""The file an action edits: parsed once per text, its lines, positions and edits."""

from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

from lsprotocol import types as lsp

from ..discovery import discover

SOURCE = "Compile Lens"
QUICKFIX = lsp.CodeActionKind.QuickFix
REWRITE = lsp.CodeActionKind.RefactorRewrite

COMPILES = {"torch.compile", "torch.compiler.compile"}

_INSTALLED = ("site-packages", "dist-packages")  # an installed library's file: never edited


@dataclass
class Edit:
    line: int  # 0-based
    col: int  # characters
    end_line: int
    end_col: int
    text: str

    def to_lsp(self) -> lsp.TextEdit:
        return lsp.TextEdit(lsp.Range(lsp.Position(self.line, self.col), lsp.Position(self.end_line, self.end_col)),
                            self.text)


class Source:
    """A parsed file. Parsed once per text (a cursor move re-asks with the same text); what the
    actions need is looked up in the top-level statement at hand, not the whole file."""

    _recent: dict[str, Source] = {}

    def __init__(self, text: str, tree: ast.Module):
        self.text = text
        self.tree = tree
        self.rows = re.split(r"\r\n|\r|\n", text)  # the last one is "" when the text ends with a newline
        self.nl = "\r\n" if "\r\n" in text else "\r" if "\r" in text and "\n" not in text else "\n"
        self._starts = [min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", [])]) for n in tree.body]
        self._memo: dict[Any, Any] = {}

    @classmethod
    def parse(cls, text: str) -> Optional[Source]:
        found = cls._recent.get(text)
        if found is not None:
            return found
        try:
            src = cls(text, ast.parse(text))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        if len(cls._recent) >= 2:  # a big file's tree is megabytes: the last texts only
            cls._recent.pop(next(iter(cls._recent)))
        cls._recent[text] = src
        return src

    def memo(self, key: Any, make: Callable[[], Any]) -> Any:
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    def top(self, line: int) -> Optional[ast.stmt]:
        """The top-level statement (with its decorators) that spans 1-based `line`."""
        i = bisect.bisect_right(self._starts, line) - 1
        if i < 0:
            return None
        node = self.tree.body[i]
        return node if line <= (node.end_lineno or node.lineno) else None

    def walk_line(self, line: int) -> Iterator[ast.AST]:
        top = self.top(line)
        return ast.walk(top) if top is not None else iter(())

    def parent(self, node: ast.AST) -> Optional[ast.AST]:
        top = self.top(getattr(node, "lineno", 0))
        if top is None:
            return None
        if node is top:
            return self.tree

        def build() -> dict[ast.AST, ast.AST]:
            found = {}
            for outer in ast.walk(top):
                for child in ast.iter_child_nodes(outer):
                    found[child] = outer
            return found

        return self.memo(("parents", id(top)), build).get(node)

    def row(self, line: int) -> str:
        """1-based line's text."""
        return self.rows[line - 1] if 0 < line <= len(self.rows) else ""

    def col(self, line: int, byte_offset: int) -> int:
        """ast columns are UTF-8 byte offsets; edits use characters."""
        text = self.row(line)
        return byte_offset if text.isascii() else len(text.encode("utf-8")[:byte_offset].decode("utf-8", "ignore"))

    def start(self, node: ast.AST) -> tuple[int, int]:
        return node.lineno - 1, self.col(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> tuple[int, int]:
        line = node.end_lineno or node.lineno  # type: ignore[attr-defined]
        return line - 1, self.col(line, node.end_col_offset or 0)  # type: ignore[attr-defined]

    def indent(self, line: int) -> str:
        text = self.row(line)
        return text[: len(text) - len(text.lstrip())]

    def insert_lines(self, before: int, lines: list[str]) -> Edit:
        """Whole lines inserted before 0-based line `before` (at the end of the file when past it)."""
        if before < len(self.rows) - 1 or (before == len(self.rows) - 1 and self.rows[-1] == ""):
            body = self.nl.join(lines) + self.nl
            return Edit(before, 0, before, 0, body)
        last = len(self.rows) - 1
        return Edit(last, len(self.rows[last]), last, len(self.rows[last]), self.nl + self.nl.join(lines))

    def blank(self, index: int) -> bool:
        """0-based line `index` is blank (or past the end)."""
        return index >= len(self.rows) or not self.rows[index].strip()

    def enclosing(self, node: ast.AST, kinds: tuple) -> Optional[ast.AST]:
        parent = self.parent(node)
        while parent is not None and not isinstance(parent, kinds):
            parent = self.parent(parent) if parent is not self.tree else None
        return parent

    def calls(self) -> list[ast.Call]:
        """Every call in the file (once per text)."""
        return self.memo("calls", lambda: [n for n in ast.walk(self.tree) if isinstance(n, ast.Call)])

    def discovery(self) -> Any:
        return self.memo("discovery", lambda: discover(self.text))


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""


def is_compile(func: ast.AST) -> bool:
    return dotted(func) in COMPILES


def decorator_names(node: ast.AST) -> list[str]:
    return [dotted(d.func if isinstance(d, ast.Call) else d) for d in getattr(node, "decorator_list", [])]


def _action(title: str, kind: str, data: dict, diagnostic: Optional[lsp.Diagnostic] = None,
            preferred: bool = False) -> lsp.CodeAction:
    return lsp.CodeAction(title=title, kind=kind, diagnostics=[diagnostic] if diagnostic else None,
                          is_preferred=preferred or None, data=data)


def calls_on_line(src: Source, line: int, test: Callable[[ast.Call], bool]) -> list[ast.Call]:
    return [n for n in src.walk_line(line) if isinstance(n, ast.Call)
            and n.lineno <= line <= (n.end_lineno or n.lineno) and test(n)]
