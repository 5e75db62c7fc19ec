"""Find every graph break TorchDynamo takes in a target, at the user line that broke.

`torch._dynamo.explain` alone under-reports (a break after an empty graph, a skipped frame), and
its reason for data-dependent branching is only "generic_jump TensorVariable()". torch's own
`graph_breaks` log is more complete and carries the full message with the registry link, but no
columns. So both are collected and merged per location: the log's record, explain's columns.
A break's type, explanation and hints are the arguments torch formatted its message from (the
collector keeps them); the message's text is read only where those are not there (another torch).
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from typing import Any, Iterator, Optional

import torch
import torch._dynamo

from ...protocol import CapturedGraph, Frame, GraphBreak, SkippedLoop
from ...timeline import Timeline
from ...torch_text.frames import frame_name, is_environment_file, is_user_file, real
from ...torch_text.stable_text import stable_text
from .. import dynamo
from ..loader import BuiltTarget
from .captured import captured
from .collector import collect
from .records import BreakFields, BreakSeen
from .spans import chars, file_source, source_line, span

_URL = re.compile(r"https?://\S+?/gb/gb(?P<num>\d{4})\.html", re.I)
_CHAINED = "*** While handling this graph break, another graph break occurred: ***"
_SKIPPED_FRAME = re.compile(r"frame skipped: (?P<name>\S+) \((?P<path>.+) line (?P<line>\d+)\)")
LOOP_GB_ID = "GB7000"  # "graph break in loop": the whole frame is skipped


def trace_graph_breaks(target: BuiltTarget, root: str, timeline: Optional[Timeline] = None,
                       graphs: Optional[list[CapturedGraph]] = None) -> tuple[int, list[GraphBreak]]:
    """Run the target once under Dynamo (no compiler) and return (graph count, breaks); with `graphs`,
    the FX graphs Dynamo captured are appended to it (`captured`)."""
    fn = target.make()
    dynamo.reset()
    with collect() as log:
        explained = torch._dynamo.explain(fn)(*target.args)
    dynamo.reset()
    if timeline is not None:
        timeline.mark("explained")
    if graphs is not None:
        graphs.extend(captured(getattr(explained, "graphs", None) or [], root))
    from_explain = list(_from_explain(explained))
    for seen in from_explain:
        seen.sections = log.sections_of(seen.reason)
    found = int(explained.graph_count), _merge(from_explain + log.breaks)
    if timeline is not None:
        timeline.mark("collected")
    return found


def distinct_breaks(seen: list[BreakSeen], root: str = "") -> list[GraphBreak]:
    """The breaks a collector kept, one per location (as a trace counts them)."""
    return _merge(list(seen))


def _from_explain(explained: Any) -> Iterator[BreakSeen]:
    for reason in getattr(explained, "break_reasons", []) or []:
        frames = [f for f in reason.user_stack or [] if is_user_file(f.filename, libraries=True)]
        if not frames:
            continue
        inner = frames[-1]
        columns, end_line = None, None
        if getattr(inner, "colno", None) is not None and getattr(inner, "end_colno", None) is not None:
            columns, end_line = span(inner.filename, inner.lineno, inner.colno, inner.end_colno)
        yield BreakSeen(
            path=real(inner.filename),
            line=inner.lineno,
            reason=str(reason.reason),
            stack=[Frame(real(f.filename), f.lineno, frame_name(f.name)) for f in frames],
            columns=columns,
            end_line=end_line,
        )


# explain's reason when Dynamo compiled the graph up to an instruction it could not step over
# (a call whose callee broke and cannot be resumed): the same break, seen from its caller.
STEP_UNSUPPORTED = "step_unsupported"
STEP_UNSUPPORTED_TEXT = ("Dynamo could not trace through this call: it compiled the graph up to it and runs the "
                         "call and the rest of the function eagerly (torch gives no further reason)")


def _fold_steps(seen: list[BreakSeen]) -> list[BreakSeen]:
    """Drop a `step_unsupported` whose call site lies on another break's call chain: one break."""
    chains = {(f.path, f.line) for s in seen if s.reason.strip() != STEP_UNSUPPORTED for f in s.stack}
    return [s for s in seen if s.reason.strip() != STEP_UNSUPPORTED or (s.path, s.line) not in chains]


def _merge(seen: list[BreakSeen]) -> list[GraphBreak]:
    """One break per location (file, line, registry id); the most informative text wins. A break
    inside an installed library (`logging.warning`) is one break per line of the program that called
    it: two calls are two breaks, though torch names one place."""
    by_place: dict[tuple[str, int, Optional[tuple[str, int]]], list[BreakSeen]] = {}
    for item in _fold_steps(seen):
        by_place.setdefault((item.path, item.line, _caller_in_program(item)), []).append(item)
    for path, line, site in [k for k in by_place if k[2] is None]:
        # torch logs a repeat without its stack: it belongs to a sighting with one (of its compile
        # when explain saw that), when there is one
        sighted = [k for k in by_place if k[:2] == (path, line) and k[2] is not None]
        if sighted:
            repeats = by_place.pop((path, line, site))
            ids = {s.compile_id for s in repeats} - {None}
            same = [k for k in sighted if ids & {s.compile_id for s in by_place[k]}]
            by_place[(same or sighted)[0]].extend(repeats)
    breaks: list[GraphBreak] = []
    for (path, line, _), items in by_place.items():
        kinds: dict[str, list[BreakSeen]] = {}
        for item in items:
            kinds.setdefault(_describe(item)["key"], []).append(item)
        # explain's terse reasons ("generic_jump TensorVariable()") duplicate the log's full one
        if len(kinds) > 1:
            kinds = {k: v for k, v in kinds.items() if not k.startswith("raw:")} or kinds
        for group in kinds.values():
            breaks.append(_to_break(path, line, items, group))
    breaks.sort(key=lambda b: (b.path, b.line, b.column))
    return breaks


def _caller_in_program(item: BreakSeen) -> Optional[tuple[str, int]]:
    """For a break inside an installed library, the innermost program line on its stack."""
    if not is_environment_file(item.path):
        return None
    return next(((f.path, f.line) for f in reversed(item.stack) if not is_environment_file(f.path)), None)


def _to_break(path: str, line: int, place: list[BreakSeen], group: list[BreakSeen]) -> GraphBreak:
    best = max(group, key=lambda s: (bool(s.sections or _URL.search(s.reason)), len(s.reason)))
    desc = _describe(best)
    located = next((s for s in place if s.columns), None)
    columns = located.columns if located else None
    end_line = (located.end_line or line) if located else line
    source = source_line(path, line)
    if columns is None:
        start = len(source) - len(source.lstrip())
        columns = (start, max(len(source.rstrip()), start + 1))
    stack = max((s.stack for s in place), key=len)
    found = GraphBreak(
        path=path, line=line, column=columns[0] + 1, end_line=end_line, end_column=columns[1] + 1,
        gb_id=desc["gb_id"], gb_type=desc["gb_type"], explanation=desc["explanation"],
        hints=desc["hints"], url=desc["url"], reason=stable_text(best.reason), stack=stack,
        compile_id=next((s.compile_id for s in group if s.compile_id), None),  # the first, in log order
    )
    said_apart = next((s for s in place if s.in_loop), None)  # torch < 2.11: on the log's record only
    if said_apart is not None and not best.in_loop:
        best = dataclasses.replace(best, in_loop=True, skipped=said_apart.skipped)
    # the same break seen by several compiles (a helper's own frame, compiled once its caller was
    # skipped, breaks in its own loop too): the loop of the first compile, the outermost frame skipped
    ordered = sorted(group, key=_compile_order)
    loop = next((skip for s in ordered if (skip := _skipped_loop(found, s)) is not None), None) \
        or _skipped_loop(found, best)
    if loop is None:
        return found
    return dataclasses.replace(found, loop=loop, hints=list(found.hints) + [h for h in _loop_hints(best)
                                                                             if h not in found.hints])


def _compile_order(seen: BreakSeen) -> tuple[int, ...]:
    """torch's compile id ("1/0": frame 1, its first compile) as a sort key; unlogged ones last."""
    return tuple(int(n) for n in re.findall(r"\d+", seen.compile_id or "")) or (1 << 30,)


def _loop_hints(seen: BreakSeen) -> list[str]:
    """torch's hints for the loop fallback (GB7000) chained after this break, if any."""
    return [h for desc, _ in _chained(seen) if _is_loop(desc) for h in desc["hints"]]


def _chained(seen: BreakSeen) -> list[tuple[dict[str, Any], str]]:
    """The breaks torch chained after this one, each with its context text."""
    if seen.sections:
        chained = [(_described(f), f.context) for f in seen.sections[1:]]
    else:
        chained = [(_describe_text(section), section) for section in seen.reason.split(_CHAINED)[1:]]
    if seen.in_loop:  # torch before 2.11: said apart, and its registry may not know the id yet
        known = LOOP_GB_ID if dynamo.registry().get(LOOP_GB_ID) else None
        chained.append(({"gb_id": known, "gb_type": "graph break in loop", "hints": [],
                         "url": dynamo.registry_url(known)}, ""))
    return chained


def _is_loop(desc: dict[str, Any]) -> bool:
    return desc["gb_id"] == LOOP_GB_ID or desc["gb_type"] == "graph break in loop"


def _skipped_loop(found: GraphBreak, seen: BreakSeen) -> SkippedLoop | None:
    """GB7000: a break inside a for/while loop makes Dynamo skip the whole frame. The break stays
    where torch names it; this is the loop (its header) and the frame torch skips. None when torch
    chained no such fallback after this break.

    torch 2.13 chains it after the break: "graph break in loop", with the exception's `skip_frame`
    set by the translator of the frame it skips (the collector keeps that code object). From text
    (another torch), the chained section's context names the frame:
    "frame skipped: forward (/path/model.py line 15)".
    """
    for desc, context in _chained(seen):
        if not _is_loop(desc):
            continue
        skipped = seen.skipped or _skipped_from_text(context)
        name = skipped.name if skipped else (found.stack[-1].name if found.stack else "function")
        # the skipped frame's own line on the chain: where the loop runs (the break may be in a callee)
        in_frame = next((f for f in reversed(found.stack) if skipped and f.name == name
                         and f.path == skipped.path), None)
        at = in_frame or Frame(found.path, found.line, name)
        first = skipped.line if skipped and skipped.path == at.path else 0
        header = _enclosing_loop(at.path, at.line, first)
        if header is not None:
            line, column, end_line, end_column = header
        else:  # no loop found in today's source: the frame's def line
            line = first or at.line
            text = source_line(at.path, line)
            column, end_line, end_column = len(text) - len(text.lstrip()) + 1, line, len(text.rstrip()) + 1
        gb_id = desc["gb_id"] or (None if seen.in_loop else LOOP_GB_ID)
        return SkippedLoop(path=at.path, line=line, column=column, end_line=end_line, end_column=end_column,
                           function=name, gb_id=gb_id, url=desc["url"] or dynamo.registry_url(gb_id))
    return None


def _enclosing_loop(path: str, line: int, first: int = 0) -> tuple[int, int, int, int] | None:
    """The innermost `for`/`while` around `line`, inside the function that starts at `first`: its
    header, as 1-based (line, col, end_line, end_col)."""
    try:
        tree = ast.parse(file_source(path))
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
    start = chars(path, best.lineno, best.col_offset)
    return best.lineno, start + 1, end_line, chars(path, end_line, end_byte) + 1


def _skipped_from_text(context: str) -> Optional[Frame]:
    """The frame a loop's break skipped, from torch's context text (when its code object was not seen)."""
    skipped = _SKIPPED_FRAME.search(context)
    return Frame(os.path.realpath(skipped["path"]), int(skipped["line"]), skipped["name"]) if skipped else None


def _describe(seen: BreakSeen) -> dict[str, Any]:
    """Registry id, short type, explanation and hints of a break: from the arguments torch formatted
    its message with (the first section is the break; chained ones follow), else from its text."""
    if seen.sections:
        return _described(seen.sections[0])
    text = seen.reason.split(_CHAINED)[0]
    # the exception's type names this message's only break; a chained message's is the last one's
    return _describe_text(text, seen.gb_type if seen.gb_type and _CHAINED not in seen.reason else None)


def _described(fields: BreakFields) -> dict[str, Any]:
    """What torch formatted one break from: its type (the registry's key: id and link) and texts."""
    gb_id = dynamo.gb_id(fields.gb_type)
    return {"gb_id": gb_id, "gb_type": fields.gb_type, "explanation": stable_text(_summary(fields.explanation)),
            "hints": [stable_text(_summary(h)) for h in fields.hints], "url": dynamo.documentation_link(fields.gb_type),
            "key": gb_id or f"type:{fields.gb_type}"}


def _summary(text: str) -> str:
    """A field's lines up to its first blank one, joined: torch's worked example follows a blank line."""
    lines = []
    for line in text.splitlines():
        if not line.strip():
            break
        lines.append(line.strip())
    return " ".join(lines)


def _describe_text(reason: str, gb_type: Optional[str] = None) -> dict[str, Any]:
    """`_describe` from a message's text (explain's reasons, another torch).

    With the exception's `gb_type` the id and link are torch's own for that type; without it the
    type is the line before "Explanation:", the id is in the link's URL. The explanation and hints
    are the "Explanation:" and "Hint:" fields, each up to its first blank line."""
    if reason.strip() == STEP_UNSUPPORTED:
        return {"gb_id": None, "gb_type": "graph break at a call (step_unsupported)", "explanation": STEP_UNSUPPORTED_TEXT,
                "hints": [], "url": None, "key": f"raw:{STEP_UNSUPPORTED}"}
    url_match = None if gb_type else _URL.search(reason)
    gb_id = dynamo.gb_id(gb_type) if gb_type else f"GB{url_match['num']}" if url_match else None
    given = gb_type
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
        elif mode in ("explanation", "hint") and not stripped:
            mode = "context"  # torch's worked example of the failing code follows: not the summary
        elif mode == "explanation":
            explanation.append(stripped)
        elif mode == "hint":  # a hint over several lines
            hints[-1] = f"{hints[-1]} {stripped}"
    gb_type = given or gb_type
    if gb_id is None and gb_type:
        gb_id = dynamo.registry_id(gb_type)
    if gb_id and not gb_type:
        entry = dynamo.registry().get(gb_id, [{}])[0]
        gb_type = entry.get("Gb_type", "")
        explanation = explanation or [entry.get("Explanation", "")]
        hints = hints or list(entry.get("Hints", []))
    url = (dynamo.documentation_link(given) if given else url_match.group(0) if url_match
           else dynamo.registry_url(gb_id))
    key = gb_id or (f"type:{gb_type}" if gb_type else f"raw:{rows[0] if rows else ''}")
    if not gb_type:
        gb_type = rows[0].strip() if rows else "graph break"
    return {"gb_id": gb_id, "gb_type": stable_text(gb_type),
            "explanation": stable_text(" ".join(e for e in explanation if e)),
            "hints": [stable_text(h) for h in hints], "url": url, "key": key}
