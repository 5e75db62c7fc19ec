"""An optional part of a measurement, run on its own: its failure is that figure's alone.

The timing, the compile times and the verdict are the measurement; guard cost, peak memory,
accuracy, the warm-remote compile, export, fallback ops, the batch sweep (and any part added
later: per-line costs, levers) are extras beside them. Each runs inside `isolated(part, unmeasured)`:

    with isolated("peak memory", benchmark_unmeasured) as part:
        figures.memory["eager"] = mem.peak_of(...)
    if part.why: ...  # the figure is not measurable; `unmeasured["peak memory"]` says why

An exception inside becomes `unmeasured[part] = "not measurable: <Type: first line>"`, the block
is left, and the caller carries on. Out of memory frees what it can first. A tool error (an
exception raised by Compile Lens's own code, `tool_errors`) also writes a bug report with its
traceback to stderr (the server's log, the CLI's stderr), and its figure says so.
KeyboardInterrupt and SystemExit are not caught.
"""

from __future__ import annotations

import contextlib
import traceback
from dataclasses import dataclass
from typing import Iterator, Optional

from ...loader import TargetError, describe
from ...tool_errors import is_tool_error, log_bug_report

NOT_MEASURABLE = "not measurable"
MAX_WHY = 200


@dataclass
class Part:
    name: str  # the figure's name as the user reads it: "peak memory", "guard cost", "torch.export"
    why: Optional[str] = None  # "not measurable: …" once it failed


def not_measurable(why: str) -> str:
    text = " ".join(why.split())
    return f"{NOT_MEASURABLE}: " + (text if len(text) <= MAX_WHY else text[: MAX_WHY - 1] + "…")


@contextlib.contextmanager
def isolated(name: str, unmeasured: dict[str, str]) -> Iterator[Part]:
    """Run the block as the optional part `name`; a failure is recorded in `unmeasured[name]`."""
    part = Part(name)
    try:
        yield part
    except Exception as exc:  # noqa: BLE001 - an extra never takes the measurement with it
        if is_tool_error(exc):
            at = log_bug_report(exc, f"measuring the {name}")
            part.why = not_measurable(f"internal error in Compile Lens at {at} (a bug; the traceback is in the log)")
        else:
            traceback.print_exc()  # the log keeps the details; the figure keeps one line
            part.why = not_measurable(exc.problem.message if isinstance(exc, TargetError) else describe(exc))
        from ..workload.devices import free_memory, is_oom  # torch: imported once a part has run

        oom = is_oom(exc)
        exc.__traceback__ = None  # drop the frames (models, inputs, graphs) before freeing memory
        del exc
        if oom:
            free_memory()
        unmeasured[name] = part.why
