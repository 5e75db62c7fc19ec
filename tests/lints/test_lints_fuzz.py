"""Fuzzing the static lints: random and mutated sources, random edit sequences.

No exception may escape, a result is None exactly when the file does not parse, every finding has a
sane place, and the incremental (cached) lint always equals linting the whole file from scratch.
A bounded run by default; `COMPILE_LENS_FUZZ_LONG=1` runs many more examples.
"""

from __future__ import annotations

import ast
import itertools
import os
import textwrap
import warnings

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compile_lens import lints
from compile_lens.lints import lint_source
from paths import REPO

LONG = os.environ.get("COMPILE_LENS_FUZZ_LONG") == "1"
FUZZ = settings(max_examples=4000 if LONG else 150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Real sources that touch every lint; plus the repository's examples when they are there.
CORPUS = [textwrap.dedent(s).lstrip("\n") for s in (
    '''
    """A small model.

    Docs at column 0, and a "quote".
    """
    import logging

    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    logger = logging.getLogger(__name__)


    def clamp(x, limit=3.0):
        if x.abs().max() > limit:
            print("clamping")
        return x.clamp(-limit, limit)


    class Block(nn.Module):
        def __init__(self, hidden: int = 16):
            super().__init__()
            self.fc = nn.Linear(hidden, hidden)

        def forward(self, x, mask=None):
            if mask is not None and x.dim() == 3:
                x = x.masked_fill(mask, 0.0)
            h = clamp(self.fc(x))
            logger.debug("h %s", h.shape)
            scale = float(np.sqrt(h.shape[-1]))
            return F.gelu(h) / scale + h.mean().item()


    class Deep(Block):
        def forward(self, x):
            return super().forward(x).tolist()
    ''',
    '''
    import torch


    @torch.compile(mode="max-autotune")
    def step(x, lr: float):
        while x.norm() > 1.0:
            x = x / 2
        return x * lr


    def make(fn):
        return torch.compile(fn)


    def train(data, epochs=3):
        fast = torch.compile(lambda t: t * 2)
        def inner(t):
            return t.numpy()
        compiled = torch.compile(inner)
        lr = 0.1
        for epoch in range(epochs):
            lr = lr * 0.5
            for x in data:
                step(x, lr)
                make(inner)(x)
                torch.compile(fast)(x, epoch)
        return compiled
    ''',
    '''
    import torch
    from torch import nn

    TABLE = {
    "a": 1,
    }


    class Net(nn.Module):
        def forward(self, x):
            y = x if x.sum() > 0 else -x
            text = """
    print(y)
    """
            try:
                z = y.cpu().numpy()
            except RuntimeError:
                z = None
            else:
                pass
            finally:
                pass
            return torch.compile(self.head)(y), z


    model = torch.compile(Net())
    for i in range(4):
        model(torch.randn(2, 4), i)
    ''',
)]
_examples = REPO / "examples"
CORPUS += [p.read_text(errors="replace") for p in sorted(_examples.rglob("*.py"))[:20]
           if p.stat().st_size < 20_000] if _examples.is_dir() else []

# Lines that are likely to matter to the lints, to splice into sources.
SNIPPETS = [
    "", "    ", "#", "# compile-lens: ignore", "x = 1", "pass", "    pass", "        return x",
    "def f(x):", "    def g(y):", "class C(nn.Module):", "class D(C):", "    def forward(self, x):",
    "        print(x)", "        x.item()", "        if x.sum() > 0:", "        while x.any():",
    "@torch.compile", "@torch.compile(dynamic=True)", "for i in range(3):", "    torch.compile(f)(i)",
    "    step(x, i)", "g = torch.compile(lambda t: t)", "import numpy as np", "        np.mean(x)",
    "logger = logging.getLogger()", "        logger.info('x')", "else:", "elif x:", "try:",
    "except Exception:", "finally:", '"""', "'''", "(", ")", "[", "]", "{", "}", "\\", "    \\",
    "\t", "\tpass", "lambda: (", "async def h():", "    await x", "match x:", "    case 1:",
    "x = f'{y!r:>{w}}'", "        self.helper(x)", "def helper(x): return x.tolist()",
    "if __name__ == '__main__':", "s = 'héllo ünïcode'", "\x0c", "x = 1 if y else 2",
]
EDIT_CHARS = "()[]{}:.,'\"#\\ \t\nxyz_0=+*@"

_paths = itertools.count()


def whole_file(source: str, path: str):
    """The reference: parse the whole file at once, nothing cached."""
    source = lints._normalise_newlines(source)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning of odd sources
            ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    chunk = lints._Chunk.parse(source, 0)
    assert chunk is not None
    return lints._lint_chunks([chunk], source, path)


def check(source: str, path: str) -> None:
    """The properties every lint result must have."""
    found = lint_source(source, path)
    assert found == whole_file(source, path)
    if found is None:
        return
    lines = lints._normalise_newlines(source).split("\n")
    for f in found:
        assert f.code in lints.CODES and f.severity == lints.CODES[f.code][0]
        assert f.predicted == f.code.startswith("CL1") and f.path == path and f.message
        assert 1 <= f.line <= f.end_line <= len(lines)
        assert 1 <= f.column <= len(lines[f.line - 1]) + 1
        assert 1 <= f.end_column <= len(lines[f.end_line - 1]) + 1
        assert f.line < f.end_line or f.column <= f.end_column
        assert all(1 <= r.line <= len(lines) and r.path == path for r in f.related)


@st.composite
def mutated(draw) -> str:
    """A real source with random deletions, insertions, character swaps and line moves."""
    source = draw(st.sampled_from(CORPUS))
    for _ in range(draw(st.integers(1, 6))):
        source = draw(edit(source))
    return source


@st.composite
def edit(draw, source: str) -> str:
    """One keystroke-sized (or paste-sized) change to `source`."""
    kind = draw(st.sampled_from(["insert", "delete", "swap", "line", "drop-line", "move-line", "text"]))
    at = draw(st.integers(0, len(source)))
    if kind == "insert":
        return source[:at] + draw(st.sampled_from(EDIT_CHARS)) + source[at:]
    if kind == "delete":
        return source[:at] + source[at + draw(st.integers(1, 40)):]
    if kind == "swap" and at + 1 < len(source):
        return source[:at] + source[at + 1] + source[at] + source[at + 2:]
    if kind == "text":
        return source[:at] + draw(st.text(max_size=12)) + source[at:]
    lines = source.split("\n")
    i = draw(st.integers(0, len(lines)))
    if kind == "line":
        lines.insert(i, draw(st.sampled_from(SNIPPETS)))
    elif kind == "drop-line" and i < len(lines):
        del lines[i]
    elif kind == "move-line" and i < len(lines):
        lines.insert(draw(st.integers(0, len(lines) - 1)), lines.pop(i))
    return "\n".join(lines)


@FUZZ
@given(st.text(max_size=400))
def test_random_text(source):
    check(source, f"/fuzz/random_{next(_paths)}.py")


@FUZZ
@given(st.lists(st.sampled_from(SNIPPETS), max_size=40).map("\n".join))
def test_random_python_lines(source):
    check(source, f"/fuzz/lines_{next(_paths)}.py")


@FUZZ
@given(mutated())
def test_mutated_real_sources(source):
    check(source, f"/fuzz/mutated_{next(_paths)}.py")


@FUZZ
@given(st.sampled_from(CORPUS), st.data())
def test_random_edit_sequences(source, data):
    """Typing in one document: each version linted through the cache of the versions before it."""
    path = f"/fuzz/edits_{next(_paths)}.py"
    check(source, path)
    for _ in range(data.draw(st.integers(1, 12), label="edits")):
        source = data.draw(edit(source), label="version")
        check(source, path)
    lints.forget(path)


def test_corpus_sources_parse_and_lint():
    """The fuzz corpus itself is valid Python with findings (else the mutations test little)."""
    for source in CORPUS[:3]:
        assert lint_source(source, "/fuzz/corpus.py")
