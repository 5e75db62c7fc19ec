"""The trial hook under torchrun (COMPILE_LENS_TRIAL_RANKED), in each rank: its own record and a step
log it appends to as it goes (`torchrun` reads both), its record kept on SIGTERM, and torch's levers
against ranks compiling apart. Stdlib only; runs inside the user's program."""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any, Callable

from . import torchrun
from .hook_state import STATE


def as_rank(write: Callable[[], None]) -> None:
    """This rank's own record and step log, and its record (`write`) kept on SIGTERM."""
    STATE.rank = int(os.environ["RANK"])
    STATE.log = torchrun.rank_log(STATE.out, str(STATE.rank))
    STATE.out = torchrun.rank_out(STATE.out, str(STATE.rank))
    log_line({"head": {"mode": STATE.mode, "step_on": STATE.step_on, "options": STATE.options, "rank": STATE.rank,
                       "pid": os.getpid()}})
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:  # the program's own handler stays

        def on_sigterm(signum: int, frame: Any) -> None:
            STATE.killed = {"signal": "SIGTERM", "step": len(STATE.steps)}
            write()
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

        signal.signal(signal.SIGTERM, on_sigterm)


def log_line(entry: dict) -> None:
    if not STATE.log:
        return
    try:
        with open(STATE.log, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
    except (OSError, TypeError, ValueError) as exc:
        STATE.problems.append(f"step log: {type(exc).__name__}: {exc}")


def log_step(step: dict) -> None:
    """The step, and the events and compiles since the last line: a killed rank keeps them."""
    done_events, done_compiles = STATE.logged
    events, compiles = STATE.events[done_events:], STATE.compiles[done_compiles:]
    STATE.logged[:] = [len(STATE.events), len(STATE.compiles)]
    log_line({"step": step, "events": events, "compiles": compiles})


def levers() -> dict:
    """torch's own levers against ranks compiling apart, as this torch has them."""
    torch, config = STATE.torch, sys.modules.get("torch._dynamo.config")
    return {"torch.compiler.set_enable_guard_collectives":
            hasattr(getattr(torch, "compiler", None), "set_enable_guard_collectives"),
            "torch._dynamo.config.enable_compiler_collectives":
            config is not None and hasattr(config, "enable_compiler_collectives")}
