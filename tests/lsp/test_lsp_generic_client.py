"""The server driven by a minimal generic LSP client (as Neovim, Helix or Emacs would be): none of
the VS Code extension's initialization options (only the plain settings docs/lsp-clients.md's Neovim
snippet sends too, to keep the measurement short), no client capabilities. Every command a lens, a hover link or a code
action offers must be one the server executes, and it must run without an error; hovers are plain
CommonMark (no HTML entities); no `window/workDoneProgress/create` goes to a client that cannot
show progress. One real Inductor measurement of a tiny model (so the "⏳ measuring" lens is seen).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote

import pytest
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_support import keep_published, locate, open_file, stop_server, wait_for

pytestmark = [pytest.mark.slow]

MODEL = '''\
import torch
from torch import nn


class Scale(nn.Module):
    """A model a user would write: a scalar read back from the tensor breaks the graph."""

    def __init__(self, dim: int = 16):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        y = self.fc(x)
        s = y.abs().max().item()
        return y / (s + 1.0)


model = torch.compile(Scale())
'''
COMMAND_LINK = re.compile(r"\]\(command:([\w.]+)(?:\?([^)]*))?\)")


async def start_generic(root: Path, options: object = None) -> LanguageClient:
    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "compile_lens"],
        server_env={**os.environ, "PYTHONSAFEPATH": "1",
                    "COMPILE_LENS_CACHE_DIR": tempfile.mkdtemp(prefix="compile-lens-generic-")},
    )
    client = await config.start()
    keep_published(client)
    client.init_result = await client.initialize_session(lsp.InitializeParams(  # type: ignore[attr-defined]
        capabilities=lsp.ClientCapabilities(), process_id=os.getpid(), root_uri=root.as_uri(),
        initialization_options=options))
    return client


class Offered:
    """Commands seen in lenses, hovers and code actions, with where they came from."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, list]] = []

    def add(self, where: str, command: lsp.Command | None) -> None:
        if command is not None:
            self.calls.append((where, command.command, list(command.arguments or [])))

    def hover(self, text: str) -> None:
        for name, query in COMMAND_LINK.findall(text):
            args = json.loads(unquote(query)) if query else []
            self.calls.append(("hover", name, args if isinstance(args, list) else [args]))


async def lenses(client: LanguageClient, uri: str) -> list[lsp.CodeLens]:
    return list(await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri))) or [])


async def hover_text(client: LanguageClient, uri: str, line: int, character: int) -> str:
    hover = await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri),
                                                                   lsp.Position(line, character)))
    assert hover is not None
    assert isinstance(hover.contents, lsp.MarkupContent)
    return hover.contents.value


def assert_plain(text: str) -> None:
    assert not re.search(r"&[a-zA-Z]+;|&#\d+;", text), text  # shown raw by clients that do not render HTML
    assert "<" not in text.replace("\\<", ""), text


async def test_every_offered_command_runs_in_a_generic_client(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "scale.py").write_text(MODEL)
    client = await start_generic(root, {"settings": {"benchmark.maxSeconds": 8, "worker.timeoutSeconds": 180}})
    try:
        provider = client.init_result.capabilities.execute_command_provider  # type: ignore[attr-defined]
        executable = set(provider.commands if provider else [])
        uri = open_file(client, root / "scale.py")
        await wait_for(client, uri, lambda ds: any(d.code == "GB0124" for d in ds), timeout=120)
        offered = Offered()
        class_line, class_col = locate(root / "scale.py", "class Scale")

        # the lens while measuring (benchmark.onSave is on by default), then the measured one
        deadline, seen_measuring, measured = time.monotonic() + 300, False, False
        while time.monotonic() < deadline and not measured:
            for lens in await lenses(client, uri):
                offered.add(f"lens {lens.command.title if lens.command else ''}", lens.command)
                title = lens.command.title if lens.command else ""
                seen_measuring |= "measuring" in title
                measured |= title.startswith("⚡ torch.compile:")
            await asyncio.sleep(0.2)
        assert seen_measuring and measured, offered.calls[-3:]

        for line in (class_line, locate(root / "scale.py", "torch.compile(Scale())")[0]):
            text = await hover_text(client, uri, line, class_col + len("class S") if line == class_line else 2)
            assert "| forward |" in text and "compile-lens report scale.py" in text
            assert_plain(text)
            offered.hover(text)

        diagnostics = client.diagnostics[uri]
        item_line = locate(root / "scale.py", ".item()")[0]
        actions = await client.text_document_code_action_async(lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri), lsp.Range(lsp.Position(item_line, 0), lsp.Position(item_line, 0)),
            lsp.CodeActionContext(diagnostics=[d for d in diagnostics if d.range.start.line == item_line])))
        assert actions, "the .item() break offers fixes"
        for action in actions:
            assert isinstance(action, lsp.CodeAction) and action.edit is not None  # no resolve support: edits now
            offered.add(f"action {action.title}", action.command)

        assert offered.calls, "lenses offer commands"
        names = {name for _, name, _ in offered.calls}
        assert "compileLens.showOutput" not in names and "compileLens.showReport" not in names
        for where, name, args in offered.calls:
            assert name in executable, f"{where}: {name} is not in executeCommandProvider {sorted(executable)}"
            await client.workspace_execute_command_async(lsp.ExecuteCommandParams(name, args))  # raises on error

        # commands without parameters take whatever a client sends
        for args in ([], ["ignored"]):
            stats = await client.workspace_execute_command_async(lsp.ExecuteCommandParams("compileLens.stats", args))
            assert stats["benchmarks"] >= 1
        assert client.progress_reports == {}, "workDoneProgress/create sent to a client without the capability"
    finally:
        await stop_server(client)


async def test_a_nested_project_is_analysed_in_its_own_root(tmp_path):
    """The workspace folder is the parent; the file's root is the folder `record` wrote to."""
    from test_cli_ci import make_recorded

    repo = make_recorded(tmp_path)
    client = await start_generic(tmp_path, {"settings": {"benchmark.onSave": False}})
    try:
        uri = open_file(client, repo / "wide.py")
        found = await wait_for(client, uri, lambda ds: True)
        assert not any(d.code == "CL001" for d in found), [d.message for d in found]  # no "needs inputs"
        lens = await lenses(client, uri)
        assert [x.command.title for x in lens if x.command] == ["▶ Measure torch.compile speedup"]
        line, col = locate(repo / "wide.py", "class Wide")
        assert "(from the recorded)" in await hover_text(client, uri, line, col + len("class W"))
    finally:
        await stop_server(client)


async def test_vs_code_declares_the_commands_it_runs(tmp_path):
    """With `clientCommands` (what the VS Code extension sends) the hover links the report view."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "scale.py").write_text(MODEL)
    client = await start_generic(root, {"trusted": False, "clientCommands": ["compileLens.showOutput",
                                                                             "compileLens.showReport"]})
    try:
        uri = open_file(client, root / "scale.py")
        await wait_for(client, uri, lambda ds: True)
        line, col = locate(root / "scale.py", "class Scale")
        text = await hover_text(client, uri, line, col + len("class S"))
        assert text.endswith("[Open the compile report](command:compileLens.showReport)")
        assert_plain(text)
    finally:
        await stop_server(client)
