"""Dynamo's tracing time per source line (`compile_lines`), on a stack of 4 blocks that Dynamo
unrolls: one real compile, checked against torch's own timers and metrics; and the aggregation."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from compile_lens.render import line_costs
from paths import FIXTURES

BLOCKS = str(FIXTURES / "levers" / "blocks.py")


def _lines(cls: str) -> tuple[int, list[int]]:
    """A class's `forward`: its `def` line and its body's statement lines."""
    tree = ast.parse(Path(BLOCKS).read_text())
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    forward = next(f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "forward")
    return node.lineno, [s.lineno for s in forward.body]


@pytest.mark.slow
def test_each_line_gets_its_tracing_seconds_and_the_block_is_traced_once_per_pass():
    torch = pytest.importorskip("torch")
    from torch._dynamo.utils import compilation_time_metrics

    from compile_lens.worker import dynamo
    from compile_lens.worker.loader import import_file
    from compile_lens.worker.measure import compile_frames, compile_lines

    _, (loop, returned) = _lines("Stack")
    _, block = _lines("Block")
    model, x = import_file(BLOCKS, str(Path(BLOCKS).parent)).Stack(depth=4), torch.randn(2, 8, 32)
    dynamo.reset()
    timed = len(compilation_time_metrics.get("bytecode_tracing", []))
    timed_guards = len(compilation_time_metrics.get("build_guards", []))
    try:  # as bench_child's cold compile takes them, around the first call; AOTAutograd's backend
        # (a real one, seconds cheaper than Inductor's C++ build): Dynamo traces the same either way
        with compile_lines.recorded() as traced, torch.no_grad():
            torch.compile(model, backend="aot_eager")(x)
        ct = compile_frames.collect(traced, str(Path(BLOCKS).parent))
        tracing = sum(compilation_time_metrics["bytecode_tracing"][timed:])  # Dynamo's own timers
        guards = sum(compilation_time_metrics["build_guards"][timed_guards:])
    finally:
        dynamo.reset()
    [frame] = ct.frames  # no graph break: one frame
    by_line = {(c.path, c.line): c for c in ct.lines}
    # the loop Dynamo unrolls traces each of the block's lines once per block, reached from the loop
    assert [by_line[(BLOCKS, n)].traced for n in block] == [4, 4, 4], ct.lines
    assert all(not by_line[(BLOCKS, n)].top and by_line[(BLOCKS, n)].via.line == loop + 1 for n in block)
    # the loop's lines are the frame's own; the call in its body holds the blocks' seconds
    header, body = by_line[(BLOCKS, loop)], by_line[(BLOCKS, loop + 1)]
    assert header.top and body.top and (header.traced, body.traced, by_line[(BLOCKS, returned)].traced) == (5, 4, 1)
    assert body.s >= sum(by_line[(BLOCKS, n)].s for n in block) * 0.99 > 0
    # the frame's own lines add up to Dynamo's bytecode tracing as its own timer took it (within 10%),
    # a part of the metrics' Dynamo phase: its guards, graph and bytecode are on no line
    top = sum(c.s for c in ct.lines if c.top)
    assert top == pytest.approx(tracing, rel=0.10) and top == pytest.approx(frame.traced_s, abs=1e-3)
    assert top < frame.phases_s["dynamo"], (top, frame)
    assert frame.guards_s == pytest.approx(guards, abs=1e-3) and top + frame.guards_s < frame.phases_s["dynamo"]
    doc = line_costs.compile_time_json(ct)
    assert set(doc["lines"][0]) == {"path", "line", "s", "traced", "self_s", "compile_id", "top", "via"}
    assert doc["frames"][0]["traced_s"] == frame.traced_s and doc["frames"][0]["guards_s"] == frame.guards_s
    assert doc["lines_note"] is None
    assert {(d["path"], d["line"]) for d in doc["lines"]} >= {(BLOCKS, n) for n in [loop, loop + 1, returned, *block]}


def test_a_stack_counts_toward_each_of_its_lines_once_and_its_own_seconds_to_the_innermost():
    from compile_lens.worker.measure.compile_lines import Traced, lines

    m, torch_nn = "/ws/m.py", "/venv/torch/nn/modules/module.py"
    out = Traced()
    out.stacks[("0/0", ((m, 30),))] += 0.125  # the loop's header
    out.stacks[("0/0", ((m, 31),))] += 0.5  # its body, on its own line
    out.stacks[("0/0", ((m, 31), (torch_nn, 1700), (m, 12)))] += 2.0  # a block's line, through torch's __call__
    out.stacks[("0/0", ((m, 31), (torch_nn, 1700)))] += 0.25  # torch's own line: the caller's seconds only
    out.stacks[("0/0", ((m, 20), (m, 21), (m, 20)))] += 1.0  # a recursion: line 20 counted once
    out.entries.update({("0/0", m, 12): 4, ("0/0", m, 31): 4, ("0/0", m, 30): 5})
    found = lines(out, keep=lambda p: p == m)
    by = {c.line: c for c in found}
    assert [c.line for c in found] == [31, 12, 20, 21, 30]  # costliest first
    assert (by[31].s, by[31].self_s, by[31].traced, by[31].top, by[31].via) == (2.75, 0.5, 4, True, None)
    assert (by[12].s, by[12].self_s, by[12].traced, by[12].top) == (2.0, 2.0, 4, False)
    assert (by[12].via.path, by[12].via.line) == (m, 31)
    assert (by[20].s, by[20].self_s, by[21].s, by[21].self_s) == (1.0, 1.0, 1.0, 0.0)
    assert 1700 not in by  # torch's lines are left out: their seconds stay in the lines that called them
    # the frame's own lines add up to everything traced
    assert sum(c.s for c in found if c.top) == sum(out.stacks.values())
