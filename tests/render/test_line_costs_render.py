"""Per-line costs and compile frames → hint labels, hover, CLI text, JSON and the report's section."""

from __future__ import annotations

import re

from compile_lens.protocol import (
    Benchmark,
    CompileFrame,
    CompileSeconds,
    CompileTime,
    Errors,
    FileReport,
    KernelShare,
    LineCost,
    LineRef,
    PeakMemory,
    TargetResult,
    Timing,
)
from compile_lens.render import cli_output, report_html
from compile_lens.render import line_costs as lc

PATH = "/ws/model.py"


def timing(compiled_note=None) -> Timing:
    fused = KernelShare("cpp_fused_add_mul_relu_0", "generated", 60.0, 3)
    lines = [
        LineCost(PATH, 15, 810.0, 200.0, [KernelShare("extern_kernels.addmm", "extern", 200.0)]),
        LineCost(PATH, 16, 100.0, None if compiled_note else 20.0, [] if compiled_note else [fused],
                 [] if compiled_note else [LineRef(PATH, 17), LineRef(PATH, 18)]),
        LineCost(PATH, 17, 50.0, None if compiled_note else 20.0, [], [], False),
        LineCost(PATH, 19, 30.0, None if compiled_note else 25.0, [KernelShare("aten._fft_r2c", "fallback", 25.0)],
                 [], fallback=True),
        LineCost(PATH, 30, 9.0, None if compiled_note else 1.0, []),  # under 3% of either side: no hint
    ]
    t = Timing(1.0, 0.3, 3.3, 0.01, 0.01, [3.0, 3.6], True, 10)
    t.lines = lines
    t.profile_us = {"eager": 999.0, "compiled": None if compiled_note else 300.0}
    t.unattributed_us = None if compiled_note else 34.0
    t.unattributed_why = {} if compiled_note else {"guards and the wrappers around compiled graphs": 34.0}
    t.compiled_lines_note = compiled_note
    return t


def bench(t: Timing) -> Benchmark:
    frames = CompileTime([CompileFrame("0/0", "forward", PATH, 14, 6.2, {"dynamo": 0.5, "aot_autograd": 0.7,
                                                                          "inductor": 0.4, "codegen_build": 4.6}),
                          CompileFrame("1/0", "torch_dynamo_resume_in_forward_at_20", PATH, 20, 1.1, {"dynamo": 0.2})])
    return Benchmark("cpu", "cpu", "default", t, None, CompileSeconds(8.0, 1.0), None, PeakMemory(), Errors(), Errors(), "worth it",
                     compile_time=frames)


def test_hint_labels_say_eager_to_compiled_fused_and_fallback():
    t = timing()
    labels = {ln.line: lc.hint_label(ln, t) for ln in lc.costly(t)}
    assert labels == {15: "0.81 ms → 0.20 ms", 16: "0.10 ms → 0.02 ms · fused ×3", 17: "0.05 ms → 0.02 ms",
                      19: "0.03 ms → 0.03 ms · falls back"}  # line 30 is under 3% of both sides


def test_without_provenance_the_compiled_column_says_so_and_eager_stands():
    t = timing("not on this torch (torch 2.4 has no Inductor provenance tracking)")
    assert lc.hint_label(t.lines[0], t) == "0.81 ms → 0.20 ms"
    assert lc.hint_label(t.lines[1], t) == "0.10 ms → not on this torch"
    assert "not on this torch" in "\n".join(lc.top_lines_text(bench(t), "/ws"))


def test_hover_names_kernels_fused_lines_and_share():
    t = timing()
    text = lc.hover_markdown(t.lines[1], t)
    assert "eager 0.10 ms → compiled 0.02 ms per call (10% of the profiled time)" in text
    assert "`cpp_fused_add_mul_relu_0` (fused from 3 lines, time split evenly, 0.06 ms)" in text
    assert "Fused with: line 17, line 18" in text
    assert "Falls back" in lc.hover_markdown(t.lines[3], t)


def test_cli_text_lists_the_five_costliest_lines_and_the_frames():
    t = timing()
    t.lines = t.lines + [LineCost(PATH, 40 + i, 1.0, 1.0) for i in range(3)]
    text = lc.top_lines_text(bench(t), "/ws")
    shown = [x for x in text if re.match(r"    model\.py:\d+ ", x)]
    assert [x.split()[0] for x in shown] == ["model.py:15", "model.py:16", "model.py:17", "model.py:19", "model.py:30"]
    assert any("not on a line: 0.03 ms compiled (guards and the wrappers around compiled graphs 0.03 ms)" in x for x in text)
    assert text[-1] == ("  cold compile by frame: 0/0 forward (model.py:14) 6.2 s, "
                        "1/0 torch_dynamo_resume_in_forward_at_20 (model.py:20) 1.1 s")


def test_json_has_the_documented_shape():
    b = bench(timing())
    doc = cli_output.benchmark_json(b)
    first = doc["forward"]["lines"][0]
    assert set(first) == {"path", "line", "eager_us", "compiled_us", "kernels", "fused_with", "fallback"}
    assert doc["forward"]["lines"][1]["fused_with"] == [{"path": PATH, "line": 17}, {"path": PATH, "line": 18}]
    assert doc["forward"]["unattributed_us"] == 34.0
    stages = {"dynamo": 0.5, "aot_autograd": 0.7, "inductor": 0.4, "codegen_build": 4.6}
    assert doc["compile_time"]["frames"][0] == {"compile_id": "0/0", "function": "forward", "path": PATH, "line": 14,
                                                "total_s": 6.2, "stages_s": stages,
                                                "phases_s": stages,  # its 0.1.0 name, printed too until 0.2.0
                                                "traced_s": None, "guards_s": None}


def test_report_has_a_row_with_bars_per_line_and_a_frame_table():
    report = FileReport(PATH, [TargetResult("Net", "module", 10, benchmark=bench(timing()))])
    html = report_html.render_report([report], title="t", torch_version="2.13", device="cpu", cwd="/ws")
    section = html[html.index("<h2>Where the time goes</h2>"):]
    section = section[:section.index("</section>")]
    rows = re.findall(r"<tr><td><code class=\"loc\">model\.py:(\d+)</code>", section)
    assert rows == ["15", "16", "17", "19", "30"]  # by cost
    assert section.count('<rect class="bar s-eager"') == 5 and section.count('<rect class="bar s-compiled"') == 5
    assert "Cold compile by frame" in section and "torch_dynamo_resume_in_forward_at_20" in section
    assert "a fused kernel&#x27;s time split evenly among its lines" in section or \
        "a fused kernel's time split evenly among its lines" in section


def test_a_failed_line_profile_is_said_once():
    t = timing()
    t.lines, t.lines_note = [], "not measurable: RuntimeError: the profiler is busy"
    assert lc.costly(t) == []
    assert lc.top_lines_text(bench(t), "/ws")[0] == "  line costs (forward): not measurable: RuntimeError: the profiler is busy"


def train_timing() -> Timing:
    t = timing()
    t.lines[0].kernels.append(KernelShare("extern_kernels.mm", "extern", 180.0, 1, backward=True))
    t.lines[1].kernels.append(KernelShare("cpp_fused_threshold_backward_0", "generated", 40.0, 2, backward=True))
    t.unattributed_why["eager: the train step's SGD step (Compile Lens's loop, not a line of the model)"] = 90.0
    return t


def test_a_train_step_hover_says_which_kernels_are_a_lines_backward():
    t = train_timing()
    text = lc.hover_markdown(t.lines[0], t)
    assert text.startswith("**Compile Lens · this line's train step (forward + backward) cost:**")
    assert "`extern_kernels.mm` (backward of line 15, extern kernel, 0.18 ms)" in text
    assert "`extern_kernels.addmm` (extern kernel, 0.20 ms)" in text  # the forward's own kernel says nothing more
    assert "(backward of line 16, fused from 2 lines, time split evenly, 0.04 ms)" in lc.hover_markdown(t.lines[1], t)
    assert lc.hover_markdown(timing().lines[0], timing()).startswith("**Compile Lens · this line's forward cost:**")


def test_train_step_lines_in_json_cli_and_report():
    b = bench(timing())
    b.train_step = train_timing()
    doc = cli_output.benchmark_json(b)
    kernels = doc["train_step"]["lines"][0]["kernels"]
    assert {(k["name"], k["backward"]) for k in kernels} == {("extern_kernels.addmm", False), ("extern_kernels.mm", True)}
    assert any(x.startswith("  where the train step time goes") for x in lc.top_lines_text(b, "/ws"))
    report = FileReport(PATH, [TargetResult("Net", "module", 10, benchmark=b)])
    html = report_html.render_report([report], title="t", torch_version="2.13", device="cpu", cwd="/ws")
    assert "· train step (forward + backward)</h3>" in html and "backward of line 15" in html


def test_hints_show_the_forward_and_the_train_step_only_where_the_forward_is_not_costly():
    b = bench(timing())
    b.train_step = train_timing()
    b.train_step.lines.append(LineCost(PATH, 50, 400.0, 100.0, [KernelShare("extern_kernels.mm", "extern", 100.0, 1, True)]))
    found = {ln.line: lc.hint_label(ln, t) for ln, t in lc.costly_in_file({"Net": b}, PATH)}
    assert found[15] == "0.81 ms → 0.20 ms"  # the forward's
    assert found[50] == "train 0.40 ms → 0.10 ms"  # only the train step (a backward) makes it costly
