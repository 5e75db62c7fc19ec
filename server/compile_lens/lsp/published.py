"""Diagnostics on the wire: each one encoded to JSON once, and kept while its finding is unchanged.

A keystroke in a 5,000-line file changes a handful of its ~1,500 findings, yet turning all of them
into lsprotocol objects, then cattrs dicts, then JSON took ~30 ms per keystroke, most of the
server's time. What a diagnostic says depends only on its finding and on the text of the finding's
line (a finding without columns covers its line's text; `# compile-lens: ignore` at the line's end
hides it), so the encoded diagnostic is kept under exactly that key: a kept diagnostic can never
be wrong, only missing. A finding that moved (lines added above it) or changed has another key: its
range is written anew, and the rest of its JSON is reused when all but its position is the same
(no line numbers in its message, data or call chain). The publish goes out as one pre-encoded message
(`lsp/wire.py`'s `notify_json`): pygls would otherwise re-encode the kept dicts on every publish.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Optional

from cattrs import Converter

from ..protocol import Finding
from ..render import findings as fnd
from ..render.lsp import to_diagnostic, to_range

# (line, column, code, message) as shown: the same finding twice is published once
Place = tuple[int, int, str, str]
# A published diagnostic: its place, its JSON, and the JSON but its range under what that depends
# on; None for a finding its line silences.
Entry = Optional[tuple[Place, str, tuple, str]]


class EncodedDiagnostics:
    """One document's diagnostics as JSON text, kept from one publish to the next."""

    def __init__(self) -> None:
        self._kept: dict[tuple, Entry] = {}
        # The same finding object as last time (the lints keep unchanged ones) on the same line
        # text: its key and entry, without building the key. Holds the finding: its id stays its own.
        self._same: dict[int, tuple[Finding, Optional[str], tuple, Entry]] = {}
        # A diagnostic's JSON but its range, by `_key` less the positions: a finding that only
        # moved (lines added above it) gets its range written, not the whole diagnostic encoded.
        self._bodies: dict[tuple, str] = {}

    def encode(self, found: list[Finding], lines: list[str], converter: Converter) -> list[str]:
        """The JSON of each diagnostic to publish, in order, duplicates and suppressed ones left
        out. Keeps only what this publish used, so the cache is as big as the document's findings."""
        kept, same, bodies = self._kept, self._same, self._bodies
        used_bodies: dict[tuple, str] = {}
        used: dict[tuple, Entry] = {}
        used_same: dict[int, tuple[Finding, Optional[str], tuple, Entry]] = {}
        out, seen = [], set()
        n_lines = len(lines)
        for finding in found:
            line_text = lines[finding.line - 1] if 0 < finding.line <= n_lines else None
            last = same.get(id(finding))
            if last is not None and last[0] is finding and last[1] == line_text:
                key, entry = last[2], last[3]
                used[key] = entry  # a copy of this finding (same content) next time is a hit too
            else:
                key = _key(finding, line_text)
                if key in used:
                    entry = used[key]
                elif key in kept:
                    entry = used[key] = kept[key]
                else:
                    entry = used[key] = _encode(finding, lines, converter, key[4:12], bodies)
            used_same[id(finding)] = (finding, line_text, key, entry)
            if entry is None:
                continue
            used_bodies[entry[2]] = entry[3]
            if entry[0] in seen:
                continue
            seen.add(entry[0])
            out.append(entry[1])
        self._kept, self._same, self._bodies = used, used_same, used_bodies
        return out


def encode_once(found: list[Finding], lines: list[str], converter: Converter) -> list[str]:
    """For a file that is not open: nothing to keep between publishes."""
    return EncodedDiagnostics().encode(found, lines, converter)


def params_json(uri: str, version: Optional[int], diagnostics: list[str]) -> str:
    """`PublishDiagnosticsParams` as JSON, from diagnostics already encoded (no version: left out)."""
    head = f'{{"uri": {json.dumps(uri)}, '
    if version is not None:
        head += f'"version": {int(version)}, '
    return head + '"diagnostics": [' + ", ".join(diagnostics) + "]}"


def _key(finding: Finding, line_text: Optional[str]) -> tuple:
    """Everything the encoded diagnostic depends on. `repr(data)`: JSON-like values only, whose
    repr tells them apart (a dict in another order is another key: encoded again, never wrong)."""
    f = finding
    related = tuple((r.path, r.line, r.name, r.note) for r in f.related) if f.related else ()
    return (f.line, f.column, f.end_line, f.end_column, f.severity, f.code, f.message, f.url, f.predicted,
            f.path, related, repr(f.data) if f.data else "", line_text)


def _encode(finding: Finding, lines: list[str], converter: Converter, body_key: tuple,
            bodies: dict[tuple, str]) -> Entry:
    """The diagnostic's JSON: its range, then the rest (`body_key`: what the rest depends on),
    kept in `bodies` or encoded; None when its line silences it."""
    if finding.column == finding.end_column == 1:
        finding = dataclasses.replace(finding)  # whole_line sets its columns: not on the caller's copy
    finding = fnd.whole_line(finding, lines)
    if fnd.suppressed(finding, lines):
        return None
    place = (finding.line, finding.column, finding.code, finding.message)
    body = bodies.get(body_key)
    if body is None:
        whole = converter.unstructure(to_diagnostic(finding))
        del whole["range"]
        body = json.dumps(whole)[1:]  # '"message": ..., ...}': after the range
    r = to_range(finding.line, finding.column, finding.end_line, finding.end_column)
    text = (f'{{"range": {{"start": {{"line": {r.start.line}, "character": {r.start.character}}}, '
            f'"end": {{"line": {r.end.line}, "character": {r.end.character}}}}}, {body}')
    return place, text, body_key, body
