"""Zero-config on nanoGPT-shaped code: every module of a GPT written like karpathy/nanoGPT's
`model.py` (tests/fixtures/nanogpt/model.py, no directive) gets inputs from the source alone, and
each is traced by the real worker with them.

What the guesses read: the rank of an input from how `forward` unpacks it (`B, T, C = x.size()`),
the width of a hand-written LayerNorm from its `nn.Parameter(torch.ones(ndim))`, constructor
arguments from the config dataclass's defaults and from the file's own calls
(`LayerNorm(config.n_embd, bias=config.bias)` in `Block.__init__`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import pytest

from compile_lens.discovery import discover
from compile_lens.protocol import InputRecipe, TargetResult
from compile_lens.render.cards import hover_card
from paths import FIXTURES

MODEL = FIXTURES / "nanogpt" / "model.py"

EXPECTED = {  # name: (init, inputs)
    "LayerNorm": ("LayerNorm(768, bias=True)", "(torch.randn(8, 16, 768),)"),  # from Block's call, GPTConfig()
    "CausalSelfAttention": ("CausalSelfAttention(GPTConfig())", "(torch.randn(8, 16, 768),)"),  # B, T, C = x.size()
    "MLP": ("MLP(GPTConfig())", "(torch.randn(8, 768),)"),  # any leading dims fit a Linear
    "Block": ("Block(GPTConfig())", "(torch.randn(8, 16, 768),)"),  # ln_1: the file's own LayerNorm
    "GPT": ("GPT(GPTConfig())", "(torch.randint(0, 50304, (8, 16)),)"),  # b, t = idx.size(); 16 <= block_size
}


def test_every_module_of_the_file_gets_inputs_from_the_source_alone():
    found = discover(MODEL.read_text())
    specs = {t.name: t for t in found.targets}
    assert set(specs) == set(EXPECTED)
    for name, (init, text) in EXPECTED.items():
        spec = specs[name]
        assert spec.problem is None, (name, spec.problem)
        assert spec.inputs.source == "inferred" and not spec.inputs.after_import, name
        assert (spec.inputs.init, spec.inputs.text) == (init, text), name


def _only(source: str):
    [spec] = discover(textwrap.dedent(source)).targets
    return spec


@pytest.mark.parametrize("unpack, expected", [
    ("B, T, C = x.size()", "(torch.randn(8, 16, 32),)"),
    ("B, T, C = x.shape", "(torch.randn(8, 16, 32),)"),
    ("b, c = x.size()", "(torch.randn(8, 32),)"),
    ("n, h, w, c = x.shape", "(torch.randn(8, 16, 4, 32),)"),
    ("t = x.shape[1]", "(torch.randn(8, 32),)"),  # at least 2 dims: a Linear's default has them
    ("heads = x.size(3)", "(torch.randn(8, 16, 4, 32),)"),  # at least 4
    ("*lead, c = x.shape", "(torch.randn(8, 32),)"),  # starred: any rank; the default
    ("B, T, C = y.size()", "(torch.randn(8, 32),)"),  # another tensor's size says nothing of x
])
def test_the_rank_of_an_input_is_read_from_how_forward_unpacks_it(unpack, expected):
    spec = _only(f"""
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self, width=32):
                super().__init__()
                self.proj = nn.Linear(width, width)

            def forward(self, x):
                y = torch.zeros(2, 3, 4)
                {unpack}
                return self.proj(x)
    """)
    assert spec.inputs.text == expected


def test_token_ids_keep_two_dimensions_and_a_small_sequence():
    spec = _only("""
        import torch.nn as nn

        class Tokens(nn.Module):
            def __init__(self, vocab=100, block_size=4096):
                super().__init__()
                self.wte = nn.Embedding(vocab, 8)

            def forward(self, idx):
                b, t = idx.size()
                return self.wte(idx)
    """)
    assert spec.inputs.text == "(torch.randint(0, 100, (8, 16)),)"


def test_a_hand_written_norm_is_sized_by_its_weight_and_nothing_else():
    rms = _only("""
        import torch
        import torch.nn as nn

        class RMSNorm(nn.Module):
            def __init__(self, ndim=24):
                super().__init__()
                self.gain = nn.Parameter(torch.ones(ndim))

            def forward(self, x):
                return x / x.norm(2, dim=-1, keepdim=True) * self.gain
    """)
    assert rms.inputs.text == "(torch.randn(8, 16, 24),)"
    mixed = _only("""
        import torch
        import torch.nn as nn

        class Mixer(nn.Module):
            def __init__(self, ndim=24):
                super().__init__()
                self.gain = nn.Parameter(torch.ones(ndim))
                self.table = nn.Parameter(torch.randn(ndim, ndim))

            def forward(self, x):
                return x @ self.table * self.gain
    """)
    assert mixed.inputs is None or mixed.inputs.text != "(torch.randn(8, 16, 24),)"  # not a norm: no width guess


def test_constructor_arguments_the_file_passes_are_written_as_literals():
    spec = {t.name: t for t in discover(textwrap.dedent("""
        import torch
        import torch.nn as nn

        WIDTH = 20

        class Scale(nn.Module):
            def __init__(self, ndim, eps):
                super().__init__()
                self.weight = nn.Parameter(torch.ones(ndim))
                self.eps = eps

            def forward(self, x):
                return x * self.weight + self.eps

        class Net(nn.Module):
            def __init__(self, width=WIDTH):
                super().__init__()
                self.scale = Scale(width, eps=1e-5)

            def forward(self, x):
                return self.scale(x)
    """)).targets}["Scale"]
    assert (spec.inputs.init, spec.inputs.text) == ("Scale(20, eps=1e-05)", "(torch.randn(8, 16, 20),)")


def _card(recipe: InputRecipe) -> str:
    return hover_card(TargetResult(name="Block", kind="module", line=1, inputs=recipe), None, guessed_inputs=True)


def test_the_hover_names_a_library_model_only_when_one_is_wrapped():
    wraps = InputRecipe("inferred", "", after_import=True,
                        note="`x` first reaches `AutoModel.from_pretrained(...)`, whose input Compile Lens cannot size")
    derives = InputRecipe("inferred", "", after_import=True, note="`Head` defines no `forward` here")
    assert "from the library model it wraps" in _card(wraps)
    assert "from the library model it wraps" not in _card(derives)
    assert "from the class it derives from" in _card(derives)


@pytest.mark.slow
def test_each_module_is_traced_with_its_guess_by_the_real_worker(tmp_path):
    """Through `compile-lens check` (a worker, real torch): GPTConfig()'s defaults are GPT-2 124M."""
    shutil.copy(MODEL, tmp_path / "model.py")
    (tmp_path / ".git").mkdir()
    run = subprocess.run([sys.executable, "-m", "compile_lens.cli", "check", str(tmp_path / "model.py"), "--no-benchmark",
                          "--no-recompiles", "--no-cache", "--format", "json", "-q"],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    report = json.loads(run.stdout)
    targets = {t["name"]: t for t in report["files"][0]["targets"]}
    for name, (_, text) in EXPECTED.items():
        t = targets[name]
        assert (t["status"], t["error"], t["inputs"]["source"], t["inputs"]["text"]) == ("ok", None, "inferred", text), name
        assert t["phases"]["trace"]["status"] == "done" and t["graph_count"] == 1 and t["graph_breaks"] == [], name


def test_each_guess_keeps_its_write_directive_action():
    from lsprotocol import types as lsp

    from compile_lens import actions

    source = MODEL.read_text()
    rows = source.splitlines()
    for name, (_, text) in EXPECTED.items():
        line = next(i for i, row in enumerate(rows) if row.startswith(f"class {name}("))
        here = lsp.Range(lsp.Position(line, 6), lsp.Position(line, 6))
        titles = [a.title for a in actions.code_actions(source, "file:///w/model.py", here, [])]
        assert f"Write these inputs as a directive: inputs={text}" in titles, (name, titles)


def test_one_timing_round_after_a_big_compile_is_inconclusive_with_its_reason():
    """GPT-2 124M on 2 CPU cores (BENCHMARKS.md): the cold compile takes most of the 60 s budget and
    one eager/compiled pair is timed. One ratio has no interval: no verdict, no payback from it."""
    from compile_lens.protocol import Timing
    from compile_lens.worker.measure.timing.verdict import break_even, verdict

    one = Timing(eager_ms=5274.4, compiled_ms=4569.2, speedup=1.154, eager_iqr_ms=0.0, compiled_iqr_ms=0.0,
                 speedup_ci=None, conclusive=False, rounds=1)
    said = verdict("cpu", one, one, 69.9, None, 0, True)
    assert said == ("inconclusive (train step on cpu): one timing round fitted in the budget after the compile "
                    "— raise compileLens.benchmark.maxSeconds")
    assert break_even(69.9, one) is None
