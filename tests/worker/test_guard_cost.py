"""Guard evaluation per compiled call (worker/measure/timing/guard_cost.py): the figure from paired rounds, when it
is a figure, and where it is said. The measurement on a real forward is in test_benchmark.py
(`test_guard_latency_and_warm_cache_come_from_torch_metrics`, shared measurement)."""

from __future__ import annotations

import random

import pytest

from compile_lens.protocol import (
    Benchmark,
    CompileSeconds,
    Errors,
    PeakMemory,
    TargetResult,
    Timing,
)
from compile_lens.render.cards import detail_lines
from compile_lens.render.cli_output import benchmark_json
from compile_lens.worker.measure.timing import guard_cost as gc
from compile_lens.worker.measure.timing import rounds as tm
from compile_lens.worker.measure.timing.verdict import _metric_notes


def _rounds(compiled_us: float, skipped_us: float, jitter_us: float, n: int = 16, seed: int = 1) -> tm.Paired:
    rng = random.Random(seed)
    compiled = [(compiled_us + rng.uniform(-jitter_us, jitter_us)) * 1e-6 for _ in range(n)]
    skipped = [(skipped_us + rng.uniform(-jitter_us, jitter_us)) * 1e-6 for _ in range(n)]
    return tm.Paired([100e-6] * n, compiled, [True] * n, {gc.NO_GUARDS: skipped})


def test_this_torch_can_skip_guard_evaluation():
    assert gc.supported() is None  # torch 2.13: set_stance(..., skip_guard_eval_unsafe=True)


def test_the_guard_cost_is_the_median_difference_with_its_interval():
    found = gc.guard_cost(_rounds(40.0, 30.0, 1.0))
    assert found["guard_us_per_call"] == pytest.approx(10.0, abs=1.0)
    lo, hi = found["guard_us_ci"]
    assert 0 < lo <= found["guard_us_per_call"] <= hi
    assert found["guard_share"] == pytest.approx(0.25, abs=0.03)


def test_an_interval_that_contains_zero_is_not_measurable():
    found = gc.guard_cost(_rounds(40.0, 39.8, 5.0))
    lo, hi = found["guard_us_ci"]
    assert lo <= 0 <= hi and found["guard_share"] is None
    assert gc.guard_words(found["guard_us_per_call"], found["guard_us_ci"], None, 0.04) is None


def test_an_interval_wholly_below_zero_is_noise_not_a_negative_cost():
    # seen under load: skipping the guards came out 4.9 ms *slower* per call than evaluating them
    found = gc.guard_cost(_rounds(1800.0, 6700.0, 50.0))
    assert found["guard_us_ci"][1] < 0 and found["guard_share"] is None

def test_busy_rounds_are_left_out_as_the_speedup_leaves_them_out():
    p = _rounds(40.0, 30.0, 0.5, n=12)
    p.compiled[:4] = [4000e-6] * 4  # a busy machine: 100× slower, and not quiet
    p.quiet[:4] = [False] * 4
    assert gc.guard_cost(p)["guard_us_per_call"] == pytest.approx(10.0, abs=1.0)


def _bench(forward: Timing) -> Benchmark:
    return Benchmark(device="cpu", device_name="cpu", mode="default", forward=forward, train_step=None,
                     compile_s=CompileSeconds(9.0, 1.5), break_even_calls=None, peak_memory_bytes=PeakMemory(),
                     max_abs_error=Errors(), max_rel_error=Errors(), verdict="no clear gain", notes=_metric_notes(forward, None))


def test_the_hover_and_json_say_it_when_over_five_percent_of_the_call():
    heavy = Timing(1.0, 0.040, 25.0, 0.0, 0.0, guard_us_per_call=8.0, guard_us_ci=[7.0, 9.0], guard_share=0.2)
    light = Timing(1.0, 0.040, 25.0, 0.0, 0.0, guard_us_per_call=1.0, guard_us_ci=[0.5, 1.5], guard_share=0.025)
    result = TargetResult("Net", "module", 3)
    card = "\n".join(detail_lines(result, _bench(heavy), guessed_inputs=False))  # the card's Details
    assert "⚠ guards: evaluating the guards costs 8.0 µs per call (95% interval 7.0–9.0), 20% of a compiled" in card
    assert "guards:" not in "\n".join(detail_lines(result, _bench(light), guessed_inputs=False))
    doc = benchmark_json(_bench(heavy))
    assert doc["forward"]["guard_us_per_call"] == 8.0 and doc["forward"]["guard_us_ci"] == [7.0, 9.0]
    assert doc["forward"]["guard_share"] == 0.2


# --- guards skipped on models whose frames Dynamo splits ---------------------------------------
# Dynamo decides what runs with guards skipped (the backend does not): `backend="eager"` keeps each
# model to a trace, not an Inductor compile. The forward is timed as the benchmark times it.

def _skipping(module, *args):
    from compile_lens.worker.measure.run.benchmark import _user_forward
    from compile_lens.worker.measure.workload.model import Model

    torch = pytest.importorskip("torch")
    torch._dynamo.reset()
    module.eval()
    compiled = Model(torch.compile(module, backend="eager"), module, args, False)
    for _ in range(2):  # the benchmark's warm-up
        compiled.forward()
    unmeasured: dict[str, str] = {}
    return gc.SkippingGuards(_user_forward(compiled)).warmed(unmeasured, "guard cost"), unmeasured, compiled


def _guard_rounds(skipping) -> dict:
    p = tm.paired_rounds(skipping._timer, skipping._timer, budget_s=0.2, min_rounds=2, extra={gc.NO_GUARDS: skipping})
    assert p.dropped == {} and len(p.extra[gc.NO_GUARDS]) == len(p.compiled) >= 2
    return gc.guard_cost(p)


def _split_models():
    torch = pytest.importorskip("torch")

    def helper(y):  # a frame of its own: the break inside it splits it too
        y = y.relu()
        torch._dynamo.graph_break()
        return y.sigmoid()

    class PrintBreak(torch.nn.Module):  # GB0059: the rest of forward runs in a resumed frame
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x):
            y = self.fc(x)
            print("", end="")
            return y.relu()

    class TwoFrames(PrintBreak):
        def forward(self, x):
            return self.fc(helper(self.fc(x)))

    return {"graph break": PrintBreak, "two frames": TwoFrames}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["graph break", "two frames"])
def test_a_forward_split_by_breaks_gets_its_guard_cost(kind):
    torch = pytest.importorskip("torch")
    skipping, unmeasured, _ = _skipping(_split_models()[kind](), torch.randn(4, 8))
    assert skipping is not None and unmeasured == {}
    found = _guard_rounds(skipping)
    assert found["guard_us_ci"] is not None and found["guard_us_per_call"] is not None


@pytest.mark.slow
def test_gpt2_with_labels_says_it_needs_another_compile_with_guards_skipped():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=32)
    torch.manual_seed(0)

    class CausalLM(torch.nn.Module):  # the loss breaks the graph inside transformers (GB0291)
        def __init__(self):
            super().__init__()
            self.gpt = transformers.GPT2LMHeadModel(config)

        def forward(self, ids):
            return self.gpt(input_ids=ids, labels=ids).loss

    skipping, unmeasured, compiled = _skipping(CausalLM(), torch.randint(0, 100, (2, 8)))
    assert skipping is None
    assert unmeasured == {"guard cost": f"not measurable ({gc.NEEDS_COMPILE})"}
    assert compiled.forward().dim() == 0  # and the compiled call still runs, guards evaluated
