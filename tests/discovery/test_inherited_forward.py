"""An inherited `forward` is a forward (issue 52.3): a class whose `forward` is a torch.nn layer's
(`class MyConv(nn.Conv1d)`) or a workspace base's (`class Child(Base)`) gets inputs as that base's
first layer would, built with the arguments the subclass passes to `super().__init__(...)`; one
whose `forward` is another library's says so. Pure discovery on source text (no torch); the CLI
check that such a target is traced is at the end.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from compile_lens.discovery import discover


def _targets(source: str, **where) -> dict:
    found = discover(textwrap.dedent(source), **where)
    assert found is not None
    return {t.name: t for t in found.targets}


def _guess(spec) -> tuple:
    assert spec.problem is None and spec.inputs is not None and not spec.inputs.after_import, spec.problem
    return spec.inputs.text, spec.inputs.init


def test_a_torch_layer_subclass_is_shaped_as_that_layer():
    specs = _targets("""
        from torch import nn
        import torch.nn as tnn

        class MyConv(nn.Conv1d):
            def __init__(self):
                super().__init__(4, 8, 3)

        class Head(tnn.Linear):  # its own forward calls the layer's
            def __init__(self):
                super(Head, self).__init__(5, 2)

            def forward(self, x):
                return super().forward(x) * 2

        class Stack(nn.Sequential):
            def __init__(self, width: int = 12):
                super().__init__(nn.Linear(width, 32), nn.GELU(), nn.Linear(32, width))

        class Attention(nn.MultiheadAttention):
            def __init__(self):
                super().__init__(8, 2, batch_first=True)
    """)
    assert _guess(specs["MyConv"]) == ("(torch.randn(8, 4, 32),)", None)  # (N, C_in, L)
    assert _guess(specs["Head"]) == ("(torch.randn(8, 5),)", None)
    assert _guess(specs["Stack"]) == ("(torch.randn(8, 12),)", None)
    assert _guess(specs["Attention"])[0] == "(torch.randn(8, 16, 8), torch.randn(8, 16, 8), torch.randn(8, 16, 8))"


def test_keyword_arguments_and_the_subclass_defaults():
    specs = _targets("""
        from torch import nn

        HIDDEN = 24

        class Proj(nn.Linear):
            def __init__(self, width=HIDDEN * 2, out=3):
                super().__init__(in_features=width, out_features=out, bias=False)

        class Tokens(nn.Embedding):
            def __init__(self, vocab=100):
                super().__init__(num_embeddings=vocab, embedding_dim=8)

        class Norm(nn.BatchNorm2d):
            def __init__(self):
                nn.BatchNorm2d.__init__(self, num_features=6)
    """)
    assert _guess(specs["Proj"]) == ("(torch.randn(8, 48),)", None)
    assert _guess(specs["Tokens"]) == ("(torch.randint(0, 100, (8, 16)),)", None)
    assert _guess(specs["Norm"]) == ("(torch.randn(8, 6, 16, 16),)", None)


def test_a_whisper_style_conv1d_is_built_as_the_file_calls_it():
    """whisper's `class Conv1d(nn.Conv1d)` overrides `_conv_forward` only and has no `__init__`:
    its constructor is nn.Conv1d's, its arguments those of its call in a module built with defaults."""
    source = """
        import torch.nn.functional as F
        from torch import Tensor, nn

        class Conv1d(nn.Conv1d):
            def _conv_forward(self, x: Tensor, weight: Tensor, bias) -> Tensor:
                return super()._conv_forward(x, weight.to(x.dtype), None if bias is None else bias.to(x.dtype))

        class LayerNorm(nn.LayerNorm):
            def forward(self, x: Tensor) -> Tensor:
                return super().forward(x.float()).type(x.dtype)

        class Linear(nn.Linear):
            def forward(self, x: Tensor) -> Tensor:
                return F.linear(x, self.weight.to(x.dtype), None if self.bias is None else self.bias.to(x.dtype))

        class Projector(nn.Module):
            def __init__(self, width: int = 6):
                super().__init__()
                self.proj = Linear(width, 2 * width)

            def forward(self, x):
                return self.proj(x)

        class AudioEncoder(nn.Module):
            def __init__(self, n_mels: int = 80, n_state: int = 384):
                super().__init__()
                self.conv1 = Conv1d(n_mels, n_state, kernel_size=3, padding=1)
                self.conv2 = Conv1d(n_state, n_state, kernel_size=3, stride=2, padding=1)
                self.ln_post = LayerNorm(n_state)
                self.proj = Linear(n_state, 2 * n_state)

            def forward(self, x: Tensor):
                x = F.gelu(self.conv1(x))
                x = F.gelu(self.conv2(x)).permute(0, 2, 1)
                return self.proj(self.ln_post(x))
    """
    specs = _targets(source)
    assert _guess(specs["Conv1d"]) == ("(torch.randn(8, 80, 32),)", "Conv1d(80, 384, kernel_size=3, padding=1)")
    # a module that calls it reaches it as the nn.Conv1d it is
    assert _guess(specs["AudioEncoder"]) == ("(torch.randn(8, 80, 32),)", None)
    # its own forward calls the layer's (`super().forward`), or tells nothing (`F.linear`): the layer's input
    assert _guess(specs["LayerNorm"]) == ("(torch.randn(8, 16, 384),)", "LayerNorm(384)")
    assert _guess(specs["Linear"]) == ("(torch.randn(8, 6),)", "Linear(6, 12)")  # its first call in the file
    assert _guess(specs["Projector"]) == ("(torch.randn(8, 6),)", None)
    # no call site: its constructor's arguments are asked for, by name
    alone = _targets(source.split("class AudioEncoder")[0])["Conv1d"]
    assert alone.inputs is None
    assert alone.problem.startswith("`Conv1d()` needs constructor arguments (in_channels, out_channels, kernel_size)")


def test_a_workspace_base_builds_its_layers_with_the_arguments_it_is_handed():
    specs = _targets("""
        from torch import nn

        class Core(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)

        class Base(Core):
            def forward(self, x):
                return self.lin(x)

        class Child(Base):
            def __init__(self):
                super().__init__(16)

        class Named(Base):
            def __init__(self, width: int = 12):
                super().__init__(d=width)

        class Residual(Child):  # neither __init__ nor forward of its own
            pass
    """)
    assert _guess(specs["Child"]) == ("(torch.randn(8, 16),)", None)
    assert _guess(specs["Named"]) == ("(torch.randn(8, 12),)", None)
    assert _guess(specs["Residual"]) == ("(torch.randn(8, 16),)", None)


def test_a_base_from_an_imported_workspace_file(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "base.py").write_text(textwrap.dedent("""
        from torch import nn

        WIDTH = 16

        class Core(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)

        class Base(Core):
            def forward(self, x):
                return self.lin(x)

        class Conv(nn.Conv2d):
            pass
    """))
    source = """
        from torch import nn
        from .base import WIDTH, Conv
        from .base import Base as Parent

        class Base:  # this file's own Base: the imported one is `Parent` here
            pass

        class Child(Parent):
            def __init__(self, width=WIDTH):
                super().__init__(width)

        class Stem(Conv):
            def __init__(self):
                super().__init__(3, 8, 3)
    """
    path = tmp_path / "pkg" / "model.py"
    path.write_text(textwrap.dedent(source))
    specs = _targets(source, path=str(path), root=str(tmp_path))
    assert _guess(specs["Child"]) == ("(torch.randn(8, 16),)", None)
    assert _guess(specs["Stem"]) == ("(torch.randn(8, 3, 32, 32),)", None)
    assert specs["Child"].maybe_module  # the worker still checks it is a module after import
    # where the file cannot be read (no path given), the base's file is named and the worker asked
    unread = _targets(source)["Child"]
    assert unread.inputs.after_import and unread.inputs.text == ""
    assert unread.inputs.note.startswith("`Child` inherits `forward` from `.base.Base`: its inputs cannot be read statically")


def test_another_librarys_forward_says_why_it_is_not_guessed():
    specs = _targets("""
        from torch import nn
        from transformers import PreTrainedModel

        class MyModel(PreTrainedModel):
            def __init__(self, config):
                super().__init__(config)

        class Unsized(nn.Linear):
            def __init__(self, sizes):
                super().__init__(*sizes)

        class Bare(nn.Module):
            pass
    """)
    # the worker may still read it from what transformers publishes; if not, this is what it says
    note = specs["MyModel"].inputs.note
    assert specs["MyModel"].inputs.after_import and specs["MyModel"].problem is None
    assert note == ("`MyModel` inherits `forward` from `transformers.PreTrainedModel`: its inputs cannot be "
                    "read statically; add `# compile-lens: inputs=(...)` above `class MyModel`")
    assert specs["Unsized"].problem.startswith("`Unsized()` needs constructor arguments (sizes)")
    assert specs["Bare"].inputs.note.startswith("`Bare` defines no `forward` here")  # nn.Module's is no one's


def test_a_torch_layer_subclass_is_traced_by_the_cli(tmp_path):
    """Through `compile-lens check --no-benchmark` (a real worker, a Dynamo trace, no Inductor):
    MyConv with the inputs read from its source; Stem, whose arguments only its directive's `init=`
    gives, with inputs the worker reads from the built layer."""
    (tmp_path / ".git").mkdir()
    path = tmp_path / "conv.py"
    path.write_text(textwrap.dedent("""
        from torch import nn

        class MyConv(nn.Conv1d):
            def __init__(self):
                super().__init__(4, 8, 3)

        # compile-lens: init=Stem(3, 8, 3)
        class Stem(nn.Conv2d):
            pass
    """))
    run = subprocess.run([sys.executable, "-m", "compile_lens.cli", "check", str(path), "--no-benchmark",
                          "--no-recompiles", "--no-cache", "--format", "json", "-q"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    [entry] = json.loads(run.stdout)["files"]
    targets = {t["name"]: t for t in entry["targets"]}
    expected = {"MyConv": "(torch.randn(8, 4, 32),)", "Stem": "(torch.randn(2, 3, 32, 32),)"}
    for name, text in expected.items():
        target = targets[name]
        assert (target["status"], target["error"]) == ("ok", None), run.stdout + run.stderr
        assert (target["inputs"]["source"], target["inputs"]["text"]) == ("inferred", text)
        assert target["phases"]["trace"]["status"] == "done" and target["graph_count"] == 1
    assert targets["Stem"]["inputs"]["origin"] == "from the Conv2d it is (3 channels)"
    assert not [d for d in entry["diagnostics"] if d["code"] == "CL001"]
