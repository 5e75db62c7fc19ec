"""Incremental parsing: each top-level statement parsed on its own and cached by its text.

A keystroke re-parses one statement; a cached statement that moved (lines added above it) keeps
its tree, and its facts carry the line offset, added on output.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Optional

from .facts import Facts, _extract

_PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)
_TRIPLE_QUOTE = re.compile(r"\"\"\"|'''")
_CONTINUATION = re.compile(r"(?:else|elif|except|finally)\b")  # these lines continue a statement
# A line that starts with code at column 0 (not blank, indented, a comment, a closing bracket or
# a backslash continuation): where a top-level statement may start.
_AT_COLUMN_0 = re.compile(r"^[^ \t\f#)\]}\\\n]", re.MULTILINE)


@dataclass(eq=False)
class _Chunk:
    """One or more consecutive top-level statements, parsed, with the facts read from them."""

    text: str
    start: int  # 0-based line index of its first line in the document
    facts: Facts

    @classmethod
    def parse(cls, text: str, start: int) -> Optional[_Chunk]:
        try:
            with warnings.catch_warnings():  # SyntaxWarnings of half-typed code: not ours to log
                warnings.simplefilter("ignore")
                # Leading newlines make the parser number lines as in the document.
                tree = ast.parse("\n" * start + text)
        except _PARSE_ERRORS:
            return None
        return cls(text, start, _extract(tree))

    def move_to(self, start: int) -> None:
        """Lines above were added or removed: the tree keeps its numbers, the facts an offset."""
        self.facts.delta += start - self.start
        self.start = start


class _ChunkCache:
    """Per document: chunk text -> the parsed chunks with that text (a text can occur twice).

    Only the documents linted last are kept (a 5,000-line file's trees take ~15 MB)."""

    def __init__(self, max_files: int = 8, max_lines: int = 20_000):
        self._files: OrderedDict[str, dict[str, list[_Chunk]]] = OrderedDict()
        self._lines: dict[str, int] = {}
        self.memos: dict[str, dict] = {}  # per document: the rules' findings kept with its chunks
        self._max_files = max_files
        self._max_lines = max_lines

    def forget(self, path: str) -> None:
        self._files.pop(path, None)
        self._lines.pop(path, None)
        self.memos.pop(path, None)

    def chunks(self, path: str, source: str) -> Optional[list[_Chunk]]:
        lines = source.split("\n")
        starts = _top_level_starts(lines, source)
        spans = list(zip(starts, starts[1:] + [len(lines)]))
        old = self._files.pop(path, {})
        result: list[_Chunk] = []
        i = 0
        while i < len(spans):
            chunk, used = self._chunk_at(spans, i, lines, old)
            if chunk is None and result:
                # The statement may begin in the previous chunk, which parsed alone (an `if`
                # before a continuation we did not recognise): join it with all that follows.
                previous = result.pop()
                chunk = _Chunk.parse("\n".join(lines[previous.start:]), previous.start)
                used = len(spans) - i
            if chunk is None:  # a syntax error: keep the cache as it was, the user is mid-edit
                self._remember(path, _by_text(result, old), len(lines))
                return None
            result.append(chunk)
            i += used
        self._remember(path, _by_text(result, {}), len(lines))
        return result

    def _chunk_at(self, spans, i, lines, old) -> tuple[Optional[_Chunk], int]:
        """The chunk starting at span i, and how many spans it took: when span i does not parse
        alone (a line at column 0 inside brackets, say), it is joined with the next 1, 3, 7, ...
        spans (a parse that fails early is cheap: no tree is built). A guessed boundary that is
        wrong always leaves the chunk before it unfinished (an open bracket or string), so joining
        forward finds the whole statement; failing to the end of the file is a syntax error."""
        start, used = spans[i][0], 1
        while True:
            end = min(i + used, len(spans))
            text = "\n".join(lines[start:spans[end - 1][1]])
            chunk = _take(old, text, start) or _Chunk.parse(text, start)
            if chunk is not None:
                return chunk, end - i
            if end == len(spans):
                return None, 0
            used *= 2

    def _remember(self, path: str, chunks: dict[str, list[_Chunk]], n_lines: int) -> None:
        self._files[path] = chunks  # (re)inserted last: the most recently used
        self._lines[path] = n_lines
        while len(self._files) > 1 and (len(self._files) > self._max_files
                                        or sum(self._lines.values()) > self._max_lines):
            evicted, _ = self._files.popitem(last=False)
            self._lines.pop(evicted, None)
            self.memos.pop(evicted, None)


def _by_text(chunks: list[_Chunk], into: dict[str, list[_Chunk]]) -> dict[str, list[_Chunk]]:
    for chunk in chunks:
        into.setdefault(chunk.text, []).append(chunk)
    return into


def _take(cache: dict[str, list[_Chunk]], text: str, start: int) -> Optional[_Chunk]:
    """A cached chunk with this text (preferably already at `start`), removed from `cache`."""
    found = cache.get(text)
    if not found:
        return None
    at = next((k for k, c in enumerate(found) if c.start == start), len(found) - 1)
    chunk = found.pop(at)
    chunk.move_to(start)
    return chunk


def _top_level_starts(lines: list[str], source: str) -> list[int]:
    """Line indexes where a top-level statement (with its decorators) starts: a guess from the text
    alone; a wrong guess makes a chunk fail to parse, and the caller recovers."""
    in_string = _lines_inside_strings(source, len(lines))
    starts = [0]
    after_decorator = False
    i, pos = 0, 0
    for match in _AT_COLUMN_0.finditer(source):  # a few hundred of a file's lines: not each line
        i += source.count("\n", pos, match.start())
        pos = match.start()
        line = lines[i]
        if in_string[i] or (line[0] in "ef" and _CONTINUATION.match(line)):
            continue
        boundary = not after_decorator
        after_decorator = line[0] == "@"
        if boundary and i:
            starts.append(i)
    return starts


def _lines_inside_strings(source: str, n_lines: int) -> bytearray:
    """1 for each line that begins inside a triple-quoted string (such lines start no statement)."""
    inside = bytearray(n_lines)
    line, pos, opened = 0, 0, None  # opened: (quote, line) of the string we are in
    for match in _TRIPLE_QUOTE.finditer(source):
        line += source.count("\n", pos, match.start())
        pos = match.start()
        quote = match.group()
        if opened is None:
            opened = (quote, line)
        elif quote == opened[0]:
            inside[opened[1] + 1:line + 1] = b"\x01" * (line - opened[1])
            opened = None
    if opened is not None:
        inside[opened[1] + 1:] = b"\x01" * (n_lines - opened[1] - 1)
    return inside
