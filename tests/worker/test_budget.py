"""The budget as a bound (`worker/measure/run/budget.py`), on the clock alone (no torch): a part that would
not fit is not run, one that runs past the stop point is stopped there — even one that swallows
`Exception`, as user code and torch do — and the forward's figure stretches the bound."""

from __future__ import annotations

import time

from compile_lens.worker.measure.run.budget import (
    GRACE,
    SLACK_S,
    WRAP_UP_S,
    Budget,
    part_status,
    run_part,
)


def _spin(seconds: float) -> None:
    """Busy for `seconds` (a part that runs on), catching every Exception as user code may."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        try:
            sum(range(1000))
        except Exception:  # noqa: BLE001 - the stop must not be swallowed here
            pass


def test_a_part_that_would_not_fit_is_not_run_and_one_that_runs_on_is_stopped_at_the_stop_point():
    # started long enough ago that 0.3 s are left before the stop point
    budget = Budget(2.0, started=time.perf_counter() - (2.0 * GRACE + SLACK_S - WRAP_UP_S - 0.3))
    ran: list[int] = []
    assert run_part(budget, 5.0, lambda: ran.append(1)) == "not run: 2 s budget" and ran == []
    assert run_part(budget, 0.0, lambda: ran.append(2)) is None and ran == [2]  # fits: runs to its end
    why = run_part(budget, 0.0, lambda: _spin(5.0))
    assert why == "stopped: 2 s budget"
    past = budget.elapsed() - (budget.bound_s() - WRAP_UP_S)
    assert 0 <= past < 0.2, past  # at the stop point, not after the 5 s it would have run
    assert part_status(why) == ("failed", "stopped: 2 s budget")
    assert part_status("not run: 2 s budget") == ("not-run", "2 s budget") and part_status(None) == ("done", None)
    assert run_part(None, 1e9, lambda: ran.append(3)) is None and ran == [2, 3]  # no budget: every part runs


def test_the_forwards_figure_stretches_the_bound_and_nothing_before_it_is_cut():
    budget = Budget(4.0, started=time.perf_counter() - 20.0)  # the forward's figure took 20 s
    assert budget.bound_s() == 4.0 * GRACE + SLACK_S and not budget.fits(0.0)
    budget.forward_landed()
    assert budget.forward_s is not None and budget.bound_s() == budget.forward_s * GRACE + SLACK_S
    assert budget.fits(1.0) and not budget.fits(10.0)  # 20 × 1.1 + 5 − 3.5 − 20 = 3.5 s left
