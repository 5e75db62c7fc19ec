"""Code actions as pure functions of `compile_lens.actions`, on source strings: each offered only
where it applies, its edit exact (the end-to-end half is `tests/lsp/test_lsp_code_actions.py`)."""

from __future__ import annotations

import ast

from lsprotocol import types as lsp

from compile_lens import actions
from compile_lens.worker.jobs import escape_hatches
from edits import apply_edits, line_changes

# --- the pure functions, on source strings -------------------------------------------------------

URI = "file:///w/model.py"
HATCHES = escape_hatches()  # what this torch (2.13) has, as the worker's hello says

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
    return actions.code_actions(source, URI, rng, list(diagnostics), figures, hatches=HATCHES)


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
    return {"kind": "graph_break", "gb_id": gb_id, "gb_type": "", "target": "Net", "function": function, "depth": 0,
            **extra}


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
    assert titles(fixes) == ["Print after the graph runs (torch._dynamo.config.reorderable_logging_functions; "
                             "not run where a compiled caller inlines this code)"]
    # in a module or helper the compiled function inlines, torch 2.13 drops a reordered print: skip it, said so
    inlined = diag(printing, 'print("y", y)', "GB0059", _gb("GB0059", depth=1))
    fixes = [a for a in offered(printing, "print(", [inlined]) if "print()" in a.title or "graph runs" in a.title]
    assert titles(fixes) == ["Skip print() in compiled code (torch._dynamo.config.ignore_logging_functions)"]
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
