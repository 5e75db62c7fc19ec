"""A document parsed statement by statement, each top-level chunk cached by its text.

Target discovery needs the whole module's tree. One `ast.parse` of a 5,000-line file holds the GIL
for ~40 ms, so the discovery thread could stall the event loop that long; parsed chunk by chunk,
the thread yields between chunks, a keystroke re-parses only the chunk it touched (and the chunks
it moved), and a `cancelled()` check between chunks lets the next keystroke stop a stale parse.
The code fingerprint comes out the same as `deps.fingerprint` of a whole-file parse.
"""

from __future__ import annotations

import ast
import hashlib
import warnings
from typing import Callable, Optional

from ..lints.chunks import _PARSE_ERRORS, _top_level_starts


class Superseded(Exception):
    """The buffer changed while it was being parsed: the result would be stale."""


class _Parsed:
    __slots__ = ("start", "body", "dumps")

    def __init__(self, start: int, body: list[ast.stmt], dumps: list[str]):
        self.start, self.body, self.dumps = start, body, dumps


def module_fingerprint(dumps: list[str]) -> str:
    """`deps.fingerprint(tree)` from the dumps of the module's statements (equal by construction:
    `ast.dump` of a Module joins its statements' dumps so)."""
    text = f"Module(body=[{', '.join(dumps)}], type_ignores=[])"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class StatementParser:
    """One per document; used from one thread at a time."""

    def __init__(self) -> None:
        self._chunks: dict[str, _Parsed] = {}

    def parse(self, source: str, cancelled: Callable[[], bool] = lambda: False
              ) -> Optional[tuple[ast.Module, str]]:
        """(the module's tree, its code fingerprint), or None when the source does not parse."""
        lines = source.split("\n")
        starts = _top_level_starts(lines, source)
        spans = list(zip(starts, starts[1:] + [len(lines)]))
        old, new = self._chunks, {}
        body: list[ast.stmt] = []
        dumps: list[str] = []
        i = 0
        while i < len(spans):
            if cancelled():
                raise Superseded
            parsed, used = self._chunk_at(spans, i, lines, old)
            if parsed is None:
                return None  # a syntax error (mid-typing): the cache keeps what parsed before
            new["\n".join(lines[spans[i][0]:spans[i + used - 1][1]])] = parsed
            body += parsed.body
            dumps += parsed.dumps
            i += used
        self._chunks = new
        return ast.Module(body=body, type_ignores=[]), module_fingerprint(dumps)

    @staticmethod
    def _chunk_at(spans, i, lines, old) -> tuple[Optional[_Parsed], int]:
        """The chunk starting at span i; joined with the next 1, 3, 7… spans when it does not parse
        alone (a guessed boundary inside brackets), as `lints.chunks` does."""
        start, used = spans[i][0], 1
        while True:
            end = min(i + used, len(spans))
            text = "\n".join(lines[start:spans[end - 1][1]])
            parsed = _parse(text, start, old.get(text))
            if parsed is not None:
                return parsed, end - i
            if end == len(spans):
                return None, 0
            used *= 2


def _parse(text: str, start: int, cached: Optional[_Parsed]) -> Optional[_Parsed]:
    if cached is not None and cached.start == start:
        return cached
    try:
        with warnings.catch_warnings():  # SyntaxWarnings of half-typed code: not ours to log
            warnings.simplefilter("ignore")
            tree = ast.parse("\n" * start + text)  # leading newlines: the document's line numbers
    except _PARSE_ERRORS:
        return None
    # a chunk that only moved keeps its dumps: they hold no line numbers
    dumps = cached.dumps if cached is not None else [ast.dump(s, include_attributes=False) for s in tree.body]
    return _Parsed(start, tree.body, dumps)
