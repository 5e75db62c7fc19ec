"""Where a quiet worker is: a thread that, after `quiet_s` with no progress and no compile event,
reads the job thread's own stack (`sys._current_frames()`) and says which stage of torch.compile it
is in, which compile id (the `compile_id` of Dynamo's `_compile` frame) and which user frame (the
one Dynamo is tracing, else the innermost workspace frame) — as py-spy would, without py-spy.

A compile stuck for an hour in one loop (pytorch#193703) is then named while it runs, and the
timeout's message names it too. The report is a `stall` event: it does not count as progress, so
the silence limit still ends the job.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from types import FrameType
from typing import Any, Callable, Optional

# innermost torch frame -> compile stage; first match wins, more specific first
STAGES: tuple[tuple[str, str], ...] = (
    ("torch/_inductor/codecache", "Inductor: compiling the generated code"),
    ("torch/_inductor/async_compile", "Inductor: compiling the generated code"),
    ("torch/_inductor/cpp_builder", "Inductor: compiling the generated code"),
    ("torch/_inductor/runtime/", "Inductor: compiling or benchmarking kernels"),
    ("torch/_inductor/select_algorithm", "Inductor: autotuning"),
    ("torch/_inductor/", "Inductor: lowering and code generation"),
    ("torch/_functorch/", "AOTAutograd: tracing the joint graph"),
    ("torch/_subclasses/fake", "Dynamo: running an op on fake tensors"),
    ("torch/_dynamo/output_graph", "Dynamo: calling the backend"),
    ("torch/_dynamo/", "Dynamo: tracing the bytecode"),
)


# the worker's own frames that wait on something else (innermost torch frame first, then these)
OWN_WAITS: tuple[tuple[str, str], ...] = (
    ("compile_lens/worker/measure/compile/cold", "waiting for a fresh process (a cold compile or timing child; "
                                                "its stack is its own)"),
)


def _norm(path: str) -> str:
    return path.replace("\\", "/")


def _stack(frame: Optional[FrameType]) -> list[FrameType]:
    """Innermost first."""
    out = []
    while frame is not None:
        out.append(frame)
        frame = frame.f_back
    return out


def _compile_id(stack: list[FrameType]) -> Optional[str]:
    for frame in stack:  # innermost compile first
        code = frame.f_code
        if code.co_name == "_compile" and _norm(code.co_filename).endswith("torch/_dynamo/convert_frame.py"):
            found = frame.f_locals.get("compile_id")
            return None if found is None else str(found)
    return None


def _under(path: str, root: str) -> bool:
    return _norm(os.path.realpath(path)).startswith(root)


def _traced_frame(stack: list[FrameType], root: str) -> Optional[tuple[str, int, str]]:
    """The user frame Dynamo is tracing: the innermost InstructionTranslator (one per inlined
    call) whose code is the workspace's, else the innermost one (a library's)."""
    found = []
    seen: set[int] = set()
    for frame in stack:
        if not _norm(frame.f_code.co_filename).endswith("torch/_dynamo/symbolic_convert.py"):
            continue
        tx = frame.f_locals.get("self")
        code, line = getattr(tx, "f_code", None), getattr(tx, "lineno", None)
        if code is not None and isinstance(line, int) and id(tx) not in seen:
            seen.add(id(tx))
            found.append((code.co_filename, line, code.co_name))
    return next((f for f in found if _under(f[0], root)), found[0] if found else None)


def _stage(stack: list[FrameType], compiling: bool) -> str:
    """The innermost torch frame's stage; else the worker's own wait; else user code running."""
    for frame in stack:
        path = _norm(frame.f_code.co_filename)
        if "torch/" in path:
            for fragment, stage in STAGES:
                if fragment in path:
                    return stage
        for fragment, stage in OWN_WAITS:
            if fragment in path:
                return stage
    return "torch.compile: in user or library code" if compiling else "user code, running (not compiling)"


def describe(frame: Optional[FrameType], root: str) -> dict[str, Any]:
    """`{stage, compile_id, frame: {path, line, name} | None, running: {...} | None}` of a thread's stack."""
    stack = _stack(frame)
    compile_id = _compile_id(stack)
    root_norm = _norm(os.path.realpath(root)).rstrip("/") + "/"
    running = next(((f.f_code.co_filename, f.f_lineno, f.f_code.co_name) for f in stack
                    if _under(f.f_code.co_filename, root_norm)), None)
    traced = _traced_frame(stack, root_norm)
    where = traced or running

    def as_dict(found: Optional[tuple[str, int, str]]) -> Optional[dict[str, Any]]:
        return None if found is None else {"path": found[0], "line": found[1], "name": found[2]}

    return {"stage": _stage(stack, compile_id is not None), "compile_id": compile_id, "frame": as_dict(where),
            "running": as_dict(running) if running and running != where else None}


def words(stall: dict[str, Any], quiet_s: float) -> str:
    """`quiet 20 s in Dynamo: tracing the bytecode, compile 0/0, at model.py:14 in forward`."""
    parts = [f"quiet {quiet_s:.0f} s in {stall['stage']}"]
    if stall.get("compile_id"):
        parts.append(f"compile {stall['compile_id']}")
    where = stall.get("frame")
    if where:
        parts.append(f"at {os.path.basename(where['path'])}:{where['line']} in {where['name']}")
    running = stall.get("running")
    if running:
        parts.append(f"running {os.path.basename(running['path'])}:{running['line']} in {running['name']}")
    return ", ".join(parts)


class StallWatch:
    """One job's watch: `poke()` on every progress; a `stall` event after each quiet `quiet_s`."""

    def __init__(self, send: Callable[[dict], None], job_id: int, root: str, quiet_s: float,
                 current: Callable[[], tuple[Optional[str], Optional[str]]]):
        self.send, self.job_id, self.root, self.quiet_s, self.current = send, job_id, root, quiet_s, current
        self.thread_id = threading.get_ident()  # the job's thread: the one to read
        self.last = time.monotonic()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="compile-lens-stall-watch", daemon=True)

    def poke(self, *_: Any, **__: Any) -> None:
        self.last = time.monotonic()

    def __enter__(self) -> StallWatch:
        global _ACTIVE
        _ACTIVE = self
        install_compile_callbacks()
        if self.quiet_s > 0:
            self.thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        global _ACTIVE
        _ACTIVE = None
        self.done.set()

    def _watch(self) -> None:
        reported = 0.0
        while not self.done.wait(min(1.0, self.quiet_s / 4)):
            quiet = time.monotonic() - self.last
            if quiet < self.quiet_s or time.monotonic() - reported < self.quiet_s:
                continue
            frame = sys._current_frames().get(self.thread_id)
            try:
                stall = describe(frame, self.root)
            except Exception as exc:  # noqa: BLE001 - a frame that changed under us: say less, never crash
                stall = {"stage": f"unknown ({type(exc).__name__})", "compile_id": None, "frame": None, "running": None}
            finally:
                del frame
            stall["quiet_s"] = round(quiet, 1)
            target, phase = self.current()
            if self.done.is_set():
                return
            self.send({"id": self.job_id, "event": "stall", "stage": words(stall, quiet), "target": target,
                       "phase": phase, "info": {"stall": stall}})
            reported = time.monotonic()


_ACTIVE: Optional[StallWatch] = None


def _on_compile_event(*_: Any, **__: Any) -> None:
    if _ACTIVE is not None:
        _ACTIVE.poke()


def install_compile_callbacks() -> None:
    """A compile that starts or ends is progress (torch's compile callbacks, torch >= 2.5; without
    them only the worker's own progress counts). At every job: `torch._dynamo.reset()` clears them."""
    try:
        from torch._dynamo.callback import callback_handler
    except ImportError:
        return
    for kind in ("start", "end"):
        registered = getattr(callback_handler, f"{kind}_callbacks", None)
        register = getattr(callback_handler, f"register_{kind}_callback", None)
        if isinstance(registered, list) and callable(register) and _on_compile_event not in registered:
            register(_on_compile_event)
