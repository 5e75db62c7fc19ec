"""The max-autotune lever (GPU only): where it applies, and its payback figure — the extra compile
seconds over the time saved per forward call. The lever itself runs only on a GPU (`scripts/gpu-check`)."""

from __future__ import annotations

from compile_lens.protocol import Lever
from compile_lens.render.levers_text import lever_line
from compile_lens.worker.levers import autotune


def test_it_applies_on_a_gpu_unless_the_measurement_autotunes_or_graphs_already():
    assert autotune.applies("cuda", "default") and autotune.applies("cuda:1", None)
    assert not autotune.applies("cpu", "default")
    assert not autotune.applies("cuda", "max-autotune") and not autotune.applies("cuda", "reduce-overhead")


def test_the_payback_is_the_extra_compile_over_what_each_call_saves():
    assert autotune.payback_calls(24.0, 2.0, 1.0) == 24001  # 1 ms saved a call
    assert autotune.payback_calls(-1.0, 2.0, 1.9) == 0  # compiles no slower: nothing to pay back
    assert autotune.payback_calls(5.0, 1.0, 1.2) is None  # slower: it never pays back
    assert autotune.payback_calls(None, 1.0, 0.5) is None


def test_its_line_names_it():
    lever = Lever("max_autotune", autotune.CHANGE, "no change", why="forward: no measurable change")
    assert lever_line(lever) == "max-autotune: no change — forward: no measurable change"
