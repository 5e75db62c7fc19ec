"""Facts read from torch's compilation metrics: the compile id of each recompile, guard cost, cache hits.

The benchmark's own figures (guard latency, the warm compile's cache counts) are checked on the
shared measurement in test_benchmark.py; here: the sweep's compile ids and when a figure is said.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from compile_lens.protocol import InputRecipe, TargetSpec, Timing
from compile_lens.worker.breaks.recompiles import sweep_recompiles
from compile_lens.worker.loader import build_target, import_file
from compile_lens.worker.measure.timing import verdict
from paths import FIXTURES

MODELS = str(FIXTURES / "recompiles" / "models.py")


@pytest.fixture(scope="module")
def module():
    return import_file(MODELS, str(Path(MODELS).parent))


def test_each_recompile_names_the_compile_it_caused(module):
    line = next(i for i, t in enumerate(Path(MODELS).read_text().splitlines(), 1) if t.startswith("class Steps"))
    spec = TargetSpec("Steps", "module", line, inputs=InputRecipe(
        "directive", "(torch.randn(8, 16), 2)", variants=["(torch.randn(8, 16), 3)", "(torch.randn(8, 16), 4)"]))
    records = [r for r in sweep_recompiles(build_target(module, spec, MODELS), path=MODELS)
               if r.variation.startswith("variant")]
    assert len(records) >= 2  # `steps` feeds range(): every value recompiles
    ids = [r.compile_id for r in records]
    assert all(i is not None and re.fullmatch(r"\d+/\d+", i) for i in ids), ids
    # one frame, compiled again and again: its compile numbers rise in the order the calls ran
    frame_ids = {i.split("/")[0] for i in ids}
    numbers = [int(i.split("/")[1]) for i in ids]
    assert len(frame_ids) == 1 and numbers == sorted(numbers) and numbers[0] >= 1


def _timing(compiled_ms: float, guard_us: float | None = None, ci: list[float] | None = None) -> Timing:
    share = None if guard_us is None or ci is None or ci[0] <= 0 <= ci[1] else guard_us / (compiled_ms * 1e3)
    return Timing(eager_ms=1.0, compiled_ms=compiled_ms, speedup=1.0 / compiled_ms, eager_iqr_ms=0.0,
                  compiled_iqr_ms=0.0, guard_us_per_call=guard_us, guard_us_ci=ci, guard_share=share)


def test_guard_cost_is_said_only_when_it_is_a_real_share_of_the_call():
    assert verdict._metric_notes(_timing(2.0, 50.0, [40.0, 60.0]), {"hits": 3, "misses": 0}) == []  # 2.5 %
    [note] = verdict._metric_notes(_timing(2.0, 400.0, [380.0, 420.0]), None)  # 20 % of a 2 ms forward
    assert note.startswith("guards:") and "400.0 µs" in note and "20%" in note and "380.0–420.0" in note
    assert verdict._metric_notes(_timing(0.01), None) == []  # not measured: nothing said
    # an interval that contains 0 is no figure, however large the median
    assert verdict._metric_notes(_timing(0.04, 20.0, [-3.0, 30.0]), None) == []


def test_a_warm_compile_that_missed_the_caches_says_so():
    [note] = verdict._metric_notes(_timing(1.0), {"hits": 1, "misses": 2})
    assert note.startswith("warm compile:") and "missed 2" in note


def test_each_graph_break_names_the_compile_that_broke(module):
    from compile_lens.worker.breaks.graph_breaks import trace_graph_breaks

    line = next(i for i, t in enumerate(Path(MODELS).read_text().splitlines(), 1) if t.startswith("class Chatty"))
    spec = TargetSpec("Chatty", "module", line, inputs=InputRecipe("directive", "(torch.randn(8, 16),)"))
    _, breaks = trace_graph_breaks(build_target(module, spec, MODELS), str(Path(MODELS).parent))
    assert breaks
    assert all(b.compile_id is not None and re.fullmatch(r"\d+/\d+", b.compile_id) for b in breaks), breaks
