"""What fails a build or is named a change must be a figure the measurement stands behind:
`--fail-on slower` only on a conclusive timing (an interval wholly below 1 on a quiet machine; a
timing with no interval is never conclusive), `--compare-with` a guard change only from two
measurable intervals taken on a quiet machine. On a real recorded measurement (torch 2.14.1's of
examples/item_scale.py), its figures set as each case needs; no torch runs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from compile_lens.cli import gate
from compile_lens.protocol import ContentionReport
from compile_lens.torch_diff import compare
from paths import DATA, REPO
from torch_results import load_recorded

EXAMPLES = REPO / "examples"
RECORDED = DATA / "torch_2_14_1" / "item_scale.json"
QUIET = ContentionReport(cpus=2, threads=2, other_cpu_percent=10.0)


def _reports():
    reports, runtime = load_recorded(RECORDED, EXAMPLES)
    assert reports[0].targets[0].benchmark is not None  # a real measurement, with a train step
    return reports, runtime


def _set_main_timing(reports, **fields) -> None:
    bench = reports[0].targets[0].benchmark
    main = bench.train_step or bench.forward
    for name, value in fields.items():
        setattr(main, name, value)


@pytest.mark.parametrize("ci,conclusive,fails", [
    ([0.7, 0.9], True, True),  # wholly below 1, quiet: certain
    ([0.7, 1.1], False, False),  # the interval holds 1: inconclusive
    (None, True, False),  # one round: no interval, so never conclusive, whatever the flag
    (None, False, False),
])
def test_fail_on_slower_only_on_a_conclusive_timing(ci, conclusive, fails):
    reports, _ = _reports()
    _set_main_timing(reports, speedup=0.8, speedup_ci=ci, conclusive=conclusive)
    failed = gate.failures(reports, ["slower"])
    assert bool(failed.get("slower")) is fails, failed


def _guarded(reports, us: float, ci, contention=QUIET):
    bench = reports[0].targets[0].benchmark
    bench.forward.guard_us_per_call, bench.forward.guard_us_ci = us, ci
    bench.contention = contention
    return reports


@pytest.mark.parametrize("base_ci,other_ci,busy,named", [
    ([1.0, 2.0], [5.0, 6.0], False, True),  # both measurable, apart, quiet
    ([-0.5, 2.0], [5.0, 6.0], False, False),  # base's interval reaches 0: "not measurable"
    ([1.0, 2.0], [0.0, 6.0], False, False),
    ([1.0, 2.0], [5.0, 6.0], True, False),  # a busy machine on one side
    ([1.0, 5.5], [5.0, 6.0], False, False),  # overlapping
])
def test_compare_names_a_guard_change_only_from_measurable_quiet_intervals(base_ci, other_ci, busy, named):
    base, runtime = _reports()
    other, _ = _reports()
    _guarded(base, sum(base_ci) / 2, base_ci)
    _guarded(other, sum(other_ci) / 2, other_ci, replace(QUIET, other_cpu_percent=190.0) if busy else QUIET)
    diff = compare(base, {"torch": "2.13.0"}, other, runtime, str(EXAMPLES))
    [target] = diff["targets"]
    guard_changes = [c for c in target["changes"] if c.startswith("guards")]
    assert bool(guard_changes) is named, target["changes"]
    assert target["guard_us_per_call"]["base"]["measurable"] is (base_ci[0] > 0)
    if named:
        assert guard_changes == [f"guards {sum(base_ci) / 2:.1f} → {sum(other_ci) / 2:.1f} µs"]

