"""torch's newest escape hatches as code actions (`actions/hatches.py`), each applied through the
real server and the file re-traced without that break: `@torch._dynamo.nonstrict_trace` on a
helper Dynamo cannot trace, `leaf_function` (with the fake implementation torch requires) on a
helper that returns None, `reorderable_logging_functions` for `logging.warning()`/`warnings.warn()`
(never for a `logging.Logger` method: torch 2.13 does not reorder those). Offered only where the
worker's torch has them (its hello lists them). (`reorderable_logging_functions` for print:
tests/lsp/test_lsp_code_actions.py `test_reorderable_print_fix`.)"""

from __future__ import annotations

import ast
import logging
import shutil
import textwrap
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types as lsp

from compile_lens import actions
from compile_lens.worker.jobs import escape_hatches
from lsp_support import _until, change_file, open_file, start_server, stop_server
from paths import FIXTURES

FIXTURE = FIXTURES / "escape_hatches"
in_server_loop = pytest.mark.asyncio(loop_scope="module")
CAPABILITIES = lsp.ClientCapabilities(text_document=lsp.TextDocumentClientCapabilities(
    code_action=lsp.CodeActionClientCapabilities(
        resolve_support=lsp.ClientCodeActionResolveOptions(properties=["edit"]),
        code_action_literal_support=lsp.ClientCodeActionLiteralOptions(
            code_action_kind=lsp.ClientCodeActionKindOptions(value_set=["quickfix", "refactor.rewrite"])))))


async def analysed(client, since: int, timeout: float = 240.0) -> None:
    """Until the trace and recompile sweep of every target that started after status `since` end
    (woken by each `compileLens/status`)."""
    def found() -> list:
        seen = client.statuses[since:]
        swept = [i for i, s in enumerate(seen) if (s.detail or "").startswith("checking recompiles in")]
        return [True] if swept and any(s.state == "idle" for s in seen[swept[0] + 1:]) else []

    def seen() -> str:
        return f"a sweep's end; seen: {[(s.state, s.detail) for s in client.statuses[since:]][-8:]}"

    await _until(client.status_event, found, timeout, seen)


def breaks(client, uri: str, text: str) -> dict[str, str]:
    """Traced graph breaks: the stripped text of their line → GB id."""
    rows = text.splitlines()
    return {rows[d.range.start.line].strip(): str(d.code) for d in client.diagnostics.get(uri, [])
            if str(d.code).startswith("GB")}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("hatches") / "ws"
    shutil.copytree(FIXTURE, root)
    client = await start_server(root, settings={"benchmark.onSave": False}, capabilities=CAPABILITIES)
    path = root / "hatches.py"
    since = len(client.statuses)
    uri = open_file(client, path)
    await analysed(client, since)
    yield client, path, uri, [100]
    await stop_server(client)


async def apply(client, path: Path, uri: str, versions: list, needle: str, title: str) -> str:
    """The action titled `title` on the break at `needle`, applied, saved and re-analysed; the new text."""
    text = path.read_text()
    rows = text.splitlines()
    found = next(d for d in client.diagnostics[uri] if str(d.code).startswith("GB") and needle in rows[d.range.start.line])
    result = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=found.range,
        context=lsp.CodeActionContext(diagnostics=[found])))
    chosen = [a for a in result or [] if isinstance(a, lsp.CodeAction) and a.title.startswith(title)]
    assert len(chosen) == 1, [a.title for a in result or []]
    resolved = await client.code_action_resolve_async(chosen[0])
    new = actions.apply_edits(text, resolved.edit.changes[uri])
    ast.parse(new)
    versions[0] += 1
    since = len(client.statuses)
    change_file(client, path, new, versions[0], save=True)
    await analysed(client, since)
    return new


@pytest.mark.slow
@in_server_loop
async def test_nonstrict_trace_on_a_helper_dynamo_cannot_trace(ws):
    client, path, uri, versions = ws
    before = breaks(client, uri, path.read_text())
    assert before["torch._dynamo.graph_break()  # stands for Python that Dynamo cannot trace"] == "GB0025"
    text = await apply(client, path, uri, versions, "torch._dynamo.graph_break()", "Trace `scaled` without Dynamo")
    assert "@torch._dynamo.nonstrict_trace\ndef scaled(x):" in text
    after = breaks(client, uri, text)
    assert "torch._dynamo.graph_break()  # stands for Python that Dynamo cannot trace" not in after
    assert {k: v for k, v in before.items() if "graph_break()" not in k} == after  # nothing else changed


@pytest.mark.slow
@in_server_loop
async def test_leaf_function_on_a_helper_that_returns_none(ws):
    client, path, uri, versions = ws
    before = breaks(client, uri, path.read_text())
    assert "if not torch.isfinite(x).all():" in before
    text = await apply(client, path, uri, versions, "if not torch.isfinite(x).all():", "Run `check_finite` eagerly")
    assert "@torch._dynamo.decorators.leaf_function\ndef check_finite(x):" in text
    assert "@check_finite.register_fake\ndef _check_finite_fake(x):" in text
    after = breaks(client, uri, text)
    assert "if not torch.isfinite(x).all():" not in after
    assert {k: v for k, v in before.items() if "isfinite" not in k} == after


@pytest.mark.slow
@in_server_loop
async def test_reorder_logging_warning_and_warnings_warn_not_a_logger_method(ws):
    client, path, uri, versions = ws
    before = breaks(client, uri, path.read_text())
    slow = 'logging.warning("Attention: using slow attention, flash needs PyTorch >= 2.0")'
    assert before[slow] == "GB4841"  # the break is inside the logging module, shown at the call
    assert before['warnings.warn("Deprecated is deprecated: use Scaled")'] == "GB0007"
    assert before['logger.info("Logged: forward done")'] == "GB0291"
    text = await apply(client, path, uri, versions, "logging.warning(", "Log after the graph runs: `logging.warning()`")
    assert ("import torch\nfrom torch import nn\n\ntorch._dynamo.config.reorderable_logging_functions.add("
            "logging.warning)  # torch._dynamo.config: applies to the whole process") in text
    after = breaks(client, uri, text)
    assert slow not in after
    assert {k: v for k, v in before.items() if k != slow} == after  # nothing else changed
    text = await apply(client, path, uri, versions, "warnings.warn(", "Warn after the graph runs: `warnings.warn()`")
    assert "torch._dynamo.config.reorderable_logging_functions.add(warnings.warn)" in text
    assert {k: v for k, v in before.items() if k != slow and "warnings.warn" not in k} == breaks(client, uri, text)
    # a logging.Logger method: torch 2.13 does not reorder it, so only the skip is offered
    rows = text.splitlines()
    found = next(d for d in client.diagnostics[uri] if "logger.info(" in rows[d.range.start.line])
    offered = [a.title for a in await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=found.range,
        context=lsp.CodeActionContext(diagnostics=[found]))) or []]
    assert not [t for t in offered if "after the graph runs" in t], offered
    assert "Skip `logger.info()` in compiled code (torch._dynamo.config.ignore_logging_functions)" in offered


# --- the pure functions: offered only where they apply --------------------------------------------

HELPERS = textwrap.dedent('''\
    import torch


    def returns_input(x, scale=2):
        print("seen", x.shape)
        return x


    def changes_input(x):
        x.add_(1)
        return x


    def returns_new(x):
        return x * 2


    def forward_like(x):
        return returns_input(x) + returns_new(x)
''')


def _offered(source: str, function: str, line_text: str, gb: str, hatches=("nonstrict_trace", "leaf_function")):
    line = next(i for i, row in enumerate(source.splitlines()) if line_text in row)
    d = lsp.Diagnostic(range=lsp.Range(lsp.Position(line, 4), lsp.Position(line, 10)), message="break", code=gb,
                       source="Compile Lens", data={"kind": "graph_break", "function": function,
                                                    "target": "forward_like", "gb_id": gb})
    return {a.title.split(" (")[0]: a for a in actions.code_actions(source, "file:///w/m.py", d.range, [d],
                                                                      hatches=hatches)}


def test_leaf_function_only_for_helpers_that_return_none_or_an_input_unchanged():
    assert any(t.startswith("Run `returns_input` eagerly") for t in _offered(HELPERS, "returns_input", "print(", "GB0059"))
    assert not any("eagerly as a leaf" in t for t in _offered(HELPERS, "changes_input", "x.add_(1)", "GB0059"))
    assert not any("eagerly as a leaf" in t for t in _offered(HELPERS, "returns_new", "return x * 2", "GB0059"))


def test_the_fake_implementation_returns_the_input_it_is_given():
    [leaf] = [a for t, a in _offered(HELPERS, "returns_input", "print(", "GB0059").items() if "eagerly" in t]
    text = actions.apply_edits(HELPERS, actions.resolve(leaf, HELPERS).edit.changes["file:///w/m.py"])
    assert "@returns_input.register_fake\ndef _returns_input_fake(x, scale=2):" in text
    assert "    return x\n" in text.split("_returns_input_fake")[1]
    compile(text, "m.py", "exec")


def test_nonstrict_trace_not_for_breaks_on_data_or_side_effects():
    assert any(t.startswith("Trace `returns_input` without Dynamo") for t in
               _offered(HELPERS, "returns_input", "print(", "GB0025"))
    for gb in ("GB0059", "GB0124", "GB0170"):  # print runs once at trace time; data-dependent values
        assert not any("without Dynamo" in t for t in _offered(HELPERS, "returns_input", "print(", gb))


def test_nothing_offered_where_this_torch_lacks_the_hatch():
    assert not any("without Dynamo" in t or "eagerly as a leaf" in t
                   for t in _offered(HELPERS, "returns_input", "print(", "GB0025", hatches=()))


# --- reordering a logging call: where torch 2.13 replays it (the action's title says this) --------

LOGGING = textwrap.dedent('''\
    import logging
    import warnings

    import torch
    from torch import nn

    logger = logging.getLogger(__name__)


    class Norm(nn.Module):
        def forward(self, x):
            logging.warning("norm in fp32")
            return x / x.norm()


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = Norm()

        def forward(self, x):
            B, T, C = x.size()
            logging.warning("net sees %d tokens", 3)
            warnings.warn(f"deprecated: {T}")
            logging.warning("shape %s", x.shape)
            warnings.warn("two calls"); logging.info("on one line")
            logger.warning("a logger method")
            return self.norm(x)
''')


def _break(source: str, line_text: str, gb: str, **data):
    line = next(i for i, row in enumerate(source.splitlines()) if line_text in row)
    d = lsp.Diagnostic(range=lsp.Range(lsp.Position(line, 8), lsp.Position(line, 20)), message="break", code=gb,
                       source="Compile Lens", data={"kind": "graph_break", "gb_id": gb, "target": "Net",
                                                    "function": "forward", "depth": 0, **data})
    return [a.title for a in actions.code_actions(source, "file:///w/m.py", d.range, [d],
                                                  hatches=("reorderable_logging_functions",
                                                           "ignore_logging_functions"))]


def test_reorder_offered_for_logging_functions_in_the_compiled_frame_only():
    at_call = dict(call_site=True, function="warning")
    assert any(t.startswith("Log after the graph runs: `logging.warning()`")
               for t in _break(LOGGING, "net sees", "GB4841", **at_call))
    assert any(t.startswith("Warn after the graph runs: `warnings.warn()`")
               for t in _break(LOGGING, "warnings.warn(", "GB0007"))
    # inlined into the compiled function (depth 1): torch drops a reordered call there
    inlined = _break(LOGGING, "norm in fp32", "GB4841", **{**at_call, "depth": 1})
    assert not [t for t in inlined if "after the graph" in t] and any(t.startswith("Skip `logging.warning()`")
                                                                       for t in inlined)
    # arguments torch cannot reorder (`x.shape`), a logger method, a break of another kind
    assert not [t for t in _break(LOGGING, "shape %s", "GB4841", **at_call) if "after the graph" in t]
    assert not [t for t in _break(LOGGING, "a logger method", "GB0291") if "after the graph" in t]
    assert not [t for t in _break(LOGGING, "net sees", "GB0124") if "after the graph" in t]
    # two calls on one line: the break says which one (the call-site copy's function, or GB0007)
    two = [t for t in _break(LOGGING, "two calls", "GB4841", call_site=True, function="info") if "after the graph" in t]
    assert len(two) == 1 and two[0].startswith("Log after the graph runs: `logging.info()`")
    two = [t for t in _break(LOGGING, "two calls", "GB0007") if "after the graph" in t]
    assert len(two) == 1 and two[0].startswith("Warn after the graph runs: `warnings.warn()`")
    line = next(i for i, row in enumerate(LOGGING.splitlines()) if "net sees" in row)
    d = lsp.Diagnostic(range=lsp.Range(lsp.Position(line, 8), lsp.Position(line, 20)), message="b", code="GB4841",
                       data={"kind": "graph_break", "depth": 0, **at_call})
    assert not [a for a in actions.code_actions(LOGGING, "file:///w/m.py", d.range, [d], hatches=())
                if "after the graph" in a.title]  # this torch lacks reorderable_logging_functions


def test_this_torch_has_reorderable_logging_functions():
    assert "reorderable_logging_functions" in escape_hatches()


def test_torch_runs_a_reordered_call_after_the_graph_only_in_the_compiled_frame():
    """What the titles say, on this torch: a reordered `logging.warning` in the compiled `forward`
    is logged after the graph; in a submodule's `forward` (inlined) it is not logged at all; a
    `logging.Logger` method put in `reorderable_logging_functions` still breaks the graph."""
    import torch
    import torch._dynamo
    from torch import nn

    logged = []

    class Keep(logging.Handler):
        def emit(self, record):
            logged.append(record.getMessage())

    class Inner(nn.Module):
        def forward(self, x):
            logging.warning("inner forward")
            return x * 2

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            logging.warning("outer forward")
            return self.inner(x) + 1

    log = logging.getLogger("compile_lens.test")

    class UsesLogger(nn.Module):
        def forward(self, x):
            log.warning("a logger method")
            return x + 1

    handler = Keep()
    logging.getLogger().addHandler(handler)
    config = torch._dynamo.config
    try:
        with config.patch(reorderable_logging_functions={logging.warning, logging.Logger.warning}):
            torch._dynamo.reset()
            torch.compile(Outer(), backend="eager", fullgraph=True)(torch.ones(2))
            assert logged == ["outer forward"]
            torch._dynamo.reset()
            with pytest.raises(torch._dynamo.exc.Unsupported, match="logging.Logger method"):
                torch.compile(UsesLogger(), backend="eager", fullgraph=True)(torch.ones(2))
    finally:
        torch._dynamo.reset()
        logging.getLogger().removeHandler(handler)


# --- the skip edit names the set the worker's torch has -------------------------------------------

BLOCK = textwrap.dedent('''\
    import logging

    import torch
    from torch import nn

    logger = logging.getLogger(__name__)


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(8, 8)

        def forward(self, x):
            B, T, C = x.size()
            logger.warning("block sees %d tokens", T)
            print("block out", x.shape)
            return self.proj(x)
''')


def _skips(source: str, hatches) -> dict[str, lsp.CodeAction]:
    """The skip actions offered for the traced logger-method and print breaks in `source`."""
    found = {}
    for text, gb in (("logger.warning(", "GB0291"), ("print(", "GB0059")):
        line = next(i for i, row in enumerate(source.splitlines()) if text in row)
        d = lsp.Diagnostic(range=lsp.Range(lsp.Position(line, 8), lsp.Position(line, 20)), message="break", code=gb,
                           source="Compile Lens", data={"kind": "graph_break", "gb_id": gb, "target": "Block",
                                                        "function": "forward", "depth": 0})
        found |= {a.title: a for a in actions.code_actions(source, "file:///w/m.py", d.range, [d], hatches=hatches)
                  if a.title.startswith("Skip")}
    return found


def _compiles_whole(source: str) -> bool:
    """`Block` compiles as one graph once `source` (its config lines included) has run: no break."""
    import torch
    import torch._dynamo

    with torch._dynamo.config.patch(ignore_logging_functions=set()):  # what the edit adds goes away after
        space: dict = {"__name__": "block_under_test"}
        exec(compile(source, "block.py", "exec"), space)
        torch._dynamo.reset()
        try:
            torch.compile(space["Block"](), backend="eager", fullgraph=True)(torch.randn(2, 3, 8))
            return True
        except torch._dynamo.exc.Unsupported:
            return False
        finally:
            torch._dynamo.reset()


def test_this_torch_has_both_names_of_the_skip_set():
    assert {"ignore_logging_functions", "ignore_logger_methods"} <= set(escape_hatches())


@pytest.mark.parametrize("hatches, name", [
    (escape_hatches(), "ignore_logging_functions"),  # this torch: both names, the current one preferred
    (("reorderable_logging_functions", "ignore_logger_methods"), "ignore_logger_methods"),  # the older name only
])
def test_skip_names_the_set_the_worker_torch_has_and_its_edit_clears_the_breaks(hatches, name):
    skips = _skips(BLOCK, hatches)
    assert sorted(skips) == [f"Skip `logger.warning()` in compiled code (torch._dynamo.config.{name})",
                             f"Skip print() in compiled code (torch._dynamo.config.{name})"]
    assert not _compiles_whole(BLOCK)
    text = BLOCK
    for title, action in sorted(skips.items()):  # the logger's skip first: print still breaks after it
        text = actions.apply_edits(text, actions.resolve(action, text).edit.changes["file:///w/m.py"])
        assert _compiles_whole(text) == title.startswith("Skip print()")
    assert f"torch._dynamo.config.{name}.add(logging.Logger.warning)" in text
    assert f"torch._dynamo.config.{name}.add(print)" in text
    assert not _skips(text, hatches)  # already skipped, under either name


def test_skip_not_offered_where_the_worker_torch_lacks_both_names():
    older = ("nonstrict_trace", "leaf_function", "reorderable_logging_functions")
    assert not _skips(BLOCK, older)
    assert not _skips(BLOCK, ())  # before the worker said what its torch has


def test_print_reorder_only_where_the_worker_torch_has_it():
    source = BLOCK.replace('print("block out", x.shape)', 'print("block out", x)')  # a tensor: reorderable
    line = next(i for i, row in enumerate(source.splitlines()) if "print(" in row)
    d = lsp.Diagnostic(range=lsp.Range(lsp.Position(line, 8), lsp.Position(line, 20)), message="break",
                       code="GB0059", source="Compile Lens",
                       data={"kind": "graph_break", "gb_id": "GB0059", "target": "Block", "function": "forward",
                             "depth": 0})

    def titles(hatches):
        return [a.title.split(" (")[0] for a in actions.code_actions(source, "file:///w/m.py", d.range, [d],
                                                                     hatches=hatches)]
    assert "Print after the graph runs" in titles(escape_hatches())
    assert "Print after the graph runs" not in titles(("ignore_logging_functions",))
    assert "Skip print() in compiled code" in titles(("ignore_logging_functions",))
