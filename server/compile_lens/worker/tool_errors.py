"""Whose fault is an exception: the user's code (and torch running it), or Compile Lens's own.

The rule: follow the traceback from the frame that raised outwards, passing over the standard
library and synthetic frames (`<timeit-src>`, `<string>`: they only run what called them); the
first other frame decides. In Compile Lens's package, it is a **tool error** (a bug of ours: the
user gets a bug report in the log, never a warning on their line); anywhere else — the user's
files, torch, an installed library — it is what measuring the user's code ran into.
`TargetError` and `NotATarget` are our words for a user's problem, never tool errors.

Imports neither torch nor anything of the server.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import traceback
from functools import cache
from typing import Optional

from ..torch_text.frames import OUR_DIR, real

BUG_HINT = "a bug in Compile Lens, not in your code"


@cache
def _stdlib_dirs() -> tuple[str, ...]:
    dirs = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib")}
    return tuple(real(d) + os.sep for d in dirs if d)


def _passes_over(path: str) -> bool:
    """A frame that only runs what called it: synthetic, or the standard library (not site-packages)."""
    if not path or path.startswith("<"):
        return True
    resolved = real(path)
    return resolved.startswith(_stdlib_dirs()) and "site-packages" not in resolved.split(os.sep)


def raised_at(exc: BaseException) -> Optional[traceback.FrameSummary]:
    """The frame that decides whose the exception is (see the module docstring), or None."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        if not _passes_over(frame.filename):
            return frame
    return None


def is_tool_error(exc: BaseException) -> bool:
    from .loader import NotATarget, TargetError  # the loader imports torch's neighbours lazily

    if isinstance(exc, (TargetError, NotATarget)) or not isinstance(exc, Exception):
        return False
    frame = raised_at(exc)
    return frame is not None and real(frame.filename).startswith(OUR_DIR)


def where(frame: traceback.FrameSummary) -> str:
    """`compile_lens/worker/measure/run/benchmark.py:412 in _result`."""
    shown = os.path.relpath(real(frame.filename), os.path.dirname(OUR_DIR.rstrip(os.sep)))
    return f"{shown}:{frame.lineno} in {frame.name}"


def bug_report(exc: BaseException, what: str) -> str:
    """The full report for the log: what was being done, where our code raised, the traceback."""
    frame = raised_at(exc)
    head = f"Compile Lens internal error while {what} ({BUG_HINT}; please report it with this traceback)"
    if frame is not None:
        head += f"\n  raised at {where(frame)}"
    return head + "\n" + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


_pending: list[str] = []  # reports of this process not yet attached to a result (`take_reports`)


def log_bug_report(exc: BaseException, what: str) -> str:
    """Keep the report for the target's result (`take_reports`: the job loop attaches it, and the
    server's log or the CLI's stderr shows it) and write it to this process's stderr; returns the
    place our code raised, for the short message."""
    report = bug_report(exc, what)
    _pending.append(report)
    sys.stderr.write(report)
    sys.stderr.flush()
    frame = raised_at(exc)
    return where(frame) if frame is not None else "?"


def take_reports() -> list[str]:
    taken = list(_pending)
    _pending.clear()
    return taken
