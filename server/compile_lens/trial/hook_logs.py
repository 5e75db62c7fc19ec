"""What the trial hook reads from torch's logs in the compiled run, inside the user's program: graph
breaks and recompiles (`events`), CUDA-graph records with reduce-overhead (`cudagraph_events`), and
DDPOptimizer's split of a compiled DDP graph at its bucket boundaries (expected, not the user's
break) — each with the step it happened in, without printing them to the program's stderr."""

from __future__ import annotations

import logging
import re
from typing import Any

from .hook_state import STATE

_DDP_SPLIT = re.compile(r"DDPOptimizer used bucket cap (\S+) and created (\d+) buckets")


def _where_now() -> tuple:
    return len(STATE.steps), STATE.cur.get("shapes")


def watch_logs(torch: Any) -> None:
    """Graph breaks and recompiles as torch logs them, without printing them to the program's stderr."""
    try:
        graphs = {"cudagraphs": True} if STATE.options.get("mode") == "reduce-overhead" else {}  # CUDA-graph records
        torch._logging.set_logs(graph_breaks=True, recompiles=True, **graphs)
    except Exception as exc:  # noqa: BLE001
        STATE.problems.append(f"set_logs: {type(exc).__name__}: {exc}")
        return
    logger = logging.getLogger("torch._dynamo")
    for handler in list(logger.handlers):  # torch's own stderr handler: the program's stderr stays its own
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            logger.removeHandler(handler)
    _watch_ddp_splits()
    try:
        from .events import watch

        watch(STATE.events, _where_now, STATE.recorder.root or None)
        if graphs:
            from .cudagraph_events import watch as watch_cudagraphs

            watch_cudagraphs(STATE.events, _where_now)
    except Exception as exc:  # noqa: BLE001 - never change what the program does
        STATE.problems.append(f"watching torch's logs: {type(exc).__name__}: {exc}")


class _DDPSplits(logging.Handler):
    """DDPOptimizer's split of a compiled DDP graph at its bucket boundaries: expected, not the user's break."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            found = _DDP_SPLIT.search(record.getMessage())
            if found:
                STATE.events.append({"kind": "ddp_split", "step": len(STATE.steps), "shapes": STATE.cur.get("shapes"),
                                     "bucket_cap_bytes": found[1], "buckets": int(found[2])})
            elif record.levelno >= logging.WARNING:  # torch's warnings reach the program's handlers as before
                logging.getLogger("torch._dynamo.backends").handle(record)
        except Exception as exc:  # noqa: BLE001
            STATE.problems.append(f"DDPOptimizer log: {type(exc).__name__}: {exc}")


def _watch_ddp_splits() -> None:
    logger = logging.getLogger("torch._dynamo.backends.distributed")
    logger.setLevel(min(logger.getEffectiveLevel(), logging.INFO))
    logger.propagate = False  # its INFO line is ours to read, not the program's stderr (warnings are passed on)
    logger.addHandler(_DDPSplits())
