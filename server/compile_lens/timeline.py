"""Timestamps on the way to the first graph-break squiggle (open or save → the publish that carries
the trace's breaks), read by `benchmarks/editor/first_break.py`.

Off in normal runs: the server keeps a timeline only while the `compile_lens.timeline` logger is
at DEBUG (`COMPILE_LENS_LOG_LEVEL=DEBUG`), and the worker only for a job that asks (`AnalyzeJob.stamps`).
A mark is (stage, monotonic seconds, this process's CPU seconds): the monotonic clock is one clock
for every process on a machine, so the worker's marks line up with the server's.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Iterable, Optional

LOGGER = "compile_lens.timeline"
PREFIX = "timeline "  # the log line: PREFIX + JSON {uri, marks: [[stage, at, cpu, process], ...]}

Mark = tuple[str, float, float, str]  # stage, monotonic s, CPU s of `process`, process ("server"/"worker")


class Timeline:
    __slots__ = ("marks", "process")

    def __init__(self, process: str = "server") -> None:
        self.marks: list[Mark] = []
        self.process = process

    def mark(self, stage: str) -> None:
        self.marks.append((stage, time.monotonic(), time.process_time(), self.process))

    def extend(self, marks: Iterable[Any]) -> None:
        """Marks another process took (they crossed the pipe as lists)."""
        self.marks.extend(tuple(m) for m in marks)  # type: ignore[misc]


def enabled() -> bool:
    return logging.getLogger(LOGGER).isEnabledFor(logging.DEBUG)


def start(stage: str) -> Optional[Timeline]:
    """A new timeline with its first mark, or None when nobody reads timelines."""
    if not enabled():
        return None
    timeline = Timeline()
    timeline.mark(stage)
    return timeline


def mark(timeline: Optional[Timeline], stage: str) -> None:
    if timeline is not None:
        timeline.mark(stage)


def report(timeline: Timeline, uri: str) -> None:
    logging.getLogger(LOGGER).debug("%s%s", PREFIX, json.dumps({"uri": uri, "marks": timeline.marks}))
