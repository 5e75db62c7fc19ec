"""The deployment questions against real torch on CPU: torch.export, Inductor's eager fallbacks, the
compile report's batch sweep and compile-time breakdown; and how the benchmark stage runs them.

The Inductor compiles (marked slow) are shared through module fixtures: one compile per model."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from paths import SERVER  # noqa: E402

try:
    import compile_lens  # noqa: F401
except ImportError:  # until the package is installed: run from the checkout
    sys.path.insert(0, str(SERVER))

import paths  # noqa: E402
from compile_lens.protocol import (  # noqa: E402
    Benchmark,
    CompileSeconds,
    Errors,
    InputRecipe,
    PeakMemory,
    TargetSpec,
    Timing,
)
from compile_lens.worker.loader import build_target, import_file  # noqa: E402
from compile_lens.worker.measure.deployment import questions as dep  # noqa: E402

FIXTURES = paths.FIXTURES / "deployment"
MODELS = str(FIXTURES / "deploy_models.py")
ROOT = str(FIXTURES)
SOURCE = Path(MODELS).read_text().splitlines()


def line_with(text: str) -> int:
    return next(i for i, row in enumerate(SOURCE, 1) if text in row)


def def_line(name: str) -> int:
    for node in ast.walk(ast.parse("\n".join(SOURCE))):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
            return node.lineno
    raise KeyError(name)


@pytest.fixture(scope="module")
def module():
    return import_file(MODELS, ROOT)


def built(module, name: str, inputs: str = "(torch.randn(8, 16),)"):
    kind = "module" if name[0].isupper() else "function"
    return build_target(module, TargetSpec(name, kind, def_line(name), inputs=InputRecipe("directive", inputs)), MODELS)


# --- torch.export ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def exports(module):
    names = ("Plain", "ItemBranch", "TensorBranch", "scale")
    return {name: dep.check_export(built(module, name), root=ROOT) for name in names}


def test_a_plain_model_exports_strict_and_non_strict(exports):
    assert exports["Plain"] == {"ok": True, "strict": True, "line": None, "path": None, "message": None}
    assert exports["scale"]["ok"] and exports["scale"]["strict"]  # a plain function, wrapped in a module


def test_data_dependent_control_flow_does_not_export_and_says_where(exports):
    item = exports["ItemBranch"]
    assert (item["ok"], item["strict"]) == (False, False)
    assert (item["path"], item["line"]) == (MODELS, line_with("if total > 0:"))
    assert item["message"].startswith("GuardOnDataDependentSymNode: Could not guard on data-dependent expression")
    assert "\n" not in item["message"] and len(item["message"]) <= dep.MESSAGE_CHARS
    assert "Traceback" not in item["message"] and "File " not in item["message"]
    branch = exports["TensorBranch"]
    assert not branch["ok"] and (branch["path"], branch["line"]) == (MODELS, line_with("if x.sum() > 0:"))


def test_location_from_torch_message_text():
    """Strict export's errors name the user line only in their text (the User Stack)."""
    text = ('Data-dependent branching\n  User Stack (most recent call last):\n'
            '  File "/env/lib/python3.11/site-packages/torch/_dynamo/functional_export.py", line 232, in forward\n'
            f'  File "{MODELS}", line 46, in forward\n    if x.sum() > 0:\n')
    assert dep._location_in_text(text, ROOT, MODELS) == (MODELS, 46)
    short = "Caused by: (yment/deploy_models.py:37 in forward)"  # torch truncates the path's start
    assert dep._location_in_text(short, ROOT, MODELS) == (MODELS, 37)
    assert dep._location_in_text("no location here", ROOT, MODELS) is None


def test_short_message_is_the_first_paragraph():
    exc = RuntimeError("first line\nsecond line\n\nFor more information, run with TORCH_LOGS=dynamic")
    assert dep.short_message(exc) == "RuntimeError: first line second line"
    assert dep.short_message(ValueError("")) == "ValueError"


# --- what Inductor generated -------------------------------------------------------------------

WRAPPER = '''
from torch._inductor.select_algorithm import extern_kernels
aten = torch.ops.aten
cpp_fused_relu_0 = async_compile.cpp_pybinding(['float*'], r"""
extern "C" void kernel(float* in_out_ptr0) { }
""")

class Runner:
    def call(self, args):
        arg0_1, arg1_1 = args
        # Topologically Sorted Source Nodes: [linear], Original ATen: [aten.addmm]
        extern_kernels.addmm(arg1_1, arg0_1, arg0_1, alpha=1, beta=1, out=buf0)
        cpp_fused_relu_0(buf1)
        buf2 = torch.ops.aten.sort.stable(buf1, stable=False, dim=1, descending=False)
        assert_size_stride(buf3, (8, 16), (16, 1), 'torch.ops.aten.sort.default')
        buf4 = torch.ops.mylib.shifted_sin.default(buf1)
        buf5 = aten.nonzero.default(buf1)
        buf6 = torch.ops.inductor._alloc_from_pool(buf0, 0, torch.float32, (8,), (1,))
        buf7 = torch.ops.mkldnn._convolution_pointwise.default(buf1, arg0_1)
        extern_kernels.addmm(arg1_1, buf1, arg0_1, alpha=1, beta=1, out=buf8)
        return (buf2, buf4)
'''


def test_ops_in_code_counts_fallbacks_and_labels_library_calls():
    ops, kernels = dep.ops_in_code([WRAPPER])
    assert ops == [
        {"op": "aten.nonzero", "count": 1, "kind": "fallback"},
        {"op": "aten.sort", "count": 1, "kind": "fallback"},  # the assert's string is not a call
        {"op": "mylib.shifted_sin", "count": 1, "kind": "fallback"},
        {"op": "extern_kernels.addmm", "count": 2, "kind": "extern"},
        {"op": "mkldnn._convolution_pointwise", "count": 1, "kind": "extern"},
    ]
    assert kernels == 1  # Inductor's own helpers (_alloc_from_pool) are neither


def test_compile_breakdown_from_metrics():
    frame = SimpleNamespace(co_name="forward", entire_frame_compile_time_s=2.0, backend_compile_time_s=1.5,
                            inductor_compile_time_s=1.2, code_gen_time_s=1.0)
    resumed = SimpleNamespace(co_name="torch_dynamo_resume_in_forward_at_9", entire_frame_compile_time_s=1.0,
                              backend_compile_time_s=0.5, inductor_compile_time_s=0.4, code_gen_time_s=None)
    backward = SimpleNamespace(co_name=None, entire_frame_compile_time_s=None)
    got = dep.compile_breakdown([frame, resumed, backward])
    assert got["graphs"] == 2
    assert got["dynamo_s"] == pytest.approx(1.0) and got["aot_autograd_s"] == pytest.approx(0.4)
    assert got["inductor_s"] == pytest.approx(0.6) and got["codegen_s"] == pytest.approx(1.0)
    assert got["total_s"] == pytest.approx(3.0)
    assert dep.compile_breakdown([backward]) is None


@pytest.fixture(scope="module")
def inductor(module):
    return {name: dep.inspect_inductor(built(module, name)) for name in ("Plain", "Fallbacks")}


@pytest.mark.slow
def test_a_plain_mlp_shows_only_library_gemms(inductor):
    plain = inductor["Plain"]
    assert plain["fallback_ops"] == [{"op": "extern_kernels.addmm", "count": 2, "kind": "extern"}]
    assert plain["kernels"] >= 1 and plain["graphs"] == 1


@pytest.mark.slow
def test_a_custom_op_and_sort_fall_back(inductor):
    ops = {o["op"]: o for o in inductor["Fallbacks"]["fallback_ops"]}
    assert ops["compile_lens_test.shifted_sin"] == {"op": "compile_lens_test.shifted_sin", "count": 1, "kind": "fallback"}
    assert ops["aten.sort"]["kind"] == "fallback"
    assert ops["extern_kernels.addmm"]["kind"] == "extern"
    assert [o["kind"] for o in inductor["Fallbacks"]["fallback_ops"]][:2] == ["fallback", "fallback"]


@pytest.mark.slow
def test_the_same_compile_gives_the_breakdown(inductor):
    b = inductor["Plain"]["breakdown"]
    assert b["graphs"] == 1
    for key in ("dynamo_s", "aot_autograd_s", "inductor_s", "codegen_s"):
        assert b[key] >= 0
    assert b["total_s"] == pytest.approx(b["dynamo_s"] + b["aot_autograd_s"] + b["inductor_s"] + b["codegen_s"])
    assert b["codegen_s"] > 0  # a fresh cache: the kernel was really compiled


# --- the batch sweep -----------------------------------------------------------------------------

def test_sweep_sizes_around_the_example_batch():
    assert dep.sweep_sizes(64, 512) == [16, 32, 64, 128, 256]
    assert dep.sweep_sizes(8, 16) == [2, 4, 8, 16, 32]
    assert dep.sweep_sizes(1, 16) == [2, 4, 8, 16, 32]  # 0 and 1 are specialised by Dynamo
    assert dep.sweep_sizes(3, 16, points=4) == [3, 6, 12, 24]
    big = dep.sweep_sizes(64, dep.SWEEP_MAX_ELEMENTS // 128)  # a huge row: capped at 128
    assert big[-1] == 128 and len(big) <= 5


def test_resize_batch_keeps_other_inputs_and_integer_indices():
    x, idx, w = torch.randn(4, 3), torch.tensor([[1], [2], [3], [0]]), torch.randn(3, 3)
    rx, ridx, rw, n = dep.resize_batch((x, idx, w, 7), 4, 6)
    assert rx.shape == (6, 3) and torch.equal(rx[4], x[0])
    assert ridx.dtype == torch.int64 and ridx.flatten().tolist() == [1, 2, 3, 0, 1, 2]
    assert rw is w and n == 7


@pytest.fixture(scope="module")
def report(module, inductor):
    plain = dep.report_data(built(module, "Plain"), device="cpu", max_seconds=3, inductor=inductor["Plain"])
    flat = dep.report_data(built(module, "scale", "(torch.randn(16),)"), device="cpu", max_seconds=3,
                           inductor={"breakdown": None, "kernels": None})
    return plain, flat


@pytest.mark.slow
def test_report_sweeps_eager_and_compiled_across_batch_sizes(report):
    plain, _ = report
    sweep = plain["batch_sweep"]
    assert sweep["sizes"] == [2, 4, 8, 16] and sweep["example_batch"] == 8  # 4 sizes: a 3 s budget
    assert sweep["compiles"] == 1 and sweep["dynamic"] is True  # one dynamic-batch compile serves all
    for p in sweep["points"]:
        assert p["eager_ms"] > 0 and p["compiled_ms"] > 0
        assert p["speedup"] == pytest.approx(p["eager_ms"] / p["compiled_ms"])
    assert "compile_breakdown" not in plain and plain["kernels"] >= 1  # compile time: the cold child's frames
    assert sweep["seconds"] < 30
    assert plain["notes"] == []


@pytest.mark.slow
def test_inputs_without_a_batch_dimension_skip_the_sweep_with_a_note(report):
    _, flat = report
    assert flat["batch_sweep"] is None
    assert any(n.startswith("batch sweep: the first input has fewer than 2 dimensions") for n in flat["notes"])
    assert flat["kernels"] is None


# --- the benchmark stage ---------------------------------------------------------------------------

def _canned_benchmark(compile_s: dict) -> Benchmark:
    t = Timing(1.0, 0.5, 2.0, 0.1, 0.1)
    return Benchmark("cpu", "cpu", "default", t, None, CompileSeconds(**compile_s), 10, PeakMemory(), Errors(), Errors(), "worth it")


EMPTY_SWEEP = {"dim": 0, "example_batch": 8, "sizes": [], "points": [], "compiles": 1, "dynamic": True, "device": "cpu",
               "workload": "forward (eval, no_grad)", "seconds": 0.0}


def _run_canned(monkeypatch, max_seconds: float, compile_s: dict, opt_in: tuple = ()) -> tuple[list[dict], list]:
    """A measure job with canned benchmark figures (no compile): its events, and the output code
    the fallback ops were read from."""
    from compile_lens.worker import jobs
    from compile_lens.worker.measure.run import benchmark as bench

    def canned(*a, on_part, output_code, **k):
        b = _canned_benchmark(compile_s)
        output_code.append("def call(args):\n    buf0 = torch.ops.aten.sort.default(x)\n    cpp_fused_0(buf0)\n")
        on_part("train_step", None, "not-run", "no parameters")
        for part in ("forward", "memory", "lines"):
            on_part(part, b, "done", None)
        return b

    monkeypatch.setattr(bench, "run_benchmark", canned)
    monkeypatch.setattr(dep, "inspect_inductor", lambda *a, **k: pytest.fail("the fallback ops compiled again"))
    swept: list = []

    def fake_report(target, **k):  # a sweep of no sizes, in `batch_sweep`'s whole shape (`BatchSweep`)
        swept.append(k["inductor"])
        return {"batch_sweep": EMPTY_SWEEP, "kernels": k["inductor"]["kernels"], "notes": []}

    monkeypatch.setattr(dep, "report_data", fake_report)
    sent: list[dict] = []
    spec = TargetSpec("Plain", "module", def_line("Plain"), inputs=InputRecipe("directive", "(torch.randn(8, 16),)"))
    job = {"id": 7, "path": MODELS, "root": ROOT, "targets": [as_dict(spec)], "trace": False,
           "recompiles": False, "benchmark": True, "max_seconds": max_seconds, "opt_in": list(opt_in)}
    jobs.run_job(job, sent.append)
    return sent, swept


def test_each_part_is_its_own_event_and_a_failing_one_loses_nothing_else(monkeypatch):
    """The forward's figures first, then each part as it lands (`part` set, `parts` saying where each
    stands); the fallback ops read from the warm compile's output code; an export that raises is
    "not measurable" alone."""
    def broken_export(*a, **k):
        raise RuntimeError("export exploded")

    monkeypatch.setattr(dep, "check_export", broken_export)
    sent, swept = _run_canned(monkeypatch, 600.0, {"cold": 9.0, "warm": 1.0}, opt_in=("batch_sweep",))
    parts = [m for m in sent if m["event"] == "target" and m.get("part")]
    assert [m["part"] for m in parts] == ["forward", "memory", "lines", "export", "fallback_ops", "batch_sweep"]
    first = parts[0]["result"]
    assert first["benchmark"]["verdict"] == "worth it" and first["export"] is None
    assert first["parts"]["forward"]["status"] == "done" and first["parts"]["train_step"]["status"] == "not-run"
    assert {first["parts"][p]["status"] for p in ("memory", "lines", "export", "batch_sweep")} == {"pending"}
    last = [m for m in sent if m["event"] == "target"][-1]["result"]
    assert last["export"] is None and last["parts"]["export"]["status"] == "failed"
    assert "export exploded" in last["parts"]["export"]["why"] and "export exploded" in last["unmeasured"]["torch.export"]
    assert last["fallback_ops"] == [{"op": "aten.sort", "count": 1, "kind": "fallback"}]
    assert last["parts"]["fallback_ops"]["status"] == "done" and swept == [{"kernels": 1}]
    assert last["report"]["batch_sweep"] == EMPTY_SWEEP and last["parts"]["batch_sweep"]["status"] == "done"
    assert set(last["parts_s"]) == {"export", "fallback_ops", "batch_sweep"}
    assert sent[-1]["event"] == "done"


def test_parts_that_would_not_fit_the_budget_are_named_not_run(monkeypatch):
    """A 12 s budget (its bound 12 × 1.1 + 5 s, less the seconds kept to finish: 14.7 s), an 8 s warm
    and a 12 s cold compile: no room for strict export (two traces); non-strict export (about a warm
    compile) and the fallback ops (free: read from the output code) still run. The batch sweep (a
    compile of its own and its timing) runs only when asked for."""
    exported: list[bool] = []
    non_strict = {"ok": True, "strict": None, "line": None, "path": None, "message": None}  # strict not checked
    monkeypatch.setattr(dep, "check_export", lambda *a, strict, **k: exported.append(strict) or non_strict)
    sent, swept = _run_canned(monkeypatch, 12.0, {"cold": 12.0, "warm": 8.0, "cold_forward": 12.0, "warm_forward": 8.0})
    last = [m for m in sent if m["event"] == "target"][-1]["result"]
    from compile_lens.worker import jobs

    assert last["parts"]["batch_sweep"] == {"status": "not-run", "why": jobs.NOT_ASKED, "seconds": None}
    assert last["unmeasured"]["batch sweep"] == f"not run: {jobs.NOT_ASKED}" and swept == []
    assert exported == [False] and last["parts"]["export"]["status"] == "done"
    assert last["parts"]["fallback_ops"]["status"] == "done" and last["fallback_ops"]
    assert dep.estimate_s("batch_sweep", {"cold_forward": 12.0}, 15.0) == 12.0 + dep.report_budget(15.0)


def as_dict(spec: TargetSpec) -> dict:
    import dataclasses

    return dataclasses.asdict(spec)
