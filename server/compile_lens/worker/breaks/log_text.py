"""Readers of torch's human log text: the fallback for a torch whose log calls do not hand the
collector their data (see `collector`), and the reader of a guard failure's own text.

Graph breaks: a `graph_breaks` record reads "Graph break in user code at FILE:LINE", "Graph Break
Reason: ...", "User code traceback:" and a `traceback.format_list` text (frames, carets).
Recompiles: a `recompiles` record reads "Recompiling function NAME in FILE:LINE", "triggered by the
following guard failure(s):", then one "- 0/1: guard" line per cache entry, each optionally
followed by "User stack trace:" and its frames. Those guard lines are torch's only form of a
guard failure (the data path gets the same strings as a list), so `failures` serves both paths.
"""

from __future__ import annotations

import os
import re
from typing import Iterator, Optional

from ...protocol import Frame
from ...torch_text.frames import frame_name, is_user_file
from .records import BreakSeen, GuardFailure, RecompileEntry
from .spans import caret_columns, source_line, span_from_first_line

_LOCATION = re.compile(r"in user code at (?P<path>.+?):(?P<line>\d+)\s*$", re.M)
_REASON = re.compile(r"^(?:Graph Break )?Reason: ", re.M)  # torch 2.6: "Reason: "
_TB_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<name>.+)$')
_ID_RE = re.compile(r"^(\d+/\d+):\s?(.*)$", re.DOTALL)
_FILE_RE = re.compile(r'^\s*File "(.+)", line (\d+), in (.+)$')
_HEADER_RE = re.compile(r"^Recompiling function (\S+) in (.+):(\d+)")
_ATTRIBUTION = "\nStack variable source attribution:"
_FROM_USER_CODE = "Graph break: from user code at:\n"  # torch 2.4–2.5
LIMIT_RE = re.compile(r"hit config\.(\w+) \((\d+)\)")
_FRAME_SUMMARY = re.compile(r"<FrameSummary file (?P<path>.+), line (?P<line>\d+) in (?P<name>\S+)>")


# --- graph breaks ---------------------------------------------------------------------------

def breaks(message: str, compile_id: Optional[str] = None, exc: Optional[BaseException] = None) -> Iterator[BreakSeen]:
    """The break in one `graph_breaks` record's text (none for records of another form). torch
    2.4–2.5 write only the user's frames ("Graph break: from user code at:"), the reason being the
    record's exception `exc`."""
    if message.startswith(_FROM_USER_CODE) and exc is not None:
        stack, columns = _parse_traceback(message[len(_FROM_USER_CODE):])
        if stack:
            yield BreakSeen(path=stack[-1].path, line=stack[-1].line, reason=str(exc).strip(), stack=stack,
                            columns=columns, compile_id=compile_id)
        return
    location = _LOCATION.search(message.splitlines()[0] if message else "")
    reason_at = _REASON.search(message)
    if not location or not reason_at:
        return
    body = message[reason_at.end():]
    reason, _, traceback_text = body.partition("\nUser code traceback:\n")
    reason = reason.partition(_ATTRIBUTION)[0]  # torch's note on where stack values came from: not the reason
    stack, columns = _parse_traceback(traceback_text)
    path, line = os.path.realpath(location["path"]), int(location["line"])
    if not is_user_file(path, libraries=True):
        return
    if not stack or (stack[-1].path, stack[-1].line) != (path, line):
        stack.append(Frame(path, line, "?"))
        columns = None
    end_line = None
    if columns is not None and columns[1] >= len(source_line(path, line).rstrip()):
        # a traceback underlines only the first line of a multi-line expression
        columns, end_line = span_from_first_line(path, line, columns)
    yield BreakSeen(path=path, line=line, reason=reason.strip(), stack=stack, columns=columns, end_line=end_line,
                    compile_id=compile_id)


def _parse_traceback(text: str) -> tuple[list[Frame], Optional[tuple[int, int]]]:
    """Frames of a `traceback.format_list` text, and the innermost frame's caret columns."""
    frames: list[Frame] = []
    columns = None
    lines = text.splitlines()
    for i, row in enumerate(lines):
        match = _TB_FRAME.match(row)
        if not match:
            continue
        path, line = match["path"], int(match["line"])
        if not is_user_file(path, libraries=True):
            continue
        frames.append(Frame(os.path.realpath(path), line, frame_name(match["name"])))
        columns = None
        if i + 2 < len(lines) and set(lines[i + 2].strip()) <= {"^", "~"} and lines[i + 2].strip():
            columns = caret_columns(path, line, lines[i + 1], lines[i + 2])
    return frames, columns


# --- recompiles -----------------------------------------------------------------------------

def recompile(message: str) -> Optional[RecompileEntry]:
    """One `recompiles` record as an entry; any "Recompiling function" record gives one."""
    lines = message.splitlines()
    if not lines or not lines[0].lstrip().startswith("Recompiling function"):
        return None
    head = _HEADER_RE.match(lines[0].strip())
    found = failures(lines[1:])
    if not found:  # a wording this parser does not know: keep the entry, with torch's text
        rest = " ".join(line.strip() for line in lines[1:]).strip()
        found.append(new_failure(None, rest or lines[0].strip()))
    if head is None:
        return RecompileEntry("?", "", 0, found, None)
    return RecompileEntry(head.group(1), head.group(2), int(head.group(3)), found, None)


def failures(lines: list[str]) -> list[GuardFailure]:
    """Guard failures from torch's lines: "0/1: guard", then optionally its "User stack trace:"."""
    found: list[GuardFailure] = []
    in_stack = False
    for raw_line in lines:
        text = raw_line.strip()
        if not text or text.startswith("triggered by the following guard failure"):
            continue
        body = raw_line.lstrip()
        body = body[2:] if body.startswith("- ") else body
        if re.match(r"^guard \d+ failures:$", body.strip()):  # recompiles_verbose on older torch
            in_stack = False
            continue
        ident = _ID_RE.match(body.strip())
        if ident:
            found.append(new_failure(ident.group(1), ident.group(2)))
            in_stack = False
            continue
        if body.strip() == "User stack trace:":
            in_stack = True
            continue
        frame = _FILE_RE.match(body)
        if in_stack:
            if frame and found:
                found[-1].stack.append((frame.group(1), int(frame.group(2))))
            continue
        if not body.startswith(" ") or not found:  # older torch: no "0/1: " prefix
            found.append(new_failure(None, body.strip()))
    return found


def new_failure(entry: Optional[str], raw: str) -> GuardFailure:
    text = re.split(r"\s{2,}#\s|\s+#\s(?=.*:\d+ in )", raw, maxsplit=1)[0].strip()
    return GuardFailure(entry, text, raw.strip())


def limit_headline(message: str) -> Optional[str]:
    """torch's recompile-limit warning, by its first line ("torch._dynamo hit config.X (N)")."""
    return message.splitlines()[0].strip() if LIMIT_RE.search(message) else None


def loop_skip(message: str) -> Optional[tuple[str, int, str]]:
    """(file, line, function) of torch's "Skipping frame because there is a graph break in a
    for/while loop" record (torch < 2.11), from the FrameSummary it prints."""
    found = _FRAME_SUMMARY.search(message)
    return (os.path.realpath(found["path"]), int(found["line"]), found["name"]) if found else None
