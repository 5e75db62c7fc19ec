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
from compile_lens.protocol import CompileSeconds, Errors, Lever, PeakMemory, TargetSpec
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


def test_the_loop_whose_block_takes_the_compile_is_offered_the_same_edit():
    from compile_lens.actions.levers import loop_actions
    from compile_lens.protocol import Benchmark, CompileFrame, CompileLine, CompileTime, Timing

    path, source = str(FIXTURES / "levers" / "blocks.py"), (FIXTURES / "levers" / "blocks.py").read_text()
    rows = source.splitlines()
    line = next(i for i, row in enumerate(rows, 1) if row.startswith("class Stack"))
    loop = next(i for i, row in enumerate(rows, 1) if row.strip() == "x = block(x)")  # the body of its `for`
    # as measured (tests/worker/test_compile_lines.py): the call in the loop 65% of Dynamo's time, traced 4×
    ct = CompileTime([CompileFrame("0/0", "forward", path, loop - 2, 3.8, {"dynamo": 2.55}, traced_s=2.0)],
                     lines=[CompileLine("0/0", path, loop, 1.7, 0.04, 4), CompileLine("0/0", path, loop - 1, 0.19, 0.04, 5)])
    benchmarks = {"Stack": Benchmark("cpu", "cpu", "default", Timing(1.0, 0.5, 2.0, 0.01, 0.01), None, CompileSeconds(), None, PeakMemory(), Errors(),
                                     Errors(), "worth it", compile_time=ct)}
    targets = [TargetSpec("Stack", "module", line)]

    def offered(at: int, verdict: str = "better") -> list[lsp.CodeAction]:
        found = loop_actions(Source.parse(source), URI, at, {"Stack": [_lever(verdict)]}, targets, benchmarks, path)
        return [actions.resolve(a, source) for a in found]

    [action] = offered(loop)
    assert action.title == _offered(source)[0].title and action.edit == _offered(source)[0].edit
    assert offered(loop - 1) == [] and offered(loop, "no change") == []  # the loop's header; a lever not better


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


def test_the_regional_edit_on_model_compile_compiles_each_block_with_its_options(tmp_path):
    source = (FIXTURES / "levers" / "blocks.py").read_text() + textwrap.dedent("""

        def build():
            model = Stack()
            model.compile(
                fullgraph=False,
            )
            return model
        """)
    [action] = _offered(source)
    edited = apply_edits(source, action.edit.changes[URI])
    assert "model.compile(" not in edited and "        block.compile(fullgraph=False)" in edited
    path = tmp_path / "edited_method.py"
    path.write_text(edited)
    built = _load(path).build()
    assert all(getattr(b, "_compiled_call_impl", None) is not None for b in built.blocks)
    assert getattr(built, "_compiled_call_impl", None) is None


# --- dynamic, static and guard filters: a keyword on the user's own compile call ---------------

NET = '''import torch
from torch import nn


# compile-lens: inputs=(torch.randn(4, 16),)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        return self.lin(x).relu()


'''
TITLES = {"dynamic": "Mark shapes dynamic (dynamic=True): compiles over 3 shapes 20.0 s → 9.0 s (3 → 1 compiles) "
                     "(forward: no measurable change)",
          "static": "Keep shapes static (dynamic=False): dynamic kernels measured forward 0.80× slower",
          "guard_filter": "Skip guards (skip_guard_on_inbuilt_nn_modules_unsafe): forward 1.10× faster — assumes "
                          "torch.nn's own modules keep their attributes after the first call",
          "cudagraphs": 'CUDA graphs (mode="reduce-overhead"): forward 1.30× faster, 1 of 2 graph(s) CUDA-graphed; '
                        "skipped: mutated inputs (1 instances) at model.py:6 (measured)",
          "max_autotune": 'Autotune kernels (mode="max-autotune-no-cudagraphs"): cold compile 7.0 s → 31.0 s, forward '
                          "1.20× faster; the 24.0 s more compiling pays back after 4,001 forward calls (measured)"}


def _keyword_lever(kind: str, verdict: str = "better") -> Lever:
    data = {"filter": "skip_guard_on_inbuilt_nn_modules_unsafe", "assumption": "…"} if kind == "guard_filter" else {}
    return Lever(kind, "", verdict, action=TITLES[kind] if verdict == "better" else "", data=data)


def _keyword_offered(source: str, kind: str, verdict: str = "better") -> list[lsp.CodeAction]:
    src = Source.parse(source)
    line = next(i for i, row in enumerate(source.splitlines(), 1) if row.startswith("class Net"))
    found = lever_actions(src, URI, line, {"Net": [_keyword_lever(kind, verdict)]}, [TargetSpec("Net", "module", line)])
    return [actions.resolve(a, source) for a in found]


def _edited(source: str, kind: str) -> str:
    [action] = _keyword_offered(source, kind)
    assert action.title == TITLES[kind]
    edited = apply_edits(source, action.edit.changes[URI])
    compile(edited, "edited.py", "exec")  # still Python
    return edited


def test_dynamic_goes_on_a_multi_line_compile_call_in_its_own_layout():
    source = NET + "model = Net()\ncompiled = torch.compile(\n    model,\n    fullgraph=False,\n)\n"
    assert _edited(source, "dynamic").endswith("    model,\n    fullgraph=False,\n    dynamic=True,\n)\n")


def test_static_replaces_the_dynamic_the_user_wrote_and_goes_on_model_compile():
    source = NET + "compiled = torch.compile(Net(), dynamic=True)\nmodel = Net()\nmodel.compile(fullgraph=True)\n"
    edited = _edited(source, "static")
    assert "torch.compile(Net(), dynamic=False)\n" in edited and "model.compile(fullgraph=True, dynamic=False)" in edited


def test_a_guard_filter_goes_into_options_new_or_there_already():
    source = NET + "model = Net()\nfast = torch.compile(model)\nslow = torch.compile(model, options={'trace.enabled': False})\n"
    edited = _edited(source, "guard_filter")
    entry = '"guard_filter_fn": torch.compiler.skip_guard_on_inbuilt_nn_modules_unsafe'
    assert f"fast = torch.compile(model, options={{{entry}}})" in edited
    assert f"torch.compile(model, options={{'trace.enabled': False, {entry}}})" in edited


def test_no_edit_where_nothing_of_the_users_compiles_the_target_or_torch_would_refuse_it():
    assert _keyword_offered(NET, "dynamic") == []  # the class alone: no call of the user's to change
    assert _keyword_offered(NET + "m = Net()\nc = torch.compile(m, mode='max-autotune')\n", "guard_filter") == []
    source = NET + "m = Net()\nc = torch.compile(m)\n"
    for kind in TITLES:
        assert _keyword_offered(source, kind, "inconclusive") == [] and _keyword_offered(source, kind, "worse") == []


def test_a_decorated_function_gets_the_keyword_on_its_decorator():
    source = "import torch\n\n\n# compile-lens: inputs=(torch.randn(4),)\n@torch.compile\ndef Net(x):\n    return x.sin()\n"
    src = Source.parse(source)
    found = lever_actions(src, URI, 5, {"Net": [_keyword_lever("dynamic")]}, [TargetSpec("Net", "function", 5)])
    [action] = [actions.resolve(a, source) for a in found]
    assert "@torch.compile(dynamic=True)\ndef Net" in apply_edits(source, action.edit.changes[URI])


def test_a_gpu_lever_sets_the_mode_it_measured_and_replaces_the_users_mode():
    source = NET + "model = Net()\nfast = torch.compile(model)\nother = torch.compile(model, mode='default', fullgraph=True)\n"
    edited = _edited(source, "cudagraphs")
    assert "fast = torch.compile(model, mode='reduce-overhead')" in edited
    assert "torch.compile(model, mode='reduce-overhead', fullgraph=True)" in edited
    edited = _edited(source, "max_autotune")
    assert "fast = torch.compile(model, mode='max-autotune-no-cudagraphs')" in edited


def test_no_mode_beside_options_torch_would_refuse_it():
    source = NET + "m = Net()\nc = torch.compile(m, options={'trace.enabled': False})\n"
    assert _keyword_offered(source, "cudagraphs") == [] and _keyword_offered(source, "max_autotune") == []
