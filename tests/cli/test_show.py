"""`compile-lens show FILE:LINE`: the captured graphs (`--graph`, a real trace through the CLI), the
kernels a line became (from the measurement's line costs), and the usage errors (exit 2, one line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from compile_lens.protocol import (
    Benchmark,
    CompileSeconds,
    Errors,
    KernelShare,
    LineCost,
    LineRef,
    PeakMemory,
    TargetResult,
    Timing,
)
from compile_lens.render.kernels_text import kernels_json, kernels_text, line_costs_at

MODEL = '''import torch
from torch import nn


# compile-lens: inputs=(torch.randn(4, 16),)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        if x.sum() > 0:
            x = x * 2
        return self.fc(x).relu()
'''


def show(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compile_lens.cli", "show", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONSAFEPATH": "1"})


def test_the_graphs_of_the_target_a_line_belongs_to(tmp_path):
    (tmp_path / "net.py").write_text(MODEL)
    done = show("net.py:14", "--graph", "--no-cache", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "# ── graph 1 of 2: forward, line 12" in done.stdout
    assert "# ── graph break at net.py:12: GB0170" in done.stdout  # data-dependent branching
    assert "net.py:14  linear = torch._C._nn.linear(" in done.stdout
    as_json = json.loads(show("net.py:6", "--graph", "--format", "json", "--no-cache", "-q", cwd=tmp_path).stdout)
    assert as_json["target"] == "Net" and len(as_json["graph"]) == 2
    assert as_json["graph"][1]["function"].startswith("torch_dynamo_resume_in_forward")


def test_usage_errors_are_one_line_and_exit_2(tmp_path):
    (tmp_path / "empty.py").write_text("x = 1\n")
    for args, says in ((["nowhere.py:3", "--graph"], "no such Python file: nowhere.py"),
                       (["empty.py", "--graph"], "give FILE:LINE"),
                       (["empty.py:0", "--graph"], "give FILE:LINE"),
                       (["empty.py:1", "--graph", "--no-cache"], "no model or compiled function to show")):
        done = show(*args, "-q", cwd=tmp_path)
        assert done.returncode == 2 and done.stdout == "", args
        assert done.stderr.count("\n") == 1 and says in done.stderr, done.stderr


def test_the_kernels_of_a_line_from_its_line_costs():
    path = "/ws/net.py"
    t = Timing(1.0, 0.5, 2.0, 0.0, 0.0)
    t.lines = [LineCost(path, 14, 80.0, 30.0, [KernelShare("extern_kernels.addmm", "extern", 20.0),
                                               KernelShare("cpp_fused_relu_0", "generated", 20.0, 2)],
                        [LineRef(path, 15)])]
    result = TargetResult("Net", "module", 6, benchmark=Benchmark("cpu", "cpu", "default", t, None, CompileSeconds(), None, PeakMemory(), Errors(), Errors(), "x"))
    found = line_costs_at(result, path, 14)
    text = kernels_text(result, path, 14, found)
    assert "forward: eager 80.0 µs → compiled 30.0 µs, fused with net.py:15" in text
    assert "extern    extern_kernels.addmm: 20.0 µs" in text and "cpp_fused_relu_0: 20.0 µs (1/2 of it)" in text
    assert kernels_json(result, found)[1] == {"name": "cpp_fused_relu_0", "kind": "generated", "workload": "forward", "us": 20.0,
                                       "backward": False, "source": None, "lines": [14, 15]}
    assert "no kernel of `Net`'s measured line costs comes from this line" in kernels_text(result, path, 3, [])
