"""The collector reads torch's data (log-call args, the logging frame's exception and stack, the
recompile reasons list); the text readers are only its fallback. Both paths must give the same
breaks and recompiles on every fixture and example: the fallback is run by switching the data off.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from compile_lens.discovery import discover
from compile_lens.discovery.inputs import resolve_inputs
from compile_lens.protocol import InputRecipe, TargetSpec
from compile_lens.worker.breaks import collector
from compile_lens.worker.breaks.graph_breaks import trace_graph_breaks
from compile_lens.worker.breaks.recompiles import sweep_recompiles
from compile_lens.worker.loader import TargetError, build_target, import_file
from paths import FIXTURES, REPO

# files whose targets break or recompile (and a clean one), each with the root it is analysed in
BREAK_FILES = [*(REPO / "examples").glob("*.py"), *(FIXTURES / "truth").glob("*.py"),
               *(FIXTURES / "spine").glob("*.py"), FIXTURES / "actions" / "breaks.py",
               FIXTURES / "recompiles" / "models.py"]
SWEEP_FILES = [FIXTURES / "recompiles" / "models.py", REPO / "examples" / "item_scale.py"]


def _targets(path: Path):
    root = str(path.parent)
    found = discover(path.read_text())
    if found is None:
        return root, None, []
    specs = [s for s in resolve_inputs(str(path), root, list(found.targets)) if s.inputs and s.inputs.text]
    return root, import_file(str(path), root), specs


def _both(run):
    """run() with torch's data, then with every record read from its text (from one line: the
    stacks torch reports include the frames above the trace, this one too)."""
    assert collector.STRUCTURED
    results = []
    try:
        for structured in (True, False):
            collector.STRUCTURED = structured
            results.append(run())
    finally:
        collector.STRUCTURED = True
    return results


def _sources(run):
    """How the records of run() were read: {"data": n, "text": n}."""
    seen = {"data": 0, "text": 0}
    original = collector.CompileCollector._count

    def count(self, found):
        original(self, found)
        seen["text" if found is None else "data"] += 1

    collector.CompileCollector._count = count
    try:
        run()
    finally:
        collector.CompileCollector._count = original
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("path", BREAK_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_breaks_are_the_same_from_data_and_from_text(path):
    root, module, specs = _targets(path)
    if module is None or not specs:
        pytest.skip("no runnable target")
    compared = 0
    for spec in specs:
        try:
            built = build_target(module, spec, str(path))
        except TargetError:
            continue
        data, text = _both(lambda b=built: trace_graph_breaks(b, root))
        from_data, from_text = ([dataclasses.asdict(b) for b in r[1]] for r in (data, text))
        for d, t in zip(from_data, from_text):
            if d["loop"] and t["loop"] and d["end_column"] != t["end_column"]:
                # known: the log's caret row under a loop's `.item()` is read one character long
                # (`x.norm().item()` ends at 62, the text reader says 63); the data's byte columns
                # are the expression's own
                source = Path(d["path"]).read_text().splitlines()[d["line"] - 1]
                assert source[d["column"] - 1:d["end_column"] - 1].endswith(".item()")
                t["end_column"] = d["end_column"]
            if not d["path"].startswith(root) and d["line"] == t["line"] and d["column"] == t["column"]:
                # known: inside a library (`logging.warning`'s `len(root.handlers) == 0`) the text's
                # caret row runs to the comparison's end; the data's columns are the call's. The
                # finding the user sees is at the program's call line, not at these columns
                t["end_column"] = d["end_column"]
        assert from_data == from_text, spec.name
        assert data[0] == text[0]
        compared += 1
    assert compared


@pytest.mark.slow
@pytest.mark.parametrize("path", SWEEP_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_recompiles_are_the_same_from_data_and_from_text(path):
    root, module, specs = _targets(path)
    compared = 0
    for spec in specs:
        try:
            built = build_target(module, spec, str(path))
        except TargetError:
            continue

        def sweep(b=built, s=spec):
            try:
                # max_seconds: a budget load alone cannot reach, so neither side is cut short
                return [{**dataclasses.asdict(r), "compile_s": r.compile_s is not None}  # a timing: differs run to run
                        for r in sweep_recompiles(b, path=str(path), max_seconds=300)]
            except TargetError as exc:
                return exc.problem.message

        data, text = _both(sweep)
        assert data == text, spec.name
        compared += 1
    assert compared


def test_the_data_path_reads_torchs_data_not_text():
    path = FIXTURES / "recompiles" / "models.py"
    root, module, specs = _targets(path)
    chatty = build_target(module, next(s for s in specs if s.name == "Chatty"), str(path))
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if t.startswith("class Steps"))
    steps = TargetSpec("Steps", "module", line, inputs=InputRecipe(
        "directive", "(torch.randn(8, 16), 2)", variants=["(torch.randn(8, 16), 3)"]))
    stepped = build_target(module, steps, str(path))
    seen = _sources(lambda: trace_graph_breaks(chatty, root))
    assert seen["data"] >= 1 and seen["text"] == 0, seen
    seen = _sources(lambda: sweep_recompiles(stepped, path=str(path), automatic=False))
    assert seen["data"] >= 1 and seen["text"] == 0, seen


def test_a_target_is_built_with_the_same_weights_and_inputs_every_time():
    """A guard on an `.item()` value names the value (`___stack0 == 1.99…`): the message is the
    same on every save, and the data/text comparisons above compare like with like, only when
    every fresh model and input is drawn the same way."""
    import torch

    path = REPO / "examples" / "item_scale.py"
    root, module, specs = _targets(path)
    spec = next(s for s in specs if s.name == "ScaledNorm")
    first, again = (build_target(module, spec, str(path)) for _ in range(2))
    torch.randn(3)  # whatever ran in between
    a, b = first.make(), again.make()
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert all(torch.equal(x, y) for x, y in zip(first.args, again.args))


LOOP_IN_A_HELPER = '''\
import torch
from torch import nn


def scale_steps(x):
    for _ in range(2):
        x = x / x.norm().item()
    return x


# compile-lens: inputs=(torch.randn(4, 8),)
class Outer(nn.Module):
    def forward(self, x):
        x = x * 2
        x = scale_steps(x)
        return x.sin()
'''


def test_a_break_is_described_from_what_torch_formatted_it_from(tmp_path, monkeypatch):
    """Type, explanation, hints and the frame a loop's break skips come from torch's data: with the
    text readers switched off the breaks are the same (each at its own line, the loop torch skips kept)."""
    from compile_lens.worker.breaks import graph_breaks

    helper = tmp_path / "helper_loop.py"
    helper.write_text(LOOP_IN_A_HELPER)

    def trace_both():
        traced = {}
        for path in (FIXTURES / "truth" / "loop.py", helper):
            root, module, [spec] = _targets(path)
            traced[path.name] = trace_graph_breaks(build_target(module, spec, str(path)), root)[1]
        return traced

    def mine(traced):  # without this test's own frames, which the stacks torch reports include
        def strip(found):
            found["stack"] = [f for f in found["stack"] if f["path"] != __file__]
            return found
        return {name: [strip(dataclasses.asdict(b)) for b in found] for name, found in traced.items()}

    traced = trace_both()

    def read_text(*args):
        raise AssertionError(f"read from text: {args[0][:80]!r}")

    monkeypatch.setattr(graph_breaks, "_describe_text", read_text)
    monkeypatch.setattr(graph_breaks, "_skipped_from_text", read_text)
    assert mine(trace_both()) == mine(traced)
    [loop] = traced["loop.py"]
    assert (loop.gb_id, loop.line, loop.loop.gb_id, loop.loop.line) == ("GB0124", 18, "GB7000", 16)
    assert loop.hints and "capture_scalar_outputs" in loop.hints[0]
    # the break in forward itself, then the loop in the helper it calls: `scale_steps` runs eagerly
    in_helper = [b for b in traced["helper_loop.py"] if b.loop is not None]
    assert [(b.loop.line, b.loop.function, b.loop.gb_id) for b in in_helper] == [
        (6, "scale_steps", "GB7000")], traced["helper_loop.py"]


def test_a_compile_refused_by_the_recompile_limit_is_known_by_torchs_break_type(monkeypatch):
    """The metrics' failure is the message torch formatted for GB0039, so the limit is told by that
    break's type; the words of the failure are read only on a torch that formats no such break."""
    import types

    import torch

    from compile_lens.worker import dynamo
    from compile_lens.worker.breaks import recompiles

    def double(x):
        return x * 2

    monkeypatch.setattr(recompiles, "_LIMIT_FAIL_RE", recompiles.re.compile(r"(?!)"))  # never matches
    dynamo.reset()
    try:
        with torch._dynamo.config.patch(recompile_limit=2), \
                collector.collect(recompiles=True) as seen:
            compiled = torch.compile(double, backend="eager")
            for dtype in (torch.float32, torch.float64, torch.float16, torch.int32):  # a guard each
                compiled(torch.zeros(2, dtype=dtype))
            sweep = types.SimpleNamespace(collector=seen)
            hit = [recompiles._Sweep._hit_limit(sweep, m) for m in dynamo.metrics()]
    finally:
        dynamo.reset()
    assert hit.count(True) >= 1 and hit[:2] == [False, False], hit
