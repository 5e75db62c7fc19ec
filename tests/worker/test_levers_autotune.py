"""The max-autotune lever: where it applies (on a GPU), its payback figure — the extra compile seconds
over the time saved per forward call —, and its measure run for real on the CPU on one Linear: what it
reports there. The phase offers it on a GPU only (`scripts/gpu-check` runs it there)."""

from __future__ import annotations

import re

import pytest

from compile_lens.protocol import InputRecipe, Lever, TargetSpec
from compile_lens.render.levers_text import lever_line
from compile_lens.worker.levers import autotune
from compile_lens.worker.levers.judge import figures_words, forward_faster, forward_slower
from compile_lens.worker.loader import build_target, import_file
from compile_lens.worker.measure.timing.rounds import MIN_ROUNDS


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


# A tiny model: one library GEMM (no C++ kernel of the default's own to build), as cheap as a real
# measure of the lever gets: two cold compiles in fresh processes, two in-process ones, 1 s of rounds.
NET = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 32)

    def forward(self, x):
        return self.fc(x)
"""


@pytest.mark.slow
def test_measured_on_the_cpu_it_reports_both_compiles_and_the_forward_it_timed(tmp_path):
    """What `measure` reports on the CPU (it is offered on a GPU only, and `scripts/gpu-check` runs it
    there): Inductor's CPU max-autotune considers its C++ GEMM template, which builds a C++ probe of
    the CPU's vector ISA, then refuses the template for a weight that is not frozen, so the output code
    is the default's extern addmm. The autotune side's cold compile uses more CPU than the default's."""
    path = tmp_path / "net.py"
    path.write_text(NET)
    spec = TargetSpec("Net", "module", 5, inputs=InputRecipe("directive", "(torch.randn(8, 32),)"))
    target = build_target(import_file(str(path), str(tmp_path)), spec, str(path))
    stages: list[str] = []
    lever = autotune.measure(target, path=str(path), root=str(tmp_path), device="cpu", mode="default",
                             max_seconds=10.0, progress=lambda stage, **kw: stages.append(stage), steady_s=1.0)
    assert (lever.lever, lever.change) == ("max_autotune", 'torch.compile(..., mode="max-autotune-no-cudagraphs")')
    assert stages[0] == "levers: compiling the default in a fresh process…"
    assert "levers: compiling with max-autotune in a fresh process…" in stages
    assert stages[-1] == "levers: timing the default and the max-autotune compile…"
    # the compiles: wall and CPU seconds of each side's fresh process
    compile_s = lever.compile_s
    assert set(compile_s) == {"before", "after", "cpu_before", "cpu_after"}
    assert all(compile_s[k] > 0 for k in compile_s), compile_s
    assert compile_s["cpu_after"] > 1.5 * compile_s["cpu_before"], compile_s  # the C++ ISA probe's build
    extra = lever.data["extra_compile_s"]
    assert lever.data["mode"] == "max-autotune-no-cudagraphs"
    assert extra == pytest.approx(compile_s["after"] - compile_s["before"], abs=0.011)
    # the forward: both sides timed in paired rounds, the ratio with its interval
    forward = lever.forward
    assert forward.eager_ms > 0 and forward.compiled_ms > 0 and forward.speedup > 0 and forward.rounds >= 1
    assert (forward.speedup_ci is None) == (forward.rounds < 2)  # an interval needs two rounds
    if forward.speedup_ci:
        assert forward.speedup_ci[0] <= forward.speedup <= forward.speedup_ci[1]
    assert not forward.conclusive or forward.rounds >= MIN_ROUNDS
    assert lever.train_step is None  # not asked for (`train` False)
    calls = autotune.payback_calls(extra, forward.eager_ms, forward.compiled_ms)  # extra rounded: ±1%
    assert lever.data["payback_calls"] == (None if calls is None else pytest.approx(calls, rel=0.01))
    # what it says: the cold compiles it measured, then the forward's words, and the verdict they make
    cold = re.match(r"cold compile (\d+\.\d) s → (\d+\.\d) s", lever.why)
    assert cold, lever.why
    assert float(cold[1]) == pytest.approx(compile_s["before"], abs=0.051)
    assert float(cold[2]) == pytest.approx(compile_s["after"], abs=0.051)
    if forward_faster(forward):
        expected = "better"
    elif forward_slower(forward):
        expected = "worse"
    else:
        expected = "inconclusive" if not forward.conclusive and forward.busy else "no change"
    assert lever.verdict == expected, (lever.verdict, forward)
    assert bool(lever.action) == (expected == "better")
    assert lever.why.startswith(figures_words(cold[0], forward, {}))
    print(f"\nmax_autotune on the CPU: compile_s={compile_s} forward={forward} verdict={lever.verdict} "
          f"why={lever.why!r}")
