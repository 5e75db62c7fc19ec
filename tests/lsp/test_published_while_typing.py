"""Diagnostics kept between keystrokes (`lsp/published.py`) are never stale: after each edit, the
edited document's diagnostics equal those of a fresh open of the same text, in full.

Edits as an editor sends them (incremental `didChange`): lines inserted and deleted above the
findings (every finding below moves), a finding added and removed inside a chunk, a helper made
traced by a call from another chunk (a finding appears far from the edit), a finding silenced by
`# compile-lens: ignore` at its line's end, and, in a small file, edits on the line of a finding
without columns (it covers its line's text). Real server over stdio, untrusted workspace (lints
and the source's own findings; no torch)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from lsprotocol import types as lsp
from pygls.protocol import default_converter

from compile_lens.lsp.documents import BIG_FILE_CHARS
from lsp_support import start_server, stop_server
from paths import REPO

sys.path.insert(0, str(REPO))  # the benchmark modules (benchmarks/)
from benchmarks.editor.typing_latency import busy_file  # noqa: E402

CONVERTER = default_converter()


class Buffer:
    """The client's copy of a document, edited with incremental changes sent to the server."""

    def __init__(self, client, path: Path, text: str):
        self.client, self.uri, self.version = client, path.as_uri(), 1
        self.lines = text.split("\n")
        client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=self.uri, language_id="python", version=1, text=text)))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def find(self, needle: str, after: int = 0) -> int:
        return next(i for i in range(after, len(self.lines)) if needle in self.lines[i])

    def replace(self, line: int, column: int, end_line: int, end_column: int, new: str) -> int:
        """Replace the range with `new` (both sides of the wire), as one didChange; its version."""
        head, tail = self.lines[line][:column], self.lines[end_line][end_column:]
        self.lines[line:end_line + 1] = (head + new + tail).split("\n")
        self.version += 1
        self.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
            [lsp.TextDocumentContentChangePartial(
                range=lsp.Range(lsp.Position(line, column), lsp.Position(end_line, end_column)), text=new)]))
        return self.version

    def insert(self, line: int, column: int, new: str) -> int:
        return self.replace(line, column, line, column, new)

    def delete_lines(self, line: int, count: int) -> int:
        return self.replace(line, 0, line + count, 0, "")


def latest(client, uri: str):
    return next((p for p in reversed(client.published) if p.uri == uri), None)


def as_json(params, uri: str) -> list[str]:
    """Each diagnostic as JSON, with the document's uri written as `uri` (related locations name it)."""
    return [json.dumps(CONVERTER.unstructure(d), sort_keys=True).replace(params.uri, uri)
            for d in params.diagnostics]


async def same_as_fresh_open(client, edited: Buffer, fresh: Path, within_s: float = 60) -> int:
    """Wait until the edited document's latest publish (of its version) equals a fresh open's of
    the same text (targets of a big file are found in the background: both settle); the count."""
    fresh.write_text(edited.text)
    other = Buffer(client, fresh, edited.text)
    deadline = asyncio.get_running_loop().time() + within_s
    try:
        while True:
            mine, theirs = latest(client, edited.uri), latest(client, other.uri)
            ready = mine is not None and theirs is not None and mine.version == edited.version
            if ready and as_json(mine, edited.uri) == as_json(theirs, edited.uri):
                return len(mine.diagnostics)
            if asyncio.get_running_loop().time() > deadline:
                have = set(as_json(mine, edited.uri)) if mine else set()
                want = set(as_json(theirs, edited.uri)) if theirs else set()
                raise AssertionError(f"version {edited.version} (published: {mine and mine.version}) differs "
                                     f"from a fresh open: only in the edited {sorted(have - want)[:3]}; "
                                     f"only in the fresh {sorted(want - have)[:3]}")
            await asyncio.sleep(0.05)
    finally:
        client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(other.uri)))
        while latest(client, other.uri).diagnostics:  # closed: its empty publish, before the next open
            await asyncio.sleep(0.02)


async def test_a_big_file_edited_publishes_what_a_fresh_open_does(tmp_path):
    text = busy_file(1200)
    assert len(text) > BIG_FILE_CHARS  # debounced lints, targets found in the background
    path, fresh = tmp_path / "busy.py", tmp_path / "fresh.py"
    path.write_text(text)
    client = await start_server(tmp_path, trusted=False)
    try:
        doc = Buffer(client, path, text)
        counts = [await same_as_fresh_open(client, doc, fresh)]
        header_end = doc.find("logger = logging.getLogger") + 1

        doc.insert(header_end, 0, "# a note\n\n# another\n")  # every finding below moves down 3 lines
        counts.append(await same_as_fresh_open(client, doc, fresh))
        forward = doc.find("h = self.norm(x)", len(doc.lines) // 2)
        printed = doc.find('print("norm"', forward)
        doc.insert(printed, doc.lines[printed].index('"norm"') + 5, " again")  # a finding's range grows
        counts.append(await same_as_fresh_open(client, doc, fresh))
        doc.delete_lines(header_end, 2)  # moves up 2
        counts.append(await same_as_fresh_open(client, doc, fresh))

        doc.insert(forward + 1, 0, '        print("added", x.shape)\n')  # a finding added inside a chunk
        counts.append(await same_as_fresh_open(client, doc, fresh))
        assert counts[-1] == counts[-2] + 1
        item = doc.find("scale = h.abs().max().item()", forward)
        doc.delete_lines(item, 1)  # and one removed
        counts.append(await same_as_fresh_open(client, doc, fresh))
        assert counts[-1] == counts[-2] - 1

        end = len(doc.lines) - 1  # a helper nobody compiles: no findings yet
        doc.insert(end, 0, '\n\ndef report(h):\n    print("report", h.shape)\n    return h\n')
        counts.append(await same_as_fresh_open(client, doc, fresh))
        assert counts[-1] == counts[-2]
        doc.insert(forward + 1, 0, "        h = report(h)\n")  # now traced from a forward far above
        counts.append(await same_as_fresh_open(client, doc, fresh))
        assert counts[-1] == counts[-2] + 1

        printed = doc.find('print("added"', forward)
        doc.insert(printed, len(doc.lines[printed]), "  # compile-lens: ignore")  # silenced
        counts.append(await same_as_fresh_open(client, doc, fresh))
        assert counts[-1] == counts[-2] - 1
        doc.replace(printed, len(doc.lines[printed]) - len("ignore"), printed, len(doc.lines[printed]), "")
        counts.append(await same_as_fresh_open(client, doc, fresh))  # "# compile-lens: " alone: shown again
        assert counts[-1] == counts[-2] + 1
    finally:
        await stop_server(client)


SMALL = '''import torch
import torch.nn as nn


# compile-lens: inputs=(torch.randn(8, 16)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        print("x", x.shape)
        return self.fc(x)
'''


async def test_a_finding_without_columns_follows_its_line_text(tmp_path):
    """A directive that does not parse is said on its whole line: edits of that line's text, and
    lines added above it, re-place it exactly as a fresh open would."""
    path, fresh = tmp_path / "small.py", tmp_path / "fresh.py"
    path.write_text(SMALL)
    client = await start_server(tmp_path, trusted=False)
    try:
        doc = Buffer(client, path, SMALL)
        first = await same_as_fresh_open(client, doc, fresh)
        directive = doc.find("# compile-lens: inputs=")
        doc.insert(directive, len(doc.lines[directive]), " ")  # trailing space: its range stays
        assert await same_as_fresh_open(client, doc, fresh) == first
        doc.insert(directive, 0, "    ")  # indented: its range starts later
        assert await same_as_fresh_open(client, doc, fresh) == first
        doc.insert(directive, 0, "\n")  # moved down a line
        assert await same_as_fresh_open(client, doc, fresh) == first
        directive += 1
        doc.insert(directive, len(doc.lines[directive]), "  # compile-lens: ignore")
        assert await same_as_fresh_open(client, doc, fresh) == first - 1
    finally:
        await stop_server(client)
