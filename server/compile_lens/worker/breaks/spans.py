"""Source positions of a break: torch's byte columns and traceback carets as editor characters.

torch's frames carry UTF-8 byte offsets and no end line; editors count characters, and a call
spread over several lines ends on a later line, which only the expression in the source tells.
"""

from __future__ import annotations

import linecache

from ...positions import expression_end


def source_line(path: str, line: int) -> str:
    return linecache.getline(path, line).rstrip("\n")


def file_source(path: str) -> str:
    return "".join(linecache.getlines(path))


def chars(path: str, line: int, byte: int) -> int:
    """Code positions are UTF-8 byte offsets; editors count characters."""
    return len(source_line(path, line).encode("utf-8")[:byte].decode("utf-8", "ignore"))


def span(path: str, line: int, start_byte: int, end_byte: int) -> tuple[tuple[int, int], int]:
    """Characters (start on `line`, end on the end line) and the end line of torch's byte columns.

    torch's frames have no end line: `end_colno` may belong to a later line (a call spread over
    several lines), which the expression's own end in the source tells."""
    end = expression_end(file_source(path), line, start_byte, end_byte)
    end_line = end[0] if end is not None else line
    if end is None and end_byte <= start_byte:  # no such expression (source changed): the start line
        return (chars(path, line, start_byte), len(source_line(path, line).rstrip())), line
    return (chars(path, line, start_byte), chars(path, end_line, end_byte)), end_line


def span_from_first_line(path: str, line: int, columns: tuple[int, int]) -> tuple[tuple[int, int], int | None]:
    """A traceback underlines only the first line of a multi-line expression: its real end."""
    start_byte = len(source_line(path, line)[:columns[0]].encode("utf-8"))
    end = expression_end(file_source(path), line, start_byte)
    if end is None:
        return columns, None
    return (columns[0], chars(path, end[0], end[1])), end[0]


def caret_columns(path: str, line: int, code_row: str, caret_row: str) -> tuple[int, int] | None:
    """The characters a traceback's `^~~~` row underlines, on the source line as it is on disk."""
    source = source_line(path, line)
    code = code_row.strip()
    if not source or not code:
        return None
    indent = source.find(code)
    if indent < 0:
        return None
    shown_at = len(code_row) - len(code_row.lstrip())
    start = len(caret_row) - len(caret_row.lstrip()) - shown_at
    width = len(caret_row.strip())
    return indent + start, indent + start + width
