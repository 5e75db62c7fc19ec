"""The measurement's budget as a bound (`--max-seconds`, the setting `benchmark.maxSeconds`).

A target's measurement ends within max(budget, time to the forward's figure) × `GRACE` + `SLACK_S`
of its start. The forward's headline (its cold compile and first look) is never cut: without it there
is nothing to show, so its time stretches the budget. Every later part (the forward's warm compile and
accuracy, its more rounds, the train step, peak memory, the line costs, the drift, the deployment
parts) starts only where what it should take (`estimates`) fits before the stop point, else it is
"not run: N s budget"; one that runs on past the stop point is stopped there (`stopping`: an alarm in
this process's main thread, a child process killed with it) and named "stopped: N s budget". Timing
rounds get the time left as their limit instead (`left_s`): their pairs stand on their own.

A part the user asked for (`AnalyzeJob.opt_in`, `check --with`) runs whatever the budget, as what it
needs does (the forward's warm compile): its caller passes no budget for it. `None` where a budget is
expected (that, a test calling `run_benchmark` directly, `deployment_parts` without `budget`): no bound.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

GRACE = 1.1  # the bound: max(budget, to the forward's figure) × GRACE + SLACK_S
SLACK_S = 5.0
# kept back from the bound for what follows a stopped part: the snapshot and its send, Dynamo's reset,
# the cache folder's removal, the deployment parts named, the CLI's output
WRAP_UP_S = 3.5


class Overrun(BaseException):
    """Raised by the alarm in the part that ran past the stop point: a BaseException, so that torch's
    and the user's `except Exception` do not swallow it (as KeyboardInterrupt is not)."""


@dataclass
class Stopped:
    """What `stopping` says about its block: `why` set ("stopped: N s budget") when it was stopped."""

    why: Optional[str] = None


class Budget:
    """One measurement's bound: `max_seconds` from `started` (perf_counter), stretched to the time of
    the forward's figure once that is known (`forward_landed`)."""

    def __init__(self, max_seconds: float, started: Optional[float] = None):
        self.max_seconds = max_seconds
        self.started = time.perf_counter() if started is None else started
        self.forward_s: Optional[float] = None  # seconds from `started` to the forward's headline

    @property
    def label(self) -> str:
        return f"{self.max_seconds:.0f} s budget"

    @property
    def not_run(self) -> str:
        return f"not run: {self.label}"

    @property
    def stopped(self) -> str:
        return f"stopped: {self.label}"

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def forward_landed(self) -> None:
        """The forward's headline is out: from here the budget is max(budget, this long)."""
        if self.forward_s is None:
            self.forward_s = self.elapsed()

    def bound_s(self) -> float:
        """The most the measurement may take, from `started`."""
        return max(self.max_seconds, self.forward_s or 0.0) * GRACE + SLACK_S

    def left_s(self) -> float:
        """Seconds until the stop point (the bound less `WRAP_UP_S`); negative once past it."""
        return self.bound_s() - WRAP_UP_S - self.elapsed()

    def fits(self, cost_s: float) -> bool:
        """Whether a part that should take `cost_s` can start and end before the stop point."""
        return cost_s <= self.left_s()

    @contextlib.contextmanager
    def stopping(self) -> Iterator[Stopped]:
        """Run the block until the stop point at the latest: past it, `Overrun` is raised in the block
        (in the main thread only: elsewhere the block runs on, as Python signals reach no other
        thread) and the block is left with `why` set. Alarms do not nest: an inner block re-arms."""
        outcome = Stopped()
        armed = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
        previous = None
        if armed:
            previous = signal.signal(signal.SIGALRM, _overrun)
            signal.setitimer(signal.ITIMER_REAL, max(self.left_s(), 1e-3))  # past it already: at once
        try:
            yield outcome
        except Overrun:
            outcome.why = self.stopped
        finally:
            if armed:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous or signal.SIG_DFL)


def _overrun(signum: int, frame: object) -> None:
    raise Overrun()


def bounded(budget: Optional[Budget]) -> contextlib.AbstractContextManager[Stopped]:
    """`budget.stopping()`, or a block that is never stopped (no budget)."""
    return budget.stopping() if budget is not None else contextlib.nullcontext(Stopped())


def fits(budget: Optional[Budget], cost_s: float) -> bool:
    return budget is None or budget.fits(cost_s)


def run_part(budget: Optional[Budget], cost_s: float, work: Callable[[], None]) -> Optional[str]:
    """Run `work` where what it should take (`cost_s`) fits, stopped at the stop point: None when it
    ran to its end, else why not ("not run: N s budget", "stopped: N s budget")."""
    if budget is None:
        work()
        return None
    if not budget.fits(cost_s):
        return budget.not_run
    with budget.stopping() as outcome:
        work()
    return outcome.why


def part_status(why: Optional[str]) -> tuple[str, Optional[str]]:
    """`run_part`'s answer as a part's status and why (`protocol.PartStatus`, without "not run:")."""
    if why is None:
        return "done", None
    if why.startswith("not run: "):
        return "not-run", why.removeprefix("not run: ")
    return "failed", why
