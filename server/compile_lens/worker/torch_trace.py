"""Write torch's structured trace (what `TORCH_TRACE=DIR` writes) for one analysis job, for tlparse.

`TORCH_TRACE` is read once, when torch is imported; this worker is long-lived and imports torch
before any job exists. So the job adds its own handler to the `torch.__trace` logger — the one
`TORCH_TRACE` installs, writing the same file (`dedicated_log_torch_trace_*.log`, glog prefix +
JSON per line) — and removes it when the job ends. Child processes the job starts (the benchmark's
fresh-process compile) inherit `TORCH_TRACE` and write their own file in the same folder.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from typing import Iterator, Optional

LOG_PREFIX = "dedicated_log_torch_trace_"  # the name tlparse expects (torch's LOG_PREFIX)


def supported() -> bool:
    """torch can write a structured trace (`torch.__trace` and its formatter: torch >= 2.3)."""
    try:
        from torch._logging import _internal
    except ImportError:
        return False
    return hasattr(_internal, "trace_log") and hasattr(_internal, "TorchLogsFormatter")


def _handler(directory: str) -> logging.Handler:
    from torch._logging import _internal

    lazy = getattr(_internal, "LazyTraceHandler", None)
    if lazy is not None:
        handler: logging.Handler = lazy(directory)  # also logs the torch version first, as TORCH_TRACE does
    else:  # the same file name and format, opened now
        fd, path = tempfile.mkstemp(suffix=".log", prefix=getattr(_internal, "LOG_PREFIX", LOG_PREFIX), dir=directory)
        os.close(fd)
        handler = logging.FileHandler(path)
    handler.setFormatter(_internal.TorchLogsFormatter(trace=True))
    return handler


def _forget_interned() -> None:
    """Stack frames name files by ids announced once per process (`str` records): a new file must
    announce them again, or tlparse cannot resolve the stacks of a second job's trace."""
    with contextlib.suppress(ImportError):
        from torch._logging import structured

        for name in ("INTERN_TABLE", "DUMPED_FILES"):
            table = getattr(structured, name, None)
            if table is not None:
                table.clear()


@contextlib.contextmanager
def torch_trace(directory: Optional[str]) -> Iterator[None]:
    """While inside, torch writes its structured trace into `directory` (nothing when None)."""
    if not directory or not supported():
        yield
        return
    from .dynamo import structured_trace

    os.makedirs(directory, exist_ok=True)
    handler = _handler(directory)
    saved_env = os.environ.get("TORCH_TRACE")
    _forget_interned()
    os.environ["TORCH_TRACE"] = directory  # for child processes only: torch read it long ago
    try:
        with structured_trace(handler):
            yield
    finally:
        handler.close()
        if saved_env is None:
            os.environ.pop("TORCH_TRACE", None)
        else:
            os.environ["TORCH_TRACE"] = saved_env
        _forget_interned()  # ids are per file: the next trace starts its own table


def trace_files(directory: str) -> list[str]:
    """The trace files in a folder, oldest first (one per process that wrote into it)."""
    try:
        names = [n for n in os.listdir(directory) if n.startswith(LOG_PREFIX) and n.endswith(".log")]
    except OSError:
        return []
    paths = [os.path.join(directory, n) for n in names]
    return sorted(paths, key=os.path.getmtime)
