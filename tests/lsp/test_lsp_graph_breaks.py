"""Graph breaks through the real server over stdio: exact positions, codes, links, chains."""

from __future__ import annotations

import re
import shutil

import pytest
import pytest_asyncio
from lsprotocol import types as lsp

from lsp_support import (
    change_file,
    locate,
    open_file,
    start_server,
    stop_server,
    wait_for,
)
from paths import FIXTURES
from torch_log import LOOP_TARGETS, lines_torch_names

pytestmark = pytest.mark.asyncio(loop_scope="module")
# breaks, hovers and recompile warnings: no measurement after each trace (one would hold the sweep
# lane for its whole budget, so a later file's recompile warnings wait behind it)
SETTINGS = {"benchmark.onSave": False}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("spine") / "ws"
    shutil.copytree(FIXTURES / "spine", root)
    client = await start_server(root, settings=SETTINGS)
    yield root, client
    await stop_server(client)


def _gb(diagnostics):
    return [d for d in diagnostics if str(d.code).startswith("GB")]


def _traced(diagnostics):
    return any(str(d.code).startswith("GB") for d in diagnostics)


def _at(diagnostics, line):
    return [d for d in _gb(diagnostics) if d.range.start.line == line]


@pytest.mark.parametrize("needle, span, gb_id", [
    ('print("shape", y.shape)', 'print("shape", y.shape)', "GB0059"),
    ("y.sum().item()", "y.sum().item()", "GB0124"),
    ("if y.sum() > 0:", "y.sum() > 0", "GB0170"),
    ("self.fc(x).tolist()", "self.fc(x).tolist()", "GB0109"),
    ('log.warning("first statement")', 'log.warning("first statement")', "GB0291"),
    ("torch._dynamo.graph_break()", "torch._dynamo.graph_break()", "GB0025"),
])
async def test_each_break_kind_at_its_line_and_columns(ws, needle, span, gb_id):
    root, client = ws
    path = root / "breaks.py"
    uri = open_file(client, path)
    diagnostics = await wait_for(client, uri, lambda ds: len(_gb(ds)) >= 6)
    line, _ = locate(path, needle)
    text = path.read_text().splitlines()[line]
    start = text.index(span)
    found = _at(diagnostics, line)
    assert len(found) == 1, [(d.code, d.range) for d in _gb(diagnostics)]
    d = found[0]
    assert d.code == gb_id
    assert (d.range.start.character, d.range.end.character) == (start, start + len(span))
    assert d.source == "Compile Lens"
    assert d.severity == lsp.DiagnosticSeverity.Warning
    assert d.code_description and d.code_description.href.endswith(f"/gb{gb_id[2:]}.html")
    assert "Traceback" not in d.message


async def test_clean_model_has_no_breaks_and_no_duplicates(ws):
    root, client = ws
    path = root / "breaks.py"
    uri = open_file(client, path)
    diagnostics = await wait_for(client, uri, lambda ds: len(_gb(ds)) >= 6)
    clean_start, _ = locate(path, "class Clean")
    assert not [d for d in _gb(diagnostics) if d.range.start.line >= clean_start]
    keys = [(d.range.start.line, d.code) for d in _gb(diagnostics)]
    assert len(keys) == len(set(keys)) == 6


async def test_break_message_has_type_explanation_and_hints(ws):
    root, client = ws
    path = root / "breaks.py"
    uri = open_file(client, path)
    diagnostics = await wait_for(client, uri, lambda ds: len(_gb(ds)) >= 6)
    line, _ = locate(path, "y.sum().item()")
    message = _at(diagnostics, line)[0].message
    assert message.startswith("Unsupported Tensor.item() call")
    assert "Hint:" in message and "capture_scalar_outputs" in message


async def test_break_inside_helper_in_another_file(ws):
    root, client = ws
    model, helper = root / "uses_helper.py", root / "pkg" / "util.py"
    uri = open_file(client, model)
    await wait_for(client, uri, _traced)
    helper_diagnostics = await wait_for(client, helper.as_uri(), _traced)
    line, col = locate(helper, 'print("debug", t.shape)')
    d = _at(helper_diagnostics, line)[0]
    assert d.code == "GB0059" and d.range.start.character == col
    chain = [(r.location.uri, r.location.range.start.line) for r in d.related_information or []]
    call_line, _ = locate(model, "h = debug(h)")
    assert (model.as_uri(), call_line) in chain
    # and at the call site in the model's own file
    here = _at(client.diagnostics[uri], call_line)
    assert here and "inside `debug`" in here[0].message


async def test_target_with_init_directive_and_unbuildable_targets(ws):
    root, client = ws
    path = root / "needs_init.py"
    uri = open_file(client, path)

    def settled(ds):
        return any("weights file missing" in d.message for d in ds)

    diagnostics = await wait_for(client, uri, settled)
    by_line = {}
    for d in diagnostics:
        by_line.setdefault(d.range.start.line, []).append(d)
    scaled, _ = locate(path, "class Scaled")
    no_args, _ = locate(path, "class NoArgs")
    broken, _ = locate(path, "class Broken")
    assert not _gb(by_line.get(scaled, [])), "Scaled is built from its init= directive and traces cleanly"
    assert not [d for d in by_line.get(scaled, []) if d.code == "CL001"]
    [needs] = by_line[no_args]
    assert "width" in needs.message and "init=" in needs.message
    broken_diags = [d for d in by_line[broken] if "weights file missing" in d.message]
    assert len(broken_diags) == 1
    assert "RuntimeError" in broken_diags[0].message and "Traceback" not in broken_diags[0].message


async def test_edited_and_saved_file_is_traced_from_the_new_code(ws):
    root, client = ws
    path = root / "breaks.py"
    uri = open_file(client, path)
    await wait_for(client, uri, lambda ds: len(_gb(ds)) >= 6)
    old_item_line, _ = locate(path, "y.sum().item()")
    text = path.read_text()
    new_text = text.replace("        s = y.sum().item()\n", "        s = y.sum()\n")
    new_text = new_text.replace("        return torch.relu(self.fc(x))", "        z = self.fc(x)\n        print(z)\n        return z")
    change_file(client, path, new_text, version=2, save=True)

    def retraced(ds):
        return not _at(ds, old_item_line) and len(_gb(ds)) == 6

    diagnostics = await wait_for(client, uri, retraced)
    new_print, _ = locate(path, "print(z)")
    assert [d.code for d in _at(diagnostics, new_print)] == ["GB0059"]
    path.write_text(text)
    change_file(client, path, text, version=3, save=True)
    await wait_for(client, uri, lambda ds: _at(ds, old_item_line) != [])


async def test_user_prints_do_not_corrupt_the_stream(ws):
    root, client = ws
    path = root / "noisy.py"
    uri = open_file(client, path)
    diagnostics = await wait_for(client, uri, _traced)
    line, _ = locate(path, "self.fc(x).sum().item()")
    assert [d.code for d in _at(diagnostics, line)] == ["GB0124"]


async def test_ignore_comments(ws):
    root, client = ws
    path = root / "ignored.py"
    uri = open_file(client, path)
    diagnostics = await wait_for(client, uri, _traced)
    quiet_print, _ = locate(path, 'print("one")')
    ignored_item, _ = locate(path, "y.sum().item()")
    other_code, _ = locate(path, "y.max().item()")
    lines = {d.range.start.line for d in diagnostics}
    assert quiet_print not in lines and ignored_item not in lines
    assert [d.code for d in _at(diagnostics, other_code)] == ["GB0124"]


# --- issue 13: loop fallbacks, multi-line ranges, one count (models shaped like real ones) ----

@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def truth(tmp_path_factory):
    root = tmp_path_factory.mktemp("truth") / "ws"
    shutil.copytree(FIXTURES / "truth", root)
    client = await start_server(root, settings=SETTINGS)
    yield root, client
    await stop_server(client)


async def test_break_inside_a_loop_is_at_its_own_line_with_the_loop_beside_it(truth):
    root, client = truth
    path = root / "loop.py"
    uri = open_file(client, path)
    diagnostics = await wait_for(client, uri, _traced)
    [d] = _gb(diagnostics)  # one break: the loop fallback is not a second warning
    line, col = locate(path, "x.norm().item()")
    loop_line, _ = locate(path, "for i, layer in enumerate(self.layers)")
    assert d.code == "GB0124" and d.code_description.href.endswith("/gb0124.html")
    assert (d.range.start.line, d.range.start.character) == (line, col)
    assert d.message.startswith("Unsupported Tensor.item() call")
    assert d.message.splitlines()[0].endswith(
        f" — inside the loop at line {loop_line + 1}: torch skips the whole `forward`, which runs eagerly"), d.message
    related = [(r.location.range.start.line, r.message) for r in d.related_information or []]
    assert [m for at, m in related if at == loop_line and m.startswith("GB7000: the loop this break is in")], related
    # the fixes act on the break's line: `.item()` is there, so capturing scalars is offered
    actions = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=d.range,
        context=lsp.CodeActionContext(diagnostics=[d])))
    titles = [a.title for a in actions or [] if isinstance(a, lsp.CodeAction)]
    assert any(t.startswith("Capture .item() in the graph") for t in titles), titles


async def test_each_line_torch_names_in_a_loop_has_its_warning(tmp_path_factory):
    """Three loops shaped like real code, through the real server: a warning on each line torch's
    own graph_breaks log names, and none on the loop headers."""
    root = tmp_path_factory.mktemp("loops") / "ws"
    shutil.copytree(FIXTURES / "loops", root)
    named = lines_torch_names(root, LOOP_TARGETS)
    client = await start_server(root, settings=SETTINGS)
    try:
        for file in LOOP_TARGETS:
            uri = open_file(client, root / file)
            diagnostics = await wait_for(client, uri, _traced)
            assert named[file], file
            assert {d.range.start.line + 1 for d in _gb(diagnostics)} == named[file], (file, diagnostics)
            assert not [d for d in _gb(diagnostics) if d.code == "GB7000"], file
    finally:
        await stop_server(client)


async def test_break_on_a_multi_line_call_spans_its_lines(truth):
    root, client = truth
    path = root / "multi.py"
    uri = open_file(client, path)
    diagnostics = await wait_for(client, uri, _traced)
    [d] = _gb(diagnostics)
    start, col = locate(path, "float(")
    end, _ = locate(path, "        )")
    assert d.code == "GB0124"
    assert (d.range.start.line, d.range.start.character) == (start, col)
    assert (d.range.end.line, d.range.end.character) == (end, len("        )"))


async def test_hover_counts_a_library_break_once_beside_torchs_graph_count(truth):
    root, client = truth
    path = root / "wrapper.py"
    uri = open_file(client, path)
    diagnostics = await wait_for(client, uri, lambda ds: _traced(ds) and any(d.code == "CL210" for d in ds))
    # the break is in vendorlib/heads.py; wrapper.py shows it at the call, still one break
    assert [d.code for d in _gb(diagnostics)] == ["GB0291"]
    recompiles = [d for d in diagnostics if str(d.code).startswith("CL21")]
    assert not [d for d in recompiles if d.code == "CL211"]
    line, col = locate(path, "class TinyLM")
    hover = await client.text_document_hover_async(lsp.HoverParams(
        lsp.TextDocumentIdentifier(uri), lsp.Position(line, col + len("class T"))))
    text = hover.contents.value
    assert re.search(r"^1 graph break \(torch: \d+ graphs\), (\d+) recompile warnings$", text, re.M), text
    shown = int(re.search(r"(\d+) recompile warnings", text).group(1))
    assert shown == len(recompiles)
