"""The independent side of benchmarks/measure/speedup_check.py: a fresh process that times eager vs
`torch.compile(f)` as a user would, in pairs whose order alternates, and says which pairs other
processes slowed (issue 14: its old 3 sequential pairs gave 0.29×–0.59× for one model in five
back-to-back runs under load; see BENCHMARKS.md)."""

from __future__ import annotations

import statistics
import sys

import pytest

from paths import REPO

sys.path.insert(0, str(REPO))  # the benchmark modules (benchmarks/)

from benchmarks.measure.speedup_check import find_spec, independent_forward  # noqa: E402

MODEL = '''
import torch


# compile-lens: inputs=(torch.randn(32, 64),)
def gelu_mlp(x, scale: float = 0.5):
    y = torch.nn.functional.gelu(x @ x.T)
    return (y * scale).softmax(dim=-1)
'''


@pytest.mark.slow
def test_independent_run_pairs_alternate_and_busy_pairs_are_named(tmp_path):
    path = tmp_path / "user_model.py"
    path.write_text(MODEL)
    spec = find_spec(str(path), "gelu_mlp", None, None)
    got = independent_forward(str(path), spec, "cpu", "default", min_run_time=0.05, repeats=5)
    assert got["pairs"] == 5 and len(got["others_cpu"]) == 5
    assert 0 <= got["quiet_pairs"] <= 5
    assert got["busy"] == (got["quiet_pairs"] < 3)
    # the figure is the median speedup of the pairs it used: the quiet ones, or all when too few
    used = got["quiet_pairs"] if not got["busy"] else 5
    assert len(got["speedups"]) == used
    assert got["speedup"] == pytest.approx(statistics.median(got["speedups"]))
    assert got["eager_ms"] > 0 and got["compiled_ms"] > 0 and got["threads"] >= 1
