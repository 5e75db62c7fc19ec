"""Reading a recompile: what changed, what kind of guard failed, where in the user's code, and
whether the recompile is a specialization, automatic dynamic, or the limit (see `recompiles`).

A guard failure is torch's guard text ("tensor 'x' size mismatch at index 0. expected 8, actual
16", "L['n'] == 2", "GLOBAL_STATE changed: grad_mode"): the guard itself, which is what is
classified; torch has no other form of it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from ...protocol import Frame, Recompile
from ...torch_text.frames import frame_name, is_user_file
from ...torch_text.guard_words import meaning
from ...torch_text.stable_text import stable_text
from ..dynamo import recompile_limit
from ..loader import BuiltTarget
from .log_text import LIMIT_RE
from .records import GuardFailure, RecompileEntry

COMMENT_LOC_RE = re.compile(r"\s#\s.*?\s{2}#\s(\S+):(\d+) in \S+")
SIZE_RE = re.compile(r"size mismatch at index (\d+)\. expected (\d+), actual (\d+)")
_STRIDE_RE = re.compile(r"stride mismatch at index (\d+)")
SIZE_EXPR_RE = re.compile(r"\.(?:size|stride)\(\)\[(\d+)\]")
_CHAIN_RE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[[^\[\]]*\])*")
_NOT_NAMES = {"True", "False", "None", "and", "or", "not", "is", "in", "if", "else"}


def _normalise_source(text: str) -> str:
    text = re.sub(r"\b[LG]\['([^']+)'\]", r"\1", text)
    text = re.sub(r"\._(?:modules|parameters|buffers)\['([^']+)'\]", r".\1", text)
    return text


def what_changed(text: str) -> str:
    tensor = re.match(r"^tensor '(.+?)'(?= )", text)
    if tensor:
        return _normalise_source(tensor.group(1))
    typed = re.match(r"^expected type of '(.+?)'", text)
    if typed:
        return _normalise_source(typed.group(1))
    state = re.match(r"^GLOBAL_STATE changed:\s*(.*)$", text)
    if state:
        return ", ".join(state.group(1).split()) or "global state"
    source = _normalise_source(text)
    for match in _CHAIN_RE.finditer(source):
        chain = match.group(0)
        after = source[match.end():match.end() + 1]
        if chain in _NOT_NAMES or chain.startswith("___") or (after == "(" and "." not in chain):
            continue
        chain = re.sub(r"\.(size|stride|shape|dim|numel|storage_offset)$", "", chain)
        return chain
    return text.split()[0] if text.split() else ""


def _category(text: str) -> tuple[str, Any, bool]:
    """(kind of guard, dimension or value type, involves a 0/1 size)."""
    if text.startswith("tensor '"):
        size = SIZE_RE.search(text)
        if size:
            zero_one = size.group(2) in ("0", "1") or size.group(3) in ("0", "1")
            return "size", int(size.group(1)), zero_one
        stride = _STRIDE_RE.search(text)
        if stride:
            return "stride", int(stride.group(1)), False
        what = re.search(r"' (\w+) mismatch", text)
        return (what.group(1) if what else "tensor"), None, False
    if text.startswith("GLOBAL_STATE"):
        return "global", None, False
    if text.startswith("expected type of "):
        return "type", None, False
    dim = SIZE_EXPR_RE.search(text)
    if dim:
        zero_one = bool(re.search(r"(?<![\w.])[012](?![\w.])", text))
        return "size", int(dim.group(1)), zero_one
    if "___check_obj_id" in text or "___check_type_id" in text or "id(" in text:
        return "identity", None, False
    if text.startswith("len("):
        return "length", None, False
    value = re.match(r"^.+? == (.+)$", text)
    if value:
        literal = value.group(1).strip()
        if literal in ("True", "False"):
            return "value", "bool", False
        if re.fullmatch(r"-?\d+", literal):
            return "value", "int", False
        if re.fullmatch(r"-?(\d+\.\d*|\.\d+|\d+)(e-?\d+)?|-?inf|nan", literal):
            return "value", "float", False
        return "value", "other", False
    return "other", None, False


def user_location(failure: GuardFailure, path: str, frame_file: str) -> tuple[str, int] | None:
    same = os.path.realpath(path)
    for filename, line in reversed(failure.stack):
        if is_user_file(filename):
            return (path if os.path.realpath(filename) == same else filename), line
    loc = COMMENT_LOC_RE.search(failure.raw)
    if loc:
        suffix, line = loc.group(1), int(loc.group(2))
        for candidate in (path, frame_file):
            if candidate and os.path.realpath(candidate).endswith(suffix.lstrip("./")):
                return (path if os.path.realpath(candidate) == same else candidate), line
    return None


@dataclass
class _Row:
    entry: RecompileEntry
    failure: GuardFailure
    changed: str
    key: tuple
    zero_one: bool


def classify(entries: list[RecompileEntry], target: BuiltTarget, path: str) -> list[Recompile]:
    rows = []
    seen: set[tuple] = set()
    for entry in entries:
        # A frame is its code object (file, first line, name): `forward` in the user's file and
        # `forward` in a library's are two frames, each with its own cache and automatic dynamic.
        frame = (os.path.realpath(entry.frame_file) if entry.frame_file else "", entry.frame_line, entry.frame)
        failure = entry.failures[min(entry.relevant, len(entry.failures) - 1)]
        row = _row(entry, frame, failure)
        newest = _row(entry, frame, entry.failures[0])
        if row.key in seen and newest.key != row.key:
            # the base entry fails on what an earlier variation already made dynamic; what forced
            # this compile is what the newest entry (dynamic in that input) failed on
            row = newest
        seen.add(row.key)
        rows.append(row)

    counts: dict[tuple, int] = {}
    for row in rows:
        if not row.zero_one:
            counts[row.key] = counts.get(row.key, 0) + 1

    records = []
    for row in rows:
        kind_of_guard, detail = row.key[-2], row.key[-1]
        if row.entry.limit:
            kind = "limit"
        elif counts.get(row.key, 0) >= 2:
            kind = "specialization"
        elif kind_of_guard in ("size", "stride") or (kind_of_guard == "value" and detail in ("int", "float")):
            kind = "automatic-dynamic"
        else:
            kind = "specialization"
        where = user_location(row.failure, path, row.entry.frame_file)
        reason = stable_text(row.failure.text)  # a guard on an object's id names its address
        if row.entry.limit:
            reason = f"{reason} — {limit_text(row.entry.limit)}"
        records.append(Recompile(
            line=where[1] if where else target.spec.line,
            variation=row.entry.variation,
            kind=kind,
            reason=reason,
            changed=row.changed,
            compile_s=None if row.entry.limit else row.entry.compile_s,
            path=where[0] if where else None,
            frame=frame_of(row.entry),
            compile_id=row.entry.compile_id,
            meaning=meaning(row.failure.text, row.entry.frame or "", row.entry.frame_file or None),
        ))
    return records


def _row(entry: RecompileEntry, frame: tuple, failure: GuardFailure) -> _Row:
    changed = what_changed(failure.text)
    kind, detail, zero_one = _category(failure.text)
    return _Row(entry, failure, changed, (*frame, changed, kind, detail), zero_one)


def frame_of(entry: RecompileEntry) -> Frame | None:
    if not entry.frame_file:
        return None
    return Frame(os.path.realpath(entry.frame_file), entry.frame_line, frame_name(entry.frame))


def limit_text(headline: str) -> str:
    match = LIMIT_RE.search(headline)
    n = match.group(2) if match else str(recompile_limit())
    return f"{headline}: after {n} compiles it runs eager"


def base_failure(entry: RecompileEntry) -> int:
    """The failure against the frame's first cache entry (the one the base inputs compiled)."""
    for i, failure in enumerate(entry.failures):
        if failure.entry and failure.entry.endswith("/0"):
            return i
    return len(entry.failures) - 1
