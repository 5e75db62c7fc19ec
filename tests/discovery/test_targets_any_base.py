"""Every target found (issue 13.1-13.3): any nn.Module subclass whatever its base is spelled, plain
functions with a directive, directives that attach to nothing, and guesses that never warn.

Discovery is checked on source text (no torch); the rest through the real server over stdio on a
workspace shaped like real model code (tests/fixtures/real_targets).
"""

from __future__ import annotations

import asyncio
import shutil
import textwrap
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types as lsp

import paths
from compile_lens.actions import apply_edits
from compile_lens.discovery import discover
from lsp_support import locate, open_file, start_server, stop_server, wait_for

FIXTURES = paths.FIXTURES / "real_targets"


def _targets(source: str) -> dict:
    found = discover(textwrap.dedent(source))
    assert found is not None
    return {t.name: t for t in found.targets}


def _errors(source: str) -> dict[int, str]:
    found = discover(textwrap.dedent(source))
    assert found is not None
    return {e.line: e.message for e in found.errors}


# --- discovery: which classes are (maybe) modules -------------------------------------------------

def test_bases_the_source_places_and_those_left_to_the_worker():
    specs = _targets("""
        import logging
        from dataclasses import dataclass
        import lightning.pytorch as pl
        from torch import nn
        from transformers.modeling_layers import GradientCheckpointingLayer
        from transformers import PretrainedConfig
        from .blocks import Block

        Base = nn.Module
        AlsoBase = Base

        class Seq(nn.Sequential):
            pass

        class Lit(pl.LightningModule):
            def forward(self, x):
                return x

        class Aliased(AlsoBase):
            def forward(self, x):
                return x

        class Layer(GradientCheckpointingLayer):
            def forward(self, x):
                return x

        class Imported(Block):
            pass

        class OnTopOfLayer(Layer):
            pass

        class Config(PretrainedConfig):
            model_type = "tiny"

        class Oops(ValueError):
            pass

        class Handler(logging.Handler):
            def emit(self, record):
                pass

        @dataclass
        class Settings(Block):
            width: int = 3

        class Plain:
            def forward(self, x):
                return x
    """)
    certain = {n for n, s in specs.items() if not s.maybe_module}
    maybe = {n for n, s in specs.items() if s.maybe_module}
    assert certain == {"Seq", "Lit", "Aliased"}
    # a library base or another file's class: settled by issubclass after import
    assert maybe == {"Layer", "Imported", "OnTopOfLayer", "Handler"}
    assert all(s.kind == "module" for s in specs.values())


def test_a_class_the_source_cannot_size_is_guessed_after_import():
    specs = _targets("""
        from torch import nn
        from .blocks import Block

        class Imported(Block):
            pass

        class Seq(nn.Sequential):
            def __init__(self):
                super().__init__(nn.Linear(4, 4))
    """)
    imported = specs["Imported"]  # no path given: the base's file is not read
    assert imported.problem is None
    assert imported.inputs is not None and imported.inputs.after_import and imported.inputs.text == ""
    # what the worker says if no library tells
    assert imported.inputs.note.startswith("`Imported` inherits `forward` from `.blocks.Block`: its inputs cannot be read")
    # nn.Sequential's forward is its first layer's: read from the source (tests/discovery/test_inherited_forward.py)
    assert (specs["Seq"].inputs.text, specs["Seq"].inputs.after_import) == ("(torch.randn(8, 4),)", False)


def test_a_plain_function_with_a_directive_is_a_target():
    specs = _targets("""
        import torch

        # compile-lens: inputs=(torch.randn(4, 8), 0.5)
        def rms_scale(x, eps):
            return x * x.pow(2).mean(-1, keepdim=True).add(eps).rsqrt()

        def helper(x):
            return x + 1
    """)
    assert set(specs) == {"rms_scale"}
    spec = specs["rms_scale"]
    assert spec.kind == "function" and spec.problem is None
    assert (spec.inputs.source, spec.inputs.text) == ("directive", "(torch.randn(4, 8), 0.5)")


def test_a_directive_that_attaches_to_nothing_says_why():
    errors = _errors('''
        import torch
        from dataclasses import dataclass
        from torch import nn

        # compile-lens: inputs=(torch.randn(3),)
        SCALE = 3

        # compile-lens: inputs=(torch.randn(3),)
        @dataclass
        class Settings:
            width: int = 3

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            # compile-lens: inputs=(torch.randn(2, 4),)
            def forward(self, x):
                return self.fc(x)

        # compile-lens: inputs=(torch.randn(2, 4),)

        class Spaced(nn.Module):
            def forward(self, x):
                return x

        DOC = """
        # compile-lens: inputs=(torch.randn(1),)
        """
    ''')
    assert sorted(errors) == [6, 9, 19, 23]
    assert all(m.startswith("this compile-lens directive attaches to nothing") for m in errors.values())
    assert "not a `class` or `def`" in errors[6] and "SCALE = 3" in errors[6]
    assert "`Settings` is not an nn.Module subclass" in errors[9]
    assert "`forward` is a method" in errors[19] and "above its class" in errors[19]
    assert "separates it from `Spaced`" in errors[23]


# --- through the real server -------------------------------------------------------------------

pytestmark_lsp = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("real_targets") / "ws"
    shutil.copytree(FIXTURES, root)
    client = await start_server(root, settings={"benchmark.onSave": False})  # the traces' findings only
    path = root / "model.py"
    uri = open_file(client, path)

    def settled(ds):  # every target of the file has answered
        found = {str(d.code) for d in ds}
        return {"GB0124", "GB0059", "GB0109", "GB0291", "CL001", "CL004"} <= found

    diagnostics = await wait_for(client, uri, settled, timeout=180)
    yield root, client, uri, list(diagnostics)
    await stop_server(client)


def _on(diagnostics, path: Path, needle: str):
    line, _ = locate(path, needle)
    return [d for d in diagnostics if d.range.start.line == line]


@pytestmark_lsp
async def test_directive_on_a_library_layer_subclass_is_honoured(ws):
    root, _, _, diagnostics = ws
    path = root / "model.py"
    # DetrEncoderLayer(GradientCheckpointingLayer), the base from another file: its break is reported
    [item] = [d for d in _on(diagnostics, path, ".item() > 1e4") if d.code == "GB0124"]
    assert item.severity == lsp.DiagnosticSeverity.Warning
    # a subclass of another file's module, an alias base, a function with a directive
    assert [d.code for d in _on(diagnostics, path, 'print("residual"')] == ["GB0059"]
    assert [d.code for d in _on(diagnostics, path, ".tolist()")] == ["GB0109"]
    assert [d.code for d in _on(diagnostics, path, 'logger.warning("scaling')] == ["GB0291"]


@pytestmark_lsp
async def test_a_class_that_is_no_module_is_dropped_silently(ws):
    root, client, uri, diagnostics = ws
    path = root / "model.py"
    assert not _on(diagnostics, path, "class QuietHandler")
    assert not _on(diagnostics, path, "def emit")
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    lens_lines = {lens.range.start.line for lens in lenses or []}
    assert locate(path, "class QuietHandler")[0] not in lens_lines
    assert locate(path, "class DetrEncoderLayer")[0] in lens_lines
    line, col = locate(path, "QuietHandler")
    hover = await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri),
                                                                   lsp.Position(line, col + 2)))
    assert hover is None


@pytestmark_lsp
async def test_stray_directive_is_a_cl004_at_the_directive(ws):
    root, _, _, diagnostics = ws
    path = root / "model.py"
    line, _ = locate(path, "# compile-lens: inputs=(torch.randn(3),)")
    [stray] = [d for d in diagnostics if d.code == "CL004"]
    assert stray.range.start.line == line
    assert "attaches to nothing" in stray.message and "SCALE = 3" in stray.message


@pytestmark_lsp
async def test_a_wrong_guess_is_one_information_on_the_class(ws):
    root, client, uri, diagnostics = ws
    path = root / "model.py"
    cls_line, _ = locate(path, "class CausalSelfAttention")
    body_end, _ = locate(path, "return self.c_proj(y.transpose")
    inside = [d for d in diagnostics if cls_line <= d.range.start.line <= body_end]
    [note] = inside  # nothing on the `.split(..., dim=2)` line: the guess is wrong, not the code
    assert note.range.start.line == cls_line and note.code == "CL001"
    assert note.severity == lsp.DiagnosticSeverity.Information
    assert note.message.startswith("`CausalSelfAttention`: guessed inputs did not fit: IndexError: tuple index out of range")
    assert "add `# compile-lens: inputs=(...)`" in note.message
    result = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri), range=note.range,
        context=lsp.CodeActionContext(diagnostics=[note])))
    [write] = [a for a in result or [] if isinstance(a, lsp.CodeAction) and a.title.startswith("Write the guessed inputs")]
    write = await client.code_action_resolve_async(write)
    text = path.read_text()
    after = apply_edits(text, write.edit.changes[uri])
    assert "# compile-lens: inputs=(torch.randn(8, 768),)\nclass CausalSelfAttention" in after
    spec = {t.name: t for t in discover(after).targets}["CausalSelfAttention"]
    assert spec.inputs.source == "directive"


@pytestmark_lsp
async def test_hover_says_where_a_guess_came_from_and_what_was_left_out(ws):
    root, client, uri, _ = ws
    path = root / "model.py"

    async def card(name: str) -> str:
        line, col = locate(path, f"class {name}")
        for _ in range(50):  # the hover is answered from memory: the trace is in already
            hover = await client.text_document_hover_async(lsp.HoverParams(
                lsp.TextDocumentIdentifier(uri), lsp.Position(line, col + len("class ") + 1)))
            if hover is not None:
                return hover.contents.value
            await asyncio.sleep(0.2)
        raise AssertionError(f"no hover on {name}")

    mlp = await card("MLP")  # nn.Sequential subclass: its forward is its first Linear's, read from the source
    assert "inputs: `(torch.randn(8, 12),)`" in mlp and "**guessed** from the first layer" in mlp
    detr = await card("DetrEncoderLayer")
    assert "called without `attention_mask` (optional)" in detr
    assert "traced path may differ" in detr


@pytestmark_lsp
async def test_untrusted_workspace_says_why_the_source_cannot_tell(tmp_path):
    """No code runs there, so no library is asked: the reason the source alone gives is shown."""
    root = tmp_path / "ws"
    shutil.copytree(FIXTURES, root)
    client = await start_server(root, trusted=False)
    try:
        path = root / "vision.py"
        uri = open_file(client, path)
        diagnostics = await wait_for(client, uri, lambda ds: any(d.code == "CL001" for d in ds), timeout=30)
        notes = {d.range.start.line: d for d in diagnostics if d.code == "CL001"}
        line, _ = locate(path, "class TimmClassifier")
        assert "`images` first reaches `create_model(...)`" in notes[line].message
        assert notes[line].severity == lsp.DiagnosticSeverity.Information
    finally:
        await stop_server(client)
