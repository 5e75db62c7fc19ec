"""Measuring in the precision the user trains in (`worker/measure/workload/precision.py`), against real torch on
the CPU: bf16 autocast around eager and compiled calls alike, the cold child compiling the same
program, accuracy held to bf16's tolerance, and the figures naming it. CUDA's TF32 flags are set and
restored here too (they are plain flags on a CPU build); what TF32 does to a GPU's kernels is not."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

import paths  # noqa: E402
from compile_lens.protocol import InputRecipe, TargetSpec  # noqa: E402
from compile_lens.render.cli_output import benchmark_json, benchmark_summary  # noqa: E402
from compile_lens.render.precision import precision_words  # noqa: E402
from compile_lens.worker.loader import build_target, import_file  # noqa: E402
from compile_lens.worker.measure.accuracy import compare as accuracy  # noqa: E402
from compile_lens.worker.measure.run import benchmark as bench  # noqa: E402
from compile_lens.worker.measure.workload import precision  # noqa: E402
from compile_lens.worker.measure.workload.model import Model  # noqa: E402

MODELS = str(paths.FIXTURES / "bench" / "bench_models.py")
ROOT = str(paths.FIXTURES / "bench")


def spec(value: str, source: str = "directive") -> TargetSpec:
    return TargetSpec("Tiny", "module", 11, inputs=InputRecipe("directive", "(torch.randn(64, 32),)"),
                      precision=value, precision_source=source)


@pytest.fixture(scope="module")
def module():
    return import_file(MODELS, ROOT)


@pytest.fixture(scope="module")
def measured(module):
    """One whole measurement of Tiny in bf16 autocast: the cold child, the warm compiles, the rounds;
    the machine declared quiet (the rounds on the thread's CPU clock: as many as on an idle machine)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COMPILE_LENS_TEST_QUIET", "1")
        return bench.run_benchmark(build_target(module, spec("bf16-autocast"), MODELS), path=MODELS, root=ROOT,
                                   device="cpu", max_seconds=8)


@pytest.mark.slow
def test_the_figures_name_the_precision(measured):
    assert measured.precision.value == "bf16-autocast" and measured.precision.source == "directive"
    assert "torch.autocast('cpu', dtype=torch.bfloat16)" in measured.precision.detail
    assert benchmark_json(measured)["precision"] == dataclasses.asdict(measured.precision)
    assert "(cpu, bf16-autocast from the directive)" in benchmark_summary(measured)
    assert precision.current() is None  # the measurement's precision ends with it


@pytest.mark.slow
def test_the_cold_child_compiles_the_same_program(measured):
    # the warm compile reads what the fresh process wrote: a child compiling fp32 graphs misses all
    assert measured.warm_cache["hits"] > 0 and measured.warm_cache["misses"] == 0, measured.notes


@pytest.mark.slow
def test_accuracy_is_compared_in_bf16(measured):
    assert measured.max_abs_error.output is not None and measured.max_abs_error.grad is not None
    assert not [n for n in measured.notes if n.startswith("accuracy")], measured.notes


@pytest.mark.slow
def test_eager_and_compiled_run_in_bf16_and_their_tolerance_is_bf16s(module):
    target = build_target(module, spec("bf16-autocast"), MODELS)
    with precision.applied(target.spec, "cpu"):
        obj = target.make()
        eager = Model(obj, obj, target.args, False)
        compiled = Model(torch.compile(obj), obj, target.args, False)
        eager.use(False)
        compiled.use(False)
        outputs = [eager.forward(), compiled.forward()]
        assert [o.dtype for o in outputs] == [torch.bfloat16, torch.bfloat16]
        assert accuracy.compare([outputs[0]], [outputs[1]])["rtol"] == accuracy.TOLERANCES[torch.bfloat16][0]
        eager.use(True)
        grads = accuracy._grads(eager, 0)  # the loss under autocast, the backward outside: fp32 grads
        assert {g.dtype for _, g in grads} == {torch.float32}
        held = accuracy.compare([g for _, g in grads], [g for _, g in grads])
        assert (held["rtol"], held["atol"]) == accuracy.TOLERANCES[torch.bfloat16]
        assert held["dtype"] == "bfloat16 (bf16-autocast)"
    assert eager.forward().dtype == torch.bfloat16  # a Model keeps the precision it was built in
    fp32 = accuracy.compare([g for _, g in grads], [g for _, g in grads])
    assert (fp32["rtol"], fp32["atol"]) == accuracy.TOLERANCES[torch.float32]
    assert Model(obj, obj, target.args, False).forward().dtype == torch.float32


def test_fp16_autocast_on_the_cpu_runs_or_says_it_cannot():
    problem = precision.autocast_problem("cpu", torch.float16)
    with precision.applied(spec("fp16-autocast"), "cpu") as used:
        out = Model(torch.nn.Linear(4, 4), None, (torch.randn(2, 4),), False).forward()
    if problem is None:
        assert (used.value, used.asked, out.dtype) == ("fp16-autocast", "", torch.float16)
    else:
        assert (used.value, used.asked, out.dtype) == ("fp32", "fp16-autocast", torch.float32)


def test_autocast_where_there_is_none_is_said_not_failed():
    with precision.applied(spec("bf16-autocast", "setting"), "meta") as used:
        assert precision.tolerance_dtype() is None
    assert (used.value, used.asked) == ("fp32", "bf16-autocast")
    assert "not on this device (meta" in used.detail
    assert precision_words(used) == "fp32: bf16-autocast from the setting is not on this device"


def test_tf32_has_no_effect_on_the_cpu():
    before = torch.get_float32_matmul_precision()
    with precision.applied(spec("tf32", "pyproject"), "cpu") as used:
        assert torch.get_float32_matmul_precision() == before
        assert precision.tolerance_dtype() is None
    assert used.detail.startswith("tf32: no effect on the CPU")
    assert precision_words(used) == "tf32 from pyproject.toml: no effect on the CPU"


def test_tf32_on_cuda_sets_torchs_flags_and_puts_them_back():
    before = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32)
    torch.backends.cudnn.allow_tf32 = False  # as a user may have left it
    try:
        with precision.applied(spec("tf32", "recorded"), "cuda") as used:
            assert torch.get_float32_matmul_precision() == "high"
            assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
            assert precision.tolerance_dtype() == torch.float16  # TF32's 10-bit mantissa is fp16's
        assert (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32) == (before[0], False)
        assert used.value == "tf32" and "TF32" in used.detail
    finally:
        torch.backends.cudnn.allow_tf32 = before[1]


def test_nothing_chosen_names_what_is_in_effect():
    with precision.applied(TargetSpec("f", "function", 1), "cuda") as on_cuda:
        pass
    assert (on_cuda.value, on_cuda.source) == ("fp32", "default")
    assert on_cuda.detail == "torch's defaults: matmul TF32 off, cuDNN convolutions TF32 on"
    torch.set_float32_matmul_precision("high")  # the imported code turned TF32 on
    try:
        with precision.applied(TargetSpec("f", "function", 1), "cuda") as set_by_code:
            pass
    finally:
        torch.set_float32_matmul_precision("highest")
    assert set_by_code.value == "tf32" and set_by_code.detail.startswith("as the imported code set it")
    with precision.applied(TargetSpec("f", "function", 1), "cpu") as on_cpu:
        pass
    assert precision_words(on_cpu) == "fp32, torch's defaults"
