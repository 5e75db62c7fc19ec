"""Issue 52: a hover card read in five seconds — the verdict, the table and at most three lines
(`cards.card_lines`), every other fact one click away (`cards.detail_lines`, the report's Details
at the target), and a lens title of at most 100 columns that keeps the verdict. Over the recorded
check of a real model (tests/data/torch_2_14_1) and the report tests' records."""

from __future__ import annotations

import dataclasses
import json
import sys
import urllib.parse
from pathlib import Path

import pytest

from compile_lens.protocol import AccuracyDrift, FileReport, TargetResult
from compile_lens.render import cards, lens_titles, report_html

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from test_line_costs_render import timing as line_timing  # noqa: E402
from test_report_html import sample_reports  # noqa: E402

from torch_results import load_recorded  # noqa: E402

RECORDED = HERE.parent / "data" / "torch_2_14_1" / "item_scale.json"
DRIFT = AccuracyDrift("blocks.1.scale", "/ws/models/mlp.py", 4, 0.0165, 0.0101, 2.38e-07, "output")
DRIFT_NOTE = ("accuracy drift: output first differs at `blocks.1.scale` (mlp.py:4): max abs 0.0165, max rel 0.0101; "
              "its inputs agree to 2.38e-07")


def records() -> dict[str, TargetResult]:
    """Fast, slow, inconclusive with a break (a real measurement), inconclusive alone, a break with a
    recompile, an accuracy drift beside a break, and a measurement with line costs."""
    mlp, item = sample_reports()[0].targets[0], sample_reports()[1].targets[0]
    real = load_recorded(RECORDED, "/ws")[0][0].targets[0]
    rb = real.benchmark
    alone = dataclasses.replace(real, graph_breaks=[], recompiles=[], benchmark=dataclasses.replace(
        rb, notes=[n for n in rb.notes if not n.startswith(("graph breaks:", "recompiles:"))]))
    drifted = dataclasses.replace(item, benchmark=dataclasses.replace(
        item.benchmark, notes=[*item.benchmark.notes, DRIFT_NOTE], accuracy_drift=DRIFT))
    lines = dataclasses.replace(mlp, benchmark=dataclasses.replace(mlp.benchmark, forward=line_timing()))
    return {"slow": mlp, "fast with a break": item, "real inconclusive with a break": real,
            "inconclusive": alone, "drift": drifted, "line costs": lines}


def under_the_table(card: str) -> list[str]:
    """The card's lines after the forward/train table, but its last (the Details link)."""
    rows = card.splitlines()
    last = max(i for i, row in enumerate(rows) if row.startswith("| train step |"))
    return [row for row in rows[last + 1:-1] if row.strip()]


@pytest.mark.parametrize("name", list(records()))
def test_the_card_has_at_most_three_lines_under_the_table_and_the_rest_in_details(name):
    t = records()[name]
    b = t.benchmark
    card = cards.hover_card(t, b, guessed_inputs=False, report=cards.details_line(True, "m.py", "file:///ws/m.py", t.name))
    assert f"**{b.verdict}**" in card and "| forward |" in card
    chosen = under_the_table(card)
    assert 1 <= len(chosen) <= 3, card
    assert chosen == cards.card_lines(t, b)
    assert chosen[0].startswith("- compile ") and ("pays back" in chosen[0]), chosen
    assert card.splitlines()[-1].startswith("[Details](command:compileLens.showReport?")
    details = cards.detail_lines(t, b, guessed_inputs=False)
    for head in ("- compile:", "- peak memory:", "- largest difference:", "- timing: ", "- inputs: `", "- measured "):
        assert any(row.startswith(head) for row in details), (head, details)
    assert any(f"· torch {b.torch} · mode" in row for row in details)
    for note in b.notes:  # every warning: the card shows one, the details all
        assert f"- ⚠ {note}" in details
    for line in (cards.export_line(t.export, t.unmeasured), cards.fallback_line(t.fallback_ops, t.report, t.unmeasured)):
        assert line is None or line in details


def test_the_one_warning_is_the_most_decisive_present():
    found = {name: cards.card_lines(t, t.benchmark) for name, t in records().items()}
    assert found["drift"][1].startswith("- ⚠ accuracy drift: output first differs at `blocks.1.scale`")  # over the break
    assert found["fast with a break"][1].startswith("- ⚠ graph break: GB0124 ")  # over its recompile
    assert "`helpers.py:4`" in found["fast with a break"][1]
    assert found["real inconclusive with a break"][1].startswith("- ⚠ graph break: GB0124 ")
    assert found["inconclusive"][1] == "- ⚠ timing inconclusive: machine busy: other processes used 139% CPU during " \
                                      "timing (2 CPUs) — re-measure when idle"
    assert found["slow"] == ["- compile 9.8 s cold, 1.7 s warm · pays back after 222,727 calls"]  # nothing to warn of
    assert found["line costs"][1] == "- costliest line (forward): `model.py:15` 0.81 ms → 0.20 ms"


def test_the_details_link_opens_the_report_at_the_target():
    link = cards.details_line(True, "models/mlp.py", "file:///ws/models/mlp.py", "MLP")
    query = link.removeprefix("[Details](command:compileLens.showReport?").removesuffix(")")
    assert json.loads(urllib.parse.unquote(query)) == ["file:///ws/models/mlp.py", "MLP"]
    assert cards.details_line(False, "models/mlp.py", "file:///ws/models/mlp.py", "MLP") == \
        "Details: `compile-lens report models/mlp.py`"  # a client without the report view
    reports = [FileReport("/ws/models/mlp.py", targets=[records()["line costs"]])]
    page = report_html.render_report(reports, title="t", torch_version="2.13", device="cpu", cwd="/ws",
                                     for_webview=True, focus="MLP")
    assert '<body data-focus="details-ws-models-mlp-py-mlp">' in page
    details = page.split('<h3 id="details-ws-models-mlp-py-mlp">MLP</h3>')[1].split("</ul>")[0]
    assert "<li>peak memory: eager 5.0 MB" in details and "<li>⚠ timing: the machine was busy" in details
    assert "costliest line (forward): <code>model.py:15</code>" in details and "\\" not in details


def test_the_lens_title_fits_100_columns_and_keeps_the_verdict():
    titles = {name: lens_titles.lens_title(t.benchmark) for name, t in records().items()}
    # the longest the records give: both figures with their intervals, and a six-figure payback
    wide = dataclasses.replace(records()["slow"].benchmark, break_even_calls=12_345_678)
    titles["wide"] = lens_titles.lens_title(wide)
    assert len("⚡ torch.compile: forward faster: 1.08–1.16× (median 1.12×) · train step slower: 0.91–0.97× "
               "(median 0.94×) · compile 9.8 s · pays back after 12,345,678 steps") > 100
    for name, title in titles.items():
        assert len(title) <= lens_titles.LENS_COLUMNS, (name, title)
    # the verdict's figure (the train step's) first, with its interval; the forward's shortened, then dropped
    assert titles["slow"] == "⚡ torch.compile: train step slower: 0.91–0.97× · compile 9.8 s · pays back after 222,727 steps"
    assert titles["wide"] == ("⚡ torch.compile: train step slower: 0.91–0.97× · compile 9.8 s "
                              "· pays back after 12,345,678 steps")
    assert titles["real inconclusive with a break"] == "⚡ torch.compile: train step inconclusive — machine busy · compile 13.5 s"
    # forward only: its break-even counts forward calls, not train steps
    assert titles["fast with a break"] == ("⚡ torch.compile: forward faster: 1.38–1.47× · compile 11.2 s "
                                           "· pays back after 124,445 calls")
    short = dataclasses.replace(records()["fast with a break"].benchmark, break_even_calls=None)
    assert lens_titles.lens_title(short) == ("⚡ torch.compile: forward faster: 1.38–1.47× (median 1.43×) · compile 11.2 s "
                                       "· never pays back")  # it fits: nothing shortened


def test_fit_lens_makes_its_cuts_in_order_and_cuts_text_only_at_the_end():
    pieces = [["train step slower: 0.91–0.97× (median 0.94×)", "train step slower: 0.91–0.97×", "train step 0.94× slower"],
             ["forward faster: 1.08–1.16× (median 1.12×)", "forward 1.12× faster", ""], ["compile 9.8 s"],
             ["pays back after 222,727 steps", ""]]
    cuts = [1, 0, 1, 3, 0]
    assert lens_titles.fit_lens(pieces, cuts, width=200).endswith("(median 1.12×) · compile 9.8 s · pays back after 222,727 steps")
    assert lens_titles.fit_lens(pieces, cuts, width=70) == "⚡ torch.compile: train step slower: 0.91–0.97× · compile 9.8 s"
    assert lens_titles.fit_lens(pieces, cuts, width=60) == "⚡ torch.compile: train step 0.94× slower · compile 9.8 s"
    assert lens_titles.fit_lens(pieces, cuts, width=30) == "⚡ torch.compile: train step 0…"  # the verdict's start stays


def test_the_levers_tried_are_in_the_details_not_on_the_card():
    from compile_lens.protocol import LEVERS, Lever, with_phase

    t = records()["slow"]
    tried = with_phase(dataclasses.replace(t, levers=[Lever("dynamic", "dim 0 of x marked dynamic", "better",
                                                            "cold compile 9.8 s → 5.1 s")]), LEVERS, "done")
    assert "- lever tried: dynamic shapes: better — cold compile 9.8 s → 5.1 s" in \
        cards.detail_lines(tried, tried.benchmark, guessed_inputs=False)
    assert "dynamic shapes" not in cards.hover_card(tried, tried.benchmark, guessed_inputs=False)
    none = with_phase(t, LEVERS, "done")
    assert cards.detail_lines(none, none.benchmark, guessed_inputs=False)[-1] == "- levers: none applies to this target"
