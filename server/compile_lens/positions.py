"""Move positions from the source a trace ran on to today's buffer when only comments or
formatting changed (same AST fingerprint): nothing re-runs, and every squiggle stays on its code.
"""

from __future__ import annotations

import ast
import dataclasses
import os
from functools import lru_cache
from typing import Optional

from .protocol import Finding, Frame, TargetResult


def same_file(a: Optional[str], b: Optional[str]) -> bool:
    return bool(a and b) and os.path.realpath(a) == os.path.realpath(b)  # type: ignore[arg-type]


class PositionMap:
    """Pairs the nodes of two structurally equal trees: walk order is the same in both."""

    def __init__(self, old: ast.AST, new: ast.AST):
        self.starts: dict[tuple[int, int], tuple[int, int]] = {}
        self.ends: dict[tuple[int, int], tuple[int, int]] = {}
        self.lines: dict[int, int] = {}
        for a, b in zip(ast.walk(old), ast.walk(new)):
            if not hasattr(a, "lineno") or not hasattr(b, "lineno"):
                continue
            self.starts.setdefault((a.lineno, a.col_offset), (b.lineno, b.col_offset))
            self.lines.setdefault(a.lineno, b.lineno)
            if getattr(a, "end_lineno", None) and getattr(b, "end_lineno", None):
                self.ends.setdefault((a.end_lineno, a.end_col_offset), (b.end_lineno, b.end_col_offset))
                self.lines.setdefault(a.end_lineno, b.end_lineno)

    def line(self, line: int) -> int:
        if line in self.lines:
            return self.lines[line]
        # a line no node starts on (a decorator's comment, a blank): shift like the nearest one above
        above = [k for k in self.lines if k < line]
        return line + (self.lines[max(above)] - max(above)) if above else line

    def span(self, line: int, column: int, end_line: int, end_column: int) -> tuple[int, int, int, int]:
        """1-based (line, column, end_line, end_column) in the old source → in the new one."""
        start = self.starts.get((line, column - 1))
        end = self.ends.get((end_line, end_column - 1))
        if start and end:
            return start[0], start[1] + 1, end[0], end[1] + 1
        new_line = self.line(line)
        return new_line, column, new_line + (end_line - line), end_column


@lru_cache(maxsize=64)
def position_map(old_source: str, new_source: str) -> Optional[PositionMap]:
    try:
        old, new = ast.parse(old_source), ast.parse(new_source)
    except (SyntaxError, ValueError):
        return None
    if ast.dump(old, include_attributes=False) != ast.dump(new, include_attributes=False):
        return None
    return PositionMap(old, new)


def moved(result: TargetResult, old_source: Optional[str], new_source: str, path: str) -> Optional[TargetResult]:
    """`result`, found on `old_source` of the file at `path`, in `new_source`'s positions: itself when
    the texts are equal (or the old one is unknown), None when they are not the same code."""
    if not old_source or old_source == new_source:
        return result
    mapping = position_map(old_source, new_source)
    return None if mapping is None else remap_result(result, mapping, path)


def remap_finding(finding: Finding, mapping: PositionMap, path: str) -> Finding:
    """`finding` in the new positions when it lies in the file at `path` (its related locations too)."""
    if not same_file(finding.path, path):
        return finding
    line, column, end_line, end_column = mapping.span(finding.line, finding.column, finding.end_line,
                                                      finding.end_column)
    related = [dataclasses.replace(f, line=mapping.line(f.line)) if same_file(f.path, path) else f
               for f in finding.related]
    return dataclasses.replace(finding, line=line, column=column, end_line=end_line, end_column=end_column,
                               related=related)


def remap_frames(frames: list[Frame], mapping: PositionMap, path: str) -> list[Frame]:
    return [dataclasses.replace(f, line=mapping.line(f.line)) if same_file(f.path, path) else f for f in frames]


def remap_result(result: TargetResult, mapping: PositionMap, path: str) -> TargetResult:
    """A cached TargetResult of the file at `path`, moved into today's coordinates; positions in
    other files stay (see `remap_finding`)."""
    def remap_break(br):
        if same_file(br.path, path):
            line, column, end_line, end_column = mapping.span(br.line, br.column, br.end_line, br.end_column)
            br = dataclasses.replace(br, line=line, column=column, end_line=end_line, end_column=end_column)
        loop = br.loop
        if loop is not None and same_file(loop.path, path):
            line, column, end_line, end_column = mapping.span(loop.line, loop.column, loop.end_line, loop.end_column)
            loop = dataclasses.replace(loop, line=line, column=column, end_line=end_line, end_column=end_column)
        return dataclasses.replace(br, stack=remap_frames(br.stack, mapping, path), loop=loop)

    breaks = [remap_break(br) for br in result.graph_breaks]
    recompiles = [dataclasses.replace(r, line=mapping.line(r.line)) if (r.path is None or same_file(r.path, path))
                  else r for r in result.recompiles]
    recompiles = [dataclasses.replace(r, frame=remap_frames([r.frame], mapping, path)[0])
                  if r.frame is not None else r for r in recompiles]
    error = result.error
    if error is not None and error.line and (error.path is None or same_file(error.path, path)):
        error = dataclasses.replace(error, line=mapping.line(error.line))
    graphs = [dataclasses.replace(g, nodes=[dataclasses.replace(n, line=mapping.line(n.line))
                                            if n.line and same_file(n.path, path) else n for n in g.nodes])
              for g in result.captured_graphs]
    return dataclasses.replace(result, line=mapping.line(result.line), graph_breaks=breaks,
                               recompiles=recompiles, error=error, captured_graphs=graphs)


@lru_cache(maxsize=32)
def _parsed(source: str) -> Optional[ast.AST]:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def expression_end(source: str, line: int, start: int, end: Optional[int] = None) -> Optional[tuple[int, int]]:
    """Where the expression that starts at `line`:`start` ends, as (end_line, end_col), or None.

    Columns are UTF-8 byte offsets, as in code objects and `ast`. torch's frames give the start
    line and both columns but no end line, so a call spread over several lines would end before it
    starts. `end` is the end column torch gave (on the unknown end line); without it (only the
    first line is known, from a traceback's carets), the smallest expression reaching past the
    first line is taken.
    """
    tree = _parsed(source)
    if tree is None:
        return None
    found: list[tuple[int, int]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.expr) or node.lineno != line or node.col_offset != start:
            continue
        end_line, end_col = node.end_lineno, node.end_col_offset
        if end_line is None or end_col is None:
            continue
        if end is None and end_line > line or end is not None and end_col == end:
            found.append((end_line, end_col))
    return min(found) if found else None
