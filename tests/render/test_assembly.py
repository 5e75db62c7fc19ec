"""render/assembly: one file's findings put together the same way for the editor and the CLI: lints a
trace settles go, a break in a workspace helper is reported in the helper too, a library's never."""

from __future__ import annotations

from pathlib import Path

from compile_lens.lints import lint_source
from compile_lens.protocol import Finding, Frame, GraphBreak, TargetResult, TargetSpec
from compile_lens.render import assembly

MODEL = '''\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, n_embd: int = 16):
        super().__init__()
        self.proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.size()
        scale = x.abs().max().item()
        return self.proj(x) / scale
'''
ITEM_LINE = 12


def _break(path: Path, line: int, stack: list[Frame] = ()) -> GraphBreak:
    return GraphBreak(str(path), line, 9, line, 30, "GB0124", "Unsupported Tensor.item() call with capture_scalar_outputs=False",
                      "Dynamo does not support tracing `Tensor.item()`", [], None, "Tensor.item", list(stack))


def _workspace(tmp_path: Path) -> tuple[Path, Path, Path]:
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    helper = tmp_path / "helpers.py"
    helper.write_text("def scale(x):\n    return x.max().item()\n")
    library = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages" / "lib" / "ops.py"
    library.parent.mkdir(parents=True)
    library.write_text("def op(x):\n    return x.item()\n")
    return model, helper, library


def test_breaks_land_in_this_file_a_workspace_helper_and_never_a_library(tmp_path):
    model, helper, library = _workspace(tmp_path)
    result = TargetResult("Block", "module", 5, graph_breaks=[
        _break(model, ITEM_LINE),
        _break(helper, 2, [Frame(str(model), 13, "forward"), Frame(str(helper), 2, "scale")]),
        _break(library, 2, [Frame(str(model), 13, "forward"), Frame(str(library), 2, "op")]),
    ])
    here, elsewhere = assembly.traced_findings([result], str(model), str(tmp_path))
    assert list(elsewhere) == [str(helper)]  # the venv's package is not the user's code
    assert [f.line for f in elsewhere[str(helper)]] == [2]
    assert all(f.path == str(model) for f in here)
    assert ITEM_LINE in {f.line for f in here}
    assert assembly.in_workspace(str(helper), str(tmp_path))
    assert not assembly.in_workspace(str(library), str(tmp_path))
    assert not assembly.in_workspace("/elsewhere/model.py", str(tmp_path))



def test_a_break_says_how_many_frames_inline_the_one_it_is_in(tmp_path):
    """`depth`: 0 in the function torch compiles (a reordered print or log runs there), n under n
    inlining frames (torch 2.13 drops it there); a call-site copy's is its call's."""
    model, helper, library = _workspace(tmp_path)
    result = TargetResult("Block", "module", 5, graph_breaks=[
        _break(model, ITEM_LINE),
        _break(model, ITEM_LINE + 1, [Frame(str(model), ITEM_LINE + 1, "forward")]),
        _break(helper, 2, [Frame(str(model), 13, "forward"), Frame(str(helper), 2, "scale")]),
        _break(library, 2, [Frame(str(model), 13, "forward"), Frame(str(library), 2, "op")]),
    ])
    here, elsewhere = assembly.traced_findings([result], str(model), str(tmp_path))
    depth = {(f.line, bool(f.data.get("call_site"))): f.data["depth"] for f in here}
    assert depth[(ITEM_LINE, False)] is None  # no stack: not known
    assert depth[(ITEM_LINE + 1, False)] == 0
    assert depth[(13, True)] == 0  # the call sites in forward of the helper's and the library's breaks
    assert [f.data["depth"] for f in elsewhere[str(helper)]] == [1]

def test_a_trace_settles_the_lints_it_confirms_or_clears(tmp_path):
    model, _, _ = _workspace(tmp_path)
    lints = lint_source(MODEL, str(model))
    predicted = [f for f in lints if f.predicted and f.line == ITEM_LINE]
    assert predicted, "the .item() lint is the prediction this test settles"
    spec = TargetSpec("Block", "module", 5, end_line=13)

    untraced = assembly.file_findings(lints, [], [], [])
    assert predicted[0] in untraced  # nothing ran: the prediction stays, marked as one

    clean = {"Block": TargetResult("Block", "module", 5)}
    cleared = assembly.file_findings(lints, [], [], assembly.covered_lines([spec], clean))
    assert not [f for f in cleared if f.predicted and 5 <= f.line <= 13]  # traced without a break: cleared

    broke = TargetResult("Block", "module", 5, graph_breaks=[_break(model, ITEM_LINE)])
    traced, _ = assembly.traced_findings([broke], str(model), str(tmp_path))
    confirmed = assembly.file_findings(lints, [], traced, [])
    at_item = [f for f in confirmed if f.line == ITEM_LINE]
    assert at_item and not any(f.predicted for f in at_item)  # the trace's break, not a second, predicted one
    assert [f.code for f in at_item if f.code == "GB0124"] == ["GB0124"]


def test_covered_spans_that_overlap_touch_or_stand_alone_each_clear_their_lines(tmp_path):
    """The traced targets' spans, joined and bisected: a prediction inside any of them goes, one
    between them stays, and a finding that is not a prediction is never cleared."""
    path = str(tmp_path / "m.py")

    def lint(line: int, predicted: bool = True) -> Finding:
        return Finding(path, line, 1, line, 5, "warning", "CL101", f"at {line}", predicted=predicted)

    lints = [lint(n) for n in (1, 4, 5, 12, 20, 21, 29, 30, 31)] + [lint(7, predicted=False)]
    covered = [(9, 20), (5, 10), (1, 3), (30, 30), (21, 21)]  # unsorted; 5-10 and 9-20 overlap; 20|21 touch
    kept = assembly.file_findings(lints, [], [], covered)
    assert [(f.line, f.predicted) for f in kept] == [(4, True), (29, True), (31, True), (7, False)]
