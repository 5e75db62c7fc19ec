"""Each lever on its own: a failure (user code, a torch that lacks the lever, a compile error, the
budget) becomes that lever's "not measured: <why>", never the phase's. A small local wrapper: the
shared isolation helper (issue 37) can replace it."""

from __future__ import annotations

import time
import traceback
from typing import Callable, Optional

from ...protocol import Lever
from ..loader import TargetError, describe


def isolated(lever: str, change: str, run: Callable[[], Lever], data: Optional[dict] = None) -> Lever:
    """`run()`'s lever, or this lever "not measured" with why (`data`: what names it, e.g. the filter)."""
    started = time.perf_counter()
    try:
        found = run()
    except TargetError as exc:
        found = Lever(lever, change, "not measured", f"not measured: {exc.problem.message}", data=dict(data or {}))
    except Exception as exc:  # noqa: BLE001 - user code or torch internals: this lever only
        traceback.print_exc()
        found = Lever(lever, change, "not measured", f"not measured: {describe(exc)[:300]}", data=dict(data or {}))
    found.wall_s = round(time.perf_counter() - started, 1)
    return found
