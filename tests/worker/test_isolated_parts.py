"""Each optional part of a measurement fails on its own (worker/measure/run/isolated.py): a real failure
injected into one part at a time (tests/fixtures/isolated/faults.py: the model, its output or its
import makes that part's real torch call raise) leaves "not measurable: <why>" on that figure and
the rest of the result as the shared baseline has it: the timing, compile times and verdict, and
every other part's figure.

The in-process measurement only: the cold compile's fresh process is replaced by canned figures
(`run_child`), as in test_benchmark.py; the warm-remote children run for real against a real Redis.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import traceback
import warnings

import pytest

torch = pytest.importorskip("torch")

import paths  # noqa: E402
from compile_lens.protocol import AnalyzeJob, InputRecipe, PeakMemory, TargetResult, TargetSpec  # noqa: E402
from compile_lens.worker import jobs  # noqa: E402
from compile_lens.worker.loader import build_target, import_file  # noqa: E402
from compile_lens.worker.measure.compile.cold_job import ColdResult  # noqa: E402
from compile_lens.worker.measure.run import benchmark as bench  # noqa: E402

ROOT = str(paths.FIXTURES / "isolated")
MODEL = os.path.join(ROOT, "faults.py")
FAULT = "COMPILE_LENS_TEST_FAULT"
DEVICE = os.environ.get("COMPILE_LENS_TEST_DEVICE", "cpu")
CANNED = ColdResult(compile_s={"forward": 8.0}, import_s=1.5)
SPEC = TargetSpec("Net", "module", 44, inputs=InputRecipe("directive", "(torch.randn(8, 16),)"))

pytestmark = pytest.mark.slow  # each measurement compiles the forward once (a few seconds here)


@pytest.fixture(scope="module")
def target():
    os.environ.pop(FAULT, None)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bench, "run_child", lambda job, **kw: copy.deepcopy(CANNED))
        yield build_target(import_file(MODEL, ROOT), SPEC, MODEL)


def _measure(target, fault: str | None = None, **kw):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COMPILE_LENS_TEST_QUIET", "1")  # every round counts: the guard cost's rounds give a figure
        if fault:
            mp.setenv(FAULT, fault)
        return bench.run_benchmark(target, path=MODEL, root=ROOT, device=DEVICE, max_seconds=2, **kw)


@pytest.fixture(scope="module")
def baseline(target):
    return _measure(target)


def _standing(b, base) -> None:
    """The measurement itself stands: timing, compile times, verdict."""
    t = b.forward
    assert t.rounds >= 1 and t.eager_ms > 0 and t.compiled_ms > 0 and t.speedup > 0
    assert b.compile_s.cold == base.compile_s.cold == 8.0 and b.compile_s.warm is not None
    assert b.verdict and "not measurable" not in b.verdict and b.device == base.device


def test_the_baseline_measures_every_part(baseline):
    assert baseline.unmeasured == {}
    assert baseline.peak_memory_bytes.eager is not None and baseline.max_abs_error.output == 0.0
    if DEVICE == "cpu":  # the guard cost's rounds ran, each counted (the machine declared quiet)
        lo, hi = baseline.forward.guard_us_ci
        assert lo <= baseline.forward.guard_us_per_call <= hi and baseline.contention.declared_quiet is True


def test_guard_cost_that_needs_another_compile_is_not_measurable_alone(target, baseline):
    b = _measure(target, "guards")
    assert b.unmeasured == {"guard cost": "not measurable (this call needs another compile with guards skipped)"}, (b.unmeasured, b.notes)
    assert b.forward.guard_us_per_call is None and b.forward.guard_share is None
    _standing(b, baseline)
    assert b.peak_memory_bytes.eager is not None and b.max_abs_error.output is not None
    assert "guard cost not measurable (this call needs another compile with guards skipped)" in b.notes


@pytest.mark.skipif(DEVICE != "cpu", reason="the CPU peak comes from torch's profiler")
def test_peak_memory_that_fails_is_not_measurable_alone(target, baseline):
    b = _measure(target, "memory")
    why = b.unmeasured.pop("peak memory")
    assert why == "not measurable: RuntimeError: Net refuses to run under the profiler" and b.unmeasured == {}
    assert b.peak_memory_bytes == PeakMemory(None, None, why)
    _standing(b, baseline)
    # the same model as the baseline's: the other parts' figures are the baseline's
    assert (b.max_abs_error, b.max_rel_error) == (baseline.max_abs_error, baseline.max_rel_error)
    if DEVICE == "cpu":  # the guard cost is timed in the same rounds as the speedup: its figure and interval
        lo, hi = b.forward.guard_us_ci
        assert lo <= b.forward.guard_us_per_call <= hi, (lo, b.forward.guard_us_per_call, hi)


def test_accuracy_that_fails_is_not_measurable_alone(target, baseline):
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="Casting complex values to real")
        b = _measure(target, "accuracy")
    why = b.unmeasured.pop("accuracy")
    # the cast is Compile Lens's own call: a tool error, said as one (the report is in the log)
    assert why.startswith("not measurable: internal error in Compile Lens at compile_lens/worker/measure/accuracy/compare.py:")
    assert b.unmeasured == {} and b.max_abs_error.output is None and b.max_rel_error.output is None
    assert not any(n.startswith("accuracy:") for n in b.notes)  # not a difference found
    _standing(b, baseline)
    assert b.peak_memory_bytes.eager is not None


def test_a_difference_beyond_tolerance_is_traced_to_the_module_that_makes_it(target, baseline):
    assert baseline.accuracy_drift is None  # nothing differs: nothing searched
    b = _measure(target, "drift")
    drift = b.accuracy_drift
    assert drift is not None and drift.module == "gate" and drift.of == "output" and drift.path == MODEL
    assert drift.max_rel > 1e-3 and drift.inputs_max_abs < 1e-5
    assert any(n.startswith("accuracy drift: output first differs at `gate` (faults.py:") for n in b.notes)
    assert b.unmeasured == {}
    _standing(b, baseline)


def test_a_warm_remote_compile_that_fails_is_not_measurable_alone(target, baseline, redis_url):
    b = _measure(target, "import", remote_cache=redis_url)  # the fresh processes cannot import the model
    why = b.unmeasured.pop("warm-remote compile")
    assert why.startswith("not measurable: ") and "cannot be imported here" in why
    assert b.unmeasured == {} and b.compile_s.warm_remote is None
    _standing(b, baseline)
    assert (b.max_abs_error, b.peak_memory_bytes.method) == (baseline.max_abs_error, baseline.peak_memory_bytes.method)


# --- the deployment questions, after the benchmark --------------------------------------------

JOB = AnalyzeJob(1, MODEL, ROOT, [SPEC], device=DEVICE, max_seconds=3)


def _deploy(target, baseline, fault: str | None = None, stages: list | None = None) -> TargetResult:
    result = TargetResult("Net", "module", SPEC.line, benchmark=baseline)
    with pytest.MonkeyPatch.context() as mp:
        if fault:
            mp.setenv(FAULT, fault)
        jobs.deployment_parts(result, target, JOB, lambda text, **kw: (stages if stages is not None else []).append((text, kw)))
    return result


STAGES: list = []


@pytest.fixture(scope="module")
def deployed(target, baseline):
    return _deploy(target, baseline, stages=STAGES)


def test_every_stage_of_a_deployment_question_may_take_as_long_as_the_question(deployed):
    # a stage reported without a limit falls back to the worker's default (60 s) and a slow
    # batch-size compile on a busy machine was killed mid-sweep, the whole measurement with it
    assert {text.partition(":")[0] for text, _ in STAGES} >= {"checking torch.export…", "batch sweep"}
    assert all(kw.get("limit_s") == max(JOB.max_seconds, 2 * CANNED.compile_s["forward"]) for _, kw in STAGES), STAGES


PARTS = {"build:1": "torch.export", "build:2": "fallback ops", "build:3": "batch sweep"}


@pytest.mark.parametrize("fault", list(PARTS))
def test_each_deployment_question_fails_alone(target, baseline, deployed, fault):
    assert deployed.unmeasured == {} and deployed.export.ok and deployed.report.batch_sweep
    result = _deploy(target, baseline, fault)
    part = PARTS[fault]
    assert result.unmeasured == {part: f"not measurable: RuntimeError: Net cannot be built a {fault[-1]}th time here"}
    assert result.benchmark is baseline  # the benchmark is never touched
    if part != "torch.export":
        assert result.export == deployed.export
    if part != "fallback ops":
        assert result.fallback_ops == deployed.fallback_ops
    if part != "batch sweep":
        assert result.report.batch_sweep.sizes == deployed.report.batch_sweep.sizes
    else:
        assert result.report.batch_sweep is None
        assert result.report.kernels == deployed.report.kernels


def test_the_renderers_say_not_measurable_on_that_figure(baseline):
    from compile_lens.render.cards import detail_lines
    from compile_lens.render.cli_output import render_json
    from compile_lens.render.report_html import export_cell, fallback_cell

    result = TargetResult("Net", "module", SPEC.line, benchmark=dataclasses.replace(
        baseline, unmeasured={"peak memory": "not measurable: RuntimeError: x"},
        notes=[*baseline.notes, "peak memory not measurable: RuntimeError: x"]),
        unmeasured={"torch.export": "not measurable: RuntimeError: y", "batch sweep": "not measurable: z"})
    card = "\n".join(detail_lines(result, result.benchmark, guessed_inputs=False))  # the card's Details
    assert "- torch.export: not measurable: RuntimeError: y" in card and "- batch sweep: not measurable: z" in card
    assert "⚠ peak memory not measurable: RuntimeError: x" in card
    assert export_cell(None, result.unmeasured)[0] == "not measurable"
    assert fallback_cell([], None, {"fallback ops": "not measurable: q"}) == ("not measurable", "warn", "not measurable: q")
    # a part the budget left out is named as not run, not as failed
    assert export_cell(None, {"torch.export": "not run: 10 s budget"}) == ("not run", "muted", "not run: 10 s budget")
    from compile_lens.protocol import FileReport

    doc = render_json([FileReport(MODEL, [result])], torch_version="2.13", device="cpu")
    shown = doc["files"][0]["targets"][0]
    assert shown["unmeasured"]["torch.export"] == "not measurable: RuntimeError: y"
    assert shown["benchmark"]["unmeasured"] == {"peak memory": "not measurable: RuntimeError: x"}


# --- a tool error: Compile Lens's own bug is a report in the log, not a warning on the user's line ---

def test_the_rule_for_whose_fault_an_exception_is(tmp_path):
    from compile_lens.worker import tool_errors
    from compile_lens.worker.loader import TargetError
    from compile_lens.worker.measure.timing import verdict

    def raised(fn, *args):
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001
            return exc
        raise AssertionError("no exception")

    ours = raised(verdict.inconclusive_why, 1.0, 2.0)  # a float where a dict goes: raised in our busy/rule.py
    assert tool_errors.is_tool_error(ours)
    assert tool_errors.where(tool_errors.raised_at(ours)).startswith("compile_lens/busy/rule.py:")
    user = tmp_path / "user_model.py"
    user.write_text("def forward(x):\n    return x.missing\n")
    namespace: dict = {}
    exec(compile(user.read_text(), str(user), "exec"), namespace)
    assert not tool_errors.is_tool_error(raised(namespace["forward"], 1))  # the user's line
    assert not tool_errors.is_tool_error(raised(torch.nn.functional.linear, torch.ones(2, 3), torch.ones(4, 5)))
    # torch's Python raising (its own frames) is torch's, even when our code called it
    assert not tool_errors.is_tool_error(raised(torch.testing.assert_close, torch.ones(1), torch.zeros(1)))
    # the standard library is passed over: `os.path` raising for what our code handed it is ours
    stdlib = raised(tool_errors.where, traceback.FrameSummary(None, 1, "f"))
    assert "posixpath" in traceback.extract_tb(stdlib.__traceback__)[-1].filename
    assert tool_errors.is_tool_error(stdlib)
    assert not tool_errors.is_tool_error(TargetError(jobs.Problem("call", "x")))


def test_a_measurement_that_fails_in_our_code_is_a_bug_report_not_a_warning(monkeypatch, caplog):
    from compile_lens.jobs.analysis import _log_bug_reports
    from compile_lens.protocol import from_dict
    from compile_lens.render.findings import target_findings
    from compile_lens.worker.measure.timing import verdict

    # a real bug in our code: break-even handed to a function of another shape (raises in busy/rule.py)
    monkeypatch.setattr(bench, "break_even", verdict.inconclusive_why)
    monkeypatch.setattr(bench, "run_child", lambda job, **kw: copy.deepcopy(CANNED))
    events: list[dict] = []
    job = dataclasses.replace(JOB, trace=False, recompiles=False, benchmark=True, max_seconds=1)
    jobs.run_job(dataclasses.asdict(job), events.append)
    result = from_dict(TargetResult, [e for e in events if e["event"] == "target"][-1]["result"])
    phase = result.phases[-1]
    assert (phase.name, phase.status, phase.error.kind) == ("measure", "failed", "internal")
    assert phase.error.message.startswith("internal error in Compile Lens at compile_lens/busy/rule.py:")
    assert "Traceback (most recent call last)" in phase.error.details and "raised at compile_lens/" in phase.error.details
    assert result.status == "ok"  # the target itself is fine: its trace and sweep stand
    assert [f for f in target_findings(result, MODEL) if f.code.startswith("CL")] == []  # no CL001 on the user's line
    caplog.clear()
    with caplog.at_level("ERROR", logger="compile_lens.jobs.analysis"):
        logged: set[str] = set()
        _log_bug_reports(result, MODEL, logged)
        _log_bug_reports(result, MODEL, logged)  # a result sent again is logged once
    records = [r for r in caplog.records if r.name == "compile_lens.jobs.analysis"]
    assert len(records) == 1 and "Traceback" in records[0].getMessage() and records[0].levelname == "ERROR"
