"""The cold compile on its lines (`CompileTime.lines`) → CLI text, hover and JSON (pure rendering)."""

from __future__ import annotations

from compile_lens.protocol import Benchmark, CompileFrame, CompileLine, CompileTime, LineRef, Timing
from compile_lens.render import cli_output
from compile_lens.render import compile_lines as cl
from compile_lens.render import line_costs as lc

PATH = "/ws/model.py"
BLOCKS = "/ws/blocks.py"


def compile_time() -> CompileTime:
    frame = CompileFrame("0/0", "forward", PATH, 28, 9.8, {"dynamo": 6.5, "aot_autograd": 1.0, "inductor": 0.8,
                                                           "codegen_build": 1.5}, traced_s=6.3, guards_s=0.12)
    lines = [
        CompileLine("0/0", PATH, 31, 6.1, 0.2, 48),  # the loop's body: the blocks it inlines included
        CompileLine("0/0", BLOCKS, 12, 2.9, 0.4, 48, top=False, via=LineRef(PATH, 31)),
        CompileLine("0/0", PATH, 14, 1.2, 1.2, 1, top=False, via=LineRef(PATH, 33)),
        CompileLine("0/0", PATH, 33, 0.15, 0.02, 1),
        CompileLine("0/0", PATH, 30, 0.04, 0.04, 49),
        CompileLine("0/0", PATH, 40, 0.01, 0.01, 1),
    ]
    return CompileTime([frame], lines=lines)


def bench(ct: CompileTime) -> Benchmark:
    t = Timing(1.0, 0.5, 2.0, 0.01, 0.01)
    return Benchmark("cpu", "cpu", "default", t, None, {"cold": 9.8}, None, {}, {}, {}, "worth it", compile_time=ct)


def test_cli_lists_the_top_compile_lines_with_their_frame_and_the_graph_not_split():
    text = lc.top_lines_text(bench(compile_time()), "/ws")
    start = text.index("  compile by line (Dynamo's tracing; a line's seconds include the calls it inlines):")
    assert text[start + 1:] == [
        "    frame 0/0 (forward), 9.8 s: Dynamo 6.5 s, of which 6.3 s tracing its lines, 0.12 s building its guards "
        "and 0.08 s its graph and bytecode, on no line; AOTAutograd and Inductor: 3.3 s for this graph, not split by line",
        "    model.py:31: compile 6.1 s of 9.8 s — traced 48×",
        "    blocks.py:12: compile 2.9 s of 9.8 s — traced 48× (the loop at model.py:31)",
        "    model.py:14: compile 1.2 s of 9.8 s — traced 1× (from line 33)",
        "    model.py:33: compile 0.15 s of 9.8 s — traced 1×",
        "    model.py:30: compile 0.04 s of 9.8 s — traced 49×",
    ]  # five lines: model.py:40 is the sixth


def test_lines_not_measured_say_why_and_no_lines_say_nothing():
    assert cl.top_text(CompileTime([], lines_note="not on this torch (no trace_source log)"), None) == [
        "  compile by line: not measured (not on this torch (no trace_source log))"]
    assert cl.top_text(CompileTime([]), None) == []


def test_hover_on_a_costly_line_names_its_share_the_loop_and_the_graph():
    ct = compile_time()
    found = cl.at({"Net": bench(ct)}, BLOCKS, 12)
    assert found is not None
    text = cl.hover_markdown(*found)
    assert text.startswith("**Compile Lens · compile:** 2.9 s of 9.8 s — traced 48× (the loop at model.py:31)")
    assert "Dynamo's tracing of this line, the calls it inlines included (0.40 s on the line itself)." in text
    assert text.endswith("Its frame 0/0 (forward), 9.8 s: Dynamo 6.5 s, of which 6.3 s tracing its lines, 0.12 s "
                         "building its guards and 0.08 s its graph and bytecode, on no line; AOTAutograd and Inductor: "
                         "3.3 s for this graph, not split by line.")
    # where Dynamo's guard timer was not read, the guards go with the graph and bytecode
    ct.frames[0].guards_s = None
    assert "of which 6.3 s tracing its lines and 0.20 s guards, graph and bytecode on no line;" in cl.hover_markdown(*found)
    # a line under HOVER_SHARE of its frame's compile gets no compile hover; an unknown line neither
    assert cl.at({"Net": bench(ct)}, PATH, 33) is None and cl.at({"Net": bench(ct)}, PATH, 99) is None


def test_json_has_the_lines_and_the_frames_traced_seconds():
    doc = cli_output.benchmark_json(bench(compile_time()))["compile_time"]
    assert doc["frames"][0]["traced_s"] == 6.3 and doc["frames"][0]["guards_s"] == 0.12
    assert doc["lines"][1] == {"path": BLOCKS, "line": 12, "s": 2.9, "traced": 48, "self_s": 0.4, "compile_id": "0/0",
                               "top": False, "via": {"path": PATH, "line": 31}}
    assert [d["line"] for d in doc["lines"]] == [31, 12, 14, 33, 30, 40] and doc["lines_note"] is None
