"""Inferred inputs: the recipe discovery writes for each layer kind, and that it really runs the model.

Discovery reads only the source; the check that the guess is right builds each model with the
worker's loader in this process and calls it with the recipe (real torch, CPU).
"""

from __future__ import annotations

import shutil
import textwrap

import pytest

from compile_lens.discovery import discover
from paths import FIXTURES

MODELS = FIXTURES / "inference" / "models.py"

EXPECTED = {
    "Lin": "(torch.randn(8, 24),)",  # Dropout looked through; width from a default using a constant
    "C1": "(torch.randn(8, 5, 32),)",
    "C2": "(torch.randn(8, 3, 32, 32),)",  # size from `self.channels = channels`
    "C3": "(torch.randn(2, 2, 8, 16, 16),)",
    "Up": "(torch.randn(8, 6, 32, 32),)",
    "BN1": "(torch.randn(8, 7),)",
    "BN2": "(torch.randn(8, 5, 16, 16),)",
    "LN": "(torch.randn(8, 16, 10),)",
    "LN2": "(torch.randn(8, 4, 6),)",
    "GN": "(torch.randn(8, 6, 16, 16),)",
    "Emb": "(torch.randint(0, 100, (8, 16)),)",  # `pos` (from the shape) is not the input
    "Bag": "(torch.randint(0, 50, (8, 16)),)",
    "BagOffsets": "(torch.randint(0, 200, (32,)), torch.arange(0, 32, 4))",
    "Lstm": "(torch.randn(8, 16, 6),)",
    "Gru": "(torch.randn(16, 8, 5),)",
    "Rnn": "(torch.randn(8, 16, 4),)",
    "EncLayer": "(torch.randn(8, 16, 16),)",
    "Encoder": "(torch.randn(16, 8, 16),)",  # the encoder_layer is a local of __init__
    "EncoderInline": "(torch.randn(8, 16, 24),)",
    "Attn": "(torch.randn(16, 8, 12),)",
    "Seq": "(torch.randn(8, 20),)",
    "SeqBuilt": "(torch.randn(8, 9),)",  # nn.Sequential(*layers) built with append in a loop
    "SeqNamed": "(torch.randn(8, 1, 32, 32),)",
    "Stack": "(torch.randn(8, 10),)",  # for layer in self.layers (ModuleList)
    "Tower": "(torch.randn(8, 16, 14),)",  # into Block, a module of the same file
    "Helper": "(torch.randn(8, 11),)",  # through a helper method
    "TinyGPT": "(torch.randint(0, 64, (8, 16)),)",  # config.vocab_size of a default TinyConfig()
    "Annotated": "(torch.randn(8, 12),)",  # Float[Tensor, "batch 12"]
    "Indices": "(torch.randint(0, 30, (8, 16)),)",  # idx: torch.LongTensor -> the embedding's range
    "Lazy": "(torch.randn(8, 16),)",
    "NoInputs": "()",
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Discovery's targets of the models file, and the module imported by the worker's loader."""
    from compile_lens.worker import loader

    root = tmp_path_factory.mktemp("inference")
    path = root / "models.py"
    shutil.copy(MODELS, path)
    found = discover(path.read_text())
    module = loader.import_file(str(path), str(root))
    return {t.name: t for t in found.targets}, module, str(path)


def test_every_kind_is_covered(built):
    specs, _, _ = built
    assert set(EXPECTED) <= set(specs)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_inferred_recipe_text_and_it_runs(built, name):
    import torch

    from compile_lens.worker import loader

    specs, module, path = built
    spec = specs[name]
    assert spec.problem is None, spec.problem
    assert spec.inputs is not None and spec.inputs.source == "inferred"
    assert spec.inputs.text == EXPECTED[name]
    target = loader.build_target(module, spec, path)
    torch.manual_seed(0)
    with torch.no_grad():
        out = target.make()(*target.args)
    assert out is not None


def test_default_config_object_builds_the_model(built):
    specs, _, _ = built
    assert specs["TinyGPT"].inputs.init == "TinyGPT(TinyConfig())"
    assert specs["Lin"].inputs.init is None


def test_block_with_required_arguments_is_built_as_the_file_calls_it(built):
    """`Block(dim)` has no default, but `Tower.__init__` calls `Block(dim)` with its default 14."""
    specs, _, _ = built
    assert specs["Block"].problem is None
    assert (specs["Block"].inputs.init, specs["Block"].inputs.text) == ("Block(14)", "(torch.randn(8, 16, 14),)")


def test_required_arguments_nobody_in_the_file_passes_say_what_to_add():
    spec = _only("""
        import torch.nn as nn

        class Block(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.fc = nn.Linear(dim, dim)

            def forward(self, x):
                return self.fc(x)
    """)
    assert spec.inputs is None
    assert "needs constructor arguments (dim)" in spec.problem
    assert "init=Block(...)" in spec.problem


def _only(source: str):
    found = discover(textwrap.dedent(source))
    [spec] = found.targets
    return spec


def test_an_unknown_first_layer_is_named_in_the_problem():
    spec = _only("""
        from torch import nn
        from transformers import GPT2LMHeadModel, GPT2Config

        class Wrapper(nn.Module):
            def __init__(self):
                super().__init__()
                self.gpt = GPT2LMHeadModel(GPT2Config(n_layer=2))

            def forward(self, input_ids):
                return self.gpt(input_ids).logits
    """)
    # the source alone cannot size it: the worker guesses after import (from GPT2Config), and says
    # this if no library tells either
    assert spec.inputs is not None and spec.inputs.after_import and spec.inputs.text == ""
    assert spec.problem is None
    assert "`input_ids` first reaches `GPT2LMHeadModel(...)`" in spec.inputs.note
    assert "add `# compile-lens: inputs=(...)` above `class Wrapper`" in spec.inputs.note


def test_a_parameter_used_in_an_unknown_role_stops_the_guess():
    spec = _only("""
        from torch import nn

        class Masked(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = nn.MultiheadAttention(8, 2)

            def forward(self, x, mask):
                return self.attn(x, x, x, attn_mask=mask)[0]
    """)
    assert spec.inputs is None
    assert "argument attn_mask" in spec.problem


def test_sizes_nobody_can_compute_give_no_guess():
    spec = _only("""
        import os
        from torch import nn

        class FromEnv(nn.Module):
            def __init__(self, width=int(os.environ["WIDTH"])):
                super().__init__()
                self.fc = nn.Linear(width, 2)

            def forward(self, x):
                return self.fc(x)
    """)
    assert spec.inputs is None and "cannot read the size of `nn.Linear(width, 2)`" in spec.problem


def test_source_values_are_never_executed():
    # `_value` interprets literals and arithmetic only: no attribute of a real object, no call.
    spec = _only("""
        from torch import nn
        SIZE = ().__class__.__base__.__subclasses__()
        BIG = 10 ** 10 ** 10

        class Sneaky(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(len(SIZE) + BIG, 2)

            def forward(self, x):
                return self.fc(x)
    """)
    assert spec.inputs is None


def test_token_ids_of_a_library_model_take_the_vocabulary_it_is_given():
    spec = _only("""
        from torch import nn
        from transformers import GPT2Config, GPT2LMHeadModel

        CONFIG = GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=1000)

        class TinyGPT2(nn.Module):
            def __init__(self):
                super().__init__()
                self.gpt = GPT2LMHeadModel(CONFIG)

            def forward(self, input_ids):
                return self.gpt(input_ids=input_ids).logits
    """)
    assert spec.inputs.text == "(torch.randint(0, 1000, (8, 16)),)"


def test_a_small_gpt2_from_transformers_runs_with_the_guess(tmp_path):
    """The issue's 'model nobody here wrote': skipped where transformers is not installed."""
    pytest.importorskip("transformers")
    import torch

    from compile_lens.worker import loader

    path = tmp_path / "gpt.py"
    path.write_text(textwrap.dedent("""
        from torch import nn
        from transformers import GPT2Config, GPT2LMHeadModel

        class TinyGPT2(nn.Module):
            def __init__(self):
                super().__init__()
                self.gpt = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=1000))

            def forward(self, input_ids):
                return self.gpt(input_ids).logits
    """))
    [spec] = discover(path.read_text()).targets
    target = loader.build_target(loader.import_file(str(path), str(tmp_path)), spec, str(path))
    with torch.no_grad():
        assert target.make()(*target.args).shape == (8, 16, 1000)
