"""Each lever on its own: a failure (user code, a torch that lacks the lever, a compile error, a bug
of ours) becomes that lever's "not measured: <why>", never the phase's — through the measurement's
one isolation rule (`measure/run/isolated`: tool errors logged as bug reports, out of memory freed)."""

from __future__ import annotations

import time
from typing import Callable, Optional

from ...protocol import Lever
from ..measure.run.isolated import NOT_MEASURABLE
from ..measure.run.isolated import isolated as isolated_part


def isolated(lever: str, change: str, run: Callable[[], Lever], data: Optional[dict] = None) -> Lever:
    """`run()`'s lever, or this lever "not measured" with why (`data`: what names it, e.g. the filter)."""
    started = time.perf_counter()
    found: Optional[Lever] = None
    unmeasured: dict[str, str] = {}
    with isolated_part(f"{lever} lever", unmeasured) as part:
        found = run()
    if found is None:
        why = (part.why or NOT_MEASURABLE).replace(NOT_MEASURABLE, "not measured", 1)
        found = Lever(lever, change, "not measured", why, data=dict(data or {}))
    found.wall_s = round(time.perf_counter() - started, 1)
    return found
