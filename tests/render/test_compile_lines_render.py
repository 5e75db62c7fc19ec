"""The cold compile on its lines (`CompileTime.lines`) → CLI text, hover, inlay hints, the report's
bars and JSON (pure rendering)."""

from __future__ import annotations

import re

from compile_lens.protocol import (
    LEVERS,
    Benchmark,
    CompileFrame,
    CompileLine,
    CompileSeconds,
    CompileTime,
    Errors,
    FileReport,
    Lever,
    LineRef,
    PeakMemory,
    Phase,
    TargetResult,
    Timing,
)
from compile_lens.render import cli_output, report_html
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
        # the def line: the frame's guards, graph and bytecode after tracing (the top lines add up to Dynamo's 6.5 s)
        CompileLine("0/0", PATH, 28, 0.2, 0.2, 1, after_s=0.2, guards_s=0.12),
        CompileLine("0/0", PATH, 33, 0.15, 0.02, 1),
        CompileLine("0/0", PATH, 30, 0.04, 0.04, 49),
        CompileLine("0/0", PATH, 40, 0.01, 0.01, 1),
    ]
    return CompileTime([frame], lines=lines)


def bench(ct: CompileTime) -> Benchmark:
    t = Timing(1.0, 0.5, 2.0, 0.01, 0.01)
    return Benchmark("cpu", "cpu", "default", t, None, CompileSeconds(9.8), None, PeakMemory(), Errors(), Errors(), "worth it", compile_time=ct)


def test_cli_lists_the_top_compile_lines_with_their_frame_and_the_graph_not_split():
    text = lc.top_lines_text(bench(compile_time()), "/ws")
    start = text.index("  compile by line (Dynamo's tracing; a line's seconds include the calls it inlines):")
    assert text[start + 1:] == [
        "    frame 0/0 (forward), 9.8 s: Dynamo 6.5 s, of which 6.3 s tracing its lines, 0.12 s building its guards "
        "and 0.08 s its graph and bytecode, on its def line (28); AOTAutograd and Inductor: 3.3 s for this graph, "
        "not split by line",
        "    model.py:31: compile 6.1 s of 9.8 s — traced 48×",
        "    blocks.py:12: compile 2.9 s of 9.8 s — traced 48× (the loop at model.py:31)",
        "    model.py:14: compile 1.2 s of 9.8 s — traced 1× (from line 33)",
        "    model.py:28: compile 0.20 s of 9.8 s — the frame's guards 0.12 s, graph and bytecode 0.08 s, after tracing "
        "its lines",
        "    model.py:33: compile 0.15 s of 9.8 s — traced 1×",
    ]  # five lines: model.py:30 is the sixth
    # the frame's own lines add up to its Dynamo time: its tracing, and its def line's guards, graph and bytecode
    ct = compile_time()
    assert sum(c.s for c in ct.lines if c.top) == ct.frames[0].stages_s["dynamo"]


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
                         "building its guards and 0.08 s its graph and bytecode, on its def line (28); AOTAutograd and "
                         "Inductor: 3.3 s for this graph, not split by line.")
    # where Dynamo's guard timer was not read, the guards go with the graph and bytecode; lines measured
    # before they were charged to the def line: on no line
    ct.frames[0].guards_s = None
    assert "of which 6.3 s tracing its lines and 0.20 s guards, graph and bytecode on its def line (28);" in \
        cl.hover_markdown(*found)
    ct.lines = [c for c in ct.lines if not c.after_s]
    assert "guards, graph and bytecode on no line;" in cl.hover_markdown(*found)
    # a line under HOVER_SHARE of its frame's compile gets no compile hover; an unknown line neither
    assert cl.at({"Net": bench(ct)}, PATH, 33) is None and cl.at({"Net": bench(ct)}, PATH, 99) is None


def test_json_has_the_lines_and_the_frames_traced_seconds():
    doc = cli_output.benchmark_json(bench(compile_time()))["compile_time"]
    assert doc["frames"][0]["traced_s"] == 6.3 and doc["frames"][0]["guards_s"] == 0.12
    assert doc["lines"][1] == {"path": BLOCKS, "line": 12, "s": 2.9, "traced": 48, "self_s": 0.4, "compile_id": "0/0",
                               "top": False, "via": {"path": PATH, "line": 31}, "after_s": 0.0, "guards_s": None}
    assert doc["lines"][3] == {"path": PATH, "line": 28, "s": 0.2, "traced": 1, "self_s": 0.2, "compile_id": "0/0",
                               "top": True, "via": None, "after_s": 0.2, "guards_s": 0.12}
    assert [d["line"] for d in doc["lines"]] == [31, 12, 14, 28, 33, 30, 40] and doc["lines_note"] is None


def regional(verdict: str = "better") -> Lever:
    return Lever("regional", "each Block in `blocks` (48) compiled once and reused (block.compile())", verdict,
                 "cold compile 41.0 s → 7.0 s, forward 0.98×", "Compile each Block once: cold compile 41.0 s → 7.0 s",
                 data={"attribute": "blocks", "block_class": "Block", "count": 48, "names": []})


def test_hints_on_the_few_costliest_lines_and_the_repeated_loop_names_its_lever(monkeypatch):
    ct = compile_time()
    benchmarks = {"Net": bench(ct)}
    # from 15% of the frame's Dynamo time (0.98 s): the loop's line and the call at 14 of model.py, costliest first
    found = cl.hints_in_file(benchmarks, PATH)
    assert [(c.line, name) for c, _, name in found] == [(31, "Net"), (14, "Net")]
    assert [c.line for c, _, _ in cl.hints_in_file(benchmarks, BLOCKS)] == [12]
    monkeypatch.setattr(cl, "HINT_CAP", 1)
    assert [c.line for c, _, _ in cl.hints_in_file(benchmarks, PATH)] == [31]
    loop, call, block, own = (next(c for c in ct.lines if c.line == n) for n in (31, 14, 12, 28))
    # the loop's line: its calls (5.9 s of 6.5 s) repeated 48×; the lever named as the levers phase left it
    assert cl.hint_label(loop, ct) == "compile 6.1 s · traced 48× · regional compilation?"  # the phase did not run
    assert cl.hint_label(loop, ct, []) == "compile 6.1 s · traced 48×"  # it ran: nothing repeats as a module
    assert cl.hint_label(loop, ct, [regional()]) == "compile 6.1 s · traced 48× · regional: better"
    assert cl.hint_label(call, ct) == "compile 1.2 s · traced 1×" and cl.hint_label(block, ct) == "compile 2.9 s · traced 48×"
    assert cl.hint_label(own, ct) == "compile 0.20 s · guards, graph"
    hover = cl.hover_markdown(loop, ct, [regional()])
    assert ("**Repeated:** Dynamo traced the calls on this line 48× (5.9 s, 91% of the frame's Dynamo time). Its lever, "
            "measured: regional compilation: better — cold compile 41.0 s → 7.0 s, forward 0.98× — offered as an edit "
            "on this line.") in hover
    assert "Try levers (`check --levers`)" in cl.hover_markdown(loop, ct)
    assert "offered" not in cl.hover_markdown(loop, ct, [regional("worse")])
    assert "Repeated" not in cl.hover_markdown(block, ct, [regional()])  # an inlined line is not the loop
    assert "the frame's own Dynamo work after its lines were traced, charged to its def line" in cl.hover_markdown(own, ct)


def test_report_has_a_bar_per_compile_line_and_the_loops_lever():
    result = TargetResult("Net", "module", 10, benchmark=bench(compile_time()), levers=[regional()],
                          phases=[Phase(LEVERS, "done")])
    html = report_html.render_report([FileReport(PATH, [result])], title="t", torch_version="2.13", device="cpu", cwd="/ws")
    section = html[html.index("Cold compile by line"):]
    section = section[:section.index("</table>")]
    rows = re.findall(r"<tr><td><code class=\"loc\">(\w+\.py:\d+)</code>", section)
    assert rows == ["model.py:31", "blocks.py:12", "model.py:14", "model.py:28", "model.py:33", "model.py:30",
                    "model.py:40"]  # costliest first
    assert section.count('<rect class="bar s-compiled"') == 7 and 'width="160.0"' in section  # the costliest: full width
    assert "94%" in section and "48×" in section  # 6.1 s of Dynamo's 6.5 s
    assert "regional compilation: better" in section and "guards 0.12 s, graph and bytecode 0.08 s" in section
