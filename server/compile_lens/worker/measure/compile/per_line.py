"""Dynamo's tracing time per source line, read while the cold compile runs (`bench_child`).

Mechanism: Dynamo's own `trace_source` log. Each time one of its translators starts a new source
line (`InstructionTranslatorBase.starts_line`) it logs a record whose one argument is a `LazyString`
bound to that translator: its file, its current line and its `parent` chain (the calls being
inlined, each parent at the line that called) are read off the translator, nothing is formatted.
Two debug records of `torch._dynamo.symbolic_convert` close an interval: `DONE INLINING` (a call
returns to its caller's line) and `… triggered compile` (the frame's tracing ended; what follows is
its graph's compile — AOTAutograd and Inductor, not split by line — guards and bytecode; the
frame's Dynamo part of these is charged to its def line by `after_tracing`, from torch's timers).

The time from one record to the next is charged to the line traced then (`self_s`) and to every
line on its inlining stack (`s`): an inlined call counts toward the line that called it and toward
its own. A line's `traced` counts Dynamo's entries into it: a line entered again after the translator
jumped back is a loop's next pass (an unrolled loop over 4 blocks traces the block's lines 4×, its
header 5×); a statement spread over lines, which flips between them going forward, is one entry.

The records are taken by logger *filters* that return False: nothing is formatted, printed or
propagated (torch's own handlers and the user's logging config see nothing they did not before);
records at a level the logger passed before are let through. Cost, measured: about 9 µs a record,
one per line started and per inlined call, 140–860 records for a compile of 4 blocks to a 12-layer
GPT (1–8 ms: under 1% of Dynamo's part, well under 0.1% of the cold compile).
"""

from __future__ import annotations

import contextlib
import logging
import time
import weakref
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from ....protocol import CompileFrame, CompileLine, LineRef

SOURCE_LOG = "torch._dynamo.symbolic_convert.__trace_source"  # the trace_source artifact's logger
CONVERT_LOG = "torch._dynamo.symbolic_convert"  # `DONE INLINING`, `… triggered compile`


@dataclass
class Traced:
    """What the records added up to: per compile id, the seconds of each inlining stack (outermost
    line first) and each line's entries; `traced_s` the compile id's tracing seconds."""

    stacks: dict[tuple[str, tuple[tuple[str, int], ...]], float] = field(default_factory=lambda: defaultdict(float))
    entries: dict[tuple[str, str, int], int] = field(default_factory=lambda: defaultdict(int))
    traced_s: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    note: Optional[str] = None  # why nothing was recorded (a torch without these records)
    # Dynamo's own `build_guards` timer, one per frame compiled inside, in compile order (None: no timer)
    guards_s: Optional[list[float]] = None


class _Clock:
    """The filters' state: the inlining stack being traced (outermost line first) since when."""

    def __init__(self, out: Traced) -> None:
        self.out = out
        self.chain: Optional[tuple[tuple[str, int], ...]] = None  # None: no line is being traced
        self.tx: Any = None  # the innermost translator of `chain`
        self.since = 0.0
        self.root: Any = None  # the frame's own translator, and its compile id
        self.cid = ""
        self.jumps: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # translator -> its entries' state

    def charge(self, now: float) -> None:
        if self.chain is not None:
            dt = now - self.since
            self.out.stacks[(self.cid, self.chain)] += dt
            self.out.traced_s[self.cid] += dt

    def at(self, tx: Any, now: float) -> None:
        """From now on the stack ends in `tx` at its current line (read now: a parent stays on the
        line that called until the call returns)."""
        chain = []
        inner = tx
        while inner is not None:
            chain.append((inner.f_code.co_filename, inner.lineno))
            inner = getattr(inner, "parent", None)
        self.tx, self.chain, self.since = tx, tuple(reversed(chain)), now

    def line(self, record: logging.LogRecord) -> None:
        now = time.perf_counter()
        lazy = record.args[0] if isinstance(record.args, tuple) and record.args else None
        tx = getattr(getattr(lazy, "func", None), "__self__", None)  # LazyString(tx.get_log_starts_line_log_str)
        if tx is None or not hasattr(tx, "f_code"):
            raise ValueError("a trace_source record without its translator")
        root = tx
        while getattr(root, "parent", None) is not None:
            root = root.parent
        if root is not self.root:  # a new frame (or a restarted analysis): nothing carried over
            self.chain, self.root, self.cid = None, root, _compile_id()
        self.charge(now)
        self.at(tx, now)
        # an entry counts when it is the line's first in this translator, or when the translator
        # jumped back since the line's last one (a loop's next pass)
        ip = tx.instruction_pointer or 0
        state = self.jumps.get(tx)
        if state is None:
            state = self.jumps[tx] = [ip, 0, {}]  # [last ip, backward jumps, {line: jumps at its last entry}]
        if ip < state[0]:
            state[1] += 1
        state[0] = ip
        if state[2].get(tx.lineno) != state[1]:
            self.out.entries[(self.cid, tx.f_code.co_filename, tx.lineno)] += 1
            state[2][tx.lineno] = state[1]

    def convert(self, record: logging.LogRecord) -> None:
        msg = record.msg if isinstance(record.msg, str) else ""
        if msg.startswith("DONE INLINING") and self.chain is not None:
            now = time.perf_counter()
            self.charge(now)
            code = record.args[0] if isinstance(record.args, tuple) and record.args else None
            done = self.tx
            while done is not None and done.f_code is not code:
                done = getattr(done, "parent", None)
            caller = getattr(done, "parent", None) if done is not None else None
            if caller is not None:  # back on the caller's line
                self.at(caller, now)
            else:
                self.since = now
        elif msg.endswith("triggered compile"):  # the graph's compile follows: not a line's
            self.charge(time.perf_counter())
            self.chain = self.tx = self.root = None


def _compile_id() -> str:
    try:
        from torch._guards import CompileContext

        cid = CompileContext.current_compile_id()
    except Exception:  # noqa: BLE001 - private API: the frame is then unnamed
        return ""
    return str(cid) if cid is not None else ""


class _Take(logging.Filter):
    """Gives every record to `take`; lets through only those at `passed` or above (the level the
    logger let through before)."""

    def __init__(self, take: Any, passed: int, out: Traced) -> None:
        super().__init__()
        self.take, self.passed, self.out = take, passed, out

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            self.take(record)
        except Exception as exc:  # noqa: BLE001 - a record torch shaped otherwise: never break the compile
            self.out.note = self.out.note or f"not read on this torch ({type(exc).__name__}: {exc})"[:200]
        return record.levelno >= self.passed  # what the logger let through before (TORCH_LOGS=+dynamo) still goes


@contextlib.contextmanager
def recorded() -> Iterator[Traced]:
    """Dynamo's tracing per line while inside (`Traced`, filled as the compiles run). The loggers'
    levels and filters are restored after; the artifact loggers under `symbolic_convert` that
    inherited its level keep the one they had (`trace_bytecode` on would format every instruction)."""
    out = Traced()
    manager = logging.Logger.manager
    if SOURCE_LOG not in manager.loggerDict:  # this torch logs no trace_source records
        out.note = "not on this torch (no trace_source log)"
        yield out
        return
    clock = _Clock(out)
    source, convert = logging.getLogger(SOURCE_LOG), logging.getLogger(CONVERT_LOG)
    children = [lg for name, lg in list(manager.loggerDict.items())
                if name.startswith(CONVERT_LOG + ".") and isinstance(lg, logging.Logger) and lg.level == logging.NOTSET]
    saved = [(lg, lg.level) for lg in (source, convert, *children)]
    filters = [(source, _Take(clock.line, source.getEffectiveLevel(), out)),
               (convert, _Take(clock.convert, convert.getEffectiveLevel(), out))]
    for lg in children:
        lg.setLevel(lg.getEffectiveLevel())
    for lg, flt in filters:
        lg.addFilter(flt)
        lg.setLevel(logging.DEBUG)
    timed = _guard_timer()
    before = len(timed) if timed is not None else 0
    try:
        yield out
    finally:
        for lg, flt in filters:
            lg.removeFilter(flt)
        for lg, level in saved:
            lg.setLevel(level)
        clock.chain = clock.tx = clock.root = None
        timed = _guard_timer()
        if timed is not None:
            out.guards_s = [float(x) for x in timed[before:]]


def _guard_timer() -> Optional[list[Any]]:
    """Dynamo's `build_guards` durations so far (`dynamo_timed`'s per-name lists); None without them."""
    try:
        from torch._dynamo.utils import compilation_time_metrics
    except ImportError:
        return None
    found = compilation_time_metrics.get("build_guards", [])
    return list(found) if isinstance(found, list) else None


def lines(out: Traced, keep: Any) -> list[CompileLine]:
    """The lines of `out` in files `keep(path)` accepts (the workspace's and libraries', not torch's
    own), costliest first. A line's `s` counts its stack's seconds once however often it recurs in it;
    `top`: the outermost kept line of its stacks (the compiled frame's own code); `via`: for an inner
    line, the outermost kept line it was reached from (most seconds)."""
    s: dict[tuple[str, str, int], float] = defaultdict(float)
    own: dict[tuple[str, str, int], float] = defaultdict(float)
    top: set[tuple[str, str, int]] = set()
    via: dict[tuple[str, str, int], dict[tuple[str, int], float]] = defaultdict(lambda: defaultdict(float))
    for (cid, chain), dt in out.stacks.items():
        kept = [(cid, p, ln) for p, ln in chain if keep(p)]
        if not kept:
            continue
        top.add(kept[0])
        if keep(chain[-1][0]):
            own[kept[-1]] += dt
        for key in dict.fromkeys(kept):
            s[key] += dt
            if key != kept[0]:
                via[key][kept[0][1:]] += dt
    found = [CompileLine(cid, path, line, round(sec, 4), round(own.get((cid, path, line), 0.0), 4),
                         out.entries.get((cid, path, line), 0), (cid, path, line) in top,
                         _most(via.get((cid, path, line))))
             for (cid, path, line), sec in s.items()]
    return sorted(found, key=lambda c: (-c.s, c.compile_id, c.path, c.line))


def after_tracing(found: list[CompileLine], frames: list[CompileFrame], keep: Any) -> list[CompileLine]:
    """`found` with each frame's Dynamo work after its lines were traced — its guards (Dynamo's
    `build_guards` timer), its graph and bytecode (the rest of its Dynamo stage) — charged to the
    frame's def line (`after_s`): work on the whole frame, its arguments' guards first, so the frame's
    lines add up to its Dynamo time. A frame whose Dynamo stage or tracing was not measured, or whose
    code is not kept (torch's own), gets none."""
    by = {(c.compile_id, c.path, c.line): c for c in found}
    for f in frames:
        dynamo = f.stages_s.get("dynamo")
        if dynamo is None or f.traced_s is None or not keep(f.path):
            continue
        after = max(dynamo - f.traced_s, 0.0)
        line = by.get((f.compile_id, f.path, f.line))
        if line is None:  # its def line was not traced on its own (a resumed frame starts mid-function)
            line = by[(f.compile_id, f.path, f.line)] = CompileLine(f.compile_id, f.path, f.line, 0.0, 0.0, 0)
            found.append(line)
        line.after_s = round(after, 4)
        line.guards_s = None if f.guards_s is None else round(min(f.guards_s, after), 4)
        line.s, line.self_s = round(line.s + after, 4), round(line.self_s + after, 4)
    return sorted(found, key=lambda c: (-c.s, c.compile_id, c.path, c.line))


def _most(seconds: Optional[dict[tuple[str, int], float]]) -> Optional[LineRef]:
    if not seconds:
        return None
    path, line = max(seconds.items(), key=lambda kv: kv[1])[0]
    return LineRef(path, line)
