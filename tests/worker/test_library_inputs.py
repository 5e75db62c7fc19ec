"""Inputs for library models without a directive (issue 15.1), read after import from what the
libraries publish: transformers configs, timm's pretrained_cfg, a torchvision-style first conv.

transformers runs for real (requirements-dev; skipped when absent); timm and torchvision are
stand-ins with the same attributes (tests/fixtures/real_targets/vision.py), since their wheels do
not import with the CPU torch here.
"""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
import textwrap
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types as lsp

import paths
from compile_lens.actions import apply_edits
from compile_lens.discovery import discover
from compile_lens.discovery.inputs import resolve_inputs
from lsp_support import locate, open_file, start_server, stop_server, wait_for

FIXTURES = paths.FIXTURES / "real_targets"


@pytest.fixture(scope="module")
def vision(tmp_path_factory):
    from compile_lens.worker import loader

    root = tmp_path_factory.mktemp("vision")
    path = root / "vision.py"
    shutil.copy(FIXTURES / "vision.py", path)
    source = path.read_text()
    specs = {t.name: t for t in resolve_inputs(str(path), str(root), discover(source).targets, source=source)}
    return specs, loader.import_file(str(path), str(root)), str(path)


@pytest.mark.parametrize("name, text, origin, out", [
    # the wrapper's backbone publishes 48×48 in its timm config: that wins over its first conv
    ("TimmClassifier", "(torch.randn(2, 3, 48, 48),)", "from timm pretrained_cfg", (2, 10)),
    # nothing published: the first conv's 3 channels at torchvision's documented 224×224
    ("ResNetClassifier", "(torch.randn(2, 3, 224, 224),)",
     "from its first convolution (3 channels) at 224×224, torchvision's default image size", (2, 4)),
])
def test_a_wrapper_gets_its_library_models_inputs(vision, name, text, origin, out):
    from compile_lens.worker import loader

    specs, module, path = vision
    spec = specs[name]
    assert spec.inputs.after_import and spec.inputs.text == "", "the source alone cannot size it"
    built = loader.build_target(module, spec, path)
    assert (built.spec.inputs.source, built.spec.inputs.text, built.spec.inputs.origin) == ("inferred", text, origin)
    assert tuple(built.make()(*built.args).shape) == out  # and the guess runs


def test_no_library_tells_says_every_way_to_give_inputs(tmp_path):
    from compile_lens.worker import loader

    source = textwrap.dedent('''
        import torch
        from torch import nn

        def make_encoder():
            return nn.GRU(5, 7)

        class Wrapper(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = make_encoder()

            def forward(self, x):
                return self.encoder(x)[0]
    ''')
    path = tmp_path / "wrapper.py"
    path.write_text(source)
    [spec] = resolve_inputs(str(path), str(tmp_path), discover(source).targets, source=source)
    module = loader.import_file(str(path), str(tmp_path))
    with pytest.raises(loader.TargetError) as caught:
        loader.build_target(module, spec, str(path))
    problem = caught.value.problem
    assert problem.kind == "inputs" and problem.line == spec.line
    assert problem.message.startswith("cannot guess inputs for `Wrapper` (`x` first reaches `make_encoder(...)`")
    assert "[[tool.compile-lens.targets]]" in problem.message and "compile-lens record" in problem.message


def test_a_pyproject_entry_beats_the_guess_after_import(tmp_path):
    source = textwrap.dedent('''
        from torch import nn
        from vision import create_model

        class Wrapped(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = create_model("vit")

            def forward(self, x):
                return self.backbone(x)

        class InitOnly(Wrapped):
            pass
    ''')
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent('''
        [[tool.compile-lens.targets]]
        target = "m.py:Wrapped"
        inputs = "(torch.randn(1, 3, 48, 48),)"

        [[tool.compile-lens.targets]]
        target = "m.py:InitOnly"
        init = "InitOnly()"
    '''))
    path = tmp_path / "m.py"
    path.write_text(source)
    specs = {t.name: t for t in resolve_inputs(str(path), str(tmp_path), discover(source).targets, source=source)}
    assert (specs["Wrapped"].inputs.source, specs["Wrapped"].inputs.text) == ("config", "(torch.randn(1, 3, 48, 48),)")
    only_init = specs["InitOnly"].inputs
    assert only_init.after_import and only_init.init == "InitOnly()" and only_init.text == ""


# --- transformers, through the real server -------------------------------------------------------

needs_transformers = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                        reason="transformers is not installed")
in_loop = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lm(tmp_path_factory):
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed")
    root = tmp_path_factory.mktemp("lm") / "ws"
    shutil.copytree(FIXTURES, root)
    client = await start_server(root, settings={"benchmark.onSave": False})  # inputs and traces only
    path = root / "lm.py"
    uri = open_file(client, path)
    # the trace of every target is in when DecoderLayer's break shows (targets stream in file order)
    diagnostics = await wait_for(client, uri, lambda ds: any(d.code == "GB0124" for d in ds), timeout=240)
    yield root, client, uri, list(diagnostics)
    await stop_server(client)


async def _card(client, uri: str, path: Path, name: str) -> str:
    line, col = locate(path, f"class {name}")
    for _ in range(100):  # the trace is in; the card is answered from memory
        hover = await client.text_document_hover_async(lsp.HoverParams(
            lsp.TextDocumentIdentifier(uri), lsp.Position(line, col + len("class ") + 1)))
        if hover is not None and "inputs: `" in hover.contents.value:
            return hover.contents.value
        await asyncio.sleep(0.2)
    raise AssertionError(f"no card with inputs for {name}")


@needs_transformers
@in_loop
async def test_gpt2_wrapper_inputs_come_from_its_config(lm):
    root, client, uri, diagnostics = lm
    path = root / "lm.py"
    card = await _card(client, uri, path, "LM")
    assert "inputs: `(torch.randint(0, 1000, (2, 16)),)` — **guessed** from GPT2Config" in card
    # called without `labels`: the traced path (logits) is not the training one (loss)
    assert "called without `labels` (optional)" in card
    assert not [d for d in diagnostics if d.code == "CL001"], [d.message for d in diagnostics]


@needs_transformers
@in_loop
async def test_library_models_subclassed_or_wrapped(lm):
    root, client, uri, _ = lm
    path = root / "lm.py"
    tiny = await _card(client, uri, path, "TinyGPT")  # init= only: inputs from its own config
    assert "inputs: `(torch.randint(0, 1000, (2, 16)),)` — **guessed** from GPT2Config" in tiny
    assert "called without `cache`, `attention_mask`, `token_type_ids`, `position_ids` and 6 more" in tiny
    vision = await _card(client, uri, path, "Vision")
    assert "inputs: `(torch.randn(2, 3, 32, 32),)` — **guessed** from ViTConfig" in vision
    # the write-directive action writes what the worker guessed
    line, col = locate(path, "class Vision")
    at = lsp.Range(lsp.Position(line, col), lsp.Position(line, col))
    result = await client.text_document_code_action_async(lsp.CodeActionParams(
        lsp.TextDocumentIdentifier(uri), at, lsp.CodeActionContext(diagnostics=[])))
    [write] = [a for a in result or [] if isinstance(a, lsp.CodeAction) and a.title.startswith("Write these inputs")]
    assert "from ViTConfig" in write.title
    write = await client.code_action_resolve_async(write)
    after = apply_edits(path.read_text(), write.edit.changes[uri])
    assert "# compile-lens: inputs=(torch.randn(2, 3, 32, 32),)\nclass Vision" in after


@needs_transformers
@in_loop
async def test_the_real_gradient_checkpointing_layer_is_a_target(lm):
    root, _, _, diagnostics = lm
    line, _ = locate(root / "lm.py", ".item() > 0")
    [item] = [d for d in diagnostics if d.code == "GB0124"]
    assert item.range.start.line == line


def test_the_json_says_where_inputs_came_from_and_what_was_left_out():
    from compile_lens.protocol import FileReport, InputRecipe, TargetResult
    from compile_lens.render.cli_output import render_json

    result = TargetResult("LM", "module", 13, inputs=InputRecipe(
        "inferred", "(torch.randint(0, 1000, (2, 16)),)", after_import=True, origin="from GPT2Config"),
        left_out=["labels"])
    document = render_json([FileReport("/w/lm.py", targets=[result])], torch_version="2", device="cpu")
    [target] = document["files"][0]["targets"]
    assert target["inputs"]["origin"] == "from GPT2Config" and target["left_out"] == ["labels"]
