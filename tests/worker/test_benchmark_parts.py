"""The benchmark's in-process parts with the fresh processes replaced by canned figures
(`bench_support.no_children`), and the fresh process's own protocol (`bench_child`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import fields, replace

import pytest

torch = pytest.importorskip("torch")

import bench_support  # noqa: E402
from bench_support import (  # noqa: E402
    DEVICE,
    MODELS,
    ROOT,
    TINY_INPUTS,
    built,
    line_of,
    quick,
    spec,
)

from compile_lens.worker.loader import TargetError  # noqa: E402
from compile_lens.worker.measure.compile import cold as cold_compile  # noqa: E402
from compile_lens.worker.measure.compile.cold_job import ColdJob, ColdResult  # noqa: E402
from compile_lens.worker.measure.memory import peak as memory  # noqa: E402
from compile_lens.worker.measure.run import benchmark as bench  # noqa: E402
from compile_lens.worker.measure.workload import devices  # noqa: E402


@pytest.fixture(scope="module")
def module():
    return bench_support.load_models()


@pytest.fixture
def no_children(monkeypatch):
    return bench_support.fake_children(monkeypatch)

# --- in-process parts (children replaced) --------------------------------------------------

@pytest.mark.slow
def test_a_model_that_draws_random_numbers_is_not_judged_on_them(module, no_children):
    """Eager differs from itself under another seed: a compiled difference says nothing about
    accuracy (a GPT-2's dropout made its verdict read "outputs differ — check accuracy first")."""
    b = quick(module, "Noisy")
    assert b.max_abs_error.output is None and b.max_abs_error.grad is None
    said = [n for n in b.notes if n.startswith("accuracy not compared:")]
    assert sorted(n.split(" — ")[0] for n in said) == ["accuracy not compared: gradients", "accuracy not compared: outputs"]
    assert all("random numbers" in n and "fallback_random" in n for n in said)
    assert not any(n.startswith("accuracy:") for n in b.notes)
    assert "check accuracy" not in b.verdict
    # the canned cold compiles flow through; the warm ones are measured here, imports added; one
    # child per workload, the forward's first
    assert b.compile_s.cold == 9.0 and b.compile_s.warm > 1.5 and b.compile_s.cold_forward == 8.0
    assert [j.tasks for j in no_children] == [["compile", "first_look"], ["compile"]]
    assert [j.workloads for j in no_children] == [["forward"], ["train"]]


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
    assert b.max_abs_error.grad is None
    assert [j.workloads for j in no_children] == [["forward"]]
    assert b.compile_s.cold == 8.0  # forward drives break-even


@pytest.mark.slow
def test_plain_function(module, no_children):
    target = built(module, "scaled_sin", "(torch.randn(8, 32), 3)")
    b = bench.run_benchmark(target, path=os.path.relpath(MODELS), root=os.path.relpath(ROOT),
                            device=DEVICE, max_seconds=1)
    # the children run elsewhere (cwd = root): they get absolute paths
    assert no_children[0].path == MODELS and no_children[0].root == ROOT
    assert b.train_step is None and b.forward.eager_ms > 0
    assert any("plain function" in n for n in b.notes)
    assert b.inputs == "float32[8, 32], 3"


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the fallback of a machine without CUDA")
def test_cuda_falls_back_to_cpu_with_a_note(module, no_children):
    assert devices.resolve_device("cuda")[0] == "cpu"
    b = quick(module, "Frozen", device="cuda")
    assert b.device == "cpu"
    assert any(n.startswith("device:") and "cuda" in n for n in b.notes)
    assert no_children[0].device == "cpu"


def test_resolve_device():
    assert devices.resolve_device("cpu") == ("cpu", None)
    assert devices.resolve_device("auto")[0] == ("cuda" if torch.cuda.is_available() else "cpu")
    if torch.cuda.is_available():
        assert devices.resolve_device("cuda") == ("cuda", None)


def test_out_of_memory_is_a_clear_problem(module, no_children):
    with pytest.raises(TargetError) as info:
        quick(module, "Hungry")
    problem = info.value.problem
    assert problem.kind == "oom" and "out of memory" in problem.message
    assert problem.line == line_of("Hungry") and problem.hint
    assert no_children == []  # failed before spending time on compiles


def test_oom_detection():
    assert devices.is_oom(torch.OutOfMemoryError("CUDA out of memory"))
    assert devices.is_oom(RuntimeError("CUDA error: out of memory"))
    assert devices.is_oom(RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory"))
    assert not devices.is_oom(RuntimeError("shape mismatch"))


# --- the child process protocol ------------------------------------------------------------

def child_job(name: str, tasks: list[str], inputs: str = TINY_INPUTS, path: str = MODELS) -> ColdJob:
    return ColdJob(path, ROOT, spec(name, inputs), DEVICE, "default", ["train"], False, tasks, 30.0, "compiling")


def test_child_result_is_not_mixed_with_user_prints(tmp_path, capfd):
    result = cold_compile.run_child(child_job("Tiny", ["memory_eager"]), cache_dir=str(tmp_path), timeout=120)
    label = "max_memory_allocated" if DEVICE.startswith("cuda") else "profiler memory events"
    assert result.memory.eager > 0 and label in result.memory.method
    assert result.memory.compiled is None and result.compile_s == {}
    out, err = capfd.readouterr()
    assert "building Tiny" not in out + err and "C-level" not in out + err  # stayed in the child's log


def test_child_prints_do_not_reach_the_result_file(tmp_path):
    """Run the child as the worker does, reading its stdout: prints there, result in the file."""
    job = dict(child_job("Tiny", ["memory_eager"]).json(), result_path=str(tmp_path / "r.json"))
    env = cold_compile._child_env(str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-m", cold_compile.CHILD_MODULE, json.dumps(job)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "building Tiny" in proc.stdout and "a C-level style write to fd 1" in proc.stdout
    result = json.loads((tmp_path / "r.json").read_text())
    assert set(result) == {f.name for f in fields(ColdResult)}  # every field, written whole
    assert ColdResult.from_json(result).memory.eager > 0


def test_a_job_or_result_without_a_field_fails_naming_it():
    """Job and result cross the process boundary as JSON: one that lacks a field (another version's)
    is refused with the field named, not read as a default that fails later on a key; a lever's
    JSON job is never sent to the cold child."""
    job = child_job("Tiny", ["compile"]).json()
    assert ColdJob.from_json(job) == child_job("Tiny", ["compile"])  # the round trip, spec typed again
    with pytest.raises(ValueError, match="the cold child's job lacks max_seconds, what"):
        ColdJob.from_json({k: v for k, v in job.items() if k not in ("max_seconds", "what")})
    result = ColdResult(compile_s={"forward": 2.0}, import_s=0.5).json()
    assert ColdResult.from_json(result).compile_s == {"forward": 2.0}
    with pytest.raises(ValueError, match="the cold child's result lacks first_look"):
        ColdResult.from_json({k: v for k, v in result.items() if k != "first_look"})
    with pytest.raises(TypeError, match="ColdJob"):
        cold_compile.run_child(job, cache_dir="/nonexistent", timeout=1)


@pytest.mark.slow
def test_the_forward_child_takes_the_first_look_right_after_its_compile(tmp_path, monkeypatch):
    """The forward's cold child times eager against just-compiled as torch's own check would: paired
    rounds with the busy reading, and calls 2 and 3 compile nothing again (a Dynamo reset or other
    Inductor settings there compiled the whole model again before the rounds). The machine declared
    quiet (the child inherits it): every round counts."""
    from compile_lens.worker.measure.compile.children import child_job as forward_job
    from compile_lens.worker.measure.timing.rounds import MIN_ROUNDS, Paired, timing_of

    monkeypatch.setenv("COMPILE_LENS_TEST_QUIET", "1")
    job = forward_job(MODELS, ROOT, spec("Tiny", TINY_INPUTS), DEVICE, "default", False, "forward", 30.0)
    assert job.tasks == ["compile", "first_look"]
    found = cold_compile.run_child(job, cache_dir=str(tmp_path), timeout=300)
    look = found.first_look
    assert look is not None and look.why is None and look.warmup_compiles == 0, look
    pairs = look.pairs
    assert isinstance(pairs, Paired)
    assert len(pairs.eager) == len(pairs.compiled) == len(pairs.quiet) >= 2
    # its minimum rounds within the look's limit (a block stops at BLOCK_GUARD × its length, however slow
    # the calls turn), each counted, the reading saying why
    assert len(pairs.eager) >= MIN_ROUNDS and all(pairs.quiet), pairs.quiet
    assert look.s > 0
    assert look.busy.declared_quiet is True and look.busy.busy is False, look.busy
    timing = timing_of(pairs)
    assert timing.rounds == len(pairs.eager) and timing.speedup > 0 and timing.eager_ms > 0 and timing.compiled_ms > 0
    lo, hi = timing.speedup_ci
    assert lo <= timing.speedup <= hi, (lo, timing.speedup, hi)
    # the compile's own figures were read before the rounds added to torch's counters
    assert found.compile_s["forward"] > 0 and found.compile_time.frames


def test_the_first_look_is_the_childs_only_when_it_took_one():
    """A child that could not take the first look (its rounds compiled again) leaves the forward's
    timing to this process; one that did gives its rounds as the forward's figure."""
    from compile_lens.protocol import ContentionReport
    from compile_lens.worker.measure.compile.children import Cold
    from compile_lens.worker.measure.compile.cold_job import FirstLook
    from compile_lens.worker.measure.run.snapshot import Figures
    from compile_lens.worker.measure.timing.per_workload import looked
    from compile_lens.worker.measure.timing.rounds import Paired

    figures = Figures(memory={})
    cold = Cold("forward", 1.0, 0.5, 60.0, child_job("Tiny", ["compile"]), [], "", None,
                FirstLook(why="compiled again while timing"))
    assert looked(figures, cold) is None and "forward" not in figures.timings
    rounds = Paired([2e-3] * 8, [1e-3] * 8, [True] * 8)
    cold.first_look = FirstLook(rounds, ContentionReport(busy=False, cpus=2), {}, 1.5)
    pairs = looked(figures, cold)
    assert pairs is not None and len(pairs.eager) == 8
    assert figures.timings["forward"].speedup == pytest.approx(2.0) and figures.timings["forward"].rounds == 8
    assert figures.busy_seen == ContentionReport(busy=False, cpus=2)


def test_a_gated_child_takes_no_cpu_while_paused(tmp_path):
    """The train step's child, started beside the warm compile, is stopped while timing rounds run:
    its imports take no CPU then, and go on after."""
    import psutil

    from compile_lens.worker.measure.compile.children import child_job as cold_job

    job = cold_job(MODELS, ROOT, spec("Tiny", TINY_INPUTS), DEVICE, "default", False, "train", 30.0)
    child = cold_compile.Child(job, cache_dir=str(tmp_path), timeout=60, gated=True)
    proc = psutil.Process(child.proc.pid)

    def cpu() -> float:
        return sum(proc.cpu_times()[:2])

    try:
        time.sleep(0.3)  # importing torch: seconds of CPU
        with child.paused():
            before = cpu()
            time.sleep(1.0)
            assert proc.status() == psutil.STATUS_STOPPED
            assert cpu() - before < 0.05
        after = cpu()
        time.sleep(0.5)
        assert proc.status() != psutil.STATUS_STOPPED and cpu() > after  # its imports go on
    finally:
        child.stop()
    assert child.proc.poll() is not None


def test_child_reports_errors_as_problems(tmp_path):
    with pytest.raises(TargetError) as info:
        cold_compile.run_child(child_job("Hungry", ["memory_eager"]), cache_dir=str(tmp_path), timeout=120)
    assert info.value.problem.kind == "oom"
    missing = child_job("Tiny", ["memory_eager"], path=str(tmp_path / "gone.py"))
    with pytest.raises(TargetError) as info:
        cold_compile.run_child(missing, cache_dir=str(tmp_path), timeout=120)
    assert info.value.problem.kind == "import"


def test_child_timeout_kills_it(tmp_path):
    started = time.perf_counter()
    with pytest.raises(TargetError) as info:
        cold_compile.run_child(child_job("Tiny", ["compile"]), cache_dir=str(tmp_path), timeout=0.5)
    problem = info.value.problem
    assert problem.kind == "timeout"
    assert "stopped during" in problem.message and "nothing of the measurement was kept" in problem.message
    assert "compileLens.benchmark.maxSeconds" in problem.hint  # the CLI shows it as --max-seconds
    assert time.perf_counter() - started < 15



def test_an_early_child_waits_for_the_word_and_ends_when_not_taken(tmp_path):
    """The cold children started as the job arrives (`compile.children.Early`) build the model and
    then wait: a child's tasks run only once the measurement that takes it says so; one asked for
    something else is ended; those not taken end with the job, and the folder goes."""
    from compile_lens.worker.measure.compile.children import Early

    job = child_job("Tiny", ["memory_eager"])
    early = Early("Tiny", {"forward": job, "train": job}, 60)
    child, unused = early.children["forward"], early.children["train"]
    time.sleep(3)
    assert child.proc.poll() is None and not os.path.exists(child.result_path)  # waiting for the word
    assert early.take("forward", job) is child
    child.go()
    assert child.result().memory.eager > 0
    early.stop()  # the train step was not taken: ended; the measurement owns the folder
    assert unused.proc.poll() is not None and os.path.isdir(early.base)
    cold_compile.shutil.rmtree(early.base, ignore_errors=True)
    other = Early("Tiny", {"forward": job}, 60)
    gone = other.children["forward"]
    assert other.take("forward", replace(job, mode="max-autotune")) is None and gone.proc.poll() is not None
    cold_compile.shutil.rmtree(other.base, ignore_errors=True)  # the measurement's folder (it ran its own)
    idle = Early("Tiny", {"forward": job}, 60)
    left = idle.children["forward"]
    idle.stop()  # the job measured nothing after all: the child and its folder go
    assert left.proc.poll() is not None and not os.path.exists(idle.base)


# --- memory at the allocator --------------------------------------------------------------

def _forward(fn, x):
    def call():
        with torch.no_grad():
            return fn(x)
    return call


def test_cpu_memory_counts_known_activation_bytes(module):
    target = built(module, "Projection", "(torch.randn(64, 256),)")
    model, (x,) = target.make().eval(), target.args
    out = 64 * 1024 * 4  # one (64, 1024) float32 tensor
    assert memory.peak_of(_forward(model, x), lambda: None, "cpu") == 2 * out  # product and ReLU


def test_cpu_memory_of_a_train_step_counts_gradients(module):
    target = built(module, "Wide", "(torch.randn(64, 256),)")
    model, (x,) = target.make(), target.args

    def step():
        model(x).pow(2).mean().backward()

    def zero():
        model.lin.weight.grad = None

    peak = memory.peak_of(step, zero, "cpu")
    assert peak >= 256 * 1024 * 4 + 64 * 1024 * 4  # the weight's gradient and the output
    assert peak < 16 * 2**20  # and not the process's RSS


@pytest.mark.slow
def test_cpu_memory_of_compiled_code_is_counted(module):
    target = built(module, "Projection", "(torch.randn(64, 256),)")
    model, (x,) = target.make().eval(), target.args
    compiled = torch.compile(model)
    peak = memory.peak_of(_forward(compiled, x), lambda: None, "cpu")
    out = 64 * 1024 * 4
    assert out <= peak <= 2 * out  # Inductor may fuse the ReLU into the product's buffer
    torch._dynamo.reset()




@pytest.mark.slow
def test_a_train_step_whose_child_dies_fails_alone(module, monkeypatch):
    """The train step's fresh process crashes: its part is "not measurable", the forward's figures
    (sent before it) stand, and break-even and memory fall back to the forward."""
    from compile_lens.protocol import Problem

    def child(job, *, cache_dir, timeout, progress=None):
        if job.workloads == ["train"]:
            raise TargetError(Problem("crash", "the benchmark process exited with code -9 before reporting"))
        return ColdResult(compile_s={"forward": 8.0}, import_s=1.5)

    monkeypatch.setattr(bench, "run_child", child)
    monkeypatch.setenv("COMPILE_LENS_TEST_QUIET", "1")  # the line table's figures are asserted
    parts: list[tuple] = []
    b = bench.run_benchmark(built(module, "Tiny"), path=MODELS, root=ROOT, device=DEVICE, max_seconds=1,
                            on_part=lambda *a: parts.append(a))
    assert [(p[0], p[2]) for p in parts][:3] == [("train_step", "pending"), ("forward", "done"), ("train_step", "failed")]
    assert "exited with code -9" in parts[2][3]
    assert b.forward.rounds >= 1 and b.train_step is None and b.compile_s.cold == 8.0
    assert b.unmeasured["train step"].startswith("not measurable: ") and "one forward" in b.peak_memory_bytes.method
    assert b.peak_memory_bytes.eager > 0 and any(n.startswith("train step not measurable:") for n in b.notes)
    # the line costs compile nothing of their own: they run whatever the budget, on the forward alone
    assert parts[-1][0] == "lines" and parts[-1][2] == "done", parts[-1]
    assert b.forward.lines_note is None and b.forward.lines_caveat is None, (b.forward.lines_note, b.forward.lines_caveat)
    # Tiny's forward is one line: its time eager and compiled, the Linears' GEMMs library calls
    [line] = b.forward.lines
    assert line.line == line_of("Tiny") + 11 and line.eager_us > 0 and line.compiled_us > 0, line
    assert any(k.name == "extern_kernels.addmm" and k.kind == "extern" for k in line.kernels), line.kernels


def test_a_cold_child_runs_beside_only_on_cores_to_spare(monkeypatch):
    # this machine's own answer: its cores beyond torch's threads, when there are 4 of them
    allowed = sorted(os.sched_getaffinity(0))
    threads = torch.get_num_threads()
    expected = set(allowed[threads:]) if len(allowed) - threads >= cold_compile.SPARE_CPUS_MIN else None
    assert cold_compile.spare_cpus(threads) == expected
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    assert cold_compile.spare_cpus(8) == set(range(8, 16))
    assert cold_compile.spare_cpus(13) is None  # 3 cores left: the child waits its turn
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert cold_compile.spare_cpus(1) is None  # a 2-core machine: never beside the timing
