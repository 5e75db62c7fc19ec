"""`compile-lens trial`: the user's training script, eager and compiled, and the GPU bill.

Two real trials of small training scripts (tests/fixtures/trial/): one that trains for 24 steps
through a graph break and a smaller last batch, one whose compiled run fails at step 5. They
compile with the `aot_eager` backend (real Dynamo and AOTAutograd, so breaks, recompiles and
compile-time figures are real; Inductor's code generation takes minutes on these CPUs). The bill
is checked against a hand computation.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compile_lens.cost import CostInputs, gpu_bill
from compile_lens.trial import summary

FIXTURES = Path(__file__).parent / "fixtures" / "trial"
SERVER = str(Path(__file__).parent.parent / "server")


def _trial(root: Path, script: str, *flags: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    shutil.copy(FIXTURES / script, root / script)
    out = root / "trial.json"
    command = [sys.executable, "-m", "compile_lens.cli", "trial", *flags, "--json", str(out), "--", sys.executable, script]
    done = subprocess.run(command, cwd=root, env={**os.environ, "PYTHONPATH": SERVER, **(env or {})},
                          capture_output=True, text=True, timeout=900)
    assert out.exists(), done.stderr[-3000:]
    return done, json.loads(out.read_text())


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("trial")
    return _trial(root, "train.py", "--steps", "24", "--backend", "aot_eager",
                  "--gpu-price", "2.5", "--gpus", "8", "--hours-per-month", "300")


@pytest.mark.slow
def test_the_program_runs_twice_and_is_stopped_after_n_steps(trained):
    done, figures = trained
    assert done.returncode == 0, done.stderr[-3000:]
    # The program's own output passes through, once per run; 24 steps reach the fourth epoch (7 a epoch).
    assert done.stdout.count("epoch 2 step 21 loss") == 2
    assert "epoch 3" not in done.stdout
    for run in ("eager", "compiled"):
        r = figures[run]
        assert r["ran"] and r["stopped_by_trial"] and r["failure"] is None
        assert [s["index"] for s in r["steps"]] == list(range(24))
        assert r["outermost_modules"] == ["Net"]
        assert all(s["wall_s"] >= s["hook_s"] > 0 for s in r["steps"])
        assert r["peak_memory_bytes"] is None and "not measured on CPU" in r["memory_note"]
    # The smaller last batch of each epoch is what the model saw at steps 6, 13, 20
    shapes = [s["shapes"] for s in figures["compiled"]["steps"]]
    assert [i for i, s in enumerate(shapes) if s == [[4, 12]]] == [6, 13, 20]
    assert "compile-lens trial: " in done.stderr and "speedup at steady state" in done.stderr
    assert figures["machine"]["cpus"] == os.cpu_count() and figures["cold"] is False


@pytest.mark.slow
def test_warm_up_and_steady_state_are_apart(trained):
    _, figures = trained
    eager, compiled = figures["eager"], figures["compiled"]
    assert eager["warmup_steps"] == [0]
    # Compiles happened in step 0 (first graphs), and in step 6 (the batch of 4); nothing after
    assert compiled["warmup_steps"][0] == 0 and 6 in compiled["warmup_steps"]
    assert figures["compile_time"]["steps"] == compiled["warmup_steps"]
    assert figures["compile_time"]["total_s"] > 0
    steady = compiled["steady"]["wall_s"]
    assert steady["n"] == 24 - len(compiled["warmup_steps"])
    assert steady["q1"] <= steady["median"] <= steady["q3"]
    wall = figures["speedup"]["wall"]
    assert wall["verdict"] in ("faster", "slower", "inconclusive")
    assert wall["ratio"] == pytest.approx(wall["eager_median_s"] / wall["compiled_median_s"])
    assert figures["payback"]["text"]


@pytest.mark.slow
def test_the_real_run_break_and_recompile_are_found(trained):
    _, figures = trained
    (brk,) = figures["graph_breaks"]
    assert brk["where"].endswith("train.py:24") and brk["gb"] == "GB0124" and ".item()" in brk["reason"]
    assert brk["step"] == 0 and brk["shapes"] == [[16, 12]]
    sizes = [r for r in figures["recompiles"] if "size mismatch" in r["reason"]]
    assert sizes and {r["step"] for r in sizes} == {6}
    assert all(r["shapes"] == [[4, 12]] and "expected 16, actual 4" in r["reason"] for r in sizes)
    assert any(r["function"] == "forward" and r["where"].endswith("train.py:18") for r in sizes)


@pytest.mark.slow
def test_the_loss_curves_match(trained):
    _, figures = trained
    loss = figures["loss"]
    assert loss["verdict"] == "match", loss["text"]
    assert len(loss["steps"]) == 24 and all(s["eager"] is not None and s["compiled"] is not None for s in loss["steps"])
    assert len({round(s["eager"], 4) for s in loss["steps"]}) > 10  # a real curve, not one value


@pytest.mark.slow
def test_the_bill_comes_from_the_measured_figures(trained):
    _, figures = trained
    bill, wall = figures["cost"], figures["speedup"]["wall"]
    if wall["verdict"] == "inconclusive":
        assert bill["money_saved_per_month"] is None and "inconclusive" in bill["lines"][0]
    else:
        assert bill["eager_hours_per_month"] == 300
        expected = (300 - 300 * wall["compiled_median_s"] / wall["eager_median_s"]) * 8
        assert bill["gpu_hours_saved_per_month"] == pytest.approx(expected)
        assert bill["money_saved_per_month"] == pytest.approx(expected * 2.5)
    assert bill["compile_cost_per_restart"] == pytest.approx(figures["compile_time"]["total_s"] / 3600 * 8 * 2.5)


@pytest.mark.slow
def test_a_compiled_run_that_fails_mid_way(tmp_path):
    done, figures = _trial(tmp_path, "train_fails.py", "--steps", "12",
                           env={"TRAIN_COMPILE_BACKEND": "aot_eager"})
    assert done.returncode == 1  # the compiled run's status: the eager run ended well
    eager, compiled = figures["eager"], figures["compiled"]
    assert eager["failure"] is None and eager["stopped_by_trial"] and len(eager["steps"]) == 12
    assert eager["steady"]["wall_s"]["n"] == 11
    failure = compiled["failure"]
    assert failure["kind"] == "exception" and failure["step"] == 5
    assert failure["message"].startswith("Unsupported") and failure["where"].endswith("train_fails.py:20")
    assert len(compiled["steps"]) == 5 and figures["speedup"] is None and figures["payback"] is None
    assert figures["loss"]["verdict"] == "match"  # the five steps it did run
    assert "COMPILED RUN FAILED at step 5" in done.stderr
    assert "activation mean" in done.stdout  # the eager run's logging step ran


def test_the_bill_by_hand():
    # 40% faster (1.0 s -> 0.6 s a step), 8 GPUs at 3.00/h, 500 runs a month of 2,000 steps,
    # one restart per run, 90 s compile, 10 engineer-days at 800.
    inputs = CostInputs(price_per_gpu_hour=3.0, gpus=8, steps_per_run=2000, runs_per_month=500,
                        restarts_per_run=1, migration_days=10, day_rate=800)
    bill = gpu_bill(inputs, eager_step_s=1.0, compiled_step_s=0.6, verdict="faster", compile_s=90)
    # eager: 2000 * 500 * 1.0 s = 1,000,000 s = 277.78 h; compiled: 166.67 h + 90 s * 2 * 500 = 25 h
    assert bill["eager_hours_per_month"] == pytest.approx(277.7778, rel=1e-6)
    assert bill["compile_hours_per_month"] == pytest.approx(25.0)
    assert bill["compiled_hours_per_month"] == pytest.approx(166.6667 + 25.0, rel=1e-6)
    assert bill["gpu_hours_saved_per_month"] == pytest.approx(86.1111 * 8, rel=1e-5)  # 688.89
    assert bill["money_saved_per_month"] == pytest.approx(2066.667, rel=1e-5)
    assert bill["compile_cost_per_restart"] == pytest.approx(90 / 3600 * 8 * 3.0)  # 0.60
    assert bill["migration_cost"] == 8000
    assert bill["payback_months"] == pytest.approx(8000 / 2066.667, rel=1e-5)  # 3.87 months


def test_no_money_without_a_price_or_from_an_inconclusive_speedup():
    unpriced = gpu_bill(CostInputs(hours_per_month=100), eager_step_s=1.0, compiled_step_s=0.5,
                        verdict="faster", compile_s=None)
    assert unpriced["gpu_hours_saved_per_month"] == pytest.approx(50)
    assert unpriced["money_saved_per_month"] is None and "set a GPU price" in unpriced["lines"][-1]
    unsure = gpu_bill(CostInputs(price_per_gpu_hour=2.0, hours_per_month=100), eager_step_s=1.0,
                      compiled_step_s=0.5, verdict="inconclusive", compile_s=10)
    assert unsure["gpu_hours_saved_per_month"] is None and unsure["money_saved_per_month"] is None
    slower = gpu_bill(CostInputs(price_per_gpu_hour=2.0, hours_per_month=100, migration_days=5, day_rate=1000),
                      eager_step_s=1.0, compiled_step_s=1.25, verdict="slower", compile_s=None)
    assert slower["money_saved_per_month"] == pytest.approx(-50) and slower["payback_months"] is None


def test_payback_measured_and_projected():
    def run(walls, compiles=()):
        steps = [{"index": i, "wall_s": w, "hook_s": w, "loss": None, "shapes": None,
                  "compiles": 1 if i in compiles else 0} for i, w in enumerate(walls)]
        return summary.run_figures({"steps": steps, "stopped_by_trial": True}, 0)

    eager = run([1.0] * 10)
    # 5 s of compiling in step 0, then half the time a step
    compiled = run([5.5] + [0.5] * 9, compiles=(0,))
    ratio = summary.speedup(eager, compiled)
    assert ratio["verdict"] == "faster" and ratio["ratio"] == pytest.approx(2.0)
    paid = summary.payback(eager, compiled, ratio)
    # cumulative: eager i+1, compiled 5.5 + 0.5 i -> equal at i = 9 (10 vs 10)
    assert paid["measured"] and paid["step"] == 9
    slow_start = run([20.5] + [0.5] * 9, compiles=(0,))
    projected = summary.payback(eager, slow_start, summary.speedup(eager, slow_start))
    # behind by 25 - 10 = 15 s after 10 steps, gaining 0.5 s a step: 30 more steps
    assert not projected["measured"] and projected["step"] == 40


@pytest.mark.slow
def test_a_cache_artifact_warms_a_fresh_process(tmp_path):
    # Inductor for real (the artifact holds its compiled code): the tiniest model, fixed shapes
    done, figures = _trial(tmp_path, "train_tiny.py", "--steps", "4", "--cold", "--cache-artifact",
                           "--gpu-price", "3", "--gpus", "4")
    assert done.returncode == 0, done.stderr[-3000:]
    artifact = figures["artifact"]
    path = tmp_path / ".compile-lens" / "compile-cache.bin"
    assert artifact["path"] == str(path) and path.stat().st_size == artifact["bytes"] > 0
    assert artifact["loaded"] and artifact["steps"] == 1 and artifact["exit_code"] == 0
    warm, cold = artifact["compile_time"]["total_s"], figures["compile_time"]["total_s"]
    assert 0 < warm and 0 < cold
    # a restart that ships the artifact compiles for `warm` seconds: that is its cost
    assert figures["cost"]["compile_cost_per_restart"] == pytest.approx(warm / 3600 * 4 * 3)
    assert "compile time warm from the cache artifact" in done.stderr
