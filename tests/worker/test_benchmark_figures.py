"""The benchmark's figures from measurements: pure functions (break-even, verdicts, paired rounds,
their intervals), and how an inconclusive figure reads everywhere."""

from __future__ import annotations

import dataclasses
import os
import random
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from compile_lens.busy.contention import Contention  # noqa: E402
from compile_lens.busy.rule import busy_threshold, busy_words  # noqa: E402
from compile_lens.protocol import (  # noqa: E402
    Benchmark,
    CompileSeconds,
    ContentionReport,
    Errors,
    PeakMemory,
    Timing,
)
from compile_lens.speed_words import speed_words  # noqa: E402
from compile_lens.worker.measure.accuracy import compare as accuracy  # noqa: E402
from compile_lens.worker.measure.timing import rounds as tm  # noqa: E402
from compile_lens.worker.measure.timing import verdict as verdicts  # noqa: E402
from compile_lens.worker.measure.workload import devices  # noqa: E402
from compile_lens.worker.measure.workload import model as workload  # noqa: E402

# --- figures from measurements: pure functions ---------------------------------------------

def timing(eager, compiled, e_iqr=0.01, c_iqr=0.01) -> Timing:
    return Timing(eager, compiled, eager / compiled, e_iqr, c_iqr)


def test_break_even():
    assert verdicts.break_even(10.0, timing(2.0, 1.0)) == 10_000
    assert verdicts.break_even(10.0, timing(1.0, 1.0)) is None
    assert verdicts.break_even(10.0, timing(0.88, 1.0)) is None
    assert verdicts.break_even(None, timing(2.0, 1.0)) is None
    assert verdicts.break_even(0.0001, timing(2.0, 1.0)) == 1


def test_verdicts():
    slower = verdicts.verdict("cpu", timing(0.88, 1.0), None, 10.0, None, 0, True)
    assert "0.88× (slower) on cpu" in slower
    assert "no clear gain" in verdicts.verdict("cpu", timing(1.05, 1.0), None, 10.0, 1, 0, True)
    noisy = timing(1.5, 1.0, e_iqr=0.6, c_iqr=0.6)  # 1.5× but the spreads overlap
    assert "no clear gain" in verdicts.verdict("cpu", noisy, None, 10.0, 1, 0, True)
    good = verdicts.verdict("cuda", timing(1.0, 1.0), timing(2.0, 1.0), 14.2, 870, 0, True)
    assert good.startswith("worth it: train step 2.00× on cuda") and "870" in good
    assert "long runs" in verdicts.verdict("cuda", timing(2, 1), None, 100.0, 10**6, 0, True)
    assert "check" in verdicts.verdict("cuda", timing(2, 1), None, 1.0, 10, 0, False)
    assert "5 graph breaks" in verdicts.verdict("cuda", timing(2, 1), None, 1.0, 10, 5, True)


def test_compare_is_safe_near_zero():
    e = [torch.tensor([1e-9, 1.0, -2.0])]
    small = accuracy.compare(e, [torch.tensor([2e-9, 1.0, -2.0])])
    assert small["abs"] == pytest.approx(1e-9) and small["rel"] < 1e-8 and not small["exceeds"]
    big = accuracy.compare(e, [torch.tensor([1e-9, 1.1, -2.0])])
    assert big["abs"] == pytest.approx(0.1, rel=1e-5) and big["rel"] == pytest.approx(0.05, rel=1e-5)
    assert big["exceeds"]
    assert accuracy.compare(e, [torch.zeros(2)])["problem"]
    nan = torch.tensor([float("nan"), 1.0])
    assert accuracy.compare([nan], [nan.clone()])["abs"] == 0
    assert accuracy.compare([nan], [torch.tensor([0.0, 1.0])])["problem"]
    half = accuracy.compare([torch.ones(3, dtype=torch.float16)], [torch.ones(3, dtype=torch.float16) * 1.001])
    assert not half["exceeds"] and half["rtol"] == accuracy.TOLERANCES[torch.float16][0]


def test_to_device_and_describe_inputs():
    x = torch.randn(2, 3, requires_grad=True)
    args = (x, [torch.ones(4, dtype=torch.int64)], {"k": 3}, 1.5)
    moved = devices.to_device(args, "cpu")
    assert moved[0] is x and isinstance(moved[1], list) and moved[2] == {"k": 3}
    assert workload.describe_inputs(args) == "float32[2, 3] requires_grad, [int64[4]], {k: 3}, 1.5"


def test_quantile_matches_torch():
    values = sorted([3.0, 1.0, 4.0, 1.5, 9.0, 2.6])
    for q in (0.25, 0.5, 0.75):
        assert verdicts.quantile(values, q) == pytest.approx(torch.tensor(values).quantile(q).item())


# --- statistics that know when they do not know ---------------------------------------------

class InjectedTimer:
    """A timer whose per-call means come from `draw` (an injected clock: no torch timing)."""

    def __init__(self, draw):
        self.draw, self.blocks = draw, 0

    def timeit(self, number):
        self.blocks += 1
        return SimpleNamespace(mean=self.draw())


def test_steady_timings_are_conclusive_and_stop_early():
    rng = random.Random(1)
    eager = InjectedTimer(lambda: 2e-3 * rng.uniform(0.99, 1.01))
    compiled = InjectedTimer(lambda: 1e-3 * rng.uniform(0.99, 1.01))
    t = tm.timing_of(tm.paired_rounds(eager, compiled, budget_s=30))
    assert t.conclusive and t.speedup == pytest.approx(2.0, rel=0.03)
    lo, hi = t.speedup_ci
    assert 1.9 < lo <= t.speedup <= hi < 2.1
    assert t.rounds == tm.MIN_ROUNDS  # it knows after the minimum: the budget is not spent
    b = verdicts.verdict("cpu", t, None, 10.0, verdicts.break_even(10.0, t), 0, True, ContentionReport(other_cpu_percent=3.0))
    assert b.startswith(f"worth it: forward faster: {lo:.2f}–{hi:.2f}× (median {t.speedup:.2f}×) on cpu") and "inconclusive" not in b
    assert "imprecise" not in b


def test_more_rounds_extend_the_first_look_in_place():
    """The forward's first look, then more rounds on the same timers (`resume`): one set of rounds,
    judged whole; a settled first look would have stopped at the minimum."""
    rng = random.Random(3)
    noisy = lambda base: (lambda: base * rng.lognormvariate(0.0, 1.0))  # noqa: E731
    eager, compiled = InjectedTimer(noisy(2e-4)), InjectedTimer(noisy(1e-4))
    ticks = iter(range(10_000))
    clock = lambda: float(next(ticks))  # noqa: E731
    first = tm.paired_rounds(eager, compiled, budget_s=10, clock=clock)
    n = len(first.eager)
    assert n >= tm.MIN_ROUNDS and not tm.settled(tm.timing_of(first))
    more = tm.paired_rounds(eager, compiled, budget_s=30, clock=clock, resume=first)
    assert more is first and len(more.eager) > n and len(more.eager) == len(more.compiled)
    assert tm.timing_of(more).rounds == len(more.eager)
    # a first look on a slow call goes on to its minimum rounds within the share it may take
    slow = tm.paired_rounds(eager, compiled, budget_s=1, clock=clock, max_s=100)
    assert len(slow.eager) >= tm.MIN_ROUNDS
    assert len(tm.paired_rounds(eager, compiled, budget_s=1, clock=clock).eager) < tm.MIN_ROUNDS


def test_noisy_timings_are_inconclusive_after_using_the_budget():
    rng = random.Random(2)

    def noisy(base):  # block means scattered by other processes, independently for each side
        return lambda: base * rng.lognormvariate(0.0, 1.0)

    ticks = iter(range(10_000))
    pairs = tm.paired_rounds(InjectedTimer(noisy(2e-4)), InjectedTimer(noisy(1e-4)),
                             budget_s=30, clock=lambda: float(next(ticks)))
    t = tm.timing_of(pairs)
    assert t.rounds > tm.MIN_ROUNDS  # rounds were extended within the budget before giving up
    lo, hi = t.speedup_ci
    assert lo <= 1.0 <= hi or hi - lo > tm.MAX_CI_WIDTH * t.speedup
    # the direction may still be certain: then it is said, as imprecise, never as "inconclusive"
    assert t.conclusive == (not lo <= 1.0 <= hi)
    if t.conclusive:
        assert speed_words(t) == f"faster: {lo:.2f}–{hi:.2f}× (median {t.speedup:.2f}×, imprecise)"
    # the same rounds on a machine where others took our cores: no direction at all
    busy = ContentionReport(other_cpu_percent=180.0, cpus=2)
    t = tm.timing_of(dataclasses.replace(pairs, quiet=[False] * len(pairs.eager)))
    assert not t.conclusive
    words = verdicts.verdict("cpu", t, t, 10.0, verdicts.break_even(10.0, t), 0, True, busy)
    assert words.startswith("inconclusive (train step on cpu): machine busy: other processes used 180% CPU "
                            "during timing (2 CPUs) — re-measure when idle")
    assert f"{t.speedup:.2f}×" not in words
    assert verdicts.break_even(10.0, t) is None  # no payback from a figure that is not one


def test_interval_that_contains_one_is_inconclusive():
    assert not tm.is_conclusive(1.0, [0.98, 1.02])
    assert tm.is_conclusive(1.5, [1.1, 2.0])  # excludes 1: the direction is certain, however wide
    assert tm.rel_width(1.5, [1.1, 2.0]) == pytest.approx(0.6)  # ... and imprecise (> MAX_CI_WIDTH)
    assert tm.is_conclusive(1.5, [1.45, 1.55]) and tm.is_conclusive(0.5, [0.48, 0.52])
    assert not tm.is_conclusive(float("nan"), [0.5, 0.6]) and not tm.is_conclusive(2.0, None)
    jitter = [0.99, 1.01, 1.0, 0.995, 1.005, 1.0, 0.99, 1.01, 1.0, 1.002]
    quiet = tm.timing_of(tm.Paired([1e-3 * j for j in jitter], [1e-3 * j for j in reversed(jitter)]))
    assert not quiet.conclusive
    assert "no measurable difference" in verdicts.inconclusive_why(quiet, ContentionReport(other_cpu_percent=1.0))
    # compiled clearly slower, but most rounds shared the cores (the run's average stayed under the
    # busy line): inconclusive, and the reason must not claim an interval that contains 1×
    rounds = tm.Paired([1e-3] * 10, [3e-3 * j for j in jitter], quiet=[True] * 3 + [False] * 7)
    shared = tm.timing_of(rounds)
    assert not shared.conclusive and shared.speedup_ci[1] < 1.0
    why = verdicts.inconclusive_why(shared, ContentionReport(other_cpu_percent=22.0, cpus=2, threads=2))
    assert why.startswith("machine busy: other processes took our cores") and "contains 1×" not in why


def test_a_certain_direction_is_said_however_wide_and_fail_on_slower_reads_it():
    from compile_lens.cli import gate
    from compile_lens.protocol import TargetResult

    wide_below = Timing(1.0, 1.4, 0.7, 0.0, 0.0, [0.55, 0.9], True, 12, ci_rel_width=0.5)
    wide_above = Timing(2.1, 1.0, 2.1, 0.0, 0.0, [1.9, 2.42], True, 12)  # stored before ci_rel_width
    around = Timing(1.0, 1.1, 0.9, 0.0, 0.0, [0.7, 1.1], False, 12)
    assert speed_words(wide_below) == "slower: 0.55–0.90× (median 0.70×, imprecise)"
    assert speed_words(wide_above) == "faster: 1.90–2.42× (median 2.10×, imprecise)"
    assert speed_words(around) == "inconclusive"
    assert verdicts.verdict("cpu", wide_above, None, 9.0, 9, 0, True).startswith(
        "worth it: forward faster: 1.90–2.42× (median 2.10×, imprecise) on cpu")
    for t, slower in ((wide_below, True), (wide_above, False), (around, False)):
        b = Benchmark("cpu", "cpu", "default", t, None, CompileSeconds(), None, PeakMemory(), Errors(), Errors(), "v", conclusive=t.conclusive)
        assert gate._slower(TargetResult("Net", "module", 1, benchmark=b)) is slower


def test_bootstrap_interval_is_seeded_and_brackets_the_median():
    values = [1.0, 1.2, 0.9, 1.1, 1.05, 0.95, 1.3, 1.0, 1.15, 0.98]
    lo, hi = tm.bootstrap_ci(values)
    assert (lo, hi) == tm.bootstrap_ci(values)
    assert lo <= sorted(values)[5] and hi >= sorted(values)[4] and lo < hi


def test_a_cpu_hog_beside_the_timing_is_measured():
    """Real contention: busy loops in processes this one started, while we wait, are counted as our
    own processes' CPU and make the machine busy (the CPU rule counts ours too; a foreign process is
    counted as others': tests/busy/test_busy_rule.py)."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        time.sleep(0.5)
        watch = Contention("cpu")
        time.sleep(2.0)
        seen = watch.report()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert seen.cpus == (os.cpu_count() or seen.cpus)
    assert seen.own_cpu_percent >= 20, seen  # two hogs on two cores: up to 200% (less under the other helpers)
    assert all(t.pid in {h.pid for h in hogs} for t in seen.top if t.ours), seen.top
    words = busy_words(seen)
    assert words and words.startswith("machine busy: ") and "% CPU during timing" in words
    assert ("our own processes used" in words) is (seen.own_cpu_percent > 50 or "other processes" not in words)


# --- what the user sees of an inconclusive figure --------------------------------------------

def _figures(conclusive: bool) -> Benchmark:
    if conclusive:
        fwd = Timing(0.412, 0.290, 1.42, 0.01, 0.01, [1.36, 1.49], True, 12)
    else:
        fwd = Timing(0.412, 0.1, 4.13, 3.0, 0.9, [0.31, 9.2], False, 16)
    busy = ContentionReport(other_cpu_percent=180.0, cpus=2)
    return Benchmark("cpu", "Xeon (2 threads)", "default", fwd, None, CompileSeconds(12.0, 2.0),
                     9000 if conclusive else None, PeakMemory(262144, 262144, "m"),
                     Errors(0.0), Errors(0.0),
                     verdicts.verdict("cpu", fwd, None, 12.0, 9000, 0, True, busy), conclusive=conclusive,
                     contention=busy)


def test_inconclusive_is_shown_as_such_everywhere():
    from compile_lens.protocol import TargetResult
    from compile_lens.render import cards as view
    from compile_lens.render import lens_titles as titles
    from compile_lens.render.cli_output import benchmark_json, benchmark_summary
    from compile_lens.render.report_html import _speed_cell

    b = _figures(conclusive=False)
    result = TargetResult("Net", "module", 3, benchmark=b)
    shown = {"lens": titles.lens_title(b), "hint": titles.hint_label(b), "cli": benchmark_summary(b),
             "hover": view.hover_card(result, b, guessed_inputs=False), "report": _speed_cell(b.forward)}
    for where, text in shown.items():
        assert "inconclusive" in text, where
        assert "4.13×" not in text and "0.00×" not in text, (where, text)  # never the noisy ratio
    for where in ("cli", "hover"):
        assert "machine busy: other processes used 180% CPU during timing" in shown[where], where
    assert "inconclusive — machine busy" in shown["lens"] and len(shown["lens"]) <= 100  # its head, at 100 columns
    data = benchmark_json(b)
    assert data["forward"]["conclusive"] is False and data["forward"]["speedup_ci"] == [0.31, 9.2]
    assert data["conclusive"] is False and data["contention"]["other_cpu_percent"] == 180.0

    good = _figures(conclusive=True)
    said = "faster: 1.36–1.49× (median 1.42×)"
    # the lens at 100 columns keeps the interval (what makes it conclusive), its median is the first to go
    assert f"forward {said.split(' (median')[0]} ·" in titles.lens_title(good) and said in _speed_cell(good.forward)
    # one figure of two the rounds could not tell: said as such beside the other
    mixed = dataclasses.replace(good, train_step=Timing(1.3, 2.5, 0.52, 0.01, 0.02, [0.5, 0.54], True, 12),
                                forward=b.forward)
    # the verdict's figure first; the one the rounds could not tell is the first to go at 100 columns
    assert titles.lens_title(mixed).startswith("⚡ torch.compile: train step slower: 0.50–0.54×")
    assert f"forward {said}" in benchmark_summary(good)
    assert said in view.hover_card(TargetResult("Net", "module", 3), good, guessed_inputs=False)
    assert titles.hint_label(good) == "⚡ forward 1.42× faster"


def test_cli_names_its_own_flag():
    from compile_lens.render.cli_output import cli_words

    assert cli_words("raise compileLens.benchmark.maxSeconds, or use smaller inputs") == \
        "raise --max-seconds, or use smaller inputs"
    assert cli_words("raise compileLens.worker.timeoutSeconds") == "raise --timeout"
    from compile_lens.cli.main import build_parser

    args = build_parser().parse_args(["check", "model.py", "--max-seconds", "12.5"])
    assert args.max_seconds == 12.5  # the flag the hint names exists, and sets benchmark.maxSeconds




def test_rounds_during_which_others_took_our_cores_do_not_count():
    steady = [1e-3] * 12
    fast = [0.5e-3 * (1 + 0.001 * i) for i in range(12)]
    mostly_busy = tm.Paired(steady, fast, [False] * 6 + [True] * 6)  # a tight 2× from 6 quiet rounds only
    t = tm.timing_of(mostly_busy)
    assert not t.conclusive  # fewer than MIN_ROUNDS quiet rounds: not a figure
    slow_when_busy = [5e-3] * 4 + fast[4:]
    enough = tm.timing_of(tm.Paired(steady, slow_when_busy, [False] * 4 + [True] * 8))
    assert enough.conclusive and enough.rounds == 8 and enough.speedup == pytest.approx(2.0, rel=0.01)
    # two cores, two threads: others may use half a core; sixteen cores, eight threads: 8.5 cores
    assert busy_threshold(2, 2) == 50.0 and busy_threshold(16, 8) == 850.0
    assert busy_words(ContentionReport(other_cpu_percent=40.0, cpus=2, threads=2)) is None
    assert busy_words(ContentionReport(other_cpu_percent=60.0, cpus=2, threads=2)).startswith("machine busy")


