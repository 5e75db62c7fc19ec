"""The graphs TorchDynamo captured, as a read-only document: a lens on each traced target, the text
from `compileLens.capturedGraph` (what the VS Code extension shows as a `compile-lens:` document),
and for other clients `compileLens.openCapturedGraph` writing it under the cache (`window/showDocument`
where the client can open it). A real server over stdio, a real trace."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from lsp_support import locate, open_file, start_server, stop_server, wait_analyzed

pytestmark = pytest.mark.asyncio(loop_scope="function")


async def command(client, name: str, *args):
    return await client.workspace_execute_command_async(lsp.ExecuteCommandParams(name, list(args)))

MODEL = '''import torch
from torch import nn


# compile-lens: inputs=(torch.randn(4, 16),)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        y = self.fc(x).relu()
        s = y.sum().item()
        return y * s
'''


async def test_a_traced_target_has_a_lens_that_shows_its_captured_graphs(tmp_path: Path):
    path = tmp_path / "net.py"
    path.write_text(MODEL)
    client = await start_server(tmp_path, settings={"benchmark.onSave": False})
    try:
        uri = open_file(client, path)
        await wait_analyzed(client, uri, "traced", timeout=180)
        found = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
        [lens] = [lens for lens in found if lens.command.title.startswith("⊞")]
        assert lens.command.title == "⊞ 2 graphs captured, 1 break: show"
        assert lens.range.start.line == locate(path, "class Net")[0]
        # a client without `clientCommands` gets the server's own command, which opens a file
        assert lens.command.command == "compileLens.openCapturedGraph"
        answer = await command(client, "compileLens.capturedGraph", uri, "Net")
        text = answer["text"]
        fc, item, mul = (locate(path, needle)[0] + 1 for needle in ("self.fc(x)", ".item()", "y * s"))
        assert "# ── graph 1 of 2: forward" in text and "# ── graph 2 of 2: torch_dynamo_resume_in_forward_at_13" in text
        rows = text.splitlines()
        assert any(re.match(rf"net\.py:{fc}\s+linear = torch\._C\._nn\.linear\(l_x_,", r) for r in rows)
        assert any(re.match(rf"net\.py:{item}\s+sum_1 = y\.sum\(\)$", r) for r in rows)
        assert f"# ── graph break at net.py:{item}: GB0124" in text
        assert any(re.match(rf"net\.py:{mul}\s+mul = operator\.mul\(l_y_, ", r) for r in rows)
        # the break sits between the two graphs
        assert text.index("graph 1 of 2") < text.index("graph break at") < text.index("graph 2 of 2")
        opened = await command(client, *([lens.command.command] + list(lens.command.arguments)))
        assert opened["started"] and not opened["shown"]  # this client cannot open documents: the path
        assert Path(opened["path"]).read_text(encoding="utf-8") == text
        assert os.path.basename(opened["path"]) == "net.py-Net.graphs.py"
        assert (await command(client, "compileLens.capturedGraph", uri, "Nope"))["started"] is False
    finally:
        await stop_server(client)
