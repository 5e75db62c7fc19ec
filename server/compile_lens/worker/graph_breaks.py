"""Find every graph break TorchDynamo takes in a target, at the user line that broke.

`torch._dynamo.explain` alone under-reports (a break after an empty graph, a skipped frame), and
its reason for data-dependent branching is only "generic_jump TensorVariable()". torch's own
`graph_breaks` log is more complete and carries the full message with the registry link, but no
columns. So both are collected and merged per location: the log's text, explain's columns.
"""

from __future__ import annotations

import ast
import contextlib
import json
import logging
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterator

import torch
import torch._dynamo

from ..positions import expression_end
from ..protocol import Frame, GraphBreak
from .loader import BuiltTarget

_LOCATION = re.compile(r"in user code at (?P<path>.+?):(?P<line>\d+)\s*$", re.M)
_REASON = re.compile(r"^Graph Break Reason: ", re.M)
_URL = re.compile(r"https?://\S+?/gb/gb(?P<num>\d{4})\.html", re.I)
_CHAINED = "*** While handling this graph break, another graph break occurred: ***"
_SKIPPED_FRAME = re.compile(r"frame skipped: (?P<name>\S+) \((?P<path>.+) line (?P<line>\d+)\)")
LOOP_GB_ID = "GB7000"  # "graph break in loop": the whole frame is skipped
_TB_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<name>.+)$')


@dataclass
class _Seen:
    """One break as one source reports it, before merging."""

    path: str
    line: int
    reason: str
    stack: list[Frame] = field(default_factory=list)
    columns: tuple[int, int] | None = None  # 0-based start (on `line`), end (on `end_line`), characters
    end_line: int | None = None  # a multi-line expression ends on a later line
    compile_id: str | None = None  # the compile that logged it ("0/0")


def current_compile_id() -> str | None:
    """The id ("frame/compile") of the compile running now, from torch's compile context."""
    try:
        trace_id = torch._guards.CompileContext.current_trace_id()  # torch >= 2.1
        compile_id = getattr(trace_id, "compile_id", None)
        frame, number = getattr(compile_id, "frame_id", None), getattr(compile_id, "frame_compile_id", None)
    except Exception:  # noqa: BLE001 - private API, may move
        return None
    return f"{frame}/{number}" if frame is not None and number is not None else None


class _Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []
        self.compile_ids: list[str | None] = []  # beside each message

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.endswith("__graph_breaks"):
            with contextlib.suppress(Exception):
                self.messages.append(record.getMessage())
                self.compile_ids.append(current_compile_id())


def _break_logger() -> logging.Logger:
    import torch._dynamo.symbolic_convert as convert

    return getattr(convert, "graph_break_log", None) or logging.getLogger(
        "torch._dynamo.symbolic_convert.__graph_breaks")


@contextlib.contextmanager
def graph_break_log() -> Iterator[_Collector]:
    """torch's graph_breaks log, captured. The `torch._dynamo` logger does not propagate.

    `set_logs` costs ≈ 15 ms (a third of a small trace), so it is switched on once and left on;
    whoever resets torch's logs (the recompile sweep does) just makes the next trace switch it on.
    """
    collector = _Collector()
    logger = logging.getLogger("torch._dynamo")
    if not _break_logger().isEnabledFor(logging.DEBUG):
        torch._logging.set_logs(graph_breaks=True)
    logger.addHandler(collector)
    try:
        yield collector
    finally:
        logger.removeHandler(collector)


def reset_dynamo() -> None:
    torch._dynamo.reset()
    # Repeated breaks are logged without their stack; a warm worker must see each as new.
    reset_dup = getattr(torch._dynamo.utils, "reset_graph_break_dup_checker", None)
    if reset_dup is not None:
        reset_dup()
    torch._dynamo.utils.counters.clear()


def trace_graph_breaks(target: BuiltTarget, root: str) -> tuple[int, list[GraphBreak]]:
    """Run the target once under Dynamo (no compiler) and return (graph count, breaks)."""
    fn = target.make()
    reset_dynamo()
    with graph_break_log() as log:
        explained = torch._dynamo.explain(fn)(*target.args)
    reset_dynamo()
    seen = [s for s in _from_explain(explained, root)] + [
        s for m, cid in zip(log.messages, log.compile_ids) for s in _from_log(m, root, cid)
    ]
    return int(explained.graph_count), _merge(seen)


def distinct_breaks(messages: list[str], root: str) -> list[GraphBreak]:
    """The breaks in captured graph_breaks log records, one per location (as a trace counts them)."""
    return _merge([s for m in messages for s in _from_log(m, root)])


def _user_frames(frames: Any, root: str) -> list[Any]:
    return [f for f in frames if _is_user_file(f.filename, root)]


_TORCH_DIR = os.path.dirname(os.path.realpath(torch.__file__)) + os.sep
_OUR_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep


def _is_user_file(path: str, root: str) -> bool:
    """A frame of the code being traced: the workspace or a library it calls, not torch, not us.

    A break inside a library (say transformers) is reported where torch reports it, in the
    library's file; the editor also shows it at the workspace line that called into it.
    """
    if not path or path.startswith("<"):
        return False
    real = os.path.realpath(path)
    return not real.startswith((_TORCH_DIR, _OUR_DIR))


def _from_explain(explained: Any, root: str) -> Iterator[_Seen]:
    for reason in getattr(explained, "break_reasons", []) or []:
        frames = _user_frames(reason.user_stack or [], root)
        if not frames:
            continue
        inner = frames[-1]
        columns, end_line = None, None
        if getattr(inner, "colno", None) is not None and getattr(inner, "end_colno", None) is not None:
            columns, end_line = _span(inner.filename, inner.lineno, inner.colno, inner.end_colno)
        yield _Seen(
            path=os.path.realpath(inner.filename),
            line=inner.lineno,
            reason=str(reason.reason),
            stack=[Frame(os.path.realpath(f.filename), f.lineno, _frame_name(f.name)) for f in frames],
            columns=columns,
            end_line=end_line,
        )


def _from_log(message: str, root: str, compile_id: str | None = None) -> Iterator[_Seen]:
    location = _LOCATION.search(message.splitlines()[0] if message else "")
    reason_at = _REASON.search(message)
    if not location or not reason_at:
        return
    body = message[reason_at.end():]
    reason, _, traceback_text = body.partition("\nUser code traceback:\n")
    stack, columns = _parse_traceback(traceback_text, root)
    path, line = os.path.realpath(location["path"]), int(location["line"])
    if not _is_user_file(path, root):
        return
    if not stack or (stack[-1].path, stack[-1].line) != (path, line):
        stack.append(Frame(path, line, "?"))
        columns = None
    end_line = None
    if columns is not None and columns[1] >= len(_source_line(path, line).rstrip()):
        # a traceback underlines only the first line of a multi-line expression
        columns, end_line = _span_from_first_line(path, line, columns)
    yield _Seen(path=path, line=line, reason=reason.strip(), stack=stack, columns=columns, end_line=end_line,
                compile_id=compile_id)


def _parse_traceback(text: str, root: str) -> tuple[list[Frame], tuple[int, int] | None]:
    """Frames of a `traceback.format_list` text, and the innermost frame's caret columns."""
    frames: list[Frame] = []
    columns = None
    lines = text.splitlines()
    for i, row in enumerate(lines):
        match = _TB_FRAME.match(row)
        if not match:
            continue
        path, line = match["path"], int(match["line"])
        if not _is_user_file(path, root):
            continue
        frames.append(Frame(os.path.realpath(path), line, _frame_name(match["name"])))
        columns = None
        if i + 2 < len(lines) and set(lines[i + 2].strip()) <= {"^", "~"} and lines[i + 2].strip():
            columns = _caret_columns(path, line, lines[i + 1], lines[i + 2])
    return frames, columns


def _caret_columns(path: str, line: int, code_row: str, caret_row: str) -> tuple[int, int] | None:
    source = _source_line(path, line)
    code = code_row.strip()
    if not source or not code:
        return None
    indent = source.find(code)
    if indent < 0:
        return None
    shown_at = len(code_row) - len(code_row.lstrip())
    start = len(caret_row) - len(caret_row.lstrip()) - shown_at
    width = len(caret_row.strip())
    return indent + start, indent + start + width


def _frame_name(name: str) -> str:
    # Resumed frames are synthetic: torch_dynamo_resume_in_forward_at_14 -> forward
    match = re.match(r"torch_dynamo_resume_in_(.+)_at_\d+$", name)
    return match.group(1) if match else name


def _source_line(path: str, line: int) -> str:
    import linecache

    return linecache.getline(path, line).rstrip("\n")


def _chars(path: str, line: int, byte: int) -> int:
    """Code positions are UTF-8 byte offsets; editors count characters."""
    return len(_source_line(path, line).encode("utf-8")[:byte].decode("utf-8", "ignore"))


def _file_source(path: str) -> str:
    import linecache

    return "".join(linecache.getlines(path))


def _span(path: str, line: int, start_byte: int, end_byte: int) -> tuple[tuple[int, int], int]:
    """Characters (start on `line`, end on the end line) and the end line of torch's byte columns.

    torch's frames have no end line: `end_colno` may belong to a later line (a call spread over
    several lines), which the expression's own end in the source tells."""
    end = expression_end(_file_source(path), line, start_byte, end_byte)
    end_line = end[0] if end is not None else line
    if end is None and end_byte <= start_byte:  # no such expression (source changed): the start line
        return (_chars(path, line, start_byte), len(_source_line(path, line).rstrip())), line
    return (_chars(path, line, start_byte), _chars(path, end_line, end_byte)), end_line


def _span_from_first_line(path: str, line: int, columns: tuple[int, int]) -> tuple[tuple[int, int], int | None]:
    start_byte = len(_source_line(path, line)[:columns[0]].encode("utf-8"))
    end = expression_end(_file_source(path), line, start_byte)
    if end is None:
        return columns, None
    return (columns[0], _chars(path, end[0], end[1])), end[0]


# explain's reason when Dynamo compiled the graph up to an instruction it could not step over
# (a call whose callee broke and cannot be resumed): the same break, seen from its caller.
STEP_UNSUPPORTED = "step_unsupported"
STEP_UNSUPPORTED_TEXT = ("Dynamo could not trace through this call: it compiled the graph up to it and runs the "
                         "call and the rest of the function eagerly (torch gives no further reason)")


def _fold_steps(seen: list[_Seen]) -> list[_Seen]:
    """Drop a `step_unsupported` whose call site lies on another break's call chain: one break."""
    chains = {(f.path, f.line) for s in seen if s.reason.strip() != STEP_UNSUPPORTED for f in s.stack}
    return [s for s in seen if s.reason.strip() != STEP_UNSUPPORTED or (s.path, s.line) not in chains]


def _merge(seen: list[_Seen]) -> list[GraphBreak]:
    """One break per location (file, line, registry id); the most informative text wins."""
    by_place: dict[tuple[str, int], list[_Seen]] = {}
    for item in _fold_steps(seen):
        by_place.setdefault((item.path, item.line), []).append(item)
    breaks: list[GraphBreak] = []
    for (path, line), items in by_place.items():
        kinds: dict[str, list[_Seen]] = {}
        for item in items:
            kinds.setdefault(_describe(item.reason)["key"], []).append(item)
        # explain's terse reasons ("generic_jump TensorVariable()") duplicate the log's full one
        if len(kinds) > 1:
            kinds = {k: v for k, v in kinds.items() if not k.startswith("raw:")} or kinds
        for group in kinds.values():
            breaks.append(_to_break(path, line, items, group))
    breaks.sort(key=lambda b: (b.path, b.line, b.column))
    return breaks


def _to_break(path: str, line: int, place: list[_Seen], group: list[_Seen]) -> GraphBreak:
    best = max(group, key=lambda s: (bool(_URL.search(s.reason)), len(s.reason)))
    desc = _describe(best.reason.split(_CHAINED)[0])
    located = next((s for s in place if s.columns), None)
    columns = located.columns if located else None
    end_line = (located.end_line or line) if located else line
    source = _source_line(path, line)
    if columns is None:
        start = len(source) - len(source.lstrip())
        columns = (start, max(len(source.rstrip()), start + 1))
    stack = max((s.stack for s in place), key=len)
    found = GraphBreak(
        path=path, line=line, column=columns[0] + 1, end_line=end_line, end_column=columns[1] + 1,
        gb_id=desc["gb_id"], gb_type=desc["gb_type"], explanation=desc["explanation"],
        hints=desc["hints"], url=desc["url"], reason=best.reason, stack=stack,
        compile_id=next((s.compile_id for s in group if s.compile_id), None),  # the first, in log order
    )
    return _loop_fallback(found) or found


def _loop_fallback(inner: GraphBreak) -> GraphBreak | None:
    """GB7000: a break inside a for/while loop makes Dynamo skip the whole frame. Said as that, at
    the loop, with the break that caused it kept as `inner`; None when this is no such break.

    torch 2.13 chains it after the inner break's text: "*** While handling this graph break,
    another graph break occurred: ***", then "graph break in loop" whose context names the frame:
    "frame skipped: forward (/path/model.py line 15)".
    """
    for section in inner.reason.split(_CHAINED)[1:]:
        desc = _describe(section)
        if desc["gb_id"] != LOOP_GB_ID and desc["gb_type"] != "graph break in loop":
            continue
        skipped = _SKIPPED_FRAME.search(section)
        name = skipped["name"] if skipped else (inner.stack[-1].name if inner.stack else "function")
        # the skipped frame's own line on the chain: where the loop runs (the break may be in a callee)
        in_frame = next((f for f in reversed(inner.stack) if skipped and f.name == name
                         and f.path == os.path.realpath(skipped["path"])), None)
        at = in_frame or Frame(inner.path, inner.line, name)
        first = int(skipped["line"]) if skipped and os.path.realpath(skipped["path"]) == at.path else 0
        loop = _enclosing_loop(at.path, at.line, first)
        if loop is not None:
            line, column, end_line, end_column = loop
        else:  # no loop found in today's source: the frame's def line
            line = first or at.line
            text = _source_line(at.path, line)
            column, end_line, end_column = len(text) - len(text.lstrip()) + 1, line, len(text.rstrip()) + 1
        chain = inner.stack[:inner.stack.index(in_frame)] if in_frame in inner.stack else []
        what = inner.gb_type or inner.reason.splitlines()[0]
        where = f"line {inner.line}" if inner.path == at.path else f"{os.path.basename(inner.path)}:{inner.line}"
        return GraphBreak(
            path=at.path, line=line, column=column, end_line=end_line, end_column=end_column,
            gb_id=desc["gb_id"] or LOOP_GB_ID, gb_type="graph break in loop",
            explanation=f"the whole `{name}` runs eagerly (break inside a loop at {where}: {what})",
            hints=list(inner.hints) + [h for h in desc["hints"] if h not in inner.hints],
            url=desc["url"] or _registry_url(LOOP_GB_ID), reason=inner.reason,
            stack=[*chain, Frame(at.path, line, name)], inner=inner, compile_id=inner.compile_id,
        )
    return None


def _enclosing_loop(path: str, line: int, first: int = 0) -> tuple[int, int, int, int] | None:
    """The innermost `for`/`while` around `line`, inside the function that starts at `first`: its
    header, as 1-based (line, col, end_line, end_col)."""
    try:
        tree = ast.parse(_file_source(path))
    except (SyntaxError, ValueError):
        return None
    best = None
    for node in ast.walk(tree):
        if (isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and first <= node.lineno <= line
                and line <= (node.end_lineno or 0)):
            if best is None or node.lineno >= best.lineno:
                best = node
    if best is None:
        return None
    head = best.iter if isinstance(best, (ast.For, ast.AsyncFor)) else best.test
    end_line, end_byte = head.end_lineno or best.lineno, head.end_col_offset or 0
    start = _chars(path, best.lineno, best.col_offset)
    return best.lineno, start + 1, end_line, _chars(path, end_line, end_byte) + 1


def _describe(reason: str) -> dict[str, Any]:
    """Split torch's message into registry id, short type, explanation and hints."""
    if reason.strip() == STEP_UNSUPPORTED:
        return {"gb_id": None, "gb_type": "graph break at a call (step_unsupported)", "explanation": STEP_UNSUPPORTED_TEXT,
                "hints": [], "url": None, "key": f"raw:{STEP_UNSUPPORTED}"}
    url_match = _URL.search(reason)
    gb_id = f"GB{url_match['num']}" if url_match else None
    rows = reason.splitlines()
    gb_type, explanation, hints = "", [], []
    mode = None
    for i, row in enumerate(rows):
        stripped = row.strip()
        if stripped.startswith("Explanation:"):
            mode = "explanation"
            explanation.append(stripped[len("Explanation:"):].strip())
            gb_type = next((r.strip() for r in reversed(rows[:i]) if r.strip()), "")
        elif stripped.startswith("Hint:"):
            mode = "hint"
            hints.append(stripped[len("Hint:"):].strip())
        elif stripped.startswith(("Developer debug context:", "For more details")):
            mode = None
        elif mode == "explanation" and not stripped:
            mode = "context"  # torch's worked example of the failing code follows: not the summary
        elif mode == "explanation":
            explanation.append(stripped)
    if gb_id is None and gb_type:
        gb_id = _registry_id(gb_type)
    if gb_id and not gb_type:
        entry = _registry().get(gb_id, [{}])[0]
        gb_type = entry.get("Gb_type", "")
        explanation = explanation or [entry.get("Explanation", "")]
        hints = hints or list(entry.get("Hints", []))
    url = url_match.group(0) if url_match else _registry_url(gb_id)
    key = gb_id or (f"type:{gb_type}" if gb_type else f"raw:{rows[0] if rows else ''}")
    if not gb_type:
        gb_type = rows[0].strip() if rows else "graph break"
    return {"gb_id": gb_id, "gb_type": gb_type, "explanation": " ".join(e for e in explanation if e),
            "hints": hints, "url": url, "key": key}


@lru_cache(maxsize=1)
def _registry() -> dict[str, list[dict[str, Any]]]:
    path = os.path.join(os.path.dirname(torch._dynamo.__file__), "graph_break_registry.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}  # older torch: no registry, ids come only from message URLs


def _registry_id(gb_type: str) -> str | None:
    for gb_id, entries in _registry().items():
        if any(e.get("Gb_type") == gb_type for e in entries):
            return gb_id
    return None


def _registry_url(gb_id: str | None) -> str | None:
    if not gb_id:
        return None
    base = getattr(torch._dynamo.exc, "GRAPH_BREAK_SITE_URL", None)
    return f"{base}gb{gb_id[2:]}.html" if base else None
