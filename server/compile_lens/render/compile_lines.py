"""The cold compile on its lines (`CompileTime.lines`, `worker/measure/compile/per_line.py`) → CLI text,
JSON, hover text and inlay hints. Dynamo's tracing is per line, its guards, graph and bytecode on the
frame's def line; AOTAutograd and Inductor compile a frame's graph as a whole, so their seconds are
said per graph, never split by line. A line of the frame's own whose calls, repeated by a loop, take
most of its Dynamo time names the regional-compilation lever, with what it measured where it ran.
Pure: one place for every surface."""

from __future__ import annotations

import math
import os
from typing import Any, Iterable, Optional

from ..protocol import LEVERS, CompileFrame, CompileLine, CompileTime, Lever, phase_of
from .levers_text import lever_line

TOP = 5  # the CLI lists this many compile lines per target
# a line gets the compile hover from this share of its frame's tracing (of its cold compile where
# not measured): on a CPU Inductor's C++ build dwarfs any one line
HOVER_SHARE = 0.10
# an inlay hint on a compile line from this share of its frame's Dynamo time, on at most HINT_CAP lines of
# a file: the few costliest, beside the line-cost hints, not a painted file
HINT_SHARE = 0.15
HINT_CAP = 3
# a line of the frame's own traced more than once whose inlined calls take this share of the frame's
# Dynamo time: a loop repeating one block, regional compilation's case
REPEATED_SHARE = 0.40


def seconds(s: float) -> str:
    return f"{s:.1f} s" if s >= 1 else f"{s:.2f} s"


def _num(x: Any) -> Any:
    return x if not isinstance(x, float) or math.isfinite(x) else None


def lines_json(ct: CompileTime) -> list[dict[str, Any]]:
    """`compile_time.lines[]`: `s` the line's tracing seconds (the calls it inlines included), `traced`
    how many times Dynamo traced it; `top` the frame's own lines (their `s` add up to the frame's Dynamo
    time: `traced_s` and, on its def line, `after_s`, its guards (`guards_s`), graph and bytecode)."""
    return [{"path": c.path, "line": c.line, "s": _num(c.s), "traced": c.traced, "self_s": _num(c.self_s),
             "compile_id": c.compile_id, "top": c.top,
             "via": None if c.via is None else {"path": c.via.path, "line": c.via.line},
             "after_s": _num(c.after_s), "guards_s": _num(c.guards_s)} for c in ct.lines]


def frame_of(ct: CompileTime, line: CompileLine) -> Optional[CompileFrame]:
    """The frame a line was traced in (the first with its compile id: the forward's child's)."""
    return next((f for f in ct.frames if f.compile_id == line.compile_id), None)


def graph_s(frame: CompileFrame) -> Optional[float]:
    """The frame's compile outside Dynamo (AOTAutograd, Inductor, code generation): its graph's, not a line's."""
    dynamo = frame.stages_s.get("dynamo")
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


def dynamo_s(frame: CompileFrame) -> float:
    """What a line's share is of: the frame's Dynamo time (its tracing, else its whole compile, where not measured)."""
    return frame.stages_s.get("dynamo") or frame.traced_s or frame.total_s


def _after_words(c: CompileLine) -> str:
    """`guards 0.12 s, graph and bytecode 0.05 s`: the frame's Dynamo work after its lines, on its def line."""
    if c.guards_s is None:
        return f"the frame's guards, graph and bytecode {seconds(c.after_s)}"
    return f"the frame's guards {seconds(c.guards_s)}, graph and bytecode {seconds(max(c.after_s - c.guards_s, 0.0))}"


def line_words(ct: CompileTime, c: CompileLine, cwd: Optional[str] = None) -> str:
    """`6.1 s of 9.8 s — traced 48× (the loop at line 31)`: of the frame's cold compile; a def line
    says the frame's guards, graph and bytecode charged to it."""
    frame = frame_of(ct, c)
    of = f" of {seconds(frame.total_s)}" if frame is not None else ""
    if c.after_s:
        return f"{seconds(c.s)}{of} — {_after_words(c)}, after tracing its lines"
    return f"{seconds(c.s)}{of} — traced {c.traced}×{_via(ct, c, cwd)}"


def _where(path: str, line: int, cwd: Optional[str]) -> str:
    shown = os.path.relpath(path, cwd) if cwd and os.path.isabs(path) and path.startswith(cwd) else os.path.basename(path)
    return f"{shown}:{line}"


def frame_words(frame: CompileFrame, ct: Optional[CompileTime] = None) -> str:
    """`frame 0/0 (forward), 9.8 s: Dynamo 6.5 s, of which 6.3 s tracing its lines, 0.12 s building its
    guards and 0.08 s its graph and bytecode, on its def line (28); AOTAutograd and Inductor: 3.3 s for
    this graph, not split by line` (guards and the rest together where Dynamo's guard timer is not read;
    "on no line" where `ct`'s lines do not charge them to the def line)."""
    parts = [f"frame {frame.compile_id} ({frame.function}), {seconds(frame.total_s)}"]
    dynamo = frame.stages_s.get("dynamo")
    charged = ct is not None and any(c.after_s and c.compile_id == frame.compile_id for c in ct.lines)
    where = f"on its def line ({frame.line})" if charged else "on no line"
    if dynamo is not None:
        words = f"Dynamo {seconds(dynamo)}"
        if frame.traced_s is not None and frame.guards_s is not None:
            rest = max(dynamo - frame.traced_s - frame.guards_s, 0.0)
            words += (f", of which {seconds(frame.traced_s)} tracing its lines, {seconds(frame.guards_s)} building "
                      f"its guards and {seconds(rest)} its graph and bytecode, {where}")
        elif frame.traced_s is not None:
            words += (f", of which {seconds(frame.traced_s)} tracing its lines and "
                      f"{seconds(max(dynamo - frame.traced_s, 0.0))} guards, graph and bytecode {where}")
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
    out += [f"    {frame_words(f, ct)}" for f in frames]
    out += [f"    {_where(c.path, c.line, cwd)}: compile {line_words(ct, c, cwd)}" for c in shown]
    return out


def at(benchmarks: Any, path: str, line: int) -> Optional[tuple[CompileLine, CompileTime]]:
    """The compile line at `path:line` across a file's measured targets (`{name: Benchmark}`), when
    it took at least HOVER_SHARE of its frame's Dynamo time: the costliest there."""
    best: Optional[tuple[CompileLine, CompileTime]] = None
    for b in benchmarks.values():
        ct = getattr(b, "compile_time", None)
        for c in (ct.lines if ct is not None else ()):
            frame = frame_of(ct, c)
            if c.line != line or not _same(c.path, path) or frame is None or c.s < HOVER_SHARE * dynamo_s(frame):
                continue
            if best is None or c.s > best[0].s:
                best = (c, ct)
    return best


def hover_markdown(c: CompileLine, ct: CompileTime, levers: Optional[Iterable[Lever]] = None) -> str:
    """`compile: 6.1 s of 9.8 s — traced 48× (the loop at line 31)`, and what the figure is; on a loop
    repeating a block, its lever (`levers`: the target's, None where the levers phase has not run)."""
    rows = [f"**Compile Lens · compile:** {line_words(ct, c)}"]
    what = "Dynamo's tracing of this line, the calls it inlines included" if c.s > c.self_s else \
        "Dynamo's tracing of this line"
    if c.s > c.self_s:
        what += f" ({seconds(c.self_s)} on the line itself)"
    if c.after_s:
        what = (("Dynamo's tracing of this line, " + f"{seconds(c.s - c.after_s)}, and " if c.s > c.after_s else "")
                + "the frame's own Dynamo work after its lines were traced, charged to its def line: building the "
                "guards on its arguments and globals, its graph and its new bytecode")
    rows.append(what + ".")
    lever = loop_lever(ct, c, levers)
    if lever:
        rows.append(f"**Repeated:** {lever}")
    frame = frame_of(ct, c)
    if frame is not None:
        rows.append(f"Its {frame_words(frame, ct)}.")
    return "\n\n".join(rows)


def _same(a: str, b: str) -> bool:
    return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


def repeated(ct: CompileTime, c: CompileLine) -> bool:
    """A line of the frame's own traced more than once whose inlined calls take REPEATED_SHARE of
    the frame's Dynamo time: a loop repeating one block (`x = block(x)` over a ModuleList)."""
    frame = frame_of(ct, c)
    return c.top and c.traced > 1 and frame is not None and c.s - c.self_s >= REPEATED_SHARE * dynamo_s(frame)


def tried(result: Any) -> Optional[list[Lever]]:
    """A target result's levers where the levers phase ran (an empty list: none applied), else None."""
    return list(result.levers) if result is not None and phase_of(result, LEVERS) is not None else None


def _regional(levers: Optional[Iterable[Lever]]) -> Optional[Lever]:
    return next((lv for lv in levers or () if lv.lever == "regional"), None)


def loop_lever(ct: CompileTime, c: CompileLine, levers: Optional[Iterable[Lever]]) -> Optional[str]:
    """On a repeated line (`repeated`): its calls' share, and the regional-compilation lever — what it
    measured (offered as an edit here when better), or how to measure it; None on any other line."""
    if not repeated(ct, c):
        return None
    frame = frame_of(ct, c)
    head = (f"Dynamo traced the calls on this line {c.traced}× ({seconds(c.s - c.self_s)}, "
            f"{(c.s - c.self_s) / dynamo_s(frame):.0%} of the frame's Dynamo time)") if frame is not None else ""
    lever = _regional(levers)
    if lever is None and levers is None:
        return (f"{head}: compiling the repeated block once and reusing it (regional compilation) is its lever — "
                "measure it with Try levers (`check --levers`).")
    if lever is None:
        return f"{head}; the levers phase found no repeated module to compile once (regional compilation)."
    offered = " — offered as an edit on this line" if lever.verdict == "better" and lever.action else ""
    return f"{head}. Its lever, measured: {lever_line(lever)}{offered}."


def hint_label(c: CompileLine, ct: CompileTime, levers: Optional[Iterable[Lever]] = None) -> str:
    """`compile 6.1 s · traced 48×`; a def line `compile 0.21 s · guards, graph`; a repeated line its
    lever's verdict (`· regional: better`), or `· regional compilation?` where not measured."""
    if c.after_s and c.after_s >= c.s / 2:
        return f"compile {seconds(c.s)} · guards, graph"
    label = f"compile {seconds(c.s)} · traced {c.traced}×"
    if repeated(ct, c):
        lever = _regional(levers)
        label += f" · regional: {lever.verdict}" if lever is not None else \
            " · regional compilation?" if levers is None else ""
    return label


def hints_in_file(benchmarks: Any, path: str) -> list[tuple[CompileLine, CompileTime, str]]:
    """The compile lines of `path` worth an inlay hint, across a file's measured targets (`{name:
    Benchmark}`): from HINT_SHARE of their frame's Dynamo time, the HINT_CAP costliest, one per line,
    each with the target it was measured on."""
    best: dict[int, tuple[CompileLine, CompileTime, str]] = {}
    for name, b in benchmarks.items():
        ct = getattr(b, "compile_time", None)
        for c in (ct.lines if ct is not None else ()):
            frame = frame_of(ct, c)
            if frame is None or c.s < HINT_SHARE * dynamo_s(frame) or not _same(c.path, path):
                continue
            if c.line not in best or c.s > best[c.line][0].s:
                best[c.line] = (c, ct, name)
    return sorted(best.values(), key=lambda found: -found[0].s)[:HINT_CAP]
