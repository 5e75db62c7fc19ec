"""What other processes took of the CPU while we timed something (the benchmark's rounds, a lever's
compile sides, a trial's runs), our own processes told apart (`processes.our_pids`'s family), and what
the kernel says of our launching thread's wait for a core (schedstat) and of the load average.
psutil and /proc only: the readings the rule (`rule.decide`) judges.

Others' CPU is the machine's busy time less our tree's, so a short-lived foreign process (a compiler
a build starts) is counted even though no snapshot saw it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Optional

import psutil

from ..measured import BusyProcess
from ..processes import Proc, our_root, own_cpu_s_of, snapshot, tree
from .rule import CpuUse

PROC = "/proc"  # where schedstat and loadavg are read (a test points it at a folder without them)

_IDLE_FIELDS = {"idle", "iowait", "guest", "guest_nice"}  # guest time is already in user time


def _busy_s(times: Any) -> float:
    return sum(getattr(times, f) for f in times._fields if f not in _IDLE_FIELDS)


def _own_cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()  # children_*: the waited-for children, theirs included
    return t.user + t.system + t.children_user + t.children_system


TOP_N = 5  # processes named when the machine was busy
TOP_MIN_PERCENT = 5.0  # below this share of one CPU a process is not worth naming
CMDLINE_CHARS = 120


class OthersCPU:
    """Other processes' CPU use since `start()`, in % of one CPU, with our own processes told apart.

    `start(full=True)` reads the whole process table (tens of ms), so the end reading can name the
    busiest processes; `start(full=False)` (a timing round) reads only the machine's total and the
    processes of our tree as the last full reading found them: a descendant born since counts as
    others there (a round is never judged quieter than it was)."""

    def __init__(self) -> None:
        self._me = psutil.Process()
        self._root = our_root(self._me)
        self._snap0: dict[int, Proc] = {}
        self._ours: dict[int, psutil.Process] = {}
        self._ours0: dict[int, float] = {}
        self._full = True
        self.start()

    def start(self, full: bool = True) -> None:
        if full or not self._ours:
            self._snap0 = snapshot()
            procs = {pid: self._process(pid) for pid in tree(self._snap0, self._root) | {self._me.pid}}
            self._ours = {pid: proc for pid, proc in procs.items() if proc is not None}
            self._ours0 = {pid: p.cpu_s for pid, p in self._snap0.items() if pid in self._ours}
            self._full = True
        else:
            self._ours0 = self._read_ours()
            self._full = False
        self._t0 = time.perf_counter()
        self._sys0 = _busy_s(psutil.cpu_times())
        self._me0 = _own_cpu_s(self._me)

    def _process(self, pid: int) -> Optional[psutil.Process]:
        if pid == self._me.pid:
            return self._me
        try:
            return psutil.Process(pid)
        except psutil.Error:  # gone since the snapshot
            return None

    def _read_ours(self) -> dict[int, float]:
        found = {}
        for pid, proc in list(self._ours.items()):
            with contextlib.suppress(psutil.Error):
                found[pid] = own_cpu_s_of(proc.cpu_times())
        return found

    def use(self, top_n: int = TOP_N) -> Optional[CpuUse]:
        """Since `start()`: others' and our own processes' CPU, and after a full start the `top_n`
        busiest by name."""
        wall = time.perf_counter() - self._t0
        if wall <= 0:
            return None
        machine = _busy_s(psutil.cpu_times()) - self._sys0
        me = _own_cpu_s(self._me) - self._me0
        top: list[BusyProcess] = []
        if self._full:
            snap1 = snapshot()
            ours1 = tree(snap1, self._root) | {self._me.pid}
            deltas = {pid: p.cpu_s - (self._snap0[pid].cpu_s if pid in self._snap0 else 0.0)
                      for pid, p in snap1.items()}
            ours = sum(max(0.0, deltas[pid]) for pid in ours1 if pid in deltas and pid != self._me.pid)
            own = {pid: p.self_s - (self._snap0[pid].self_s if pid in self._snap0 else 0.0) for pid, p in snap1.items()}
            top = self._top(snap1, own, ours1, wall, top_n)
        else:
            now = self._read_ours()
            ours = sum(max(0.0, now[pid] - self._ours0.get(pid, 0.0)) for pid in now if pid != self._me.pid)
        others = machine - me - ours
        return CpuUse(max(0.0, 100.0 * others / wall), max(0.0, 100.0 * ours / wall), top)

    def _top(self, snap: dict[int, Proc], deltas: dict[int, float], ours: set[int], wall: float,
             top_n: int) -> list[BusyProcess]:
        busiest = sorted((pid for pid in deltas if pid != self._me.pid), key=lambda pid: -deltas[pid])
        top = []
        for pid in busiest[:top_n]:
            pct = 100.0 * deltas[pid] / wall
            if pct < TOP_MIN_PERCENT:
                break
            top.append(BusyProcess(pid, snap[pid].name, _cmdline(pid), round(pct, 1), pid in ours))
        return top


def _cmdline(pid: int) -> str:
    try:
        words = " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return ""
    return words if len(words) <= CMDLINE_CHARS else words[:CMDLINE_CHARS - 1] + "…"


def thread_run_delay_s(tid: Optional[int] = None, proc: str = PROC) -> Optional[float]:
    """Seconds the thread `tid` (default: the calling one) has waited on a run queue for a core,
    since it started (the second field of /proc/self/task/TID/schedstat); None: not readable."""
    tid = threading.get_native_id() if tid is None else tid
    try:
        with open(f"{proc}/self/task/{tid}/schedstat", encoding="ascii") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def load_average(proc: str = PROC) -> Optional[float]:
    """The 1-minute load average (/proc/loadavg's first field); None: not readable."""
    try:
        with open(f"{proc}/loadavg", encoding="ascii") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
