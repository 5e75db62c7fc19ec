"""Which children the regional lever compiles one by one (`worker/levers/blocks.py`): read from real
models — the levers fixture's ModuleList, a tiny random GPT-2 and BERT from transformers, repeated
attributes — no compile."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from torch import nn

from compile_lens.worker.levers.blocks import already_regional, modules_of, repeated_blocks
from paths import FIXTURES


def _fixture_model() -> nn.Module:
    spec = importlib.util.spec_from_file_location("levers_blocks", FIXTURES / "levers" / "blocks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Stack()


def test_a_module_list_of_one_class_is_the_group_and_its_compile_is_seen():
    model = _fixture_model()
    blocks = repeated_blocks(model)
    assert (blocks.attribute, blocks.block_class, blocks.count) == ("blocks", "Block", 8)
    assert not already_regional(model, blocks)
    for block in modules_of(model, blocks):
        block.compile()  # lazy: nothing compiles until a call
    assert already_regional(model, blocks)


def test_repeated_attributes_count_and_torch_layers_do_not():
    class Pair(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)  # torch's own layers: not a region

    class Twin(nn.Module):
        def __init__(self):
            super().__init__()
            self.left, self.right, self.head = Pair(), Pair(), nn.Linear(4, 2)

    blocks = repeated_blocks(Twin())
    assert (blocks.attribute, blocks.names, blocks.block_class) == ("", ["left", "right"], "Pair")
    assert repeated_blocks(Pair()) is None


@pytest.mark.parametrize("kind", ["gpt2", "bert"])
def test_transformers_layers_are_the_blocks(kind):
    transformers = pytest.importorskip("transformers")
    if kind == "gpt2":
        config = transformers.GPT2Config(n_layer=4, n_embd=32, n_head=2, vocab_size=64, n_positions=32)
        model, where = transformers.GPT2Model(config), "h"
    else:
        config = transformers.BertConfig(num_hidden_layers=4, hidden_size=32, num_attention_heads=2,
                                         intermediate_size=64, vocab_size=64)
        model, where = transformers.BertModel(config), "encoder.layer"
    blocks = repeated_blocks(model)
    assert blocks.attribute == where and blocks.count == 4
    assert all(isinstance(m, torch.nn.Module) for m in modules_of(model, blocks))
