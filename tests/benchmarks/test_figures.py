"""The typed figure (a number with its unit, its goal and the load it was taken under) and the one
JSON line a benchmark's child hands its figures back on: the verdict read from the figures, the
line's round trip, and a real child process whose figures line is found among its other output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.common import result_of  # noqa: E402
from benchmarks.figures import PROTOCOL, Figure, Load, Result, read_line  # noqa: E402


def test_a_figure_meets_its_goal_in_the_direction_that_is_better():
    assert Figure(2.9, "x", "lower", 3.0).met() is True and Figure(3.1, "x", "lower", 3.0).met() is False
    assert Figure(120, "MB/s", "higher", 100).met() is True and Figure(80, "MB/s", "higher", 100).met() is False
    assert Figure(1.08, "x", "near", 0.10).met() is True and Figure(0.85, "x", "near", 0.10).met() is False
    assert Figure(0.5, "s", "lower").met() is None  # a direction, no goal
    assert Figure(None, "x", "near", 0.10).met() is None  # not measured: no verdict
    assert Figure(2.9, "x", "lower", 3.0).goal() == "≤ 3 x" and Figure(1.0, "x", "near", 0.1).goal() == "1 ± 0.1 x"
    with pytest.raises(ValueError):
        Figure(1.0, "s", limit=2.0)  # a limit with no direction cannot be read
    with pytest.raises(ValueError):
        Figure(1.0, "s", "smaller")


def test_the_verdict_is_read_from_the_figures_unless_set():
    met, missed, plain = Figure(1, "count", "lower", 1), Figure(2, "count", "lower", 1), Figure(5.0, "s")
    assert Result({"a": met, "b": plain}).verdict() is True
    assert Result({"a": met, "b": missed}).verdict() is False
    assert Result({"b": plain}).verdict() is None  # nothing with a goal: no verdict
    assert Result({"a": met}, ok=False).verdict() is False  # an error outranks the figures
    assert Result.failed("rc 1: boom").verdict() is False


def test_a_result_round_trips_through_its_json_line():
    load = Load((1.5, 1.2, 0.9), 37.5, 2)
    r = Result({"MLP.ratio": Figure(1.23456789, "x", "near", 0.1, load), "graphs": Figure(7, "count")},
               notes={"printed": ["a", "b"]}, load=load)
    back = Result.from_json(r.to_json())
    assert back.figures["MLP.ratio"] == Figure(1.235, "x", "near", 0.1, load)  # 4 significant digits
    assert back.figures["graphs"] == Figure(7, "count") and back.notes == {"printed": ["a", "b"]} and back.load == load
    with pytest.raises(ValueError):
        Result.from_json({**r.to_json(), "protocol": "another/9"})


CHILD = r'''
import json, sys
sys.path.insert(0, {repo!r})
from benchmarks.figures import Figure, Result, emit
print("torch says: {{'ratio': 9.9}} and a table | 1.0 |")
print(json.dumps({{"protocol": "someone-else/1", "figures": {{}}}}))  # JSON, but not ours
emit(Result({{"sum": Figure(sum(range(10)), "count", "higher", 45), "took": Figure(0.25, "s", "lower")}}))
print("a last line of prose")
sys.exit({rc})
'''


def _child(rc: int = 0, body: str = CHILD) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", body.format(repo=str(REPO), rc=rc)], capture_output=True, text=True,
                          timeout=60)


def test_the_parent_reads_the_json_line_a_real_child_writes_among_its_prose():
    proc = _child()
    assert proc.returncode == 0, proc.stderr
    got = read_line(proc.stdout)
    assert got is not None and got.figures["sum"] == Figure(45, "count", "higher", 45)
    assert got.figures["took"].value == 0.25 and got.verdict() is True
    assert got.load is not None and got.load.cores >= 1  # the child's own load, taken as it wrote the line
    assert f'"protocol": "{PROTOCOL}"' in proc.stdout
    assert result_of(proc).figures == got.figures


def test_a_child_that_writes_no_figures_line_is_a_failed_result_and_its_exit_status_is_kept():
    exited = result_of(_child(rc=3))  # a child run by hand exits 1 on a missed goal: its figures still count
    assert exited.verdict() is True and exited.notes["rc"] == 3 and exited.figures["sum"].value == 45
    silent = result_of(_child(body="print('median 1.0 µs, total 2 ms')"))
    assert silent.verdict() is False and silent.notes["error"].startswith("rc 0, no figures line")
    crashed = result_of(_child(body="raise SystemExit('boom')"))
    assert crashed.verdict() is False and crashed.notes["error"].startswith("rc 1, no figures line") and "boom" in crashed.notes["error"]
    assert read_line("{not json\n[1, 2]\n") is None


def test_a_childs_plain_json_is_typed_by_its_names_with_goals_on_some():
    from benchmarks.figures import typed

    got = typed({"lines": 5000, "typing_ms": 12.5, "cold_s": 1.5, "sizes": {"big": {"heap_peak_mb": 40.0}},
                 "median_ratio": 1.1, "busy": False, "kinds_missing": [], "why": "text"},
                {"typing_ms": ("lower", 50.0), "median_ratio": ("lower", 1.2)})
    assert got.figures["lines"] == Figure(5000, "count") and got.figures["cold_s"].unit == "s"
    assert got.figures["typing_ms"] == Figure(12.5, "ms", "lower", 50.0) and got.figures["median_ratio"].unit == "x"
    assert got.figures["sizes.big.heap_peak_mb"].unit == "MB"  # nested: dotted names
    assert typed({"hover_ms": {"p50": 3.0}, "a.py": {"x_floor": 1.2}}).figures["hover_ms.p50"].unit == "ms"  # the parent's
    assert typed({"a.py": {"x_floor": 1.2}}).figures["a.py.x_floor"].unit == "x"
    assert got.notes == {"busy": False, "kinds_missing": [], "why": "text"} and got.verdict() is True
    assert typed({"typing_ms": 80.0}, {"typing_ms": ("lower", 50.0)}).verdict() is False
    assert typed({"ok": False, "error": "rc 1: boom"}).verdict() is False
    missing = typed({"lines": 3}, {"typing_ms": ("lower", 50.0)})  # the goal's figure never written: no pass
    assert missing.verdict() is False and missing.notes["goals_without_a_figure"] == ["typing_ms"]
