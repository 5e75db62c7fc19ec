"""The model first, in the editor (`discovery/order.py`): on save the outer target is queued for
measurement and the inner one it builds is not — its lens says "Measure" and that it is measured
within the outer one — until the user clicks it. The real server; the server stops before any
Inductor compile is needed (the lens says "measuring" from the moment the measurement is queued)."""

from __future__ import annotations

import shutil

import pytest
from lsprotocol import types as lsp

from lsp_support import locate, open_file, start_server, stop_server, wait_analyzed
from paths import FIXTURES

pytestmark = pytest.mark.asyncio


async def _lenses(client, uri) -> dict[int, str]:
    found = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    return {lens.range.start.line: lens.command.title for lens in found or []
            if lens.command.command in ("compileLens.measure", "compileLens.showOutput")}


async def test_the_outer_target_is_queued_and_the_inner_one_waits_for_its_measure_lens(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    path = root / "nested.py"
    shutil.copy(FIXTURES / "measure_order" / "nested.py", path)
    inner, outer = locate(path, "class Inner")[0], locate(path, "class Outer")[0]
    client = await start_server(root, settings={"benchmark.onSave": True})
    try:
        uri = open_file(client, path)
        traced = await wait_analyzed(client, uri, "traced")
        assert traced.ok
        titles = await _lenses(client, uri)
        assert titles[outer] == "⏳ measuring torch.compile…", titles  # queued on save, first
        assert titles[inner] == "▶ Measure · measured within Outer: see its line costs", titles
        stats = await client.workspace_execute_command_async(lsp.ExecuteCommandParams("compileLens.stats", []))
        assert stats["traces"] == 1
        # a click measures it after all (queued behind Outer's)
        answer = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("compileLens.measure", [uri, "Inner"]))
        assert answer["started"] is True, answer
        titles = await _lenses(client, uri)
        assert titles[inner] == "⏳ measuring torch.compile…", titles
    finally:
        await stop_server(client)
