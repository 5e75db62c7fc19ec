"""`compile-lens trial`: the user's training script, eager and compiled, and the GPU bill.

The 24-step trial's saved figures (.compile-lens/trial.json) also feed the report's trial section
(`compile-lens report`, real subprocess) and the hover card (a real server over stdio).

Two real trials of small training scripts (tests/fixtures/trial/): one that trains for 24 steps
through a graph break and a smaller last batch, one whose compiled run fails at step 5. They
compile with the `aot_eager` backend (real Dynamo and AOTAutograd, so breaks, recompiles and
compile-time figures are real; Inductor's code generation takes minutes on these CPUs). The bill
is checked against a hand computation.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types as lsp

import paths
from compile_lens.cost import CostInputs, gpu_bill
from compile_lens.render import report_trial
from compile_lens.render.cards import money
from compile_lens.render.cards import trial_line as view_trial_line
from compile_lens.render.html_parts import _Page
from compile_lens.render.units import STEP, duration
from compile_lens.trial import store, summary
from compile_lens.trial.figures import (
    Quartiles,
    RunFigures,
    Steady,
    Step,
    TrialFigures,
    TrialRecord,
)
from lsp_support import locate, open_file, start_server, stop_server

FIXTURES = paths.FIXTURES / "trial"
SERVER = str(paths.SERVER)


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
        # step 12 (the middle one) was profiled: its allocations include every parameter's gradient
        # (zero_grad() before the step frees them), 2,788 float32 values, plus activations
        assert [s["index"] for s in r["steps"] if s["profiled"]] == [12]
        assert r["peak_memory_bytes"] >= 2788 * 4 and "step 12" in r["memory_method"], r["memory_method"]
        assert r["memory_note"] is None
    # The smaller last batch of each epoch is what the model saw at steps 6, 13, 20
    shapes = [s["shapes"] for s in figures["compiled"]["steps"]]
    assert [i for i, s in enumerate(shapes) if s == [[4, 12]]] == [6, 13, 20]
    assert "compile-lens trial: " in done.stderr and "speedup at steady state" in done.stderr
    # the profiled step adds nothing to the program's output (kineto's "profiler_start" lines)
    assert "profiler_st" not in done.stderr and "USDT:" not in done.stderr, done.stderr[-2000:]
    assert figures["machine"]["cpus"] == os.cpu_count() and figures["cold"] is False
    for run in ("eager", "compiled"):  # what other processes took while it ran, in % of one CPU
        assert 0 <= figures[run]["other_cpu_percent"] <= 100 * os.cpu_count()


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
    assert steady["n"] == 24 - len(compiled["warmup_steps"]) - 1  # and the step profiled for memory
    assert steady["q1"] <= steady["median"] <= steady["q3"]
    wall = figures["speedup"]["wall"]
    assert wall["verdict"] in ("faster", "slower", "inconclusive")
    assert wall["ratio"] == pytest.approx(wall["eager_median_s"] / wall["compiled_median_s"])
    assert figures["payback"]["text"]


@pytest.mark.slow
def test_the_real_run_break_and_recompile_are_found(trained):
    _, figures = trained
    # `.item()` in clip_scale, called inside Net.forward's loop over its blocks: torch skips the whole
    # forward (GB7000, the loop beside the break), then compiles clip_scale as a frame of its own and
    # breaks in it again: one break, at the line torch names
    [brk] = figures["graph_breaks"]
    assert brk["where"].endswith("train.py:24") and brk["gb"] == "GB0124" and ".item()" in brk["reason"]
    assert brk["loop"]["where"].endswith("train.py:37") and brk["loop"]["gb"] == "GB7000"
    assert brk["loop"]["skipped"] == "forward"
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
    assert eager["steady"]["wall_s"]["n"] == 10  # not step 0, nor step 6 (profiled for memory)
    failure = compiled["failure"]
    assert failure["kind"] == "exception" and failure["step"] == 5
    assert failure["message"].startswith("Unsupported") and failure["where"].endswith("train_fails.py:20")
    assert len(compiled["steps"]) == 5 and figures["speedup"] is None and figures["payback"] is None
    assert figures["loss"]["verdict"] == "match"  # the five steps it did run
    assert "COMPILED RUN FAILED at step 5" in done.stderr
    assert "activation mean" in done.stdout  # the eager run's logging step ran


@pytest.mark.slow
def test_a_library_model_is_found_at_the_end_of_step_0_and_compiled_from_step_1(tmp_path):
    done, figures = _trial(tmp_path, "train_library.py", "--steps", "10", "--backend", "aot_eager")
    assert done.returncode == 0, done.stderr[-3000:]
    for run in ("eager", "compiled"):
        r = figures[run]
        assert r["outermost_modules"] == ["Sequential"] and r["outermost_found_late"]
        assert r["outermost_targets"] == []  # not a workspace class: no hover card to feed
        assert r["dropout_in"] == ["Sequential"]
        assert r["untimed_steps"] == [0] and r["steps"][0]["hook_s"] == 0
        assert all(s["hook_s"] > 0 for s in r["steps"][1:])  # timed through the model's calls from step 1
        assert r["peak_memory_bytes"] and "step 5" in r["memory_method"]
    # compiled from step 1 (step 0 ran before the model was known), again for the batch of 12 (step 3)
    assert figures["compiled"]["warmup_steps"][:2] == [0, 1] and figures["compile_time"]["steps"][0] == 1
    [recompile] = figures["recompiles"]
    assert recompile["step"] == 3 and recompile["shapes"] == [[12, 12]] and "expected 16, actual 12" in recompile["reason"]
    # named as the model, not as the wrapper frame torch.compile(model) adds (torch/_dynamo/external_utils.py)
    assert recompile["function"] == "Sequential (its compiled call)" and recompile["where"] is None
    # eager: step 0 is its only warm-up step, so no time is given; compiled: steps 1 and 3 have theirs
    assert "warm-up steps [0] not timed (the model was found at the end of step 0)" in done.stderr
    assert re.search(r"warm-up steps \[0, 1, 3\] took [0-9.]+ m?s \(step 0 not timed: the model was found at its end\)",
                     done.stderr), done.stderr[-2000:]
    assert "the model (Sequential) is a library's" in done.stderr and "nothing was compiled" not in done.stderr
    assert "Warning" not in done.stderr, done.stderr[-2000:]  # finding the model prints nothing
    assert figures["loss"]["verdict"] != "diverge", figures["loss"]["text"]


@pytest.mark.slow
def test_a_library_model_the_program_compiles_itself_keeps_its_own_compile(tmp_path):
    """The program compiles the model itself with recompile_limit=1: its call, the setting, the limit hit explained."""
    done, figures = _trial(tmp_path, "train_library.py", "--steps", "8",
                           env={"TRAIN_COMPILE_BACKEND": "aot_eager", "TRAIN_RECOMPILE_LIMIT": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    compiled = figures["compiled"]
    # named as the model, not as torch's OptimizedModule; compiled once, by the program, in step 0
    assert compiled["outermost_modules"] == ["Sequential"] and compiled["dropout_in"] == ["Sequential"]
    assert compiled["compiled_by_program"] and not figures["eager"]["compiled_by_program"]
    # the batch of 12 (step 3) is refused by the limit of 1: one frame compile, the refusal in step 3
    assert figures["compile_time"]["steps"] == [0, 3] and figures["compile_time"]["compiles"] == 1
    assert "timed from step 1, compiled by the program's own torch.compile" in done.stderr
    settings, hover = figures["compile_settings"], view_trial_line(TrialRecord(figures=TrialFigures.from_dict(figures)))
    call = "torch.compile(backend='aot_eager') at train_library.py:" + str(next(n for n, text in enumerate(
        (FIXTURES / "train_library.py").read_text().splitlines(), 1) if "model = torch.compile(" in text))
    assert settings["calls"] == [{"what": "torch.compile", "where": call.split(" at ")[1], "backend": "aot_eager"}]
    assert settings["settings"] == [{"compile_ids": ["0/0", "0/1"], "values": {"torch._dynamo.config.recompile_limit": "1"}}]
    [limit] = settings["explains"]
    assert limit.startswith("the recompile limit was hit (compile 0/1 in step 3)") and "recompile_limit = 1" in limit
    assert f"compiled by {call}" in done.stderr and f"`{call}`" in hover  # the CLI, and the hover card's line
    assert "settings off torch's defaults: `dynamo.recompile_limit = 1`" in hover and "recompile limit was hit" in hover


def test_losses_that_differ_with_dropout_are_not_called_a_divergence():
    def run(losses, dropout):
        return RunFigures(ran=True, steps=[Step(index=i, loss=v) for i, v in enumerate(losses)], dropout_in=dropout)

    eager = run([2.0, 1.5, 1.2, 1.0], [])
    drifted = [2.0, 1.5, 1.25, 1.1]
    plain = summary.losses(eager, run(drifted, []), rtol=1e-3, atol=1e-5)
    assert plain.verdict == "diverge" and plain.first_divergent_step == 2
    assert "losses diverge from step 2" in plain.text and "dropout" in plain.text
    random = summary.losses(eager, run(drifted, ["GPT2LMHeadModel"]), rtol=1e-3, atol=1e-5)
    assert random.verdict == "random" and random.first_divergent_step == 2
    assert "GPT2LMHeadModel has dropout" in random.text
    same = summary.losses(eager, run([2.0, 1.5, 1.2, 1.0], ["GPT2LMHeadModel"]), rtol=1e-3, atol=1e-5)
    assert same.verdict == "match"  # dropout alone changes nothing when the losses agree


def test_a_run_that_others_took_cpu_from_gives_no_verdict():
    def run(median, others):
        q = Quartiles(median=median, q1=median * 0.95, q3=median * 1.05, min=median * 0.9, max=median * 1.1, n=10)
        return RunFigures(ran=True, steady=Steady(wall_s=q, hook_s=q), other_cpu_percent=others)

    quiet = summary.speedup(run(0.02, 3.0), run(0.01, 12.0))
    assert quiet.verdict == "faster" and quiet.why is None and quiet.ratio == pytest.approx(2.0)
    busy = summary.speedup(run(0.02, 180.0), run(0.01, 12.0))
    assert busy.verdict == "inconclusive"
    assert busy.why == "machine busy: other processes used 180% CPU during the eager run"
    unknown = summary.speedup(run(0.02, None), run(0.01, None))  # not measured: the quartiles decide
    assert unknown.verdict == "faster"


def test_the_busy_run_names_who_ours_told_apart():
    """The runner's reading (`busy.cpu.OthersCPU`, real): a process this one started burning a core is
    ours, and the trial's words name it as ours."""
    import subprocess
    import sys
    import time

    from compile_lens.busy.cpu import OthersCPU

    burner = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 5\nwhile time.time() < end: pass"])
    try:
        watch = OthersCPU()
        time.sleep(0.6)
        use = watch.use(top_n=50)
    finally:
        burner.kill()
        burner.wait()
    assert any(t.pid == burner.pid and t.ours for t in use.top), use.top
    q = Quartiles(median=0.02, q1=0.019, q3=0.021, min=0.018, max=0.022, n=10)
    eager = RunFigures(ran=True, steady=Steady(wall_s=q, hook_s=q), other_cpu_percent=180.0,
                       busy_top=[t for t in use.top if t.pid == burner.pid])
    busy = summary.speedup(eager, RunFigures(ran=True, steady=Steady(wall_s=q, hook_s=q), other_cpu_percent=3.0))
    assert busy.why.startswith("machine busy: other processes used 180% CPU during the eager run (ours: python -c ")


def test_the_bill_by_hand():
    # 40% faster (1.0 s -> 0.6 s a step), 8 GPUs at 3.00/h, 500 runs a month of 2,000 steps,
    # one restart per run, 90 s compile, 10 engineer-days at 800.
    inputs = CostInputs(price_per_gpu_hour=3.0, gpus=8, steps_per_run=2000, runs_per_month=500,
                        restarts_per_run=1, migration_days=10, day_rate=800)
    bill = gpu_bill(inputs, eager_step_s=1.0, compiled_step_s=0.6, verdict="faster", compile_s=90)
    # eager: 2000 * 500 * 1.0 s = 1,000,000 s = 277.78 h; compiled: 166.67 h + 90 s * 2 * 500 = 25 h
    assert bill.eager_hours_per_month == pytest.approx(277.7778, rel=1e-6)
    assert bill.compile_hours_per_month == pytest.approx(25.0)
    assert bill.compiled_hours_per_month == pytest.approx(166.6667 + 25.0, rel=1e-6)
    assert bill.gpu_hours_saved_per_month == pytest.approx(86.1111 * 8, rel=1e-5)  # 688.89
    assert bill.money_saved_per_month == pytest.approx(2066.667, rel=1e-5)
    assert bill.compile_cost_per_restart == pytest.approx(90 / 3600 * 8 * 3.0)  # 0.60
    assert bill.migration_cost == 8000
    assert bill.payback_months == pytest.approx(8000 / 2066.667, rel=1e-5)  # 3.87 months


def test_no_money_without_a_price_or_from_an_inconclusive_speedup():
    unpriced = gpu_bill(CostInputs(hours_per_month=100), eager_step_s=1.0, compiled_step_s=0.5,
                        verdict="faster", compile_s=None)
    assert unpriced.gpu_hours_saved_per_month == pytest.approx(50)
    assert unpriced.money_saved_per_month is None and "set a GPU price" in unpriced.lines[-1]
    unsure = gpu_bill(CostInputs(price_per_gpu_hour=2.0, hours_per_month=100), eager_step_s=1.0,
                      compiled_step_s=0.5, verdict="inconclusive", compile_s=10)
    assert unsure.gpu_hours_saved_per_month is None and unsure.money_saved_per_month is None
    slower = gpu_bill(CostInputs(price_per_gpu_hour=2.0, hours_per_month=100, migration_days=5, day_rate=1000),
                      eager_step_s=1.0, compiled_step_s=1.25, verdict="slower", compile_s=None)
    assert slower.money_saved_per_month == pytest.approx(-50) and slower.payback_months is None


def test_payback_measured_and_projected():
    def run(walls, compiles=()):
        steps = [{"index": i, "wall_s": w, "hook_s": w, "loss": None, "shapes": None,
                  "compiles": 1 if i in compiles else 0} for i, w in enumerate(walls)]
        return summary.run_figures({"steps": steps, "stopped_by_trial": True}, 0)

    eager = run([1.0] * 10)
    # 5 s of compiling in step 0, then half the time a step
    compiled = run([5.5] + [0.5] * 9, compiles=(0,))
    ratio = summary.speedup(eager, compiled)
    assert ratio.verdict == "faster" and ratio.ratio == pytest.approx(2.0)
    paid = summary.payback(eager, compiled, ratio)
    # cumulative: eager i+1, compiled 5.5 + 0.5 i -> equal at i = 9 (10 vs 10)
    assert paid.measured and paid.step == 9
    slow_start = run([20.5] + [0.5] * 9, compiles=(0,))
    projected = summary.payback(eager, slow_start, summary.speedup(eager, slow_start))
    # behind by 25 - 10 = 15 s after 10 steps, gaining 0.5 s a step: 30 more steps
    assert not projected.measured and projected.step == 40


@pytest.mark.slow
def test_a_cache_artifact_warms_a_fresh_process(tmp_path):
    # Inductor for real (the artifact holds its compiled code): the cheapest model, fixed shapes, no
    # C++ kernel to build (train_linear.py)
    done, figures = _trial(tmp_path, "train_linear.py", "--steps", "4", "--cold", "--cache-artifact",
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
    assert artifact["miss_reasons"] == [] and "compiled again" not in done.stderr  # served: nothing differed


@pytest.mark.slow
def test_a_cache_artifact_run_that_missed_says_what_differed(tmp_path):
    # the artifact run sets TORCHINDUCTOR_SIZE_ASSERTS=0 (the compiled run has torch's default, on)
    done, figures = _trial(tmp_path, "train_linear_elsewhere.py", "--steps", "2", "--cold", "--cache-artifact")
    assert done.returncode == 0, done.stderr[-3000:]
    artifact = figures["artifact"]
    assert artifact["loaded"] and artifact["exit_code"] == 0
    assert artifact["miss_reasons"] == ["Inductor config option `size_asserts` (True → False)"]
    assert ("the cache artifact run compiled again the FX graphs the compiled run wrote; its cache key differed in "
            "Inductor config option `size_asserts` (True → False) (compiled run → this run)") in done.stderr
    page = report_trial.trial_section(_Page("/w", False), TrialRecord.from_dict({"figures": figures}), None)
    assert ('<li class="warn">the cache artifact run compiled again the FX graphs the compiled run wrote; its cache '
            "key differed in Inductor config option `size_asserts` (True → False)") in page


def _root(done: subprocess.CompletedProcess) -> Path:
    return Path(done.args[done.args.index("--json") + 1]).parent


@pytest.mark.slow
def test_the_trial_is_saved_in_the_workspace_store(trained):
    done, figures = trained
    saved = store.read(str(_root(done)))
    assert saved is not None and saved.targets == ["train.py:Net"]  # as recorded.json names it; not Block
    assert saved.command.endswith("train.py") and re.match(r"\d{4}-\d\d-\d\dT", saved.at)
    assert saved.figures.to_dict() == figures  # what --json got
    assert "figures saved in .compile-lens/trial.json" in done.stderr


def _report(root: Path, *flags: str) -> str:
    (root / "data_utils.py").write_text("def batches(n):\n    return list(range(n))\n")
    done = subprocess.run([sys.executable, "-m", "compile_lens.cli", "report", "data_utils.py", "-o", "report.html",
                           *flags], cwd=root, env={**os.environ, "PYTHONPATH": SERVER}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    page = (root / "report.html").read_text()
    start = page.index("<section><h2>Your training run")
    return page[start:page.index("</section>", start)]


@pytest.mark.slow
def test_the_report_has_the_trial_section(trained):
    done, figures = trained
    root = _root(done)
    bare = _report(root)
    assert "no price set" in bare and "per month" not in bare  # no money until a price is set
    section = _report(root, "--gpu-price", "2.5", "--gpus", "8", "--hours-per-month", "300",
                      "--migration-days", "10", "--day-rate", "1000")
    # the real run's break and recompile, with their steps and inputs
    assert "train.py:24" in section and "GB0124" in section and ".item()" in section
    assert "inside the loop at train.py:37: torch skips the whole `forward`, which runs eagerly" in section
    assert "expected 16, actual 4" in section and "(step 6, inputs [[4, 12]])" in section
    assert "losses match" in section and "compile time in the run" in section
    steady = figures["compiled"]["steady"]["wall_s"]
    assert f"IQR {duration(steady['q1'], STEP)}–{duration(steady['q3'], STEP)}, n={steady['n']}" in section
    assert section.count("<svg") == 1 and "http" not in section  # inline chart, nothing fetched
    wall = figures["speedup"]["wall"]
    bill = summary.bill(TrialFigures.from_dict(figures), CostInputs(price_per_gpu_hour=2.5, gpus=8, hours_per_month=300, migration_days=10,
                                            day_rate=1000))
    if wall["verdict"] == "inconclusive":
        assert "Speedup per step: inconclusive" in section and "no money figure" in section
        assert "Cumulative wall time over the run" in section and "per month" not in section
    else:
        assert f"{wall['ratio']:.2f}× per step" in section and "Cumulative GPU cost over a month" in section
        assert f"{abs(bill.money_saved_per_month):,.2f}" in section


@pytest.mark.slow
async def test_the_hover_card_of_the_trained_model_shows_the_run(trained):
    done, figures = trained
    root = _root(done)
    pyproject = root / "pyproject.toml"  # the bill's figures from the project
    pyproject.write_text("[tool.compile-lens.bill]\ngpuPricePerHour = 2.5\ngpus = 8\ntrainingHoursPerMonth = 300\n")
    client = await start_server(root, trusted=False)  # the card is answered from files: no user code runs
    cards = {}
    try:
        path = root / "train.py"
        uri = open_file(client, path)
        for name in ("Net", "Block"):
            line, col = locate(path, f"class {name}")
            for _ in range(50):
                hover = await client.text_document_hover_async(lsp.HoverParams(
                    lsp.TextDocumentIdentifier(uri), lsp.Position(line, col + len("class ") + 1)))
                if hover is not None:
                    cards[name] = hover.contents.value
                    break
                await asyncio.sleep(0.2)
        # the editor's report page has the trial's section too, priced by the same settings
        page = (await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
            command="compileLens.reportHtml", arguments=[uri])))["html"]
    finally:
        await stop_server(client)
        pyproject.unlink()
    assert "Your training run: eager vs compiled" in page and "train.py:Net" in page
    assert "GB0124" in page and "expected 16, actual 4" in page and "no price set" not in page
    assert "measured in your run" not in cards["Block"]  # the trial compiled Net, not its blocks
    line = next(ln for ln in cards["Net"].splitlines() if ln.startswith("- measured in your run"))
    wall, paid = figures["speedup"]["wall"], figures["payback"]
    bill = summary.bill(TrialFigures.from_dict(figures), CostInputs(price_per_gpu_hour=2.5, gpus=8, hours_per_month=300))
    if wall["verdict"] == "inconclusive":
        assert "per step inconclusive over 24 steps" in line and "no money figure" in line and "per month" not in line
    else:
        assert f"**{wall['ratio']:.2f}×** per step" in line
        assert (f"pays back after {paid['step']:,} steps" if paid["step"] is not None else "does not pay back") in line
        assert f"; {money(abs(bill.money_saved_per_month))} " in line and "per month" in line
    assert "losses match" in line


def _points(svg: str) -> list[list[tuple[float, float]]]:
    return [[tuple(map(float, p.split(","))) for p in m.split()] for m in re.findall(r'<polyline [^>]*points="([^"]+)"', svg)]


def test_the_month_chart_of_the_issues_example():
    # "a 40% faster run on a 100k/month GPU budget saves 40k/month; two engineer-weeks of migration
    # pay back within the month": 5,000 h x 8 GPUs x 2.50 = 100,000; 10 days x 1,000 = 10,000
    inputs = CostInputs(price_per_gpu_hour=2.5, gpus=8, hours_per_month=5000, migration_days=10, day_rate=1000)
    bill = gpu_bill(inputs, eager_step_s=1.0, compiled_step_s=0.6, verdict="faster", compile_s=None)
    assert bill.money_saved_per_month == pytest.approx(40000) and bill.payback_months == pytest.approx(0.25)
    svg = report_trial.money_chart(bill)
    assert "pays back: day 8" in svg and "100,000" in svg  # 0.25 months = day 7.5; the 100k axis tick
    (e0, e1), (c0, c1) = _points(svg)
    zero, full = e0[1], e1[1]  # y of 0 and of 100,000

    def share(y: float) -> float:
        return (zero - y) / (zero - full)

    assert share(c0[1]) == pytest.approx(0.10, abs=1e-3)  # the migration on day 0
    assert share(c1[1]) == pytest.approx(0.70, abs=1e-3)  # + 60,000 of GPU time
    assert e0[0] == c0[0] and e1[0] == c1[0]  # both over the same 30 days
    unsure = gpu_bill(inputs, eager_step_s=1.0, compiled_step_s=0.6, verdict="inconclusive", compile_s=None)
    assert report_trial.money_chart(unsure) is None  # no money chart from an inconclusive speedup


def test_a_conclusive_trial_in_the_hover_line_and_the_report_section():
    # step times as the hook records them: 5 s of compiling in step 0, then half eager's time
    def run(walls):
        return {"steps": [{"index": i, "wall_s": w, "hook_s": w, "loss": 1.0 / (i + 1), "shapes": [[8, 4]],
                           "compiles": 1 if (i == 0 and w > 1) else 0} for i, w in enumerate(walls)],
                "stopped_by_trial": True}

    figures = summary.summarize(run([1.0] * 10), 0, run([5.5] + [0.5] * 9), 0, rtol=1e-3, atol=1e-5,
                                command="python train.py")
    trial = TrialRecord(command="python train.py", at="2026-01-01T00:00:00Z", targets=["train.py:Net"], figures=figures)
    priced = summary.bill(figures, CostInputs(price_per_gpu_hour=2.0, hours_per_month=100))
    # 100 h eager -> 50 h compiled = 50 GPU-hours x 2.00 = 100 saved a month
    assert priced.money_saved_per_month == pytest.approx(100)
    line = view_trial_line(trial, priced)
    assert "**2.00×** per step, pays back after 9 steps; losses match; 100 saved per month" in line
    unpriced = view_trial_line(trial, summary.bill(figures, CostInputs()))
    assert "per month" not in unpriced and "pays back after 9 steps" in unpriced
    page = report_trial.trial_section(_Page("/w", False), trial, priced)
    assert "Cumulative GPU cost over a month" in page and "2.00× per step" in page and "no price set" not in page
    assert "50.0 GPU-hours saved per month" in page
    bare = report_trial.trial_section(_Page("/w", False), trial, summary.bill(figures, CostInputs()))
    assert "Cumulative wall time over the run" in bare and "ahead from step 9" in bare and "no price set" in bare
