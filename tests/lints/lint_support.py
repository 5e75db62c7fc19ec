"""What the static-lint tests share: lint a source, and the place of a piece of text in it."""

from __future__ import annotations

import itertools
import textwrap

from compile_lens.lints import lint_source
from compile_lens.protocol import Finding

_paths = itertools.count()


def lint(source: str) -> list[Finding]:
    found = lint_source(source, f"/work/model_{next(_paths)}.py")
    assert found is not None, "the source parses: lint_source must return a list"
    return found


def code(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def span(source: str, text: str, nth: int = 0) -> tuple[int, int, int, int]:
    """(line, column, end_line, end_column) of the nth occurrence of `text`: 1-based, characters."""
    at = -1
    for _ in range(nth + 1):
        at = source.index(text, at + 1)
    end = at + len(text)

    def position(offset: int) -> tuple[int, int]:
        return source.count("\n", 0, offset) + 1, offset - (source.rfind("\n", 0, offset) + 1) + 1

    return (*position(at), *position(end))


def places(findings: list[Finding], prefix: str = "CL") -> list[tuple]:
    return [(f.code, f.line, f.column, f.end_line, f.end_column) for f in findings
            if f.code.startswith(prefix)]


def at(code_: str, source: str, text: str, nth: int = 0) -> tuple:
    return (code_, *span(source, text, nth))


def at_arg(code_: str, source: str, text: str, nth: int = 0) -> tuple:
    """An argument found with the character after it (`"lr)"`): the place of `text[:-1]`."""
    line, column, end_line, end_column = span(source, text, nth)
    return (code_, line, column, end_line, end_column - 1)


HEADER = "import torch\nimport torch.nn as nn\n\n\n"
