"""Process lifetimes shared by the server and the worker: psutil and the standard library only.

`kill_tree` ends a process with everything it started (the server's workers, the worker's
cold-compile child and Inductor's compile workers); `watch_parent` makes a child exit when the
process that started it is gone, so nothing is left orphaned; `our_pids` tells our own processes
from others' (the busy rule's readers, `busy/`, count what each side took).

**Ours**: the tree of `our_root()` — this process and its live descendants (Inductor's compile
workers, a cold-compile child and its pool) and, when this process was started by compile-lens's
CLI or server, that parent and everything else it started (its other workers). Everything else on
the machine is **others**.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Optional

import psutil


def _is_compile_lens(proc: psutil.Process) -> bool:
    """compile-lens's CLI or server: `compile-lens check …`, `python -m compile_lens …`."""
    try:
        words = proc.cmdline()
    except psutil.Error:
        return False
    return any(os.path.basename(w) == "compile-lens" or w == "compile_lens" or w.startswith("compile_lens.")
               for w in words[:6])  # `python -X dev -m compile_lens`: the module comes late


# The worker template's pid in a worker it forked (`worker/template.py`): that worker was started by
# the server behind the template, whose tree is the worker's family.
FORKED_FROM: Optional[int] = None


def our_root(me: Optional[psutil.Process] = None) -> int:
    """The pid whose tree is ours: the compile-lens CLI or server that started this process (its other
    workers are ours too), else this process."""
    me = me or psutil.Process()
    with contextlib.suppress(psutil.Error):
        parent = me.parent()
        if parent is not None and parent.pid == FORKED_FROM and me.pid == os.getpid():
            server = parent.parent()
            if server is not None and _is_compile_lens(server):
                return server.pid
        if parent is not None and _is_compile_lens(parent):
            return parent.pid
    return me.pid


@dataclass(frozen=True)
class Proc:
    ppid: int
    name: str
    cpu_s: float  # user + system, its waited-for children's included
    self_s: float  # its own user + system (a child reaped meanwhile adds its whole life to `cpu_s`)


def snapshot() -> dict[int, Proc]:
    """Every process's parent, name and CPU seconds (one pass over the process table)."""
    found = {}
    for proc in psutil.process_iter(["ppid", "name", "cpu_times"]):
        times = proc.info.get("cpu_times")
        if times is not None:  # None: another user's process we may not read (its time is still others')
            found[proc.pid] = Proc(proc.info.get("ppid") or 0, proc.info.get("name") or "?",
                                    own_cpu_s_of(times), times.user + times.system)
    return found


def own_cpu_s_of(t: Any) -> float:
    """User and system seconds of a process's `cpu_times()`, its waited-for children's included."""
    return t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)


def tree(snap: dict[int, Proc], root: int) -> set[int]:
    """`root` and its descendants in a snapshot."""
    kids: dict[int, list[int]] = {}
    for pid, p in snap.items():
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
    return tree(snapshot(), our_root(me)) | {me.pid}


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
