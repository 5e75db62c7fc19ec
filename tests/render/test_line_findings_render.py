"""Line tables that are no finding (a busy machine, a profile off its timing) and a launch-bound
compiled call on a GPU: what the hint, hover, card, CLI text, JSON and report say (issue 42)."""

from __future__ import annotations

import re

from test_line_costs_render import PATH, bench, timing

from compile_lens.protocol import FileReport, TargetResult
from compile_lens.render import cards, cli_output, report_html
from compile_lens.render import line_costs as lc

BUSY = "machine busy: other processes used 180% CPU while profiling (2 CPUs)"


def _ratio(text: str) -> bool:
    return bool(re.search(r"\d \S*s → \d", text)) or "→ compiled" in text


def test_a_busy_table_shows_no_ratio_anywhere():
    t = timing()
    t.lines_caveat = BUSY
    b = bench(t)
    hints = [lc.hint_label(ln, t) for ln in lc.costly(t)]
    assert hints and not any(_ratio(h) for h in hints), hints
    assert hints[0] == "81% of the profile · no finding (machine busy)"
    hover = lc.hover_markdown(t.lines[0], t)
    assert "Not a finding" in hover and BUSY in hover and not _ratio(hover)
    text = lc.top_lines_text(b, "/ws")
    assert text[0].startswith(f"  where the forward time goes: no finding ({BUSY}); costliest lines by share")
    assert not any(_ratio(x) for x in text)
    [card] = cards.line_cost_lines(b)
    assert card.startswith("- line costs (forward): no finding (machine busy")
    html = report_html.render_report([FileReport(PATH, [TargetResult("Net", "module", 10, benchmark=b)])],
                                     title="t", torch_version="2.13", device="cpu", cwd="/ws")
    section = html[html.index("<h2>Where the time goes</h2>"):]
    section = section[:section.index("</section>")]
    assert "no finding" in section and "s-compiled" not in section  # no eager/compiled bars
    assert cli_output.benchmark_json(b)["forward"]["lines_caveat"] == BUSY


def test_a_table_that_is_a_finding_keeps_its_ratio():
    t = timing()
    assert t.lines_caveat is None and lc.hint_label(t.lines[0], t) == "0.81 ms → 0.20 ms"
    assert cards.line_cost_lines(bench(t)) == []


def test_a_launch_bound_call_points_at_cuda_graphs():
    t = timing()
    t.gpu_idle_share = 0.62
    b = bench(t)
    words = lc.launch_bound(t)
    assert words and "62%" in words and 'mode="reduce-overhead"' in words
    assert any(words in x for x in lc.top_lines_text(b, "/ws"))
    assert any("reduce-overhead" in x for x in cards.line_cost_lines(b))
    assert "reduce-overhead" in lc.hover_markdown(t.lines[0], t)
    assert cli_output.benchmark_json(b)["forward"]["gpu_idle_share"] == 0.62
    html = report_html.render_report([FileReport(PATH, [TargetResult("Net", "module", 10, benchmark=b)])],
                                     title="t", torch_version="2.13", device="cuda", cwd="/ws")
    assert "launch-bound" in html
    t.gpu_idle_share = 0.2  # a busy GPU: nothing said
    assert lc.launch_bound(t) is None and cards.line_cost_lines(bench(t)) == []
    t.gpu_idle_share = None  # the CPU
    assert cli_output.benchmark_json(bench(t))["forward"]["gpu_idle_share"] is None
