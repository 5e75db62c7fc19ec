"""Dynamo's tracing time per source line, in the cold compile's fresh process (`bench_child`), on a
stack of 4 blocks that Dynamo unrolls: one real compile, checked against torch's own metrics."""

from __future__ import annotations

import ast
from dataclasses import asdict
from pathlib import Path

import pytest

from compile_lens.protocol import CompileTime, InputRecipe, TargetSpec, from_dict
from compile_lens.render import line_costs
from compile_lens.worker.measure import cold_compile
from compile_lens.worker.measure.cold_children import child_job
from paths import FIXTURES

BLOCKS = str(FIXTURES / "levers" / "blocks.py")


def _lines(cls: str) -> tuple[int, list[int]]:
    """A class's `forward`: its `def` line and its body's statement lines."""
    tree = ast.parse(Path(BLOCKS).read_text())
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    forward = next(f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "forward")
    return node.lineno, [s.lineno for s in forward.body]


@pytest.mark.slow
def test_each_line_gets_its_tracing_seconds_and_the_block_is_traced_once_per_pass(tmp_path):
    line, (loop, returned) = _lines("Stack")
    _, block = _lines("Block")
    spec = TargetSpec("Stack", "module", line, inputs=InputRecipe("directive", "(torch.randn(2, 8, 32),)",
                                                                  init="Stack(depth=4)"))
    job = dict(child_job(BLOCKS, str(Path(BLOCKS).parent), asdict(spec), "cpu", "default", False, "forward", 60),
               tasks=["compile"])
    ct = from_dict(CompileTime, cold_compile.run_child(job, cache_dir=str(tmp_path), timeout=300)["compile_time"])
    [frame] = ct.frames  # no graph break: one frame
    by_line = {(c.path, c.line): c for c in ct.lines}
    # the loop Dynamo unrolls traces each of the block's lines once per block
    assert [by_line[(BLOCKS, n)].traced for n in block] == [4, 4, 4], ct.lines
    assert all(not by_line[(BLOCKS, n)].top and by_line[(BLOCKS, n)].via is not None for n in block)
    # the loop's lines are the frame's own; the call in its body holds the blocks' seconds
    header, body = by_line[(BLOCKS, loop)], by_line[(BLOCKS, loop + 1)]
    assert header.top and body.top and body.traced == 4 and header.traced >= 4
    assert body.s >= sum(by_line[(BLOCKS, n)].s for n in block) * 0.99 > 0
    # the frame's own lines add up to Dynamo's part of the frame in torch's metrics (within 10%)
    top = sum(c.s for c in ct.lines if c.top and c.compile_id == frame.compile_id)
    assert top == pytest.approx(frame.phases_s["dynamo"], rel=0.10), (top, frame)
    assert frame.traced_s is not None and top <= frame.traced_s * 1.001
    doc = line_costs.compile_time_json(ct)
    assert set(doc["lines"][0]) == {"path", "line", "s", "traced", "self_s", "compile_id", "top", "via"}
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
