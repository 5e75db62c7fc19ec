"""`check --levers`: the levers phase after the measurement. A target whose figures came from the
cache runs the levers phase alone, handed those figures (the guard share, the recompiles); levers
already measured on the same code come from the cache too."""

from __future__ import annotations

import dataclasses
from typing import Optional

from ..jobs.cache import ResultCache, TargetKeys, read_levers
from ..jobs.levers import levers_only as levers_only
from ..protocol import LEVERS, TargetResult, with_phase

FLAG_HELP = ("after the measurement, try torch's levers on each target (regional compilation, dynamic/static "
             "shapes, guard filters, the aot_compile restart path, CUDA graphs on a GPU) and measure each against the default; costs up to 3× a measurement")


def with_cached_levers(cache: Optional[ResultCache], keys: Optional[TargetKeys],
                       hit: TargetResult) -> Optional[TargetResult]:
    """`hit` with its cached levers, or None when they are not cached."""
    if cache is None or keys is None:
        return None
    levers = read_levers(cache, keys)
    if levers is None:
        return None
    return with_phase(dataclasses.replace(hit, levers=levers), LEVERS, "done")
