"""`worker.stall_watch.describe`: where another thread's stack is, read as the watch reads the job
thread's. A thread of this test waits inside a function of this file (the workspace here): no torch
frame on its stack, so it is user code running, at the waiting line. The compile case (a real
stall inside Dynamo) is tests/cli/test_stall_cli.py and tests/lsp/test_faults.py."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from compile_lens.worker.stall_watch import describe, words

HERE = Path(__file__)


def _waits(started: threading.Event, release: threading.Event) -> None:
    started.set()
    release.wait(60)  # the line the watch must name


def test_a_quiet_thread_is_named_at_its_user_line():
    started, release = threading.Event(), threading.Event()
    thread = threading.Thread(target=_waits, args=(started, release))
    thread.start()
    try:
        assert started.wait(30)
        stall = describe(sys._current_frames()[thread.ident], str(HERE.parent))
    finally:
        release.set()
        thread.join()
    line = next(i for i, t in enumerate(HERE.read_text().splitlines(), 1) if "release.wait(60)" in t)
    assert stall["compile_id"] is None and stall["stage"] == "user code, running (not compiling)"
    assert stall["frame"] == {"path": str(HERE), "line": line, "name": "_waits"}
    assert words(stall, 20.4) == f"quiet 20 s in user code, running (not compiling), at test_stall_watch.py:{line} in _waits"
