"""Code actions: each edit applied to the file, saved and re-analysed by the real server, and the
pure functions of `compile_lens.actions` on source strings (offered only where they apply)."""

from __future__ import annotations

import ast
import asyncio
import difflib
import itertools
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types as lsp

from compile_lens import actions
from compile_lens.discovery import discover
from lsp_support import change_file, locate, open_file, start_server, stop_server, wait_for

FIXTURES = Path(__file__).parent / "fixtures" / "actions"
in_server_loop = pytest.mark.asyncio(loop_scope="module")  # the loop the module's server runs in
VERSIONS = itertools.count(100)  # document versions: increasing, whichever test edits
CAPABILITIES = lsp.ClientCapabilities(text_document=lsp.TextDocumentClientCapabilities(
    code_action=lsp.CodeActionClientCapabilities(
        resolve_support=lsp.ClientCodeActionResolveOptions(properties=["edit"]),
        code_action_literal_support=lsp.ClientCodeActionLiteralOptions(
            code_action_kind=lsp.ClientCodeActionKindOptions(value_set=["quickfix", "refactor.rewrite"])))))


async def _start(root: Path):
    return await start_server(root, settings={"benchmark.onSave": False}, capabilities=CAPABILITIES)


def _workspace(factory, name: str, source: Path) -> Path:
    root = factory.mktemp(name) / "ws"
    shutil.copytree(source, root)
    return root


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ws(tmp_path_factory):
    root = _workspace(tmp_path_factory, "actions", FIXTURES)
    client = await _start(root)
    yield root, client
    await stop_server(client)


# --- helpers ------------------------------------------------------------------------------------

def apply_edits(text: str, edits) -> str:
    """LSP text edits applied to `text` (positions refer to the original; last first)."""
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)

    def at(p: lsp.Position) -> int:
        return min(offsets[min(p.line, len(lines))] + p.character, len(text))

    spans = [(at(e.range.start), at(e.range.end), i, e.new_text) for i, e in enumerate(edits)]
    for start, end, _, new_text in sorted(spans, reverse=True):  # same position: array order kept
        text = text[:start] + new_text + text[end:]
    return text


def line_changes(before: str, after: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(replaced lines as (old, new), inserted lines): nothing may be deleted."""
    replaced, inserted = [], []
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    for op, a1, a2, b1, b2 in matcher.get_opcodes():
        old, new = before.splitlines()[a1:a2], after.splitlines()[b1:b2]
        if op == "insert":
            inserted += new
        elif op == "replace":
            assert len(old) == len(new), (old, new)
            replaced += list(zip(old, new))
        elif op == "delete":
            raise AssertionError(f"lines deleted: {old}")
    return replaced, inserted


def signature(diagnostics, text: str) -> Counter:
    """What was found, independent of line numbers: (code, the text of its line)."""
    rows = text.splitlines()
    return Counter((str(d.code), rows[d.range.start.line].strip()) for d in diagnostics)


async def analysed(client, name: str, since: int, timeout: float = 150.0) -> None:
    """Until the trace and the recompile sweep of `name` that started after status `since` end."""
    deadline = time.monotonic() + timeout
    while True:
        seen = client.statuses[since:]
        sweep = [i for i, s in enumerate(seen) if s.detail == f"checking recompiles in {name}"]
        if sweep and any(s.state == "idle" for s in seen[sweep[0] + 1:]):
            return
        assert time.monotonic() < deadline, [(s.state, s.detail) for s in seen][-8:]
        await asyncio.sleep(0.2)


async def open_and_settle(client, path: Path):
    since = len(client.statuses)
    uri = open_file(client, path)
    await analysed(client, path.name, since)
    return uri, client.diagnostics.get(uri, [])


async def save_and_settle(client, path: Path, text: str, version: int, *, reruns: bool = True):
    since = len(client.statuses)
    change_file(client, path, text, version, save=True)
    if reruns:
        await analysed(client, path.name, since)
    return since


def the(diagnostics, code: str, needle: str, text: str):
    rows = text.splitlines()
    found = [d for d in diagnostics if d.code == code and needle in rows[d.range.start.line]]
    assert len(found) == 1, [(d.code, d.range.start.line) for d in diagnostics]
    return found[0]


async def request(client, uri: str, rng: lsp.Range, diagnostics=()):
    result = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=rng,
        context=lsp.CodeActionContext(diagnostics=list(diagnostics))))
    return [a for a in result or [] if isinstance(a, lsp.CodeAction)]


async def action_for(client, uri: str, diagnostic, title_start: str) -> lsp.CodeAction:
    offered = await request(client, uri, diagnostic.range, [diagnostic])
    chosen = [a for a in offered if a.title.startswith(title_start)]
    assert len(chosen) == 1, [a.title for a in offered]
    assert chosen[0].edit is None and chosen[0].data, "edits are computed on resolve"
    assert chosen[0].diagnostics and chosen[0].diagnostics[0].code == diagnostic.code
    resolved = await client.code_action_resolve_async(chosen[0])
    assert resolved.edit and resolved.edit.changes
    return resolved


def cursor(path: Path, needle: str) -> lsp.Range:
    line, col = locate(path, needle)
    return lsp.Range(lsp.Position(line, col), lsp.Position(line, col))


def edited(action: lsp.CodeAction, uri: str, text: str) -> str:
    new = apply_edits(text, action.edit.changes[uri])
    ast.parse(new)
    return new


# --- through the server: apply, save, re-analyse ------------------------------------------------

@in_server_loop
async def test_wrap_construction_and_function_in_torch_compile(ws):
    root, client = ws
    path = root / "wrap.py"
    uri, before = await open_and_settle(client, path)
    text = path.read_text()
    assert not [d for d in before if str(d.code).startswith(("GB", "CL1", "CL0"))]

    offered = await request(client, uri, cursor(path, "model = Net()"))
    [wrap] = [a for a in offered if a.title.startswith("Wrap in torch.compile")]
    assert wrap.kind == lsp.CodeActionKind.RefactorRewrite
    wrap = await client.code_action_resolve_async(wrap)
    text2 = edited(wrap, uri, text)
    assert line_changes(text, text2) == ([("    model = Net()", "    model = torch.compile(Net())")], [])
    change_file(client, path, text2, next(VERSIONS), save=False)  # applied in the editor, not saved yet

    offered = await request(client, uri, cursor(path, "def scale"))
    [wrap_def] = [a for a in offered if a.title == "Wrap in torch.compile"]
    wrap_def = await client.code_action_resolve_async(wrap_def)
    text3 = edited(wrap_def, uri, text2)
    assert line_changes(text2, text3) == ([], ["@torch.compile"])
    assert "# compile-lens: inputs=(torch.randn(4, 8),)\n@torch.compile\ndef scale(x):" in text3

    await save_and_settle(client, path, text3, next(VERSIONS))
    after = client.diagnostics[uri]
    # the same findings as before; `scale` is a target now (its directive above the decorator):
    # traced without breaks, at most recompile information from its sweep
    new = signature(after, text3) - signature(before, text)
    assert all(code.startswith("CL21") for code, _ in new), new
    assert not signature(before, text) - signature(after, text3)
    for needle in ("model = torch.compile(Net())", "def scale"):  # already compiled: not offered
        assert not [a for a in await request(client, uri, cursor(path, needle)) if "torch.compile" in a.title]


@in_server_loop
async def test_dynamic_true_stops_the_recompile_warning(ws):
    root, client = ws
    path = root / "recompiles.py"
    uri, before = await open_and_settle(client, path)
    text = path.read_text()
    warning = next(d for d in before if d.code == "CL210")
    assert warning.data["changed"] == "x"
    fix = await action_for(client, uri, warning, "Compile `double` with dynamic=True")
    offered = await request(client, uri, warning.range, [warning])
    assert not [a for a in offered if "mark_dynamic" in a.title]  # no call of it in this file
    text2 = edited(fix, uri, text)
    assert line_changes(text, text2) == ([("@torch.compile", "@torch.compile(dynamic=True)")], [])
    await save_and_settle(client, path, text2, next(VERSIONS))
    after = client.diagnostics[uri]
    assert not [d for d in after if d.code == "CL210"]  # the size recompiles are gone
    kept = Counter({k: v for k, v in signature(before, text).items() if k[0] != "CL210"})
    assert signature(after, text2) == kept  # train/eval, requires_grad, autocast (CL213) stay


@in_server_loop
async def test_disable_a_helper_in_another_file(ws):
    root, client = ws
    model, helper = root / "uses_util.py", root / "pkg" / "util.py"
    helper_uri = open_file(client, helper)
    uri, before = await open_and_settle(client, model)
    text, helper_text = model.read_text(), helper.read_text()
    await wait_for(client, helper_uri, lambda ds: any(d.code == "GB0059" for d in ds))
    call_site = the(before, "GB0059", "h = debug(h)", text)
    fix = await action_for(client, uri, call_site, "Run `debug` outside the graph")
    assert list(fix.edit.changes) == [helper_uri]  # the edit goes to the helper's file
    helper2 = edited(fix, helper_uri, helper_text)
    assert helper2 == "import torch\n\n\n@torch.compiler.disable\n" + helper_text
    since = len(client.statuses)
    change_file(client, helper, helper2, next(VERSIONS), save=True)  # re-traces the file that imports it
    await analysed(client, model.name, since)
    assert not [d for d in client.diagnostics[helper_uri] if str(d.code).startswith("GB")]
    after = client.diagnostics[uri]
    # honest: the break inside `debug` is gone, the graph still breaks once where it is called
    assert [d.code for d in after if str(d.code).startswith("GB")] == ["GB0098"]
    assert the(after, "GB0098", "h = debug(h)", text)
    assert signature(after, text) - Counter({("GB0098", "h = debug(h)"): 1}) == \
        signature(before, text) - Counter({("GB0059", "h = debug(h)"): 1})


@in_server_loop
async def test_ignore_comment_silences_only_that_finding(ws):
    root, client = ws
    path = root / "breaks.py"
    uri, before = await open_and_settle(client, path)
    text = path.read_text()
    item = the(before, "GB0124", "y.sum().item()", text)
    fix = await action_for(client, uri, item, "Ignore GB0124 on this line")
    text2 = edited(fix, uri, text)
    assert line_changes(text, text2) == (
        [("        s = y.sum().item()", "        s = y.sum().item()  # compile-lens: ignore[GB0124]")], [])
    change_file(client, path, text2, next(VERSIONS), save=True)  # a comment: nothing re-runs
    after = await wait_for(client, uri, lambda ds: not [d for d in ds if d.code == "GB0124"])
    assert signature(after, text2) == signature(before, text) - Counter({("GB0124", "s = y.sum().item()"): 1})
    change_file(client, path, text, next(VERSIONS), save=True)
    await wait_for(client, uri, lambda ds: signature(ds, text) == signature(before, text))


@in_server_loop
async def test_write_inferred_inputs_as_a_directive(ws):
    root, client = ws
    path = root / "breaks.py"
    uri = open_file(client, path)
    text = path.read_text()
    before = await wait_for(client, uri, lambda ds: any(d.code == "GB0124" for d in ds))
    at = cursor(path, "ItemNet(nn.Module)")
    [write] = [a for a in await request(client, uri, at) if a.title.startswith("Write these inputs as a directive")]
    write = await client.code_action_resolve_async(write)
    text2 = edited(write, uri, text)
    assert line_changes(text, text2) == ([], ["# compile-lens: inputs=(torch.randn(8, 8),)"])
    assert "\n\n\n# compile-lens: inputs=(torch.randn(8, 8),)\nclass ItemNet" in text2
    change_file(client, path, text2, next(VERSIONS), save=True)  # a comment: nothing re-runs
    after = await wait_for(client, uri, lambda ds: signature(ds, text2) == signature(before, text))
    moved = lsp.Position(at.start.line + 1, at.start.character)
    [spec] = [t for t in discover(text2).targets if t.name == "ItemNet"]
    assert (spec.inputs.source, spec.inputs.text) == ("directive", "(torch.randn(8, 8),)")
    assert not [a for a in await request(client, uri, lsp.Range(moved, moved)) if a.title.startswith("Write")]
    assert signature(after, text2) == signature(before, text)
    change_file(client, path, text, next(VERSIONS), save=True)
    await wait_for(client, uri, lambda ds: signature(ds, text) == signature(before, text))


@in_server_loop
@pytest.mark.parametrize("code, needle, title, config", [
    ("GB0124", "y.sum().item()", "Capture .item() in the graph",
     "torch._dynamo.config.capture_scalar_outputs = True"),
    ("GB0059", 'print("shape", y.shape)', "Skip print() in compiled code",
     "torch._dynamo.config.ignore_logging_functions.add(print)"),
    ("GB0291", 'log.warning("halfway")', "Skip `log.warning()` in compiled code",
     "torch._dynamo.config.ignore_logging_functions.add(logging.Logger.warning)"),
])
async def test_config_fix_removes_its_break_and_nothing_else(ws, code, needle, title, config):
    # The fixes accumulate in breaks.py (as a user applying them one after another would).
    root, client = ws
    path = root / "breaks.py"
    uri = open_file(client, path)
    text = path.read_text()
    # settled: the trace and the recompile sweep (its findings arrive a moment after the trace)
    await wait_for(client, uri, lambda ds: any(d.code == code for d in ds))
    await analysed(client, path.name, 0)
    before = client.diagnostics[uri]
    found = the(before, code, needle, text)
    fix = await action_for(client, uri, found, title)
    assert fix.is_preferred or code == "GB0059"
    text2 = edited(fix, uri, text)
    replaced, inserted = line_changes(text, text2)
    assert not replaced and config in inserted and set(inserted) <= {config, ""}
    assert text2.index(config) > text2.index("from torch import nn") and text2.index(config) < text2.index("log =")
    await save_and_settle(client, path, text2, next(VERSIONS))
    after = client.diagnostics[uri]
    assert not [d for d in after if d.code == code]
    assert signature(after, text2) == signature(before, text) - signature([found], text)


# --- a server of its own: what this fix sets must not leak into the files above ----------------

@in_server_loop
async def test_reorderable_print_fix(tmp_path_factory):
    root = _workspace(tmp_path_factory, "reorder", FIXTURES / "reorder")
    client = await _start(root)
    try:
        path = root / "reorder.py"
        uri, before = await open_and_settle(client, path)
        text = path.read_text()
        fix = await action_for(client, uri, the(before, "GB0059", 'print("hidden", h)', text),
                               "Print after the graph runs")
        text2 = edited(fix, uri, text)
        assert line_changes(text, text2) == (
            [], ["", "torch._dynamo.config.reorderable_logging_functions.add(print)"])
        await save_and_settle(client, path, text2, next(VERSIONS))
        after = client.diagnostics[uri]
        assert not [d for d in after if str(d.code).startswith("GB")]
        assert signature(after, text2) == signature(before, text) - Counter({("GB0059", 'print("hidden", h)'): 1})
    finally:
        await stop_server(client)


# --- the pure functions, on source strings -------------------------------------------------------

URI = "file:///w/model.py"

MODEL = '''\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x)


class Encoder(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return self.fc(x)


class Both(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder(8)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.encoder(x))


def make():
    return Net()


def run(x):
    model = Net().eval()
    compiled = torch.compile(Net())
    other = Net()
    other = torch.compile(other)
    seq = nn.Sequential(nn.Linear(8, 8))
    value = len(x)
    return model(x), compiled(x), other(x), seq(x), value
'''


def offered(source: str, needle: str, diagnostics=(), figures=None, occurrence: int = 1):
    line = _line_of(source, needle, occurrence)
    rng = lsp.Range(lsp.Position(line, 0), lsp.Position(line, 0))
    return actions.code_actions(source, URI, rng, list(diagnostics), figures)


def _line_of(source: str, needle: str, occurrence: int = 1) -> int:
    rows = [i for i, row in enumerate(source.splitlines()) if needle in row]
    return rows[occurrence - 1]


def run_action(source: str, action: lsp.CodeAction, uri: str = URI) -> str:
    resolved = actions.resolve(action, source)
    assert resolved.edit is not None, action.title
    new = apply_edits(source, resolved.edit.changes[uri])
    ast.parse(new)
    return new


def titles(found) -> list[str]:
    return [a.title for a in found]


def diag(source: str, needle: str, code: str, data: dict, message: str = "", related=None) -> lsp.Diagnostic:
    line = _line_of(source, needle)
    col = source.splitlines()[line].index(needle)
    return lsp.Diagnostic(range=lsp.Range(lsp.Position(line, col), lsp.Position(line, col + len(needle))),
                          message=message or code, code=code, source="Compile Lens", data=data,
                          related_information=related)


def test_wrap_offered_on_module_constructions_only():
    wrap = "Wrap in torch.compile"
    assert titles(offered(MODEL, "return Net()")) == [wrap]
    assert titles(offered(MODEL, "model = Net().eval()")) == [wrap]
    assert titles(offered(MODEL, "self.encoder = Encoder(8)")) == [wrap]
    assert titles(offered(MODEL, "seq = nn.Sequential")) == [wrap]
    for needle in ("compiled = torch.compile(Net())",  # already compiled
                   "other = Net()",  # compiled on the next line
                   "self.head = nn.Linear(8, 2)",  # a layer inside a model: not offered
                   "value = len(x)",  # not a model
                   "class Net", "def forward", "super().__init__()"):
        assert wrap not in titles(offered(MODEL, needle)), needle


def test_wrap_edits_keep_formatting_and_carry_the_figure():
    [action] = offered(MODEL, "model = Net().eval()", figures={"Net": "1.42×"})
    assert action.title == "Wrap in torch.compile (1.42× measured)"
    new = run_action(MODEL, action)
    assert line_changes(MODEL, new) == ([("    model = Net().eval()", "    model = torch.compile(Net().eval())")], [])
    [action] = offered(MODEL, "self.encoder = Encoder(8)")
    assert line_changes(MODEL, run_action(MODEL, action)) == (
        [("        self.encoder = Encoder(8)", "        self.encoder = torch.compile(Encoder(8))")], [])
    multi = MODEL.replace("    return Net()\n", "    return Net(\n    )\n")
    [action] = offered(multi, "return Net(")
    assert "    return torch.compile(Net(\n    ))\n" in run_action(multi, action)


def test_wrap_adds_import_torch_where_the_file_has_it():
    source = '"""Doc."""\n\nfrom torch import nn\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n' \
             '        return x\n\n\ndef make():\n    return Net()\n'
    [action] = offered(source, "return Net()")
    new = run_action(source, action)
    assert new.startswith('"""Doc."""\n\nimport torch\nfrom torch import nn\n\n\nclass Net')
    assert "    return torch.compile(Net())\n" in new
    bare = "def make():\n    return Net()\n\n\nclass Net(Module):\n    def forward(self, x):\n        return x\n"
    [action] = offered(bare, "return Net()")
    assert run_action(bare, action).startswith("import torch\n\n\ndef make():\n    return torch.compile(Net())\n")


def test_wrap_def_adds_decorator_above_the_others():
    source = "import functools\n\nimport torch\n\n\n@functools.lru_cache\ndef f(x):\n    return x * 2\n\n\n" \
             "@torch.compile\ndef g(x):\n    return x\n\n\ndef main():\n    pass\n"
    [action] = offered(source, "def f(x)")
    assert "\n\n@torch.compile\n@functools.lru_cache\ndef f(x):" in run_action(source, action)
    assert not offered(source, "def g(x)")  # already compiled
    assert not offered(source, "def main()")
    loop = source + "\n\ndef train(model, batches):\n    for x in batches:\n        model(x).sum().backward()\n"
    assert not offered(loop, "def train(")  # a training loop, not tensor code
    assert not offered(loop.replace("    return x * 2\n", "    return 'x'\n"), "def f(x)")  # no tensor work


def test_directive_offered_for_inferred_inputs_only():
    [action] = offered(MODEL, "class Net")
    assert action.title == "Write these inputs as a directive: inputs=(torch.randn(8, 8),)"
    new = run_action(MODEL, action)
    assert "\n\n\n# compile-lens: inputs=(torch.randn(8, 8),)\nclass Net(nn.Module):" in new
    assert not offered(new, "class Net")  # the directive supplies them now
    two = MODEL.replace("    def forward(self, x):\n        return self.fc(x)\n", "    def forward(self, x, y):\n        return self.fc(x)\n", 1)
    assert not offered(two, "class Net")  # nothing inferred for two inputs: no directive to write


def test_ignore_appends_or_merges():
    source = "x = 1\ny = 2  # compile-lens: ignore[GB0059]\nz = 3  # noqa\n"
    for needle, expected in (("x = 1", "x = 1  # compile-lens: ignore[GB0124]"),
                             ("y = 2", "y = 2  # compile-lens: ignore[GB0059, GB0124]"),
                             ("z = 3", "z = 3  # noqa  # compile-lens: ignore[GB0124]")):
        [action] = offered(source, needle, [diag(source, needle, "GB0124", {})])
        assert action.kind == lsp.CodeActionKind.QuickFix
        assert expected in run_action(source, action).splitlines()
    assert not offered(source, "x = 1", [lsp.Diagnostic(range=lsp.Range(lsp.Position(0, 0), lsp.Position(0, 1)),
                                                        message="m", code="E1", source="pylint")])


ITEM = '''\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        y = self.fc(x)
        s = y.sum().item()
        return y * s
'''


def _gb(gb_id: str, function: str = "forward", **extra) -> dict:
    return {"kind": "graph_break", "gb_id": gb_id, "gb_type": "", "target": "Net", "function": function, **extra}


def test_capture_scalar_outputs_only_where_it_removes_the_break():
    d = diag(ITEM, "y.sum().item()", "GB0124", _gb("GB0124"))
    [capture] = [a for a in offered(ITEM, "y.sum().item()", [d]) if a.title.startswith("Capture")]
    new = run_action(ITEM, capture)
    assert line_changes(ITEM, new) == ([], ["", "torch._dynamo.config.capture_scalar_outputs = True"])
    assert not [a for a in offered(new, "y.sum().item()", [d]) if a.title.startswith("Capture")]  # set already
    branched = ITEM.replace("        return y * s\n", "        if s > 0:\n            return y\n        return -y\n")
    assert not [a for a in offered(branched, "y.sum().item()", [d]) if a.title.startswith("Capture")]


def test_print_fix_reorders_when_torch_can_else_skips():
    printing = ITEM.replace("        s = y.sum().item()\n        return y * s\n", '        print("y", y)\n        return y\n')
    d = diag(printing, 'print("y", y)', "GB0059", _gb("GB0059"))
    fixes = [a for a in offered(printing, "print(", [d]) if "print()" in a.title or "graph runs" in a.title]
    assert titles(fixes) == ["Print after the graph runs (torch._dynamo.config.reorderable_logging_functions)"]
    shape = printing.replace('print("y", y)', 'print("y", y.shape)')
    d = diag(shape, 'print("y", y.shape)', "GB0059", _gb("GB0059"))
    fixes = [a for a in offered(shape, "print(", [d]) if "print()" in a.title or "graph runs" in a.title]
    assert titles(fixes) == ["Skip print() in compiled code (torch._dynamo.config.ignore_logging_functions)"]


def test_logging_fix_adds_import_logging_when_needed():
    source = ITEM.replace("        s = y.sum().item()\n        return y * s\n",
                          '        LOG.info("hi")\n        return y\n')
    source = source.replace("from torch import nn\n", "from torch import nn\nfrom logging import getLogger\n\nLOG = getLogger()\n")
    d = diag(source, 'LOG.info("hi")', "CL107", {"kind": "logging", "function": "Net.forward", "root": "Net.forward",
                                                   "call": "LOG.info"})
    [fix] = [a for a in offered(source, 'LOG.info', [d]) if a.title.startswith("Skip")]
    new = run_action(source, fix)
    assert new.startswith("import torch\nfrom torch import nn\nimport logging\nfrom logging import getLogger\n\n"
                          "torch._dynamo.config.ignore_logging_functions.add(logging.Logger.info)\n\nLOG =")


LOGGING_LM = '''\
import logging

import torch
from torch import nn

logger = logging.getLogger(__name__)


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.lm = nn.Linear(8, 8)

    @property
    def loss_function(self):
        logger.warning("loss_type=None: using the default loss")
        return nn.functional.mse_loss

    def forward(self, x, labels=None):
        out = self.lm(x)
        logger.info("logits %s", self.lm(x).shape)
        if labels is not None:
            return self.loss_function(out, labels)
        return out
'''


def test_logging_fix_names_the_logging_call_never_another_call_on_the_line():
    d = diag(LOGGING_LM, 'logger.info("logits', "GB0291", _gb("GB0291"))
    [fix] = [a for a in offered(LOGGING_LM, 'logger.info("logits', [d]) if a.title.startswith("Skip")]
    assert "torch._dynamo.config.ignore_logging_functions.add(logging.Logger.info)" in run_action(LOGGING_LM, fix)
    # the break inside `loss_function`, seen from its call site: no logging call on that line
    site = diag(LOGGING_LM, "return self.loss_function(out, labels)", "GB0291",
                _gb("GB0291", function="loss_function", call_site=True))
    assert not [a for a in offered(LOGGING_LM, "return self.loss_function", [site]) if a.title.startswith("Skip")]
    call = LOGGING_LM.replace('logger.info("logits %s", self.lm(x).shape)', "self.lm(x)")
    plain = diag(call, "        self.lm(x)", "GB0291", _gb("GB0291"))
    assert not [a for a in offered(call, "        self.lm(x)", [plain]) if a.title.startswith("Skip")]


def test_disable_on_a_property_goes_under_the_property_decorator_and_imports():
    d = diag(LOGGING_LM, 'logger.warning("loss_type', "GB0291", _gb("GB0291", function="loss_function"))
    [fix] = [a for a in offered(LOGGING_LM, 'logger.warning("loss_type', [d]) if "outside the graph" in a.title]
    new = run_action(LOGGING_LM, fix)
    assert "    @property\n    @torch.compiler.disable\n    def loss_function(self):" in new
    namespace: dict = {"__name__": "lm_checked"}
    exec(compile(new, "lm.py", "exec"), namespace)  # noqa: S102 - the edited file must run
    assert callable(namespace["LM"]().loss_function)
    installed = lsp.DiagnosticRelatedInformation(lsp.Location(
        "file:///venv/lib/python3.11/site-packages/transformers/modeling_utils.py",
        lsp.Range(lsp.Position(4777, 0), lsp.Position(4777, 0))), "loss_function")
    site = diag(LOGGING_LM, "return self.loss_function(out, labels)", "GB0291",
                _gb("GB0291", function="loss_function", call_site=True), related=[installed])
    assert not [a for a in offered(LOGGING_LM, "return self.loss_function", [site]) if "outside" in a.title]


def test_wrap_not_offered_where_the_compiled_wrapper_would_break_the_file():
    source = ("import torch\n\n\n@torch.library.custom_op(\"lib::op\", mutates_args=())\n"
              "def op(x: torch.Tensor) -> torch.Tensor:\n    return x.sin() + 1\n\n\n"
              "@op.register_fake\ndef _(x):\n    return torch.empty_like(x)\n\n\n"
              "def scale(x):\n    return x * 2\n\n\nscale.calls = 0\n")
    assert not [a for a in offered(source, "def op(x") if a.title.startswith("Wrap")]
    assert not [a for a in offered(source, "def scale(x)") if a.title.startswith("Wrap")]


HELPERS = '''\
import torch
from torch import nn


def helper(t):
    print(t.shape)
    return t


@torch.compiler.disable
def quiet(t):
    return t


class Net(nn.Module):
    def forward(self, x):
        return quiet(helper(x))
'''


def test_disable_offered_for_helpers_not_for_forward():
    d = diag(HELPERS, "print(t.shape)", "GB0059", _gb("GB0059", function="helper"))
    [fix] = [a for a in offered(HELPERS, "print(t.shape)", [d]) if "outside the graph" in a.title]
    new = run_action(HELPERS, fix)
    assert line_changes(HELPERS, new) == ([], ["@torch.compiler.disable"])
    assert "\n\n\n@torch.compiler.disable\ndef helper(t):" in new
    in_forward = diag(HELPERS, "return quiet(helper(x))", "GB0059", _gb("GB0059"))
    assert not [a for a in offered(HELPERS, "return quiet", [in_forward]) if "outside the graph" in a.title]
    already = diag(HELPERS, "return t", "GB0059", _gb("GB0059", function="quiet"))
    assert not [a for a in offered(HELPERS, "return t", [already]) if "outside the graph" in a.title]
    lint = diag(HELPERS, "print(t.shape)", "CL101", {"kind": "print", "function": "helper", "root": "Net.forward"})
    assert [a for a in offered(HELPERS, "print(t.shape)", [lint]) if "outside the graph" in a.title]


CALL_SITE = '''\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc(x)


def train(batches):
    model = torch.compile(
        Net(),
        mode="max-autotune",
    )
    for x in batches:
        out = model(x)
        print(out)
'''


def _recompile(source: str, needle: str, kind: str = "automatic-dynamic", code: str = "CL210") -> lsp.Diagnostic:
    return diag(source, needle, code, {"kind": "recompile", "recompile_kind": kind, "changed": "x", "target": "Net",
                                       "variation": "batch 16", "count": 1},
                message="Recompiles when `x` changes (batch 16): tensor 'x' size mismatch at index 0. "
                        "expected 8, actual 16 — one extra compile, then dynamic")


def test_recompile_fixes_dynamic_true_or_mark_dynamic_at_the_call():
    d = _recompile(CALL_SITE, "class Net")
    dynamic, mark = [a for a in offered(CALL_SITE, "class Net", [d]) if a.title.startswith(("Compile", "Mark"))]
    assert dynamic.title == "Compile `Net` with dynamic=True"
    assert line_changes(CALL_SITE, run_action(CALL_SITE, dynamic)) == ([], ["        dynamic=True,"])
    assert mark.title.startswith("Mark dimension 0 of `x` dynamic before the call")
    assert line_changes(CALL_SITE, run_action(CALL_SITE, mark)) == ([], ["        torch._dynamo.mark_dynamic(x, 0)"])
    one_line = CALL_SITE.replace('torch.compile(\n        Net(),\n        mode="max-autotune",\n    )', "torch.compile(Net())")
    [dynamic] = [a for a in offered(one_line, "class Net", [d]) if a.title.startswith("Compile")]
    assert "    model = torch.compile(Net(), dynamic=True)\n" in run_action(one_line, dynamic)
    special = _recompile(CALL_SITE, "class Net", kind="specialization", code="CL211")
    fixes = [a for a in offered(CALL_SITE, "class Net", [special]) if a.kind == lsp.CodeActionKind.QuickFix]
    assert titles(fixes) == ["Ignore CL211 on this line (# compile-lens: ignore[CL211])"]  # dynamic=True would not help
    no_site = CALL_SITE.split("def train")[0]
    fixes = [a for a in offered(no_site, "class Net", [d]) if a.kind == lsp.CodeActionKind.QuickFix]
    assert titles(fixes) == ["Ignore CL210 on this line (# compile-lens: ignore[CL210])"]  # compiled elsewhere


def test_stale_or_unknown_actions_resolve_to_no_edit():
    [action] = offered(MODEL, "return Net()")
    changed = MODEL.replace("    return Net()\n", "    return 3\n")
    assert actions.resolve(action, changed).edit is None
    assert actions.resolve(lsp.CodeAction(title="x", data={"fix": "nope", "uri": URI}), MODEL).edit is None
    assert actions.code_actions("def broken(:\n", URI, lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)), []) == []


# --- every offered action, on every fixture and example: applied, compiled and imported -----------

REPO = Path(__file__).parent.parent
IMPORT_CHECK = '''\
import json, os, signal, sys, time, traceback
import torch  # once, before the forks: each import then costs milliseconds
import torch._dynamo  # what `@torch.compile` at import time pulls in (seconds, once)
import torch._inductor.compile_fx
from compile_lens.worker import loader

results = {}
for job in json.load(sys.stdin):
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        try:
            loader.import_file(job["file"], job["root"])
            code = 0
        except BaseException:  # noqa: BLE001
            with open(job["file"] + ".import-error", "w") as f:
                f.write(traceback.format_exc()[-2000:])
            code = 1
        os._exit(code)
    started = time.monotonic()
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
            results[job["id"]] = ["ok" if ok else "failed", time.monotonic() - started]
            break
        if time.monotonic() > started + 10:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            results[job["id"]] = ["timeout", 10.0]
            break
        time.sleep(0.01)
print(json.dumps(results))
'''


def _import_check(jobs: list[dict], tmp: Path) -> dict[str, tuple[str, float]]:
    """Import each job's file with the worker's own loader, in a forked child (10 s each):
    ("ok" | "failed" | "timeout", seconds)."""
    import json
    import os
    import subprocess
    import sys

    script = tmp / "import_check.py"
    script.write_text(IMPORT_CHECK)
    out = subprocess.run([sys.executable, str(script)], input=json.dumps(jobs), capture_output=True, text=True,
                         timeout=120 + 15 * len(jobs), env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    return {job: (status, seconds) for job, (status, seconds) in json.loads(out.stdout.strip().splitlines()[-1]).items()}


async def _offered_everywhere(client, files: list[Path]) -> list[tuple[Path, lsp.CodeAction, lsp.CodeAction]]:
    """Every action the server offers on every line of each (open) file, with the diagnostics on
    that line, each resolved through the server: (file, offered, resolved)."""
    import json

    seen, found = set(), []
    for path in files:
        uri = path.as_uri()
        rows = path.read_text().split("\n")
        diagnostics = client.diagnostics.get(uri, [])
        for i, row in enumerate(rows):
            rng = lsp.Range(lsp.Position(i, 0), lsp.Position(i, len(row)))
            here = [d for d in diagnostics if d.range.start.line <= i <= d.range.end.line]
            for action in await request(client, uri, rng, here):
                key = (action.title, json.dumps(action.data, sort_keys=True))
                if key in seen:
                    continue
                seen.add(key)
                resolved = await client.code_action_resolve_async(action)
                assert resolved.edit and resolved.edit.changes and all(resolved.edit.changes.values()), \
                    f"{path.name}:{i + 1}: offered '{action.title}' resolves to no edit"
                found.append((path, action, resolved))
    return found


def _apply_everywhere(root: Path, found, tmp: Path) -> None:
    """Apply each action to a copy of the workspace; every edited file must compile, and every file
    it touched (and the file it was offered in) must import whenever the original does."""
    from pygls.uris import to_fs_path

    tmp.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in root.rglob("*.py") if ".compile-lens" not in p.parts)
    originals = _import_check([{"id": str(p), "file": str(p), "root": str(root)} for p in files], tmp)
    # files that import (fault fixtures that loop, sleep or hog memory on purpose are compiled only)
    importable = {Path(p) for p, (status, seconds) in originals.items() if status == "ok" and seconds < 3}
    assert len(importable) > len(files) // 2, originals  # most fixtures import: the check is real
    jobs, variants = [], {}
    for n, (path, action, resolved) in enumerate(found):
        copy = tmp / f"v{n}"
        shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".compile-lens", "*.import-error"))
        touched = {path}
        for uri, edits in resolved.edit.changes.items():
            target = Path(to_fs_path(uri))
            new = apply_edits(target.read_text(), edits)
            assert new != target.read_text(), f"'{action.title}' changes nothing"
            compile(new, str(target), "exec", dont_inherit=True)  # raises SyntaxError: the test fails
            (copy / target.relative_to(root)).write_text(new)
            touched.add(target)
        for target in touched & importable:
            job = str(len(jobs))
            jobs.append({"id": job, "file": str(copy / target.relative_to(root)), "root": str(copy)})
            variants[job] = (path, action.title, target)
    statuses = _import_check(jobs, tmp)
    broken = []
    for job, (status, _seconds) in statuses.items():
        if status != "ok":
            path, title, target = variants[job]
            error = Path(jobs[int(job)]["file"] + ".import-error")
            why = error.read_text().strip().splitlines()[-1] if error.exists() else status
            broken.append(f"{path.name}: '{title}' breaks {target.name}: {why}")
    assert not broken, "\n".join(broken)


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="function")
async def test_every_static_action_on_every_fixture_and_example_compiles_and_imports(tmp_path):
    """Static lints and targets (no code run: an untrusted workspace) on every file of
    tests/fixtures and examples/: each offered action applied."""
    root = tmp_path / "ws"
    shutil.copytree(REPO / "tests" / "fixtures", root / "fixtures")
    shutil.copytree(REPO / "examples", root / "examples")
    files = sorted(root.rglob("*.py"))
    client = await start_server(root, trusted=False, capabilities=CAPABILITIES)
    try:
        for path in files:
            uri = open_file(client, path)
            await wait_for(client, uri, lambda ds: True, timeout=30)
        found = await _offered_everywhere(client, files)
    finally:
        await stop_server(client)
    kinds = Counter(a.data["fix"] for _, a, _ in found)
    assert {"ignore", "wrap", "directive", "config"} <= set(kinds), kinds
    _apply_everywhere(root, found, tmp_path / "variants")


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="function")
@pytest.mark.parametrize("folder", ["examples", "tests/fixtures/actions"])
async def test_every_action_after_a_trace_compiles_and_imports(tmp_path, folder):
    """The same with the trace's and the sweep's findings (graph breaks at call sites, in helpers,
    recompiles): the GPT-2-shaped `lm_head.py` breaks inside a library-style `@property` that logs."""
    root = tmp_path / "ws"
    shutil.copytree(REPO / folder, root)
    files = sorted(p for p in root.rglob("*.py") if p.name != "pyproject.toml")
    client = await _start(root)
    try:
        with_targets = [p for p in files if (found := discover(p.read_text())) and any(t.inputs for t in found.targets)]
        for path in with_targets:
            await open_and_settle(client, path)
        for path in files:
            if path not in with_targets:
                uri = open_file(client, path)
                await wait_for(client, uri, lambda ds: True, timeout=30)
        assert any(str(d.code).startswith("GB") for ds in client.diagnostics.values() for d in ds)
        found = await _offered_everywhere(client, files)
    finally:
        await stop_server(client)
    if folder.endswith("actions"):
        lm = root / "lm_head.py"
        offered = [a.title for path, a, _ in found if path == lm]
        assert not [t for t in offered if "ignore_logging_functions" in t], offered  # no logger call on that line
        assert any("Run `loss_function` outside the graph" in t for t in offered), offered
    _apply_everywhere(root, found, tmp_path / "variants")
