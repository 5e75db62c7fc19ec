"""Static lints: the usual graph-break patterns and recompile hazards, from `ast` alone.

CL1xx predict graph breaks inside code that `torch.compile` will trace: the `forward` of
`nn.Module` subclasses, `@torch.compile` functions, functions passed to `torch.compile(...)`, and
the helpers in this file that they call. CL2xx flag recompile hazards anywhere in the file.

No torch and no pygls: this runs in the language server on every keystroke. `ast.parse` alone takes
longer than the budget on a 5,000-line file, so parsing is incremental: each top-level statement is
parsed on its own and cached by its text, and so are the facts read from it; a keystroke re-parses
one statement and re-runs only the cheap cross-statement resolution. A cached statement that moved
(lines added above it) keeps its tree: its facts carry the line offset, added on output.

`chunks` parses incrementally, `facts` reads each chunk, `index` resolves them against each other,
`graph_breaks` (CL1xx) and `recompiles` (CL2xx) are the rule families, `output` places findings.
`lint_source` and `forget` are the entry points.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from typing import Optional

from ..protocol import Finding
from .chunks import _Chunk, _ChunkCache
from .graph_breaks import Memo, _predicted_breaks
from .index import Index
from .output import CODES, Output
from .recompiles import _recompile_hazards


def lint_source(source: str, path: str) -> Optional[list[Finding]]:
    """Static lints for one file. None when the source does not parse (mid-typing): the caller then
    keeps what it published before. Findings that did not change are the same objects as the last
    lint's of this path (kept with its chunks): read them, copy before changing one."""
    source = _normalise_newlines(source)
    with _LOCK, _gc_paused():  # cached chunks' offsets change per call; one lint at a time
        chunks = _CACHE.chunks(path, source)
        if chunks is None:
            return None
        return _lint_chunks(chunks, source, path, _CACHE.memos.setdefault(path, {}))


def forget(path: str) -> None:
    """Drop the parse cache of a closed document."""
    with _LOCK:
        _CACHE.forget(path)


def _lint_chunks(chunks: list[_Chunk], source: str, path: str, memo: Optional[Memo] = None) -> list[Finding]:
    """`memo`: the previous lint's findings of each traced function (see `_predicted_breaks`),
    replaced by this lint's."""
    index = Index([chunk.facts for chunk in chunks])
    out = Output(path, source.split("\n"))
    _predicted_breaks(index, out, {} if memo is None else memo)
    _recompile_hazards(index, out)
    return out.sorted()


@contextlib.contextmanager
def _gc_paused():
    """Parsing a large file makes ~10^5 objects, and the collector, triggered over and over by
    them, doubles the time of a first lint; nothing here needs it while it runs."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _normalise_newlines(source: str) -> str:
    # The parser treats \r\n and \r as \n; doing the same keeps our line numbers equal to its.
    if "\r" in source:
        source = source.replace("\r\n", "\n").replace("\r", "\n")
    # A byte-order mark is an error in a str for the parser (line 1 then counts columns after it).
    return source[1:] if source.startswith("\ufeff") else source


_LOCK = threading.Lock()

_CACHE = _ChunkCache()

__all__ = ["CODES", "forget", "lint_source"]
