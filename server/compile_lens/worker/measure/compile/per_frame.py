"""The cold compile, frame by frame: torch's own compilation metrics (one entry per compile id).

Read in the fresh process that makes the cold compile (`bench_child`), right after it: a graph
break splits a function into frames (`0/0` the code before it, `1/0` the code after), each with its
compile time. Stages, from the cumulative timers torch keeps per compile id (microseconds):

- `dynamo`: the whole frame minus its backend (bytecode tracing, guards);
- `aot_autograd`: the backend minus Inductor (AOTAutograd's tracing and partitioning);
- `inductor`: Inductor minus its code generation (lowering, scheduling);
- `codegen_build`: Inductor's code generation, the C++/Triton build included;
- `autotune`: compile-time autotuning, where torch records it (apart: it is not inside the others).

A backward compiled later (`co_name` None) adds to the frame with its compile id. A torch that
does not keep these timers gives the total only.

`output_code()`: the output code (Inductor's wrapper module, one per graph) of the compiles inside
it, from torch's structured trace (`inductor_output_code`, emitted on a cache hit too): the warm
forward compile's gives the fallback ops (`deployment.ops_in_code`) without a compile of its own.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any, Iterator, Optional

from ....protocol import CompileFrame, CompileTime

if TYPE_CHECKING:
    from .per_line import Traced


def _us(m: Any, name: str) -> Optional[float]:
    v = getattr(m, name, None)
    return float(v) / 1e6 if isinstance(v, (int, float)) else None


def collect(traced: Optional[Traced] = None, root: Optional[str] = None) -> CompileTime:
    """The compile ids this process compiled so far (torch keeps the last 64); with `traced` (what
    `compile.per_line.recorded` saw of them), each frame's tracing seconds and the lines in the
    workspace (`root`) and libraries they went to."""
    try:
        from torch._dynamo.utils import get_compilation_metrics
    except ImportError as exc:
        return CompileTime(note=f"not on this torch ({exc})")
    frames: dict[str, CompileFrame] = {}
    guarded: list[str] = []  # the frame compiles that built guards, in order (none failed)
    for m in get_compilation_metrics():
        cid = str(getattr(m, "compile_id", None) or "")
        total = _us(m, "dynamo_cumulative_compile_time_us") or getattr(m, "entire_frame_compile_time_s", None)
        if not cid or total is None:
            continue
        stages = _stages(m, float(total))
        frame = frames.get(cid)
        if frame is None:
            if getattr(m, "co_name", None) is None:
                continue  # a backward whose forward is not in the window
            frame = frames[cid] = CompileFrame(cid, m.co_name, getattr(m, "co_filename", "") or "",
                                               int(getattr(m, "co_firstlineno", 0) or 0), 0.0, {})
        if getattr(m, "co_name", None) is not None:
            guarded.append(cid if not getattr(m, "fail_type", None) else "")
        frame.total_s = round(frame.total_s + float(total), 4)
        for k, v in stages.items():
            frame.stages_s[k] = round(frame.stages_s.get(k, 0.0) + v, 4)
    found = CompileTime(frames=list(frames.values()))
    if traced is not None:
        _with_guards(frames, guarded, traced.guards_s)
        _with_lines(found, traced, root or ".")
    return found


def _with_guards(frames: dict[str, CompileFrame], guarded: list[str], timed: Optional[list[float]]) -> None:
    """Each frame's guard building, from Dynamo's own timer: one duration per frame compile, in
    order; given only when they pair off one to one (a compile that failed built none: then none)."""
    if timed is None or "" in guarded or len(timed) != len(guarded) or len(set(guarded)) != len(guarded):
        return
    for cid, seconds in zip(guarded, timed):
        frames[cid].guards_s = round(seconds, 4)


def _with_lines(found: CompileTime, traced: Traced, root: str) -> None:
    """Each frame's tracing seconds, and the lines: those of torch, the standard library and
    Compile Lens are left out (their seconds stay in the lines that called them); the frame's work
    after tracing on its def line (`compile.per_line.after_tracing`)."""
    from ..lines.tags import Places
    from . import per_line as compile_lines

    if traced.note:
        found.lines_note = traced.note
        return
    for frame in found.frames:
        if frame.compile_id in traced.traced_s:
            frame.traced_s = round(traced.traced_s[frame.compile_id], 4)
    places = Places(root)
    keep = lambda p: places.kind(p) in ("workspace", "library")  # noqa: E731
    # each frame's guards, graph and bytecode on its def line: the lines add up to its Dynamo time
    found.lines = compile_lines.after_tracing(compile_lines.lines(traced, keep), found.frames, keep)
    if not found.lines:
        found.lines_note = "no line of the workspace or a library was traced"


def _stages(m: Any, total: float) -> dict[str, float]:
    aot = _us(m, "aot_autograd_cumulative_compile_time_us")
    if aot is None:
        aot = getattr(m, "backend_compile_time_s", None)
    ind = _us(m, "inductor_cumulative_compile_time_us")
    if ind is None:
        ind = getattr(m, "inductor_compile_time_s", None)
    gen = _us(m, "inductor_code_gen_cumulative_compile_time_us")
    if gen is None:
        gen = getattr(m, "code_gen_time_s", None)
    stages: dict[str, float] = {}
    if aot is not None:
        stages["dynamo"] = max(total - aot, 0.0)
        if ind is not None:
            stages["aot_autograd"] = max(aot - ind, 0.0)
            if gen is not None:
                stages["inductor"] = max(ind - gen, 0.0)
                stages["codegen_build"] = gen
            else:
                stages["inductor"] = ind
        else:
            stages["aot_autograd"] = aot  # Inductor's share not recorded on this torch
    autotune = _us(m, "compile_time_autotune_time_us")
    if autotune:
        stages["autotune"] = autotune
    return stages


class _OutputCode(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.codes: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "metadata", None) or {}
        code = getattr(record, "payload", None)
        if "inductor_output_code" in meta and isinstance(code, str) and code and code not in self.codes:
            self.codes.append(code)


@contextlib.contextmanager
def output_code() -> Iterator[list[str]]:
    """The output code of each graph compiled (or read from the cache) inside the block, in order;
    stays empty on a torch without the structured trace."""
    from ...dynamo import structured_trace

    handler = _OutputCode()
    with structured_trace(handler):
        yield handler.codes
