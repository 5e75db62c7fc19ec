"""A graph break torch reports inside a library is shown at the program's line that called it
(`trial/library_breaks.py`), beyond DDP: a real trial of tests/fixtures/trial_library/proj/train.py,
whose RMSNorm calls `rms_norm` from a vendored package outside the workspace (`vendor/fastnorm`)
that breaks on `.item()`; and the placement rule on frames (no torch).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import paths
from compile_lens.protocol import Frame
from compile_lens.render import report_trial
from compile_lens.render.html_parts import _Page
from compile_lens.torch_text.frames import torch_dir
from compile_lens.trial import library_breaks
from compile_lens.trial.figures import TrialFigures

FIXTURE = paths.FIXTURES / "trial_library"


def _line(path: Path, text: str) -> int:
    return [line.strip() for line in path.read_text().splitlines()].index(text) + 1


@pytest.fixture(scope="module")
def library_trial(tmp_path_factory):
    base = tmp_path_factory.mktemp("library")
    shutil.copytree(FIXTURE, base, dirs_exist_ok=True)
    out = base / "trial.json"
    done = subprocess.run([sys.executable, "-m", "compile_lens.cli", "trial", "--steps", "4", "--backend", "eager",
                           "--root", "proj", "--json", str(out), "--", sys.executable, "proj/train.py"],
                          cwd=base, env={**os.environ, "PYTHONPATH": str(paths.SERVER)},
                          capture_output=True, text=True, timeout=600)
    assert out.exists(), done.stderr[-3000:]
    return base, done, json.loads(out.read_text())


@pytest.mark.slow
def test_a_break_inside_a_library_helper_is_at_the_workspace_line_that_called_it(library_trial):
    base, done, figures = library_trial
    assert done.returncode == 0, done.stderr[-3000:]
    call = _line(base / "proj" / "train.py", "return rms_norm(x, self.weight)")
    item = _line(base / "vendor" / "fastnorm" / "__init__.py", "if x.abs().max().item() > 1e4:")
    # one break: torch logs it again for each frame it compiles after the first (its repeats, placed alike)
    [b] = figures["graph_breaks"]
    assert b["where"] == f"{os.path.realpath(base / 'proj' / 'train.py')}:{call}"
    assert b["gb"] == "GB0124"
    assert b["inside"]["function"] == "rms_norm"
    assert b["inside"]["shown"] == f"../vendor/fastnorm/__init__.py:{item}"
    assert b["inside"]["reported"] == f"{os.path.realpath(base / 'vendor' / 'fastnorm' / '__init__.py')}:{item}"
    assert f"inside `rms_norm` (../vendor/fastnorm/__init__.py:{item}), called from train.py:{call}" in done.stderr
    html = report_trial._events(_Page(str(base / "proj"), False), TrialFigures.from_dict(figures))
    assert f"inside `rms_norm` (../vendor/fastnorm/__init__.py:{item}), called from train.py:{call}" in html


def test_the_programs_own_line_stays_where_torch_says(tmp_path):
    program = tmp_path / "train.py"
    program.write_text("x = 1\n")
    assert library_breaks.place(str(program), 1, [Frame(str(program), 1, "forward")], str(tmp_path), None) is None


def test_the_innermost_program_frame_on_the_traced_stack_is_the_place(tmp_path):
    root, lib = tmp_path / "proj", tmp_path / "lib"
    root.mkdir()
    lib.mkdir()
    (root / "model.py").write_text("def forward(x):\n    return helper(x)\n")
    (lib / "norms.py").write_text("class Norm:\n    def apply(self, x):\n        y = x.item()\n        return y\n")
    stack = [Frame(str(root / "model.py"), 2, "forward"), Frame(str(lib / "norms.py"), 3, "apply")]
    placed = library_breaks.place(str(lib / "norms.py"), 3, stack, str(root), Frame("/elsewhere.py", 9, "main"))
    assert placed == {"where": f"{root / 'model.py'}:2",
                      "inside": {"function": "Norm.apply", "where": f"{lib / 'norms.py'}:3",
                                 "shown": "../lib/norms.py:3", "reported": f"{lib / 'norms.py'}:3",
                                 "reported_shown": "../lib/norms.py:3"}}


def test_without_a_program_frame_traced_the_live_caller_is_the_place_past_torchs_plumbing(tmp_path):
    torch_files = Path(torch_dir())
    plumbing = Frame(str(torch_files / "_dynamo" / "external_utils.py"), 67, "inner")
    ddp = Frame(str(torch_files / "nn" / "parallel" / "distributed.py"), 1700, "forward")
    caller = Frame(str(tmp_path / "train.py"), 42, "main")
    placed = library_breaks.place(ddp.path, 1700, [plumbing, ddp], str(tmp_path), caller)
    assert placed["where"] == f"{tmp_path / 'train.py'}:42"
    assert placed["inside"]["shown"] == "torch/nn/parallel/distributed.py:1700"
    assert placed["inside"]["function"].endswith("forward")  # the enclosing def as torch's file has it
    assert library_breaks.place(ddp.path, 1700, [plumbing, ddp], str(tmp_path), None) is None  # nowhere to place it
