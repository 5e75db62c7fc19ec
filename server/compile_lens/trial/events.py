"""The compiled run's graph breaks and recompiles, as the worker's collector reads them (torch's
data, its text only on a torch that does not hand it over), tagged with the step they happened in
and the model's input shapes then. Imported by the trial hook once torch is, inside the user's
program; the summary reads these fields, never torch's log text. A break torch reports inside a
library is placed at the program's line that called into it (`library_breaks`), with torch's
location in `inside`.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Optional

from ..worker.breaks.collector import CompileCollector
from ..worker.breaks.graph_breaks import distinct_breaks
from .library_breaks import place, program_caller


class RunEvents(CompileCollector):
    """A collector that turns each record into an event the moment torch logs it."""

    def __init__(self, events: list, now: Callable[[], tuple[int, Any]], root: Optional[str] = None) -> None:
        super().__init__()
        self.events = events
        self.now = now  # (step index, input shapes) at this moment of the program
        self.root = root  # the workspace: the program's files
        self.torch_breaks = root is not None  # breaks inside torch too, placed at the program's line
        self.placed: dict = {}  # torch's location of a break -> where it was placed from its full stack

    def _read(self, record: logging.LogRecord) -> None:
        breaks, recompiles = len(self.breaks), len(self.recompiles)
        super()._read(record)
        step, shapes = self.now()
        live = program_caller(self.root) if self.root and len(self.breaks) > breaks else None
        for gb in distinct_breaks(self.breaks[breaks:]):
            placed = self._place(gb, live) if self.root else None
            where = placed["where"] if placed else f"{gb.path}:{gb.line}"
            self.events.append({"kind": "graph_break", "step": step, "shapes": shapes, "where": where,
                                "inside": placed["inside"] if placed else None,
                                "reason": gb.gb_type, "gb": gb.gb_id, "explanation": gb.explanation,
                                # a break inside a loop: the loop's header and the frame torch skips
                                "loop": (None if gb.loop is None else
                                         {"where": f"{gb.loop.path}:{gb.loop.line}", "skipped": gb.loop.function,
                                          "gb": gb.loop.gb_id})})
        for entry in self.recompiles[recompiles:]:
            failure = entry.failures[entry.relevant] if entry.failures else None
            self.events.append({"kind": "recompile", "step": step, "shapes": shapes, "function": entry.frame,
                                "where": f"{entry.frame_file}:{entry.frame_line}",
                                "reason": failure.text if failure else "", "compile_id": entry.compile_id})


    def _place(self, gb: Any, live: Any) -> Optional[dict]:
        """`library_breaks.place`; a repeat (torch logs a break it saw before without its stack) where
        its first sighting was placed: the live stack then lacks the frame being compiled."""
        key = (gb.path, gb.line)
        if len(gb.stack) <= 1 and key in self.placed:
            return self.placed[key]
        placed = place(gb.path, gb.line, gb.stack, self.root, live)
        if len(gb.stack) > 1:
            self.placed.setdefault(key, placed)
        return placed


def watch(events: list, now: Callable[[], tuple[int, Any]], root: Optional[str] = None) -> RunEvents:
    """Start collecting for the rest of the run (torch's break formatter stays wrapped till exit);
    `root`: the workspace, whose files are the program's (None: breaks stay where torch says)."""
    collector = RunEvents(events, now, root)
    logging.getLogger("torch._dynamo").addHandler(collector)
    collector.formatting().__enter__()
    return collector
