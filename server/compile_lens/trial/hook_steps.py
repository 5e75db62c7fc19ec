"""The trial hook's steps, inside the user's program: the end of each step (its times, loss, input
shapes and the compiles that happened in it), the stop after `--steps`/`--seconds`, the compilation
metrics kept, and how the run failed. Stdlib only at import."""

from __future__ import annotations

import math
import sys
import time
from typing import Any, Callable, Optional

from ..remote_cache import REMOTE_COUNT_FIELDS
from . import hook_settings, step_memory
from .hook_ranks import log_line, log_step
from .hook_state import STATE, compiling, new_step, on_cuda


def end_step(at_step0_end: Optional[Callable[[], None]] = None) -> None:
    """The step ends (an optimizer step, or with --step-on forward the outermost call's return);
    `at_step0_end` runs when step 0 ends (the library model found then)."""
    if compiling():
        return
    if on_cuda():
        STATE.torch.cuda.synchronize()
    now = time.perf_counter()
    cur, last_end = STATE.cur, STATE.last_end
    start = cur["start"] if cur["start"] is not None else (last_end if last_end is not None else now)
    if STATE.first_start is None:
        STATE.first_start = start
    step = {"index": len(STATE.steps), "wall_s": now - (last_end if last_end is not None else start),
            "hook_s": now - start, "loss": cur["loss"], "shapes": cur["shapes"], "compiles": new_compiles()}
    if cur["start"] is None and last_end is None:
        step["timed"] = False  # no model call was seen before it ended: nothing to time it from
    STATE.steps.append(step)
    for event in reversed(STATE.events):  # logged before the step's first model call (inside DDP's forward): its inputs
        if event.get("step") != step["index"]:
            break
        if event.get("shapes") is None:
            event["shapes"] = step["shapes"]
    if at_step0_end is not None and step["index"] == 0:
        at_step0_end()
    if not cur["loss_finite"] and STATE.failure is None:
        fail("nan-loss", f"the loss of step {step['index']} is not finite", step["index"])
    if step_memory.running():
        step_memory.end(step)
        now = time.perf_counter()  # the profiler's processing is no step's time
    if STATE.log:
        log_step(step)
        now = time.perf_counter()  # the log's write is no step's time
    STATE.last_end = now
    STATE.cur = new_step()
    if (STATE.steps_limit and len(STATE.steps) >= STATE.steps_limit) or \
            (STATE.seconds_limit and now - STATE.first_start >= STATE.seconds_limit):
        STATE.stopped = True
        if STATE.step_on == "optimizer":
            raise SystemExit(0)
        # --step-on forward: at the next model call, so that the last step's loss and backward happen


def stop_if_done() -> None:
    if STATE.stopped:
        raise SystemExit(0)


def note_loss(tensor: Any) -> None:
    """A `.backward()`: the first scalar's value is the step's loss (with --step-on forward, the step
    that just ended: its loss comes after the model returned); a loss that is not finite fails the run."""
    cur = STATE.cur
    step = STATE.steps[-1] if STATE.step_on == "forward" and STATE.steps and cur["start"] is None else cur
    if step.get("loss") is None and step.get("loss_finite", True) and not compiling():
        try:
            if tensor.numel() == 1:
                value = float(tensor.detach())
                if math.isfinite(value):
                    step["loss"] = value
                elif STATE.failure is None:
                    cur["loss_finite"] = step["loss_finite"] = False
                    if step is not cur:
                        fail("nan-loss", f"the loss of step {step['index']} is not finite", step["index"])
        except Exception as exc:  # noqa: BLE001 - never change what backward does
            STATE.problems.append(f"loss: {type(exc).__name__}: {exc}")


def new_compiles() -> int:
    """Dynamo's compilation metrics entries since the last call, kept with the step they happened in."""
    if STATE.mode != "compiled" or "torch._dynamo.utils" not in sys.modules:
        return 0
    fresh = 0
    try:
        for entry in sys.modules["torch._dynamo.utils"].get_compilation_metrics():
            if id(entry) in STATE.seen_metrics:
                continue
            STATE.seen_metrics.add(id(entry))
            STATE.compiles.append(_metric(entry, len(STATE.steps)))
            fresh += 1
    except Exception as exc:  # noqa: BLE001
        STATE.problems.append(f"compilation metrics: {type(exc).__name__}: {exc}")
    if fresh:
        hook_settings.snapshot([c["compile_id"] for c in STATE.compiles[-fresh:] if c.get("compile_id")])
    return fresh


def _metric(entry: Any, step: int) -> dict:
    out: dict = {"step": step}
    for name in ("compile_id", "co_name", "co_filename", "co_firstlineno", "recompile_reason", "num_graph_breaks",
                 "entire_frame_compile_time_s", "backend_compile_time_s", "inductor_compile_time_s",
                 "fail_type", "fail_reason", "structured_logging_overhead_s",  # with `fx_keys`: torch's trace payloads
                 *(f"{p}_{n}_count" for p in REMOTE_COUNT_FIELDS.values() for n in ("hit", "miss"))):
        value = getattr(entry, name, None)
        out[name] = value if value is None or isinstance(value, (int, float, str, bool)) else str(value)
    return out


def fail(kind: str, message: str, step: int, where: Optional[str] = None) -> None:
    STATE.failure = {"kind": kind, "message": message[:2000], "step": step, "where": where,
                     "at": time.time()}  # under torchrun, the first rank to fail is the cause: others fail in collectives after
    log_line({"failure": STATE.failure})
