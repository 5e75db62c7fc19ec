"""The launch-bound line (a compiled call the GPU sat idle most of, `forward.gpu_idle_share`) points
to its action, the CUDA-graphs lever, and where the lever was measured says what it found: the same
idle figure before and after (`Lever.gpu_idle_share`), in the hover card, the CLI text and the report."""

from __future__ import annotations

from test_line_costs_render import PATH, bench, timing

from compile_lens.protocol import FileReport, TargetResult, Timing
from compile_lens.render import cards, cli_output, report_html
from compile_lens.render import line_costs as lc
from compile_lens.worker.levers import cudagraphs

FASTER = Timing(1.0, 0.7, 1.43, 0.0, 0.0, [1.35, 1.5], True, 12)


def test_the_launch_bound_line_points_to_the_lever_and_says_what_it_measured():
    t = timing()
    t.gpu_idle_share = 0.64
    b = bench(t)
    unmeasured = lc.launch_bound(t)
    assert unmeasured.startswith("launch-bound: the GPU sat idle 64% of the compiled forward — its action is CUDA "
                                 'graphs (`torch.compile(mode="reduce-overhead")`') and "check --levers" in unmeasured
    lever = cudagraphs.judged(FASTER, cudagraphs.graphed_words(1, 0, []), {"before": 0.64, "after": 0.08}, {})
    said = lc.launch_bound(t, levers=[lever])
    assert said == ('launch-bound: the GPU sat idle 64% of the compiled forward — its action, CUDA graphs '
                    '(`mode="reduce-overhead"`), measured better: forward 1.43× faster; GPU idle 64% → 8% of the '
                    "call; 1 of 1 graph(s) CUDA-graphed (offered as an edit)")
    result = TargetResult("Net", "module", 10, benchmark=b, levers=[lever])
    assert "  " + said in lc.top_lines_text(b, "/ws", levers=result.levers)
    assert any("GPU idle 64% → 8% of the call" in x for x in cards.line_cost_lines(b, result.levers))
    # the costly line's own hover says it too, once its target's lever ran (not "measure the lever")
    line, owner = lc.line_at({"Net": b}, PATH, t.lines[0].line)
    assert lc.measured_by({"Net": b}, owner) == "Net"
    assert "⚠ " + said in lc.hover_markdown(line, owner, levers=result.levers)
    assert "check --levers" in lc.hover_markdown(line, owner)
    text = cli_output.render_text([FileReport(PATH, [result])], cwd="/ws")
    assert "GPU idle 64% → 8% of the call" in text
    html = report_html.render_report([FileReport(PATH, [result])], title="t", torch_version="2.13", device="cuda",
                                     cwd="/ws")
    assert "GPU idle 64% → 8% of the call" in html
