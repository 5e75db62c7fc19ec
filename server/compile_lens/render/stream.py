"""`check --stream`'s lines: one JSON object per part of a target as it lands. Pure.

`PartFeed.update(path, result)` is handed each growing `TargetResult` as the worker sends it (and
each file's final ones); it answers the parts that landed since the result it saw last for that
target — compared by where each part stands (`render.progress_rows`), so they are right whatever order the
worker sends them in — each part once per target:
`{"path", "target", "part", "status", "data"}` (+ `"why"` when not "done"), `data` as
`--format json` shows that part (`progress_rows.row_data`).
"""

from __future__ import annotations

from typing import Any, Optional

from ..protocol import TargetResult
from ..speed_words import direction, speed_words
from . import progress_rows
from .cli_output import target_json
from .units import SECONDS, duration


class PartFeed:
    def __init__(self) -> None:
        self.sent: dict[tuple[str, str], set[str]] = {}  # (path, target) -> parts already said

    def update(self, path: str, result: TargetResult) -> list[dict[str, Any]]:
        """The parts of `result` landed since the last update for it, in `progress_rows.ROWS` order."""
        if result.status == "skipped":  # not an nn.Module after all: not in the document either
            return []
        sent = self.sent.setdefault((path, result.name), set())
        found = {p: s for p, s in progress_rows.states(result).items() if s.status != "pending" and p not in sent}
        if not found:
            return []
        shown = target_json(result)
        lines = []
        for part, state in found.items():
            sent.add(part)
            line: dict[str, Any] = {"path": path, "target": result.name, "part": part, "status": state.status,
                                    "data": progress_rows.row_data(shown, part)}
            if state.status != "done":
                line["why"] = state.why
            lines.append(line)
        return lines


def headline(result: TargetResult) -> Optional[str]:
    """The progress line when the forward's figures land: `Net: forward faster: 1.08–1.15× (median
    1.12×) · compile 9.8 s cold / 1.7 s warm (cpu)`, or `forward inconclusive (95% CI …)`."""
    b = result.benchmark
    if b is None:
        return None
    t = b.forward
    if direction(t):
        speed = f"forward {speed_words(t)}"
    else:
        ci = f" (95% CI {t.speedup_ci[0]:.2f}–{t.speedup_ci[1]:.2f}×)" if t.speedup_ci else ""
        speed = f"forward inconclusive{ci}"
    # the forward's own compiles where the worker says them apart from the train step's
    c = b.compile_s  # the forward's, else (a target timed without it apart) the break-even workload's
    cold = c.cold_forward if c.cold_forward is not None else c.cold
    warm = c.warm_forward if c.warm_forward is not None else c.warm
    compiles = [f"{duration(v, SECONDS)} {label}" for label, v in (("cold", cold), ("warm", warm)) if v is not None]
    return f"{result.name}: {speed}" + (f" · compile {' / '.join(compiles)}" if compiles else "") + f" ({b.device})"
