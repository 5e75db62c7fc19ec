"""The benchmark job against real torch and Inductor, on CPU here (set COMPILE_LENS_TEST_DEVICE=cuda
on a GPU machine: scripts/gpu-check does).

One full measurement of a tiny model is shared by the tests of its figures (module fixture). The
other models run only the in-process part: `run_child` (the fresh processes for cold/warm compile
and memory) is replaced by canned figures, which keeps each to a warm in-process compile.
"""

from __future__ import annotations

import ast
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

try:
    import compile_lens  # noqa: F401
except ImportError:  # until the package is installed: run from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from compile_lens.protocol import Benchmark, InputRecipe, TargetSpec, Timing, from_dict  # noqa: E402
from compile_lens.worker import benchmark as bench  # noqa: E402
from compile_lens.worker.loader import TargetError, build_target, import_file  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "bench"
MODELS = str(FIXTURES / "bench_models.py")
ROOT = str(FIXTURES)
DEVICE = os.environ.get("COMPILE_LENS_TEST_DEVICE", "cpu")
TINY_INPUTS = "(torch.randn(256, 32),)"


def line_of(name: str) -> int:
    for node in ast.walk(ast.parse(Path(MODELS).read_text())):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
            return node.lineno
    raise KeyError(name)


def spec(name: str, inputs: str) -> TargetSpec:
    kind = "module" if name[0].isupper() else "function"
    return TargetSpec(name, kind, line_of(name), inputs=InputRecipe("directive", inputs))


@pytest.fixture(scope="module")
def module():
    return import_file(MODELS, ROOT)


def built(module, name: str, inputs: str = "(torch.randn(8, 32),)"):
    return build_target(module, spec(name, inputs), MODELS)


@pytest.fixture(scope="module")
def measured(module):
    """One full benchmark of Tiny: two fresh processes and the in-process timings."""
    stages: list[str] = []
    started = time.perf_counter()
    result = bench.run_benchmark(built(module, "Tiny", TINY_INPUTS), path=MODELS, root=ROOT,
                                 device=DEVICE, max_seconds=20, progress=stages.append)
    return result, stages, time.perf_counter() - started


CANNED = {"compile_s": {"train": 9.0, "forward": 8.0},
          "memory": {"eager": 4096, "compiled": 4096, "method": "canned"}, "notes": []}


@pytest.fixture
def no_children(monkeypatch):
    """Skip the fresh processes: canned compile times and memory, the rest measured for real."""
    jobs: list[dict] = []

    def fake(job, *, cache_dir, timeout):
        jobs.append(job)
        return json.loads(json.dumps(CANNED))

    monkeypatch.setattr(bench, "run_child", fake)
    return jobs


def quick(module, name: str, inputs: str = "(torch.randn(8, 32),)", device: str = DEVICE) -> Benchmark:
    return bench.run_benchmark(built(module, name, inputs), path=MODELS, root=ROOT, device=device,
                               max_seconds=1)


# --- the full measurement ------------------------------------------------------------------

@pytest.mark.slow
def test_timings_are_plausible(measured):
    b, _, _ = measured
    for t in (b.forward, b.train_step):
        assert isinstance(t, Timing)
        assert t.eager_ms > 0 and t.compiled_ms > 0
        assert t.speedup == pytest.approx(t.eager_ms / t.compiled_ms)
        assert t.eager_iqr_ms >= 0 and t.compiled_iqr_ms >= 0
        assert t.eager_ms < 1000 and t.compiled_ms < 1000  # a tiny model: well under a second


@pytest.mark.slow
def test_cold_compile_is_slower_than_warm(measured):
    b, _, _ = measured
    cold, warm = b.compile_s["cold"], b.compile_s["warm"]
    assert cold is not None and warm is not None
    assert cold > warm > 0
    assert set(b.compile_s) == {"cold", "warm"}


@pytest.mark.slow
def test_break_even_follows_the_formula(measured):
    b, _, _ = measured
    t = b.train_step  # the training step drives break-even when there is one
    if t.compiled_ms < t.eager_ms:
        expected = math.ceil(b.compile_s["cold"] / ((t.eager_ms - t.compiled_ms) / 1000))
        assert b.break_even_calls == expected
    else:
        assert b.break_even_calls is None
        assert "slower" in b.verdict or "no clear gain" in b.verdict


@pytest.mark.slow
def test_peak_memory_is_measured_and_labelled(measured):
    b, _, _ = measured
    mem = b.peak_memory_bytes
    assert mem["eager"] > 0 and mem["compiled"] > 0
    label = "max_memory_allocated" if DEVICE.startswith("cuda") else "peak RSS"
    assert label in mem["method"] and "train step" in mem["method"]


@pytest.mark.slow
def test_deterministic_model_agrees(measured):
    b, _, _ = measured
    assert 0 <= b.max_abs_error["output"] < 1e-5
    assert 0 <= b.max_abs_error["grad"] < 1e-4
    assert 0 <= b.max_rel_error["output"] < 1e-4
    assert not [n for n in b.notes if n.startswith(("accuracy:", "graph breaks:", "recompiles:"))]


@pytest.mark.slow
def test_description_fields(measured):
    b, stages, elapsed = measured
    assert b.device == DEVICE.split(":")[0] or b.device == DEVICE
    assert b.device_name and b.torch == torch.__version__ and b.mode == "default"
    assert b.inputs == "float32[256, 32]"
    assert abs(time.time() - b.measured_at) < 600
    assert b.verdict and "\n" not in b.verdict
    assert any("cold cache" in s for s in stages)
    assert "timing eager forward…" in stages and "timing compiled train step…" in stages
    assert elapsed < 600  # compiles take what they take; on a quiet 2-core machine ≈ 30 s


@pytest.mark.slow
def test_result_survives_json(measured):
    b, _, _ = measured
    again = from_dict(Benchmark, json.loads(json.dumps(asdict(b), allow_nan=False)))
    assert again == b


# --- in-process parts (children replaced) --------------------------------------------------

@pytest.mark.slow
def test_random_op_shows_as_an_accuracy_difference(module, no_children):
    b = quick(module, "Noisy")
    assert b.max_abs_error["output"] > 1e-3
    assert any(n.startswith("accuracy:") and "random" in n for n in b.notes)
    assert "check" in b.verdict or "slower" in b.verdict or "no clear gain" in b.verdict
    # canned compile times flow through; the children were asked for cold, then warm+memory
    assert b.compile_s == {"cold": 9.0, "warm": 9.0}
    assert [j["tasks"] for j in no_children] == [["compile"], ["memory_eager", "compile", "memory_compiled"]]
    assert no_children[0]["workloads"] == ["train", "forward"]


@pytest.mark.slow
def test_graph_break_yields_a_note(module, no_children, capfd):
    b = quick(module, "Chatty")
    breaks = [n for n in b.notes if n.startswith("graph breaks:")]
    assert breaks and "GB0059" in breaks[0]
    assert "graph break" in b.verdict
    assert "between the graphs" in capfd.readouterr().out  # user code really ran


@pytest.mark.slow
def test_no_parameters_means_forward_only(module, no_children):
    b = quick(module, "Frozen")
    assert b.train_step is None
    assert any(n.startswith("train step:") for n in b.notes)
    assert b.max_abs_error["grad"] is None
    assert no_children[0]["workloads"] == ["forward"]
    assert b.compile_s["cold"] == 8.0  # forward drives break-even


@pytest.mark.slow
def test_plain_function(module, no_children):
    target = built(module, "scaled_sin", "(torch.randn(8, 32), 3)")
    b = bench.run_benchmark(target, path=os.path.relpath(MODELS), root=os.path.relpath(ROOT),
                            device=DEVICE, max_seconds=1)
    # the children run elsewhere (cwd = root): they get absolute paths
    assert no_children[0]["path"] == MODELS and no_children[0]["root"] == ROOT
    assert b.train_step is None and b.forward.eager_ms > 0
    assert any("plain function" in n for n in b.notes)
    assert b.inputs == "float32[8, 32], 3"


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the fallback of a machine without CUDA")
def test_cuda_falls_back_to_cpu_with_a_note(module, no_children):
    assert bench.resolve_device("cuda")[0] == "cpu"
    b = quick(module, "Frozen", device="cuda")
    assert b.device == "cpu"
    assert any(n.startswith("device:") and "cuda" in n for n in b.notes)
    assert no_children[0]["device"] == "cpu"


def test_resolve_device():
    assert bench.resolve_device("cpu") == ("cpu", None)
    assert bench.resolve_device("auto")[0] == ("cuda" if torch.cuda.is_available() else "cpu")
    if torch.cuda.is_available():
        assert bench.resolve_device("cuda") == ("cuda", None)


def test_out_of_memory_is_a_clear_problem(module, no_children):
    with pytest.raises(TargetError) as info:
        quick(module, "Hungry")
    problem = info.value.problem
    assert problem.kind == "oom" and "out of memory" in problem.message
    assert problem.line == line_of("Hungry") and problem.hint
    assert no_children == []  # failed before spending time on compiles


def test_oom_detection():
    assert bench.is_oom(torch.OutOfMemoryError("CUDA out of memory"))
    assert bench.is_oom(RuntimeError("CUDA error: out of memory"))
    assert bench.is_oom(RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory"))
    assert not bench.is_oom(RuntimeError("shape mismatch"))


# --- the child process protocol ------------------------------------------------------------

def child_job(name: str, tasks: list[str], inputs: str = TINY_INPUTS, path: str = MODELS) -> dict:
    return {"path": path, "root": ROOT, "spec": asdict(spec(name, inputs)), "device": DEVICE,
            "mode": "default", "workloads": ["train"], "tasks": tasks}


def test_child_result_is_not_mixed_with_user_prints(tmp_path, capfd):
    result = bench.run_child(child_job("Tiny", ["memory_eager"]), cache_dir=str(tmp_path), timeout=120)
    label = "max_memory_allocated" if DEVICE.startswith("cuda") else "peak RSS"
    assert result["memory"]["eager"] > 0 and label in result["memory"]["method"]
    assert result["memory"]["compiled"] is None and result["compile_s"] == {}
    out, err = capfd.readouterr()
    assert "building Tiny" not in out + err and "C-level" not in out + err  # stayed in the child's log


def test_child_prints_do_not_reach_the_result_file(tmp_path):
    """Run the child as the worker does, reading its stdout: prints there, result in the file."""
    job = dict(child_job("Tiny", ["memory_eager"]), result_path=str(tmp_path / "r.json"))
    env = bench._child_env(str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-m", bench.CHILD_MODULE, json.dumps(job)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "building Tiny" in proc.stdout and "a C-level style write to fd 1" in proc.stdout
    result = json.loads((tmp_path / "r.json").read_text())
    assert set(result) == {"compile_s", "memory", "notes"}


def test_child_reports_errors_as_problems(tmp_path):
    with pytest.raises(TargetError) as info:
        bench.run_child(child_job("Hungry", ["memory_eager"]), cache_dir=str(tmp_path), timeout=120)
    assert info.value.problem.kind == "oom"
    missing = child_job("Tiny", ["memory_eager"], path=str(tmp_path / "gone.py"))
    with pytest.raises(TargetError) as info:
        bench.run_child(missing, cache_dir=str(tmp_path), timeout=120)
    assert info.value.problem.kind == "import"


def test_child_timeout_kills_it(tmp_path):
    started = time.perf_counter()
    with pytest.raises(TargetError) as info:
        bench.run_child(child_job("Tiny", ["compile"]), cache_dir=str(tmp_path), timeout=0.5)
    assert info.value.problem.kind == "timeout"
    assert time.perf_counter() - started < 15


# --- figures from measurements: pure functions ---------------------------------------------

def timing(eager, compiled, e_iqr=0.01, c_iqr=0.01) -> Timing:
    return Timing(eager, compiled, eager / compiled, e_iqr, c_iqr)


def test_break_even():
    assert bench.break_even(10.0, timing(2.0, 1.0)) == 10_000
    assert bench.break_even(10.0, timing(1.0, 1.0)) is None
    assert bench.break_even(10.0, timing(0.88, 1.0)) is None
    assert bench.break_even(None, timing(2.0, 1.0)) is None
    assert bench.break_even(0.0001, timing(2.0, 1.0)) == 1


def test_verdicts():
    slower = bench.verdict("cpu", timing(0.88, 1.0), None, 10.0, None, 0, True)
    assert "0.88× (slower) on cpu" in slower
    assert "no clear gain" in bench.verdict("cpu", timing(1.05, 1.0), None, 10.0, 1, 0, True)
    noisy = timing(1.5, 1.0, e_iqr=0.6, c_iqr=0.6)  # 1.5× but the spreads overlap
    assert "no clear gain" in bench.verdict("cpu", noisy, None, 10.0, 1, 0, True)
    good = bench.verdict("cuda", timing(1.0, 1.0), timing(2.0, 1.0), 14.2, 870, 0, True)
    assert good.startswith("worth it: 2.00× train step on cuda") and "870" in good
    assert "long runs" in bench.verdict("cuda", timing(2, 1), None, 100.0, 10**6, 0, True)
    assert "check" in bench.verdict("cuda", timing(2, 1), None, 1.0, 10, 0, False)
    assert "5 graph breaks" in bench.verdict("cuda", timing(2, 1), None, 1.0, 10, 5, True)


def test_compare_is_safe_near_zero():
    e = [torch.tensor([1e-9, 1.0, -2.0])]
    small = bench.compare(e, [torch.tensor([2e-9, 1.0, -2.0])])
    assert small["abs"] == pytest.approx(1e-9) and small["rel"] < 1e-8 and not small["exceeds"]
    big = bench.compare(e, [torch.tensor([1e-9, 1.1, -2.0])])
    assert big["abs"] == pytest.approx(0.1, rel=1e-5) and big["rel"] == pytest.approx(0.05, rel=1e-5)
    assert big["exceeds"]
    assert bench.compare(e, [torch.zeros(2)])["problem"]
    nan = torch.tensor([float("nan"), 1.0])
    assert bench.compare([nan], [nan.clone()])["abs"] == 0
    assert bench.compare([nan], [torch.tensor([0.0, 1.0])])["problem"]
    half = bench.compare([torch.ones(3, dtype=torch.float16)], [torch.ones(3, dtype=torch.float16) * 1.001])
    assert not half["exceeds"] and half["rtol"] == bench.TOLERANCES[torch.float16][0]


def test_to_device_and_describe_inputs():
    x = torch.randn(2, 3, requires_grad=True)
    args = (x, [torch.ones(4, dtype=torch.int64)], {"k": 3}, 1.5)
    moved = bench.to_device(args, "cpu")
    assert moved[0] is x and isinstance(moved[1], list) and moved[2] == {"k": 3}
    assert bench.describe_inputs(args) == "float32[2, 3] requires_grad, [int64[4]], {k: 3}, 1.5"


def test_quantile_matches_torch():
    values = sorted([3.0, 1.0, 4.0, 1.5, 9.0, 2.6])
    for q in (0.25, 0.5, 0.75):
        assert bench.quantile(values, q) == pytest.approx(torch.tensor(values).quantile(q).item())


@pytest.mark.slow
def test_guard_latency_and_warm_cache_come_from_torch_metrics(measured):
    b, _, _ = measured
    # torch 2.13 records both; a torch that does not leaves them None (and says nothing)
    assert b.guard_latency_us is not None and 0 < b.guard_latency_us < b.forward.compiled_ms * 1e3 * 10
    assert b.warm_cache is not None
    assert b.warm_cache["hits"] > 0  # the warm compile really read Inductor's/AOTAutograd's caches
    guard_notes = [n for n in b.notes if n.startswith("guards:")]
    assert bool(guard_notes) == (b.guard_latency_us > bench.GUARD_SHARE * b.forward.compiled_ms * 1e3)
