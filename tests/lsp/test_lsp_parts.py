"""The editor shows each part of a measurement as it lands, through the real server over stdio: the
server asks the client to refresh its lenses at every target event the worker sends, and at the
first one with figures the lens and the hover show the forward's figure while the hover still says
what is "not measured yet" (the deployment answers); once the measurement ends nothing is pending.
One real measurement of a tiny model (tens of seconds on two cores)."""

from __future__ import annotations

import asyncio
import shutil

import pytest
from lsprotocol import types as lsp

from lsp_support import locate, open_file, start_server, stop_server, wait_analyzed, wait_for
from paths import FIXTURES

SETTINGS = {"benchmark.onSave": False, "benchmark.maxSeconds": 4, "worker.timeoutSeconds": 300}
CAPABILITIES = lsp.ClientCapabilities(workspace=lsp.WorkspaceClientCapabilities(
    code_lens=lsp.CodeLensWorkspaceClientCapabilities(refresh_support=True)))
pytestmark = [pytest.mark.asyncio, pytest.mark.slow]


@pytest.mark.asyncio
async def test_lens_and_hover_show_the_forward_before_the_deployment_parts_land(tmp_path):
    root = tmp_path / "ws"
    shutil.copytree(FIXTURES / "measure", root)
    client = await start_server(root, settings=SETTINGS, cache_dir=tmp_path / "cache", capabilities=CAPABILITIES)
    snapshots: list[tuple[list[str], str]] = []  # (lens titles, hover) as each refresh asked
    tasks: list[asyncio.Task] = []
    line, col = locate(root / "tiny.py", "class Tiny")
    try:
        uri = open_file(client, root / "tiny.py")

        async def snapshot() -> None:
            found = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
            hover = await client.text_document_hover_async(lsp.HoverParams(
                lsp.TextDocumentIdentifier(uri), lsp.Position(line, col + len("class T"))))
            snapshots.append(([lens.command.title for lens in found or []], hover.contents.value if hover else ""))

        @client.feature(lsp.WORKSPACE_CODE_LENS_REFRESH)
        def on_refresh(params) -> None:
            tasks.append(asyncio.ensure_future(snapshot()))  # answered at once; looked at right after

        await wait_for(client, uri, lambda ds: True)
        await wait_analyzed(client, uri, "traced")
        answer = await client.workspace_execute_command_async(lsp.ExecuteCommandParams("compileLens.measure", [uri, "Tiny"]))
        assert answer["started"] is True
        await wait_analyzed(client, uri, "measured", timeout=900)
        await asyncio.gather(*tasks)
        await snapshot()
    finally:
        await stop_server(client)

    def figures(titles: list[str]) -> bool:
        return any(title.startswith("⚡ torch.compile:") for title in titles)

    early = [(titles, hover) for titles, hover in snapshots if figures(titles) and "not measured yet" in hover]
    assert early, [(titles, hover.splitlines()[-6:]) for titles, hover in snapshots]
    titles, hover = early[0]
    assert "| forward |" in hover and ("×" in hover or "inconclusive" in hover), hover
    pending = next(row for row in hover.splitlines() if "not measured yet" in row)
    # the forward lands first: what follows it (memory, line costs, the deployment parts) is still to come
    assert any(part in pending for part in ("peak memory", "line costs", "torch.export", "batch sweep")), pending
    final_titles, final_hover = snapshots[-1]
    assert figures(final_titles) and not any("⏳" in title for title in final_titles), final_titles
    # all landed: the card is the figures and its Details link (torch.export is among the details)
    assert "not measured yet" not in final_hover and "Details" in final_hover, final_hover
    assert snapshots.index(early[0]) < len(snapshots) - 1  # the figures came before the end, not with it
