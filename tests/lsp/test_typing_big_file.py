"""A big file while typing, through the real server: lints at once, targets found off the event
loop (a new class becomes a target without a save), hovers on `torch.compile(...)` calls answered
from the call sites found with the targets. Untrusted workspace: no torch, only the editor path."""

from __future__ import annotations

import asyncio
import sys

from lsprotocol import types as lsp

from compile_lens.lsp.documents import BIG_FILE_CHARS
from lsp_support import open_file, start_server, stop_server, wait_for
from paths import REPO

sys.path.insert(0, str(REPO))  # the benchmark modules (benchmarks/)
from benchmarks.editor.typing_latency import busy_file  # noqa: E402

FRESH = ["", "", "class Fresh(nn.Module):", "    def __init__(self):", "        super().__init__()",
         "        self.fc = nn.Linear(8, 8)", "", "    def forward(self, x):", "        return self.fc(x)", ""]


def edit(uri: str, version: int, line: int, column: int, text: str) -> lsp.DidChangeTextDocumentParams:
    at = lsp.Position(line, column)
    return lsp.DidChangeTextDocumentParams(lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                                           [lsp.TextDocumentContentChangePartial(range=lsp.Range(at, at), text=text)])


async def hover(client, uri: str, line: int, character: int):
    return await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(line, character)))


async def answered(ask, word: str, within_s: float = 60) -> bool:
    """Hover until a card naming `word` comes (the targets are found in the background)."""
    deadline = asyncio.get_running_loop().time() + within_s
    while asyncio.get_running_loop().time() < deadline:
        card = await ask()
        if card is not None and word in card.contents.value:
            return True
        await asyncio.sleep(0.05)
    return False


async def test_typing_in_a_big_file_finds_a_new_class_and_answers_hovers_on_compile_calls(tmp_path):
    text = busy_file(1200)
    assert len(text) > BIG_FILE_CHARS  # the path that finds targets off the event loop
    path = tmp_path / "busy.py"
    path.write_text(text)
    lines = text.split("\n")
    client = await start_server(tmp_path, trusted=False)
    try:
        uri = open_file(client, path)
        await wait_for(client, uri, lambda ds: len(ds) > 100)
        middle = next(i for i, row in enumerate(lines) if "h = self.norm(x)" in row and i > len(lines) // 2)
        for k in range(10):  # keystrokes faster than the discovery's delay: each one stops the last
            client.text_document_did_change(edit(uri, 2 + k, middle, len(lines[middle]) + k, "#" if k == 0 else "x"))
        while not any(p.version == 11 for p in client.published):
            await asyncio.sleep(0.01)
        call = next(i for i, row in enumerate(lines) if "torch.compile(model)" in row)
        assert await answered(lambda: hover(client, uri, call, 20), "Mixer")  # once the targets are found

        end = len(lines) - 1
        client.text_document_did_change(edit(uri, 12, end, 0, "\n".join(FRESH)))
        fresh_line = end + FRESH.index("class Fresh(nn.Module):")
        assert await answered(lambda: hover(client, uri, fresh_line, len("class ") + 1), "Fresh")  # no save
    finally:
        await stop_server(client)
