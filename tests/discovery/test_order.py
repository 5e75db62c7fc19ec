"""The order a file's targets run in (`discovery/order.py`), on nanoGPT's shape: the model a
workspace file compiles first, then the outermost targets, then the rest; an inner target whose
lines the outer one's measurement covers is *within* it. Pure `ast` and real files, no torch."""

from __future__ import annotations

import shutil
import textwrap

from compile_lens.discovery import discover, measure_order, note_importers
from compile_lens.protocol import Benchmark, CompileSeconds, Errors, LineCost, PeakMemory, Timing
from compile_lens.render.lens_titles import within_lens_title
from paths import FIXTURES

FILE_ORDER = ["LayerNorm", "CausalSelfAttention", "MLP", "Block", "GPT"]
INNER = {"LayerNorm", "CausalSelfAttention", "MLP", "Block"}


def _workspace(tmp_path, train: bool = True):
    shutil.copy(FIXTURES / "nanogpt" / "model.py", tmp_path / "model.py")
    if train:
        shutil.copy(FIXTURES / "measure_order" / "train.py", tmp_path / "train.py")
    return tmp_path / "model.py"


def _order(path, root):
    found = discover(path.read_text())
    note_importers(found, str(path), str(root))
    return found, measure_order(found)


def test_the_model_train_py_compiles_comes_first_and_covers_its_parts(tmp_path):
    model = _workspace(tmp_path)
    found, order = _order(model, tmp_path)
    assert [t.name for t in found.targets] == FILE_ORDER  # what the order used to be
    assert found.compiled_elsewhere == {"GPT": "train.py"}
    assert order.names[0] == "GPT"
    assert sorted(order.names) == sorted(FILE_ORDER)  # nothing dropped
    # Block builds the other three: it comes before them (outer before inner)
    assert order.names.index("Block") < min(order.names.index(n) for n in ("CausalSelfAttention", "MLP"))
    assert order.within == {name: "GPT" for name in INNER}
    assert found.contains["GPT"] == ["LayerNorm", "Block"]  # nn.ModuleDict(h=nn.ModuleList([Block(...)]), ln_f=LayerNorm)
    assert found.contains["Block"] == ["LayerNorm", "CausalSelfAttention", "MLP"]


def test_without_a_compile_anywhere_the_outermost_target_leads(tmp_path):
    model = _workspace(tmp_path, train=False)
    found, order = _order(model, tmp_path)
    assert found.compiled_elsewhere == {}
    assert order.names[0] == "GPT"  # no one builds it: outermost
    assert order.within == {name: "GPT" for name in INNER}


def test_a_compiled_inner_target_is_measured_as_its_own_model(tmp_path):
    model = _workspace(tmp_path, train=False)
    (tmp_path / "blocks.py").write_text(textwrap.dedent("""\
        import torch
        from model import Block, GPTConfig
        block = Block(GPTConfig())
        fast = torch.compile(block)
    """))
    found, order = _order(model, tmp_path)
    assert found.compiled_elsewhere == {"Block": "blocks.py"}
    assert order.names[:2] == ["Block", "GPT"]  # compiled first, then the outermost
    # Block's parts are covered by Block's own measurement (compiled ranks before outermost)
    assert order.within == {"LayerNorm": "Block", "CausalSelfAttention": "Block", "MLP": "Block"}


def test_a_file_that_does_not_import_the_model_does_not_count(tmp_path):
    model = _workspace(tmp_path, train=False)
    (tmp_path / "other.py").write_text("import torch\nclass Block: ...\nfast = torch.compile(Block())\n")
    found, _ = _order(model, tmp_path)
    assert found.compiled_elsewhere == {}


def test_a_call_site_in_the_file_itself(tmp_path):
    source = (FIXTURES / "nanogpt" / "model.py").read_text() + "\nfast_mlp = torch.compile(MLP(GPTConfig()))\n"
    order = measure_order(discover(source))
    assert order.names[:2] == ["MLP", "GPT"]
    assert "MLP" not in order.within and order.within["Block"] == "GPT"


def test_a_target_without_inputs_covers_nothing():
    found = discover(textwrap.dedent("""\
        import torch.nn as nn
        class Inner(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)
            def forward(self, x):
                return self.fc(x)
        class Outer(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.inner = Inner()
            def forward(self, x):
                return self.inner(x)
    """))
    assert {t.name: t.inputs is not None for t in found.targets} == {"Inner": True, "Outer": False}
    order = measure_order(found)
    assert order.names == ["Outer", "Inner"] and order.within == {}  # Inner is measured on its own


def test_the_inner_lens_says_what_the_outer_measurement_found_on_its_lines(tmp_path):
    path = str(tmp_path / "model.py")
    assert within_lens_title("GPT", None, path, 87, 100) == "▶ Measure · measured within GPT: see its line costs"
    forward = Timing(1.0, 0.5, 2.0, 0.0, 0.0, lines=[
        LineCost(path, 95, 300.0, 100.0), LineCost(path, 96, 200.0, None),  # Block's lines
        LineCost(path, 130, 5000.0, 2000.0),  # GPT's own line: not Block's
    ])
    b = Benchmark("cpu", "cpu", "default", forward, None, CompileSeconds(), None, PeakMemory(), Errors(), Errors(), "worth it")
    assert within_lens_title("GPT", b, path, 87, 100) == "▶ Measure · within GPT: its lines 0.50 ms eager → 0.10 ms compiled per forward"
    assert within_lens_title("GPT", b, path, 1, 10) == "▶ Measure · measured within GPT: see its line costs"
