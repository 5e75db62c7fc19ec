"""Process lifetimes shared by the server and the worker: psutil and the standard library only.

`kill_tree` ends a process with everything it started (the server's workers, the worker's
cold-compile child and Inductor's compile workers); `watch_parent` makes a child exit when the
process that started it is gone, so nothing is left orphaned; `OthersCPU` measures what other
processes took while we timed something (the benchmark's rounds, a trial's runs).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any, Optional

import psutil

_IDLE_FIELDS = {"idle", "iowait", "guest", "guest_nice"}  # guest time is already in user time


def _busy_s(times: Any) -> float:
    return sum(getattr(times, f) for f in times._fields if f not in _IDLE_FIELDS)


def _own_cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()  # children_*: the waited-for children, theirs included
    return t.user + t.system + t.children_user + t.children_system


BUSY_MARGIN = 0.5  # CPUs' worth others may use beyond the cores our threads leave idle


def busy_threshold(cpus: int, threads: int) -> float:
    """Others' CPU use (% of one CPU) above which they must have taken time from our threads: the
    cores our threads leave idle, plus half a core. (The worker's timing and `torch_diff`, which
    judges a side measured elsewhere, read it here: the server may not import the worker.)"""
    return 100.0 * (BUSY_MARGIN + max(0, cpus - threads))


class OthersCPU:
    """Other processes' CPU use since `start()`, in % of one CPU (200% = two CPUs' worth): the
    machine's busy time less this process's and its waited-for children's."""

    def __init__(self) -> None:
        self._me = psutil.Process()
        self.start()

    def start(self) -> None:
        self._t0 = time.perf_counter()
        self._sys0 = _busy_s(psutil.cpu_times())
        self._me0 = _own_cpu_s(self._me)

    def percent(self) -> Optional[float]:
        wall = time.perf_counter() - self._t0
        if wall <= 0:
            return None
        others = (_busy_s(psutil.cpu_times()) - self._sys0) - (_own_cpu_s(self._me) - self._me0)
        return max(0.0, 100.0 * others / wall)


def kill_tree(pid: int) -> None:
    """SIGKILL a process and everything it started."""
    try:
        parent = psutil.Process(pid)
        procs = parent.children(recursive=True) + [parent]
    except psutil.Error:
        return
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    # No wait here: reaping our own child would steal its exit status from asyncio.


def watch_parent(parent: Optional[int] = None, *, exit_code: int = 0) -> None:
    """Exit (with `exit_code`, no teardown) when `parent`, default the current parent, goes away.

    A parent that died before this call is noticed only when its pid is given: by then
    `os.getppid()` already names the process that adopted us.
    """
    parent = os.getppid() if parent is None else parent

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(exit_code)
            time.sleep(0.5)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
