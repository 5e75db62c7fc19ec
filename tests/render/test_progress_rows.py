"""Where each part of a growing result stands (`render.progress_rows`), the stream's lines read from it
(`render.stream`) and the editor's words while a measurement runs (`render.cards`): the worker's
events replayed as it sends them today (the figures, then the deployment answers, then the phase),
in another order, and with a measurement that dies after the forward."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from compile_lens.protocol import FileReport, Problem, TargetResult, with_phase
from compile_lens.render import cards, lens_titles, progress_rows
from compile_lens.render.cli_output import render_json
from compile_lens.render.stream import PartFeed, headline

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_report_html import sample_reports  # noqa: E402

DEPLOYMENT = ("export", "fallback_ops", "batch_sweep")


def _measured() -> TargetResult:
    mlp = sample_reports()[0].targets[0]  # every figure, every deployment answer
    mlp = with_phase(with_phase(mlp, "trace", "done"), "sweep", "done")
    return with_phase(mlp, "measure", "done")


def _events(final: TargetResult) -> list[TargetResult]:
    """The growing results the worker sends for `final` today: trace, sweep, the figures, the end."""
    bare = dataclasses.replace(final, benchmark=None, export=None, fallback_ops=[], report=None,
                               phases=[p for p in final.phases if p.name == "trace"])
    swept = with_phase(bare, "sweep", "done")
    figures = dataclasses.replace(swept, benchmark=final.benchmark)
    return [bare, swept, figures, final]


def test_the_feed_says_each_part_once_as_it_lands():
    feed, said = PartFeed(), []
    for event in _events(_measured()):
        said.append([line["part"] for line in feed.update("m.py", event)])
    assert said == [["trace"], ["recompiles"], ["forward", "train_step", "memory", "lines"], list(DEPLOYMENT)]
    assert feed.update("m.py", _measured()) == []  # a result sent again says nothing new
    skipped = dataclasses.replace(_measured(), name="NotAModule", status="skipped")
    assert feed.update("m.py", skipped) == []  # not in the document either


def test_each_line_holds_what_the_json_document_shows_of_that_part():
    final = _measured()
    lines = {line["part"]: line for line in PartFeed().update("m.py", final)}
    doc = render_json([FileReport("m.py", targets=[final])], torch_version=None, device="cpu")
    [target] = doc["files"][0]["targets"]
    assert lines["batch_sweep"]["data"] == {"batch_sweep": target["batch_sweep"]} and target["batch_sweep"]["points"]
    assert lines["forward"]["data"]["benchmark"]["forward"] == target["benchmark"]["forward"]
    assert lines["memory"]["data"] == {"benchmark": {"peak_memory_bytes": target["benchmark"]["peak_memory_bytes"]}}
    assert all(line["status"] == "done" and "why" not in line for line in lines.values())


def test_parts_land_in_whatever_order_the_worker_sends_them():
    final = _measured()
    export_first = dataclasses.replace(final, benchmark=None, fallback_ops=[], report=None,
                                       phases=[p for p in final.phases if p.name != "measure"])
    feed = PartFeed()
    assert [line["part"] for line in feed.update("m.py", export_first)] == ["trace", "recompiles", "export"]
    assert [line["part"] for line in feed.update("m.py", final)] == [
        "forward", "train_step", "memory", "lines", "fallback_ops", "batch_sweep"]


def test_a_measurement_that_dies_after_the_forward_keeps_it_and_fails_the_rest_with_why():
    final = _measured()
    *_, figures, _ = _events(final)
    died = with_phase(figures, "measure", "failed", Problem("timeout", "the analysis took longer than 20 s"))
    feed = PartFeed()
    feed.update("m.py", figures)
    rest = {line["part"]: line for line in feed.update("m.py", died)}
    assert list(rest) == list(DEPLOYMENT)
    assert all(line["status"] == "failed" and "longer than 20 s" in line["why"] for line in rest.values())
    assert progress_rows.row_state(died, "forward") == progress_rows.RowState("done")
    card = cards.hover_card(died, died.benchmark, guessed_inputs=False, rows=progress_rows.states(died))
    assert "1.08–1.16×" in card  # the forward's figure stands
    details = "\n".join(cards.detail_lines(died, died.benchmark, guessed_inputs=False, rows=progress_rows.states(died)))
    assert "torch.export, fallback ops, batch sweep: not measurable: the analysis took longer than 20 s" in details


def test_the_editor_says_what_is_not_measured_yet_while_the_measurement_runs():
    final = _measured()
    *_, figures, _ = _events(final)
    running = progress_rows.states(figures, in_flight=True)
    assert [p for p, s in running.items() if s.status == "pending"] == list(DEPLOYMENT)
    card = cards.hover_card(figures, figures.benchmark, guessed_inputs=False, rows=running)
    assert "\n⏳ not measured yet: torch.export, fallback ops, batch sweep\n" in card  # above the figures so far
    assert "not measured yet" not in cards.hover_card(final, final.benchmark, guessed_inputs=False,
                                                      rows=progress_rows.states(final))
    # only the forward so far (a worker that sends it first): no payback promised before the train step
    forward_only = dataclasses.replace(figures.benchmark, train_step=None, break_even_calls=None)
    title = lens_titles.code_lens_title(forward_only, False, ("train_step", "memory"))
    assert "forward faster: 1.08–1.16×" in title and title.endswith("⏳ train step…") and "pays back" not in title
    assert "never pays back" in lens_titles.code_lens_title(forward_only, False)  # the same figures, measured to the end


def test_the_headline_says_the_forward_speedup_and_its_compiles():
    text = headline(_measured())
    assert text == "MLP: forward faster: 1.08–1.16× (median 1.12×) · compile 9.8 s cold / 1.7 s warm (cpu)"
    busy = dataclasses.replace(_measured().benchmark, forward=dataclasses.replace(
        _measured().benchmark.forward, conclusive=False, speedup_ci=[0.7, 1.4]))
    assert "forward inconclusive (95% CI 0.70–1.40×)" in headline(dataclasses.replace(_measured(), benchmark=busy))
