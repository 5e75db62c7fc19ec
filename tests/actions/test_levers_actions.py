"""The regional lever's edit (`actions/levers.py`), offered only for a lever measured better, applied
to real files: in the model's own `__init__`, and at the call site that compiles it. The edited file is
imported and built: every block then compiles itself (re-measured cold in tests/worker/test_levers.py)."""

from __future__ import annotations

import importlib.util
import textwrap

from lsprotocol import types as lsp

from compile_lens import actions
from compile_lens.actions.levers import lever_actions
from compile_lens.actions.source import Source
from compile_lens.protocol import Lever, TargetSpec
from edits import apply_edits
from paths import FIXTURES

URI = "file:///w/blocks.py"


def _lever(verdict: str = "better") -> Lever:
    return Lever("regional", "each Block in `blocks` (8) compiled once and reused (block.compile())", verdict,
                 action="Compile each Block once: cold compile 41.0 s → 7.0 s, forward 0.98× (measured)"
                 if verdict == "better" else "",
                 data={"attribute": "blocks", "block_class": "Block", "count": 8,
                       "names": [f"blocks.{i}" for i in range(8)]})


def _offered(source: str, verdict: str = "better") -> list[lsp.CodeAction]:
    src = Source.parse(source)
    line = next(i for i, row in enumerate(source.splitlines(), 1) if row.startswith("class Stack"))
    found = lever_actions(src, URI, line, {"Stack": [_lever(verdict)]}, [TargetSpec("Stack", "module", line)])
    return [actions.resolve(a, source) for a in found]


def _load(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_only_a_lever_measured_better_is_offered_with_its_figures_in_the_title():
    source = (FIXTURES / "levers" / "blocks.py").read_text()
    assert _offered(source, "inconclusive") == [] and _offered(source, "no change") == []
    [action] = _offered(source)
    assert action.title == "Compile each Block once: cold compile 41.0 s → 7.0 s, forward 0.98× (measured)"


def test_the_edit_in_the_models_own_init_makes_every_block_compile_itself(tmp_path):
    source = (FIXTURES / "levers" / "blocks.py").read_text()
    [action] = _offered(source)
    edited = apply_edits(source, action.edit.changes[URI])
    assert "        for block in self.blocks:  # regional compilation" in edited
    path = tmp_path / "edited_blocks.py"
    path.write_text(edited)
    model = _load(path).Stack()
    assert all(getattr(b, "_compiled_call_impl", None) is not None for b in model.blocks)


def test_the_edit_at_the_call_site_compiles_each_block_with_the_same_options(tmp_path):
    source = (FIXTURES / "levers" / "blocks.py").read_text() + textwrap.dedent("""

        def build():
            model = Stack()
            fast = torch.compile(model, dynamic=False)
            return fast
        """)
    [action] = _offered(source)
    edited = apply_edits(source, action.edit.changes[URI])
    assert "torch.compile(model" not in edited
    assert "    for block in model.blocks:" in edited and "        block.compile(dynamic=False)" in edited
    assert "    fast = model" in edited
    path = tmp_path / "edited_site.py"
    path.write_text(edited)
    built = _load(path).build()
    assert all(getattr(b, "_compiled_call_impl", None) is not None for b in built.blocks)
    assert getattr(built, "_compiled_call_impl", None) is None  # the whole model no longer compiles
