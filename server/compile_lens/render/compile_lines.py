"""The cold compile on its lines (`CompileTime.lines`, `worker/measure/compile_lines.py`) → CLI text,
JSON and hover text. Dynamo's tracing is per line; AOTAutograd and Inductor compile a frame's graph
as a whole, so their seconds are said per graph, never split by line. Pure: one place for every surface."""

from __future__ import annotations

import math
import os
from typing import Any, Optional

from ..protocol import CompileFrame, CompileLine, CompileTime

TOP = 5  # the CLI lists this many compile lines per target
# a line gets the compile hover from this share of its frame's tracing (of its cold compile where
# not measured): on a CPU Inductor's C++ build dwarfs any one line
HOVER_SHARE = 0.10


def seconds(s: float) -> str:
    return f"{s:.1f} s" if s >= 1 else f"{s:.2f} s"


def _num(x: Any) -> Any:
    return x if not isinstance(x, float) or math.isfinite(x) else None


def lines_json(ct: CompileTime) -> list[dict[str, Any]]:
    """`compile_time.lines[]`: `s` the line's tracing seconds (the calls it inlines included), `traced`
    how many times Dynamo traced it; `top` the frame's own lines (their `s` add up to the frame's `traced_s`)."""
    return [{"path": c.path, "line": c.line, "s": _num(c.s), "traced": c.traced, "self_s": _num(c.self_s),
             "compile_id": c.compile_id, "top": c.top,
             "via": None if c.via is None else {"path": c.via.path, "line": c.via.line}} for c in ct.lines]


def frame_of(ct: CompileTime, line: CompileLine) -> Optional[CompileFrame]:
    """The frame a line was traced in (the first with its compile id: the forward's child's)."""
    return next((f for f in ct.frames if f.compile_id == line.compile_id), None)


def graph_s(frame: CompileFrame) -> Optional[float]:
    """The frame's compile outside Dynamo (AOTAutograd, Inductor, code generation): its graph's, not a line's."""
    dynamo = frame.phases_s.get("dynamo")
    return None if dynamo is None else max(frame.total_s - dynamo, 0.0)


def _place(path: str, line: int, beside: str, cwd: Optional[str]) -> str:
    return f"line {line}" if path == beside else _where(path, line, cwd)


def _via(ct: CompileTime, c: CompileLine, cwd: Optional[str]) -> str:
    """` (the loop at line 31)`: the frame's own line an inner line was reached from, a loop when
    Dynamo traced that line more than once."""
    if c.via is None:
        return ""
    caller = next((o for o in ct.lines if o.compile_id == c.compile_id and o.path == c.via.path
                   and o.line == c.via.line), None)
    where = _place(c.via.path, c.via.line, c.path, cwd)
    return f" (the loop at {where})" if caller is not None and caller.traced > 1 else f" (from {where})"


def line_words(ct: CompileTime, c: CompileLine, cwd: Optional[str] = None) -> str:
    """`6.1 s of 9.8 s — traced 48× (the loop at line 31)`: of the frame's cold compile."""
    frame = frame_of(ct, c)
    of = f" of {seconds(frame.total_s)}" if frame is not None else ""
    return f"{seconds(c.s)}{of} — traced {c.traced}×{_via(ct, c, cwd)}"


def _where(path: str, line: int, cwd: Optional[str]) -> str:
    shown = os.path.relpath(path, cwd) if cwd and os.path.isabs(path) and path.startswith(cwd) else os.path.basename(path)
    return f"{shown}:{line}"


def frame_words(frame: CompileFrame) -> str:
    """`frame 0/0 (forward), 9.8 s: Dynamo 6.5 s, of which 6.3 s tracing its lines, 0.12 s building its
    guards and 0.08 s its graph and bytecode, on no line; AOTAutograd and Inductor: 3.3 s for this
    graph, not split by line` (guards and the rest together where Dynamo's guard timer is not read)."""
    parts = [f"frame {frame.compile_id} ({frame.function}), {seconds(frame.total_s)}"]
    dynamo = frame.phases_s.get("dynamo")
    if dynamo is not None:
        words = f"Dynamo {seconds(dynamo)}"
        if frame.traced_s is not None and frame.guards_s is not None:
            rest = max(dynamo - frame.traced_s - frame.guards_s, 0.0)
            words += (f", of which {seconds(frame.traced_s)} tracing its lines, {seconds(frame.guards_s)} building "
                      f"its guards and {seconds(rest)} its graph and bytecode, on no line")
        elif frame.traced_s is not None:
            words += (f", of which {seconds(frame.traced_s)} tracing its lines and "
                      f"{seconds(max(dynamo - frame.traced_s, 0.0))} guards, graph and bytecode on no line")
        parts.append(words)
    graph = graph_s(frame)
    if graph is not None:
        parts.append(f"AOTAutograd and Inductor: {seconds(graph)} for this graph, not split by line")
    return parts[0] + ": " + "; ".join(parts[1:]) if len(parts) > 1 else parts[0]


def top_text(ct: Optional[CompileTime], cwd: Optional[str], n: int = TOP) -> list[str]:
    """The CLI's compile lines of a target: the frames they were traced in, then the `n` costliest
    lines (`model.py:31: compile 6.1 s of 9.8 s — traced 48×`)."""
    if ct is None:
        return []
    if not ct.lines:
        return [f"  compile by line: not measured ({ct.lines_note})"] if ct.lines_note else []
    shown = ct.lines[:n]
    ids = list(dict.fromkeys(c.compile_id for c in shown))
    frames = [f for f in (next((f for f in ct.frames if f.compile_id == i), None) for i in ids) if f is not None]
    out = ["  compile by line (Dynamo's tracing; a line's seconds include the calls it inlines):"]
    out += [f"    {frame_words(f)}" for f in frames]
    out += [f"    {_where(c.path, c.line, cwd)}: compile {line_words(ct, c, cwd)}" for c in shown]
    return out


def at(benchmarks: Any, path: str, line: int) -> Optional[tuple[CompileLine, CompileTime]]:
    """The compile line at `path:line` across a file's measured targets (`{name: Benchmark}`), when
    it took at least HOVER_SHARE of its frame's tracing: the costliest there."""
    best: Optional[tuple[CompileLine, CompileTime]] = None
    for b in benchmarks.values():
        ct = getattr(b, "compile_time", None)
        for c in (ct.lines if ct is not None else ()):
            frame = frame_of(ct, c)
            if c.line != line or not _same(c.path, path) or frame is None or \
                    c.s < HOVER_SHARE * (frame.traced_s if frame.traced_s is not None else frame.total_s):
                continue
            if best is None or c.s > best[0].s:
                best = (c, ct)
    return best


def hover_markdown(c: CompileLine, ct: CompileTime) -> str:
    """`compile: 6.1 s of 9.8 s — traced 48× (the loop at line 31)`, and what the figure is."""
    rows = [f"**Compile Lens · compile:** {line_words(ct, c)}"]
    what = "Dynamo's tracing of this line, the calls it inlines included" if c.s > c.self_s else \
        "Dynamo's tracing of this line"
    if c.s > c.self_s:
        what += f" ({seconds(c.self_s)} on the line itself)"
    rows.append(what + ".")
    frame = frame_of(ct, c)
    if frame is not None:
        rows.append(f"Its {frame_words(frame)}.")
    return "\n\n".join(rows)


def _same(a: str, b: str) -> bool:
    return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))
