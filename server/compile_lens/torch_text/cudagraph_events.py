"""CUDA-graph recordings and skips of a `mode="reduce-overhead"` compile, as torch's `cudagraphs` log
states them: read in the user's program by the trial, and in the worker by the CUDA-graphs lever.

- Inductor's cudagraph trees log (artifact `cudagraphs` of `torch._inductor.cudagraph_trees`,
  debug level) `Recording function=%s, mode=%s, cuda_graph_id=%d, inputs: %s` each time a graph is
  recorded and `Re-recording function=%s, mode=%s, reason=%s` when a recorded graph no longer fits
  its inputs. The trial tags each with the step and the model's input shapes then.
- A graph that is not CUDA-graphed is logged (artifact `cudagraphs` of
  `torch._inductor.cudagraph_utils`, warning level, `log_cudagraph_skip_and_bump_counter`) as one
  finished message, `skipping cudagraphs due to <reason>`, where a reason torch traced to an FX node
  ends `. Found from : \n <the node's stack trace>` — the user's `File "...", line N` in it.

Stdlib only: imported inside the user's program.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Callable, Optional

LOGGER = "torch._inductor.cudagraph_trees.__cudagraphs"  # torch's artifact logger name
SKIP_LOGGER = "torch._inductor.cudagraph_utils.__cudagraphs"  # where the skips are logged
SKIP_PREFIXES = ("skipping cudagraphs due to ", "disabling cudagraphs ")  # cudagraph_utils / compile_fx
_FOUND_FROM = re.compile(r"\.?\s*Found from\s*:?\s*\n", re.S)
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def event_of(record: logging.LogRecord) -> Optional[dict]:
    """The event a log record states, or None for the others (warm-up runs, symint keys)."""
    msg, args = str(record.msg), record.args if isinstance(record.args, tuple) else ()
    if "Re-recording function=" in msg and len(args) >= 4:
        return {"kind": "cudagraph_record", "rerecord": True, "function": str(args[1]), "mode": str(args[2]),
                "reason": str(args[3])[:300]}
    if "Recording function=" in msg and len(args) >= 4:
        return {"kind": "cudagraph_record", "rerecord": False, "function": str(args[1]), "mode": str(args[2]),
                "graph_id": args[3], "reason": None}
    return None


class CudagraphEvents(logging.Handler):
    def __init__(self, events: list, now: Callable[[], tuple[int, Any]]) -> None:
        super().__init__(logging.DEBUG)
        self.events = events
        self.now = now

    def emit(self, record: logging.LogRecord) -> None:
        try:
            event = event_of(record)
        except Exception:  # noqa: BLE001 - a log record we cannot read is no event
            return
        if event is not None:
            step, shapes = self.now()
            self.events.append({**event, "step": step, "shapes": shapes})


def watch(events: list, now: Callable[[], tuple[int, Any]]) -> CudagraphEvents:
    """Collect torch's `cudagraphs` artifact log (turned on by the hook's `set_logs`), not printed to the
    program's stderr."""
    logger = logging.getLogger(LOGGER)
    handler = CudagraphEvents(events, now)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False  # torch's stderr handler sits on a parent: the program's stderr stays its own
    return handler


def skip_of(text: str) -> Optional[dict]:
    """`{"reason", "frames"}` of one skip message (`frames`: the (path, line) pairs of its stack trace,
    outermost first), or None for another message."""
    text = text.strip()
    if not text.startswith(SKIP_PREFIXES):
        return None
    head, stack = (_FOUND_FROM.split(text, maxsplit=1) + [""])[:2]
    reason = head[len(SKIP_PREFIXES[0]):] if head.startswith(SKIP_PREFIXES[0]) else head
    frames = [(m.group(1), int(m.group(2))) for m in _FRAME.finditer(stack)]
    return {"reason": reason.strip().rstrip(".")[:300], "frames": frames}
