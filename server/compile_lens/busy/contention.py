"""Was the machine busy while we timed? `Contention` reads a span (a workload's timing) or a round
(one pair of blocks) with `cpu`'s and `gpu`'s readers and asks the rule (`rule.decide`) per device;
`report()` is the JSON `contention`. The timing's rounds, every lever's and the line costs' profiles
read it in the worker; it never imports torch itself (torch's thread count is read from the torch the
worker already loaded).

Tests only: `COMPILE_LENS_TEST_QUIET=1` declares the machine quiet (`declared_quiet`), read only
while pytest runs a test (`PYTEST_CURRENT_TEST`, which the processes a test starts inherit), so that
a test on a loaded 2-core machine gets the figures a user's idle machine gives and can assert them;
the contention then says so (`declared_quiet: true`, and what the rule would have said), so no
figure pretends. Its rounds on the CPU are timed on the timing thread's CPU clock (`round_clock`,
`clock: "thread CPU"`): on a 2-core machine shared with an editor and another test worker, wall
time per call rose ×4–×7 and the train step's ratio fell to ×1.2 from ×2.2, while CPU time is what
the call itself did. Their budget is counted on that clock too (`timing.rounds.paired_rounds`),
and a declared round reads no process table (that reading spent the clock): as many rounds as on
an idle machine, in more wall time. (The clock sees the timing thread's work alone: the tests'
models are too small for torch to split a call across threads.)
Never a user setting: docs/settings.md does not name it.

Before the rounds, `settle` waits for Inductor's compile pool to be ready and for our own
processes to go quiet (the pool starts at the first compile, one worker per core).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable, Optional

from ..measured import ContentionReport
from .cpu import PROC, OthersCPU, load_average, thread_run_delay_s
from .gpu import gpu_others
from .rule import Load, decide

SETTLE_MAX_S = 5.0  # at most this long waiting for our own processes to go quiet before timing
SETTLE_PERCENT = 20.0  # our own processes under this share of one CPU: quiet
SETTLE_WINDOW_S = 0.1
SETTLE_WINDOWS = 2
QUIET_ENV = "COMPILE_LENS_TEST_QUIET"  # tests only (see the module): "1" under pytest declares the machine quiet


def declared_quiet() -> bool:
    """A test declared the machine quiet: `COMPILE_LENS_TEST_QUIET=1` while pytest runs a test
    (read at each call: a test sets it for the processes it starts). Outside pytest it is ignored."""
    return os.environ.get(QUIET_ENV) == "1" and bool(os.environ.get("PYTEST_CURRENT_TEST"))


def round_clock(device: str) -> Optional[Callable[[], float]]:
    """The clock timing rounds read instead of wall time: the thread's CPU time under a test's
    declaration on the CPU (another process's load does not enter it; such rounds run on one
    thread), else None (wall time, and on CUDA the Timer's synchronising clock)."""
    return time.thread_time if declared_quiet() and not device.startswith("cuda") else None


def torch_threads(cpus: int) -> int:
    """The threads torch runs its ops on in this process, asked of the torch already loaded (the
    worker, a lever's child): the server imports this module and never torch. None loaded: every core
    (torch's own default, as a user's program runs)."""
    torch = sys.modules.get("torch")
    get = getattr(torch, "get_num_threads", None)
    return get() if get is not None else cpus


class Contention:
    """What ran beside us since `start()`, judged by the device's rule (see the module)."""

    def __init__(self, device: str = "cpu", proc: str = PROC, cpus: Optional[int] = None):
        self.device, self.proc = device, proc
        self.cpus = cpus or os.cpu_count() or 1
        self._cpu = OthersCPU()
        self._tid = threading.get_native_id()  # the thread that launches the timed work
        self.start(gpu=True)

    def start(self, gpu: bool = False) -> None:
        """`gpu` (a span's start, e.g. a workload's timing): a full reading that can name processes;
        else a round's start (cheap)."""
        self._cpu.start(full=gpu)
        self._t0 = time.perf_counter()
        self._sched0 = thread_run_delay_s(self._tid, self.proc)
        self._gpu0 = gpu_others() if self.device.startswith("cuda") else (None, "")

    def other_cpu_percent(self) -> Optional[float]:
        use = self._cpu.use()
        return None if use is None else use.others

    def _read(self) -> ContentionReport:
        wall = time.perf_counter() - self._t0
        cpu = self._cpu.use()
        found = ContentionReport(cpus=self.cpus, threads=torch_threads(self.cpus),
                                 rule="cuda" if self.device.startswith("cuda") else "cpu")
        if cpu is not None:
            found.other_cpu_percent, found.own_cpu_percent = round(cpu.others, 1), round(cpu.ours, 1)
            found.top = list(cpu.top)
        sched = None
        if self._sched0 is not None and (now := thread_run_delay_s(self._tid, self.proc)) is not None:
            sched = max(0.0, now - self._sched0)
            found.launch_wait_percent = round(100.0 * sched / max(wall, 1e-9), 1)
        gpu = None
        if self.device.startswith("cuda"):
            later, why = gpu_others()
            seen = [g for g in (self._gpu0[0], later) if g is not None]
            gpu = tuple({p.pid: p for g in seen for p in g}.values()) if seen else None
            found.gpu_other_processes = None if gpu is None else len(gpu)
            if gpu is None:
                found.unknown.append(f"other processes on the GPU ({why or self._gpu0[1]})")
        if self.device.startswith("cuda") and sched is None:
            found.load_average = load_average(self.proc)
            found.unknown.append("our launching thread's wait for a core (no /proc schedstat): busy only when "
                                 "others' CPU left no core for it")
        busy, words = decide(self.device, Load(cpus=self.cpus, threads=found.threads, cpu=cpu, wall_s=wall,
                                               sched_delay_s=sched, load_average=found.load_average, gpu_others=gpu))
        found.busy, found.why = busy, words if busy else []
        if declared_quiet():  # a test's declaration: every round counts, and the reading says why
            found.busy, found.declared_quiet, found.busy_by_rule = False, True, busy
            if round_clock(self.device) is not None:
                found.clock = "thread CPU"
        return found

    def round_quiet(self) -> Optional[bool]:
        """Was this round quiet by the device's rule? None: nothing could be read. Under a test's
        declaration: quiet, unread (a reading of every process would spend the rounds' CPU clock)."""
        if declared_quiet():
            return True
        found = self._read()
        if found.other_cpu_percent is None and found.launch_wait_percent is None and not found.gpu_other_processes:
            return None
        return not found.busy

    def report(self) -> ContentionReport:
        """The JSON `contention` (`measured.ContentionReport`); under a test's declaration
        `declared_quiet` (busy False; `busy_by_rule` and `why`: what the rule saw)."""
        return self._read()


def settle(max_s: float = SETTLE_MAX_S) -> float:
    """Before timing: wait for Inductor's compile pool (if this process started one) to be ready,
    then for our own other processes to go quiet; the seconds waited."""
    started = time.perf_counter()
    mod = sys.modules.get("torch._inductor.async_compile")
    pool = getattr(getattr(mod, "AsyncCompile", None), "process_pool", None)
    info = getattr(pool, "cache_info", None)
    quiesced = info is not None and info().currsize and getattr(pool(), "quiesce_waitcounter", None) is not None
    if info is not None and info().currsize and not quiesced:  # its workers may still be starting (a quiesced
        try:  # pool has none running: waiting for it would start them)
            mod.AsyncCompile.wait_pool_ready(timeout=max_s)  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - a pool that failed to start is Inductor's business, not the timing's
            pass
    watch, quiet = OthersCPU(), 0
    while time.perf_counter() - started < max_s and quiet < SETTLE_WINDOWS:
        watch.start(full=False)
        time.sleep(SETTLE_WINDOW_S)
        use = watch.use()
        # quiet windows in a row: on a loaded machine a busy process of ours can miss one window
        quiet = quiet + 1 if use is None or use.ours < SETTLE_PERCENT else 0
    return time.perf_counter() - started
