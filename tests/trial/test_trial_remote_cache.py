"""`compile-lens trial --remote-cache redis://HOST:PORT`: one more fresh compiled run with an empty
local Inductor cache, served by a real Redis (`tests/redis_server.py`) only, and the GPU bill pricing a
restart's compile from it. Two trials of the cheapest training loop (train_linear.py: Inductor's
graphs, no C++ kernel to build) against the same server: the first fills the cache (nothing to serve
yet, and it says so), the second is served by it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import paths
from compile_lens.cost import CostInputs
from compile_lens.trial import session, summary
from compile_lens.trial.figures import (
    ArtifactRun,
    CompileTime,
    LossFigures,
    RemoteRun,
    RunFigures,
    Speedup,
    Speedups,
    TrialFigures,
)
from redis_server import free_port, key_count, redis_server

FIXTURES = paths.FIXTURES / "trial"


def _trial(root: Path, *flags: str) -> tuple[subprocess.CompletedProcess, dict]:
    shutil.copy(FIXTURES / "train_linear.py", root / "train_linear.py")  # no C++ kernel to build: cheap compiles
    out = root / "trial.json"
    command = [sys.executable, "-m", "compile_lens.cli", "trial", "--steps", "3", "--cold", *flags, "--json", str(out),
               "--", sys.executable, "train_linear.py"]
    done = subprocess.run(command, cwd=root, env={**os.environ, "PYTHONPATH": str(paths.SERVER)},
                          capture_output=True, text=True, timeout=900)
    assert out.exists(), done.stderr[-3000:]
    return done, json.loads(out.read_text())


@pytest.fixture(scope="module")
def two_trials(tmp_path_factory):
    with redis_server(str(tmp_path_factory.mktemp("redis"))) as url:
        bill = ("--gpu-price", "3", "--gpus", "4")
        first = _trial(tmp_path_factory.mktemp("first"), "--remote-cache", url, *bill)
        keys = key_count(url)
        second = _trial(tmp_path_factory.mktemp("second"), "--remote-cache", url, *bill)
    return url, first, keys, second


@pytest.mark.slow
def test_the_first_trial_fills_the_remote_cache_and_says_it_served_nothing(two_trials):
    url, (done, figures), keys, _ = two_trials
    assert done.returncode == 0, done.stderr[-3000:]
    served = figures["remote_cache"]
    assert served["url"] == url and served["exit_code"] == 0 and keys > 0
    assert not served["served"] and "filled it" in served["note"]
    assert served["remote"]["fx_graph"]["hits"] == 0 and served["remote"]["fx_graph"]["misses"] > 0
    assert served["miss_reasons"] == []  # it missed keys the compiled run had too: not in the cache, not different
    assert figures["cost"]["compile_source"] == "compiled run"  # nothing served: not a warm-remote figure


@pytest.mark.slow
def test_the_second_trial_is_served_and_the_bill_prices_a_restart_from_it(two_trials):
    _, _, _, (done, figures) = two_trials
    assert done.returncode == 0, done.stderr[-3000:]
    served = figures["remote_cache"]
    assert served["served"] and served["note"] is None, served
    assert served["remote"]["fx_graph"]["hits"] > 0 and served["remote"]["autotune"] == "n/a"
    assert served["miss_reasons"] == [] and "compiled again" not in done.stderr
    warm_remote = served["compile_time"]["total_s"]
    assert figures["cost"]["compile_source"] == "warm-remote"
    assert figures["cost"]["compile_cost_per_restart"] == pytest.approx(warm_remote / 3600 * 4 * 3)
    assert "compile time served by the remote cache" in done.stderr


def test_an_address_that_does_not_answer_runs_nothing_and_says_so(tmp_path):
    url = f"redis://127.0.0.1:{free_port()}"
    started = time.perf_counter()
    plan = session.TrialPlan(program=[sys.executable, "-c", "raise SystemExit(9)"], root=str(tmp_path), remote_cache=url)
    served = session._remote_run(plan, str(tmp_path), None, {}, lambda _: None)
    assert time.perf_counter() - started < 2.0
    assert served.url == url and "check the address" in served.note and served.compile_time is None


def test_a_restart_compiles_warm_remote_else_from_the_artifact_else_as_the_compiled_run_did():
    def seconds(total_s: float) -> CompileTime:
        return CompileTime(total_s=total_s, forward_frames_s=total_s, backward_s=0.0, compiles=1, steps=[0])

    def trial(**fields) -> TrialFigures:
        return TrialFigures(eager=RunFigures(ran=True), compiled=RunFigures(ran=True),
                            loss=LossFigures(rtol=0.0, atol=0.0, verdict="no-loss", text=""), **fields)

    compiled = {"compile_time": seconds(40.0)}
    artifact = {"artifact": ArtifactRun(path="a.bin", compile_time=seconds(9.0))}
    served = {"remote_cache": RemoteRun(url="redis://r:1", served=True, compile_time=seconds(4.0))}
    filled = {"remote_cache": RemoteRun(url="redis://r:1", served=False, compile_time=seconds(38.0))}
    assert summary.restart_compile_s(trial(**compiled, **artifact, **served)) == (4.0, "warm-remote")
    assert summary.restart_compile_s(trial(**compiled, **artifact, **filled)) == (9.0, "artifact")
    assert summary.restart_compile_s(trial(**compiled, **filled)) == (40.0, "compiled run")
    assert summary.restart_compile_s(trial()) == (None, None)
    figures = trial(**compiled, **served, speedup=Speedups(wall=Speedup(
        ratio=2.0, verdict="faster", why=None, eager_median_s=1.0, compiled_median_s=0.5)))
    bill = summary.bill(figures, CostInputs(price_per_gpu_hour=3.0, gpus=4, hours_per_month=100))
    assert bill.compile_source == "warm-remote"
    assert any("4.0 s (a fresh process served by the team's remote cache)" in line for line in bill.lines)
