"""Process lifetimes shared by the server and the worker: psutil and the standard library only.

`kill_tree` ends a process with everything it started (the server's workers, the worker's
cold-compile child and Inductor's compile workers); `watch_parent` makes a child exit when the
process that started it is gone, so nothing is left orphaned.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Optional

import psutil


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
