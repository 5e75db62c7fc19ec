"""What one compile run told us, as records: the same shapes whichever source filled them
(torch's data, see `collector`, or its log text on an older torch, see `log_text`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ...protocol import Frame


@dataclass
class BreakFields:
    """One break as torch built its message: the arguments of `format_graph_break_message`."""

    gb_type: str  # the registry's key ("Unsupported Tensor.item() call with capture_scalar_outputs=False")
    context: str  # torch's developer context ("frame skipped: forward (/m.py line 15)" for a loop)
    explanation: str
    hints: list[str]
    message: str  # the text torch formatted from them, as it appears in the log


@dataclass
class BreakSeen:
    """One graph break as one source reports it, before breaks are merged per location."""

    path: str
    line: int
    reason: str  # torch's message for it ("Graph Break Reason")
    stack: list[Frame] = field(default_factory=list)
    columns: Optional[tuple[int, int]] = None  # 0-based start (on `line`), end (on `end_line`), characters
    end_line: Optional[int] = None  # a multi-line expression ends on a later line
    compile_id: Optional[str] = None  # the compile that logged it ("0/0")
    gb_type: Optional[str] = None  # the exception's own break type (torch's data; None from text)
    # torch's breaks the message was formatted from, in message order: the break itself, then each
    # "while handling this graph break, another occurred" (a loop's); None: read from the text
    sections: Optional[list[BreakFields]] = None
    skipped: Optional[Frame] = None  # the frame torch skipped for a break in a loop (its code object)
    in_loop: bool = False  # torch before 2.11 said the loop apart ("Skipping frame ..."), not as a break


@dataclass
class GuardFailure:
    """One failed guard of one cache entry: why that entry could not be reused."""

    entry: Optional[str]  # the cache entry that failed, "0/1" (None on torch without ids)
    text: str  # the guard, without the compile-id prefix and the source comment
    raw: str  # the line as torch wrote it (without the id prefix)
    stack: list[tuple[str, int]] = field(default_factory=list)  # "User stack trace:" frames


@dataclass
class RecompileEntry:
    """One recompile of one frame, tagged with the sweep's variation that caused it."""

    frame: str
    frame_file: str
    frame_line: int
    failures: list[GuardFailure]  # one per cached entry of that frame, newest first
    compile_id: Optional[str]
    variation: str = ""
    relevant: int = 0  # index into failures: the line reported as the reason
    limit: Optional[str] = None  # torch's limit warning headline when this entry hit it
    compile_s: Optional[float] = None
