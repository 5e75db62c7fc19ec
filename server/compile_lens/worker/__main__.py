"""`python -m compile_lens.worker`: the warm torch process the server sends jobs to.

The job channel is the process's original stdin/stdout, taken away before any user code runs:
fd 1 is then pointed at stderr, so `print`, `os.write(1, ...)` and C-level writes from user code
all land in the captured stderr and can never corrupt a JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Optional

from .. import processes


def _take_channel() -> tuple:
    rpc_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    rpc_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    sys.stdout = sys.stderr
    return rpc_in, rpc_out


def _watch_parent() -> None:
    """Exit when the server goes away (killed, crashed): no orphan workers.

    The server names itself in COMPILE_LENS_SERVER_PID: a server killed before this thread
    started is noticed too (by then `os.getppid()` already names the process that adopted us).
    """
    named = os.environ.pop("COMPILE_LENS_SERVER_PID", "")  # not for user code's own subprocesses
    # forked from the template (`template.py`): that is the parent, and it watches the server
    processes.watch_parent(processes.FORKED_FROM or (int(named) if named.isdigit() else None))


def main(import_s: Optional[float] = None) -> None:
    """`import_s`: forked from the template (`template.py`), which imported torch in that many seconds."""
    rpc_in, rpc_out = _take_channel()
    _watch_parent()
    lock = threading.Lock()

    def send(message: dict) -> None:
        with lock:
            rpc_out.write(json.dumps(message, separators=(",", ":")) + "\n")
            rpc_out.flush()

    started = time.perf_counter()
    try:
        from .jobs import describe_runtime, run_job
    except ImportError as exc:  # torch missing or broken in this interpreter
        send({"id": 0, "event": "hello", "error": {
            "kind": "no-torch", "message": f"cannot import torch: {exc}",
            "hint": "select an interpreter that has PyTorch installed"}, "info": {}})
        return
    info = describe_runtime()
    elapsed = round(time.perf_counter() - started, 3)
    if import_s is None:
        info["import_s"] = elapsed
    else:  # forked: the template's import, and the seconds from the fork to here
        info["import_s"], info["forked_s"] = import_s, elapsed
    send({"id": 0, "event": "hello", "info": info})
    for line in rpc_in:
        if not line.strip():
            continue
        run_job(json.loads(line), send)


if __name__ == "__main__":
    main()
