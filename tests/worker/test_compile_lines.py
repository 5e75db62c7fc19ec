"""Dynamo's tracing time per source line (`compile.per_line`), on a stack of 4 blocks that Dynamo
unrolls: one real compile, checked against torch's own timers and metrics; and the aggregation."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from compile_lens.render import compile_lines as compile_lines_text
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
    from compile_lens.worker.measure.compile import per_frame as compile_frames
    from compile_lens.worker.measure.compile import per_line as compile_lines

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
    # the frame's own lines' tracing adds up to Dynamo's bytecode tracing as its own timer took it (within 10%)
    own = by_line[(BLOCKS, frame.line)]  # the def line: the frame's guards, graph and bytecode after tracing
    top = sum(c.s for c in ct.lines if c.top)
    assert top - own.after_s == pytest.approx(tracing, rel=0.10)
    assert top - own.after_s == pytest.approx(frame.traced_s, abs=1e-3)
    assert frame.guards_s == pytest.approx(guards, abs=1e-3) and own.guards_s == frame.guards_s < own.after_s
    # with them, the lines add up to the frame's Dynamo time (the metrics' compile less its backend)
    assert top == pytest.approx(frame.stages_s["dynamo"], rel=0.10), (top, frame)
    assert own.after_s == pytest.approx(frame.stages_s["dynamo"] - frame.traced_s, abs=1e-3)
    doc = line_costs.compile_time_json(ct)
    assert set(doc["lines"][0]) == {"path", "line", "s", "traced", "self_s", "compile_id", "top", "via", "after_s",
                                    "guards_s"}
    assert doc["frames"][0]["traced_s"] == frame.traced_s and doc["frames"][0]["guards_s"] == frame.guards_s
    assert doc["lines_note"] is None
    assert {(d["path"], d["line"]) for d in doc["lines"]} >= {(BLOCKS, n) for n in [loop, loop + 1, returned, *block]}
    # shown: the loop's call, its block repeated 4×, is the costliest hint and names regional compilation
    hints = compile_lines_text.hints_in_file({"Stack": SimpleNamespace(compile_time=ct)}, BLOCKS)
    assert hints[0][0] is body and compile_lines_text.repeated(ct, body) and len(hints) <= compile_lines_text.HINT_CAP
    assert compile_lines_text.hint_label(body, ct).endswith(" · traced 4× · regional compilation?")
    assert not any(compile_lines_text.repeated(ct, c) for c in ct.lines if c is not body)


def test_a_stack_counts_toward_each_of_its_lines_once_and_its_own_seconds_to_the_innermost():
    from compile_lens.protocol import CompileFrame
    from compile_lens.worker.measure.compile.per_line import Traced, after_tracing, lines

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
    # and, with its guards, graph and bytecode on its def line (a resumed frame's first line, not traced
    # on its own, gets a row), to its Dynamo time; a frame of torch's own code gets none
    frames = [CompileFrame("0/0", "forward", m, 20, 9.0, {"dynamo": 5.0}, traced_s=3.875, guards_s=0.5),
              CompileFrame("1/0", "resume", m, 40, 1.0, {"dynamo": 0.5}, traced_s=0.25),
              CompileFrame("2/0", "_call_impl", torch_nn, 1700, 1.0, {"dynamo": 0.5}, traced_s=0.25)]
    found = after_tracing(found, frames, keep=lambda p: p == m)
    by = {(c.compile_id, c.line): c for c in found}
    assert (by[("0/0", 20)].s, by[("0/0", 20)].after_s, by[("0/0", 20)].guards_s) == (2.125, 1.125, 0.5)
    assert (by[("1/0", 40)].s, by[("1/0", 40)].traced, by[("1/0", 40)].guards_s) == (0.25, 0, None)
    assert sum(c.s for c in found if c.top and c.compile_id == "0/0") == 5.0 and ("2/0", 1700) not in by
    assert [c.line for c in found][:2] == [31, 20]  # costliest first again
