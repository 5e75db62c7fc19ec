"""`compile-lens record` notes the autocast dtype and TF32 state at a target's first call, and the next
analysis measures in it (tests/fixtures/record_precision/train.py: one model under
`torch.autocast('cpu', torch.bfloat16)`, one plain, one after TF32 was turned on)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

import paths
from compile_lens.discovery import discover
from compile_lens.discovery.inputs import resolve_inputs

FIXTURE = paths.FIXTURES / "record_precision" / "train.py"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    root = tmp_path_factory.mktemp("record_precision")
    shutil.copy(FIXTURE, root / "train.py")
    run = subprocess.run([sys.executable, "-m", "compile_lens.cli", "record", "--", sys.executable, "train.py"],
                         cwd=root, env={**os.environ, "PYTHONPATH": str(paths.SERVER)}, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "torch.float32\n"  # the program's output is its own
    return root, json.loads((root / ".compile-lens" / "recorded.json").read_text())["targets"]


def test_the_first_call_notes_autocast_and_tf32(recorded):
    _, targets = recorded
    assert targets["train.py:Amp"]["precision"] == {
        "device": "cpu", "autocast": "bfloat16", "matmul_tf32": False, "float32_matmul_precision": "highest",
        "cudnn_tf32": True}
    assert targets["train.py:Plain"]["precision"]["autocast"] is None
    assert targets["train.py:Tf32"]["precision"]["matmul_tf32"] is True
    assert targets["train.py:Tf32"]["precision"]["float32_matmul_precision"] == "high"


def test_the_next_analysis_measures_in_it(recorded):
    root, _ = recorded
    source = (root / "train.py").read_text()
    specs = {t.name: t for t in resolve_inputs(str(root / "train.py"), str(root), discover(source).targets)}
    assert {n: (s.precision, s.precision_source) for n, s in specs.items()} == {
        "Amp": ("bf16-autocast", "recorded"), "Plain": ("fp32", "recorded"), "Tf32": ("tf32", "recorded")}
    # a setting says otherwise: it wins
    again = resolve_inputs(str(root / "train.py"), str(root), discover(source).targets, precision="fp32")
    assert {(t.precision, t.precision_source) for t in again} == {("fp32", "setting")}
