"""Every surface names the precision a figure was measured in, in the one wording of
`render/precision.py`: the hover's machine line, the CLI's summary, the report's verdict row."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from compile_lens.protocol import FileReport, Precision
from compile_lens.render import cards
from compile_lens.render import report_html as rh
from compile_lens.render.cli_output import benchmark_summary
from compile_lens.render.precision import precision_words

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_report_html import ROOT, sample_reports  # noqa: E402

BF16 = Precision("bf16-autocast", "directive", "torch.autocast('cuda', dtype=torch.bfloat16) around the forward and "
                 "the loss; matmul TF32 off, cuDNN convolutions TF32 on")


def _measured(precision):
    mlp = sample_reports()[0].targets[0]
    return dataclasses.replace(mlp, benchmark=dataclasses.replace(mlp.benchmark, precision=precision))


def test_the_words():
    assert precision_words(BF16) == "bf16-autocast from the directive"
    assert precision_words(BF16, detail=True).endswith(": torch.autocast('cuda', dtype=torch.bfloat16) around the "
                                                       "forward and the loss; matmul TF32 off, cuDNN convolutions TF32 on")
    default = Precision("fp32", "default", "torch's defaults: matmul TF32 off, cuDNN convolutions TF32 on")
    assert precision_words(default) == "fp32, torch's defaults"
    assert precision_words(default, detail=True) == "fp32, torch's defaults: matmul TF32 off, cuDNN convolutions TF32 on"
    assert precision_words(Precision("tf32", "recorded", "matmul and cuDNN convolutions in TF32")) == "tf32 from the recorded run"
    assert precision_words(None) == ""  # measured before precision was named: nothing claimed


def test_the_hover_the_cli_and_the_report_name_it():
    mlp = _measured(BF16)
    card = cards.hover_card(mlp, mlp.benchmark, guessed_inputs=False)
    assert f"**{mlp.benchmark.verdict}** · precision bf16-autocast from the directive" in card  # beside the figures
    machine = next(row for row in cards.detail_lines(mlp, mlp.benchmark, guessed_inputs=False) if "· mode" in row)
    assert "· precision bf16-autocast from the directive: torch.autocast(" in machine
    assert benchmark_summary(mlp.benchmark).endswith("(cpu, bf16-autocast from the directive)")
    page = rh.render_report([FileReport(f"{ROOT}/models/mlp.py", targets=[mlp])], title="t", torch_version="2.13",
                            device="cpu", cwd=ROOT)
    assert "· precision bf16-autocast from the directive</span>" in page


def test_an_old_result_claims_no_precision():
    mlp = _measured(None)
    card = cards.hover_card(mlp, mlp.benchmark, guessed_inputs=False)
    assert "precision" not in card and "precision" not in "\n".join(cards.detail_lines(mlp, mlp.benchmark, guessed_inputs=False))
    assert benchmark_summary(mlp.benchmark).endswith("(cpu)")
