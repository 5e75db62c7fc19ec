"""Stream the events of one PyTorch profiler (Kineto) trace: `{"schemaVersion": …, "traceEvents": [{…}, …], …}`,
plain or gzipped, in bounded memory.

`json.load` of a 1 GB trace holds every event as a dict at once (HTA's pandas frames hold them as
rows); here the top-level object is walked key by key and `traceEvents` is decoded one event at a
time with the standard library's C decoder (`raw_decode`) over a sliding buffer, so memory is the
buffer plus what the caller keeps. The other top-level keys (`distributedInfo`, `deviceProperties`,
`baseTimeNanoseconds`, …) may come before or after the events: they are in `meta` once the events
are read. A file cut short (a job killed while writing) keeps what was read, `truncated` says so.
"""

from __future__ import annotations

import gzip
import json
from typing import IO, Any, Iterator

CHUNK = 1 << 20  # characters per read; the buffer holds about this much beside one event
MAX_VALUE = 64 << 20  # no event is this long: broken JSON further on, not a value to read the file into memory for
_WS = " \t\n\r"


class NotKineto(ValueError):
    """The file is not a profiler trace (the first bytes say so): which file, and what it is instead."""


def opened(path: str) -> IO[str]:
    with open(path, "rb") as raw:
        gz = raw.read(2) == b"\x1f\x8b"
    if gz:
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def looks_like_kineto(path: str) -> bool:
    """The first KB holds a JSON object with a Kineto key: what `compile-lens import` detects by content."""
    try:
        with opened(path) as f:
            head = f.read(4096)
    except (OSError, EOFError, gzip.BadGzipFile):
        return False
    return head.lstrip().startswith("{") and any(k in head for k in ('"traceEvents"', '"schemaVersion"', '"deviceProperties"'))


class TraceFile:
    """`events()` yields each event dict once; `meta` then holds the other top-level keys."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.meta: dict[str, Any] = {}
        self.truncated = False
        self.bytes_read = 0
        self._decoder = json.JSONDecoder()
        self._f: IO[str] | None = None
        self._buf = ""
        self._pos = 0
        self._eof = False

    # the buffer: `_buf[_pos:]` is what is not consumed yet
    def _more(self) -> bool:
        if self._eof or self._f is None:
            return False
        try:
            chunk = self._f.read(CHUNK)
        except (EOFError, OSError, gzip.BadGzipFile):  # a gzip stream cut short
            chunk = ""
            self.truncated = True
        if not chunk:
            self._eof = True
            return False
        self.bytes_read += len(chunk)
        self._buf = self._buf[self._pos:] + chunk
        self._pos = 0
        return True

    def _skip_ws(self) -> str:
        """The next non-blank character, not consumed; "" at the end of the file."""
        while True:
            buf, pos = self._buf, self._pos
            while pos < len(buf) and buf[pos] in _WS:
                pos += 1
            self._pos = pos
            if pos < len(buf):
                return buf[pos]
            if not self._more():
                return ""

    def _expect(self, chars: str) -> str:
        c = self._skip_ws()
        if c == "" or c not in chars:
            raise _Cut(f"expected {chars!r}, found {c!r}")
        self._pos += 1
        return c

    def _value(self) -> Any:
        """One JSON value at the position; the buffer grows until it holds the whole value (a number at
        the buffer's end may go on in the next chunk, so a value must end before the buffer does)."""
        self._skip_ws()
        while True:
            try:
                value, end = self._decoder.raw_decode(self._buf, self._pos)
                if end < len(self._buf) or self._eof:
                    self._pos = end
                    return value
            except json.JSONDecodeError:
                if self._eof or len(self._buf) - self._pos > MAX_VALUE:
                    raise _Cut("a value cut short, or broken JSON") from None
            if not self._more():
                if self._eof:
                    continue  # decode once more, knowing nothing follows
                raise _Cut("a value cut short")

    def events(self) -> Iterator[dict[str, Any]]:
        with opened(self.path) as f:
            self._f = f
            try:
                if self._skip_ws() != "{":
                    raise NotKineto(f"{self.path}: not a PyTorch profiler trace (it does not start with a JSON object)")
                self._pos += 1
                if self._skip_ws() == "}":
                    return
                while True:
                    key = self._value()
                    self._expect(":")
                    if key == "traceEvents":
                        yield from self._array()
                    else:
                        self.meta[key] = self._value()
                    if self._expect(",}") == "}":
                        return
            except _Cut:
                self.truncated = True
            finally:
                self._f = None
                self._buf, self._pos = "", 0

    def _array(self) -> Iterator[dict[str, Any]]:
        self._expect("[")
        if self._skip_ws() == "]":
            self._pos += 1
            return
        while True:
            event = self._value()
            if isinstance(event, dict):
                yield event
            if self._expect(",]") == "]":
                return


class _Cut(Exception):
    """The file ends (or breaks) before its JSON does."""
