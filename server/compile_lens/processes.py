"""Process lifetimes shared by the server and the worker: psutil and the standard library only.

`kill_tree` ends a process with everything it started (the server's workers, the worker's
cold-compile child and Inductor's compile workers); `watch_parent` makes a child exit when the
process that started it is gone, so nothing is left orphaned; `OthersCPU` measures what other
processes took while we timed something (the benchmark's rounds, a lever's sides, a trial's runs),
telling our own processes apart from others'.

**Ours**: the tree of `our_root()` — this process and its live descendants (Inductor's compile
workers, a cold-compile child and its pool) and, when this process was started by compile-lens's
CLI or server, that parent and everything else it started (its other workers). Everything else on
the machine is **others**. Others' CPU is the machine's busy time less our tree's, so a short-lived
foreign process (a compiler a build starts) is counted even though no snapshot saw it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass, field
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


TOP_N = 5  # processes named when the machine was busy
TOP_MIN_PERCENT = 5.0  # below this share of one CPU a process is not worth naming
CMDLINE_CHARS = 120


def _is_compile_lens(proc: psutil.Process) -> bool:
    """compile-lens's CLI or server: `compile-lens check …`, `python -m compile_lens …`."""
    try:
        words = proc.cmdline()
    except psutil.Error:
        return False
    return any(os.path.basename(w) == "compile-lens" or w == "compile_lens" or w.startswith("compile_lens.")
               for w in words[:6])  # `python -X dev -m compile_lens`: the module comes late


def our_root(me: Optional[psutil.Process] = None) -> int:
    """The pid whose tree is ours: the compile-lens CLI or server that started this process (its other
    workers are ours too), else this process."""
    me = me or psutil.Process()
    with contextlib.suppress(psutil.Error):
        parent = me.parent()
        if parent is not None and _is_compile_lens(parent):
            return parent.pid
    return me.pid


@dataclass(frozen=True)
class _Proc:
    ppid: int
    name: str
    cpu_s: float  # user + system, its waited-for children's included
    self_s: float  # its own user + system (a child reaped meanwhile adds its whole life to `cpu_s`)


def _snapshot() -> dict[int, _Proc]:
    """Every process's parent, name and CPU seconds (one pass over the process table)."""
    found = {}
    for proc in psutil.process_iter(["ppid", "name", "cpu_times"]):
        times = proc.info.get("cpu_times")
        if times is not None:  # None: another user's process we may not read (its time is still others')
            found[proc.pid] = _Proc(proc.info.get("ppid") or 0, proc.info.get("name") or "?",
                                    _own_cpu_s_of(times), times.user + times.system)
    return found


def _own_cpu_s_of(t: Any) -> float:
    return t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)


def tree(snapshot: dict[int, _Proc], root: int) -> set[int]:
    """`root` and its descendants in a snapshot."""
    kids: dict[int, list[int]] = {}
    for pid, p in snapshot.items():
        kids.setdefault(p.ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(kids.get(pid, ()))
    return found


def our_pids() -> set[int]:
    """This process's family now (see the module's docstring)."""
    me = psutil.Process()
    return tree(_snapshot(), our_root(me)) | {me.pid}


@dataclass
class CpuUse:
    """What ran beside us, in % of one CPU (200% = two CPUs' worth): `others` (not our tree), `ours`
    (our tree less this process: compile workers, the parent CLI or server), and the busiest
    processes (`top`: [{pid, name, cmdline, cpu_percent, ours}], only from a `full` reading)."""
    others: float
    ours: float
    top: list[dict[str, Any]] = field(default_factory=list)


class OthersCPU:
    """Other processes' CPU use since `start()`, in % of one CPU, with our own processes told apart.

    `start(full=True)` reads the whole process table (tens of ms), so the end reading can name the
    busiest processes; `start(full=False)` (a timing round) reads only the machine's total and the
    processes of our tree as the last full reading found them: a descendant born since counts as
    others there (a round is never judged quieter than it was)."""

    def __init__(self) -> None:
        self._me = psutil.Process()
        self._root = our_root(self._me)
        self._snap0: dict[int, _Proc] = {}
        self._ours: dict[int, psutil.Process] = {}
        self._ours0: dict[int, float] = {}
        self._full = True
        self.start()

    def start(self, full: bool = True) -> None:
        if full or not self._ours:
            self._snap0 = _snapshot()
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
                found[pid] = _own_cpu_s_of(proc.cpu_times())
        return found

    def use(self, top_n: int = TOP_N) -> Optional[CpuUse]:
        """Since `start()`: others' and our own processes' CPU, and after a full start the `top_n`
        busiest by name."""
        wall = time.perf_counter() - self._t0
        if wall <= 0:
            return None
        machine = _busy_s(psutil.cpu_times()) - self._sys0
        me = _own_cpu_s(self._me) - self._me0
        top: list[dict[str, Any]] = []
        if self._full:
            snap1 = _snapshot()
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

    def _top(self, snap: dict[int, _Proc], deltas: dict[int, float], ours: set[int], wall: float,
             top_n: int) -> list[dict[str, Any]]:
        busiest = sorted((pid for pid in deltas if pid != self._me.pid), key=lambda pid: -deltas[pid])
        top = []
        for pid in busiest[:top_n]:
            pct = 100.0 * deltas[pid] / wall
            if pct < TOP_MIN_PERCENT:
                break
            top.append({"pid": pid, "name": snap[pid].name, "cmdline": _cmdline(pid),
                        "cpu_percent": round(pct, 1), "ours": pid in ours})
        return top

    def percent(self) -> Optional[float]:
        """Others' CPU and our own other processes' together (the CPU rule's figure: either took our cores)."""
        use = self.use()
        return None if use is None else use.others + use.ours


def _cmdline(pid: int) -> str:
    try:
        words = " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return ""
    return words if len(words) <= CMDLINE_CHARS else words[:CMDLINE_CHARS - 1] + "…"


def top_words(top: list[dict[str, Any]], ours: bool, n: int = 3) -> str:
    """`pytest 95%, chromium 60%`: the busiest of `top` on one side (ours or others')."""
    from .gpu.busy import process_label  # pure; the label the busy-GPU wait shows

    named = [t for t in top if bool(t.get("ours")) == ours][:n]
    return ", ".join(f"{_label(t, process_label)} {t['cpu_percent']:.0f}%" for t in named)


def _label(t: dict[str, Any], process_label: Any) -> str:
    cmd = str(t.get("cmdline") or "")
    if "compile_worker" in cmd:
        return "Inductor compile worker"
    return process_label(cmd.split(), str(t.get("name") or "?")) if cmd else str(t.get("name") or f"pid {t.get('pid')}")


def cpu_busy_words(others: Optional[float], ours: Optional[float], cpus: int, threads: int,
                   top: list[dict[str, Any]], during: str = "during timing") -> list[str]:
    """The CPU rule (as strict as it has always been: any CPU beyond the cores our threads leave idle
    and half a core, whoever used it), in words that tell others from our own: []: not busy."""
    others, ours = others or 0.0, ours or 0.0
    if others + ours <= busy_threshold(cpus, threads):
        return []
    parts = []
    if others >= ours or others > 100.0 * BUSY_MARGIN:
        named = top_words(top, ours=False)
        parts.append(f"other processes used {others:.0f}% CPU {during} ({cpus} CPUs)" + (f": {named}" if named else ""))
    if ours > 100.0 * BUSY_MARGIN or not parts:
        named = top_words(top, ours=True)
        parts.append(f"our own processes used {ours:.0f}% CPU {during}" + (f": {named}" if named else ""))
    return parts


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
