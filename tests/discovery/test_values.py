"""discovery/values: the small interpreter that reads what a file's source tells of a value (config
dataclasses, module constants, arithmetic), never running the file and never trusting it."""

from __future__ import annotations

import ast

import pytest

from compile_lens.discovery.values import _UNKNOWN, _module_constants, _value

NANOGPT = '''\
from dataclasses import dataclass

import torch
from torch import nn

N_EMBD = 128
HEADS = 4
HEAD_SIZE = N_EMBD // HEADS
SIZES = (64, 128, 256)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@dataclass
class GPTConfig:
    block_size: int = 64
    vocab_size: int = 50304
    n_layer: int = 2
    n_head: int = HEADS
    n_embd: int = N_EMBD
    dropout: float = 0.0
    bias: bool = True


config = GPTConfig(n_layer=4)
model = nn.Linear(N_EMBD, N_EMBD)
'''


@pytest.fixture(scope="module")
def env() -> dict[str, object]:
    return _module_constants(ast.parse(NANOGPT))


def value(expr: str, env: dict[str, object]) -> object:
    return _value(ast.parse(expr, mode="eval").body, env)


def test_module_constants_and_a_config_dataclass_are_read(env):
    assert env["N_EMBD"] == 128 and env["HEAD_SIZE"] == 32 and env["SIZES"] == (64, 128, 256)
    assert "DEVICE" not in env  # it depends on the machine: not told by the source
    assert "model" not in env  # a layer, not a value
    assert value("config.n_layer", env) == 4  # the keyword given at the call
    assert value("config.n_embd // config.n_head", env) == 32  # defaults from module constants
    assert value("GPTConfig().block_size * 2", env) == 128
    assert value("config.bias and config.dropout == 0.0", env) is True


@pytest.mark.parametrize("expr, expected", [
    ("4 * N_EMBD", 512),
    ("-HEADS + 1", -3),
    ("not HEADS", False),
    ("0 or HEADS", 4),
    ("SIZES[1:]", (128, 256)),
    ("SIZES[-1]", 256),
    ("{'a': HEADS}['a']", 4),
    ("[N_EMBD] * 2", [128, 128]),
    ("max(1, HEADS, len(SIZES))", 4),
    ("N_EMBD if HEADS > 2 else 0", 128),
    ("2 ** 10", 1024),
])
def test_arithmetic_over_what_the_source_tells(env, expr, expected):
    assert value(expr, env) == expected


@pytest.mark.parametrize("expr", [
    "torch.randn(2, 8)",  # a call the interpreter does not know
    "DEVICE",  # a name the source does not tell
    "2 ** 100",  # too large to be a size
    "[0] * 10 ** 6",  # a list far larger than any example input
    "N_EMBD // 0",  # an error is not a value
    "SIZES[9]",
    "open('x')",
    "__import__('os').system('true')",  # never run
    "(lambda: 1)()",
    "1 < 2 < 3",  # chained comparisons are not read
    "config.missing",
])
def test_what_it_cannot_tell_is_unknown_never_an_error(env, expr):
    assert value(expr, env) is _UNKNOWN
