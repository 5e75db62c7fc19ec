"""Two sides of a lever timed in the steady state, as the speedup is: paired rounds of the default
compile and the lever, the ratio default/lever with its 95% interval (`measure/timing`), rounds
during which other processes took our cores left out, and "inconclusive" when it cannot tell."""

from __future__ import annotations

from typing import Any, Optional

import torch

from ..loader import BuiltTarget
from ..measure.devices import to_device
from ..measure.timing import Contention, busy_words, paired_rounds, timer, timing_of
from ..measure.workload import Model, compile_kwargs
from .variants import compile_variant


def forward_pair(target: BuiltTarget, before: str, after: str, *, device: str, mode: str,
                 budget_s: float) -> dict[str, Any]:
    """{"before", "after"} ms per forward (eval, no_grad), "speedup" (before/after: above 1 the lever
    is faster), "ci", "conclusive", and "busy" when other processes took our cores."""
    kwargs = compile_kwargs(target, mode)
    args = to_device(target.args, device)
    sides = {}
    for name, variant in (("before", before), ("after", after)):
        obj = target.make()
        module: Optional[torch.nn.Module] = obj.to(device) if isinstance(obj, torch.nn.Module) else None
        model = Model(compile_variant(variant, module if module is not None else obj, kwargs), module, args, False)
        model.use(False)
        for _ in range(3):  # compiles (and any recompile) before anything is timed
            model.forward()
        sides[name] = timer("f()", {"f": model.forward})
    watch = Contention(device)
    rounds = paired_rounds(sides["before"], sides["after"], budget_s=budget_s, watch=watch)
    t = timing_of(rounds)
    found = {"before": round(t.eager_ms, 4), "after": round(t.compiled_ms, 4), "speedup": round(t.speedup, 3),
             "ci": [round(v, 3) for v in t.speedup_ci] if t.speedup_ci else None, "conclusive": t.conclusive,
             "rounds": t.rounds}
    busy = busy_words(watch.report())
    if busy and not t.conclusive:
        found["busy"] = busy
    return found
