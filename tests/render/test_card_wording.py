"""Wording of issue 25: a batch variation names the batch of all inputs, the machine line names the
default mode, code spans in the card's text stay code (no backslash shows)."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

from compile_lens.protocol import Recompile
from compile_lens.render import cards
from compile_lens.render.findings import recompile_message

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_report_html import sample_reports  # noqa: E402


def test_a_batch_variation_says_the_batch_of_all_inputs_changed():
    rc = Recompile(line=9, variation="batch 8", kind="automatic-dynamic",
                   reason="tensor 'labels' size mismatch at index 0. expected 4, actual 8", changed="labels")
    message = recompile_message(rc)
    assert message.startswith("Recompiles when the batch size of the inputs (first guard to fail: `labels`) changes (batch 8)")
    other = dataclasses.replace(rc, variation="sequence 32", changed="x")
    assert recompile_message(other).startswith("Recompiles when `x` changes (sequence 32)")


def test_the_machine_line_says_default_when_no_mode_was_given():
    mlp = sample_reports()[0].targets[0]
    bench = dataclasses.replace(mlp.benchmark, mode="")
    details = cards.detail_lines(mlp, bench, guessed_inputs=False)  # the machine is a detail, not the card's
    line = next(row for row in details if "· mode" in row)
    assert line.endswith("mode `default`")


def test_code_spans_in_card_text_keep_no_backslash():
    text = cards._md("cannot guess inputs: add `# compile-lens: inputs=(torch.randn(8, 16),)` above the class *now*")
    assert "`# compile-lens: inputs=(torch.randn(8, 16),)`" in text  # the span as written
    assert "\\*now\\*" in text  # markdown outside the span is still escaped
    spans = re.findall(r"`[^`]+`", text)
    assert spans and not any("\\" in span for span in spans)
    assert cards._code("python train.py --tag `v1`") == "`` python train.py --tag `v1` ``"
