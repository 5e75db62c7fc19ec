"""One compile run as records: every graph break, recompile and recompile-limit hit torch reports
while it runs, for the trace, the recompile sweep and the benchmark alike.

Where the facts come from (torch 2.13, checked; each is detected, never assumed from a version):
- a graph break: torch's `graph_breaks` log call hands its data over in two ways. A repeated break
  is logged with `record.args` = (file, line, reason). A first one is logged as preformatted text,
  so the collector reads the data that text was made from in the logging function itself
  (`InstructionTranslator.log_graph_break`, found as the frame named by `record.funcName` and
  `record.pathname`): `frame_loc` (file, line), `reason`, the `Unsupported` exception (`gb_type`)
  and `user_stack` (FrameSummary objects with byte columns);
- a recompile: the logging function `get_and_maybe_log_recompilation_reasons` holds `code` (the
  frame's code object) and `reasons`, one guard failure per cache entry;
- the recompile limit: its warning's `record.args` = (limit name, value, function, reason, url);
- the compile id: `CompileContext.current_trace_id()` while the record is logged;
- a break's type, explanation, hints and context: torch formats them into the message and keeps
  only the text (`Unsupported.msg`), so while collecting, `exc.format_graph_break_message` is
  wrapped to keep its arguments beside the text it returned; a message is then read as the
  breaks it was made of (exact text, in order: a loop's break is chained after the inner one);
- the frame a break in a loop skipped: the logging translator's `f_code` when the exception says
  `skip_frame`; torch before 2.11 raises no break for it but logs "Skipping frame because there is
  a graph break in a for/while loop" at INFO from the translator (`self.f_code`, `self.lineno`),
  which the collector lets through on such a torch only;
- torch 2.4–2.5 log a first break as "Graph break: from user code at:" with the exception as the
  record's `exc_info` and the locals `frame_loc`, `user_stack`, `excp` (2.6 names it `reason`).
When a record's data is not there (another torch), that record is read from its text by
`log_text`, the old regex readers, which stay only as this fallback. Tests switch `STRUCTURED` off
to run every record through them and compare.

One handler on the `torch._dynamo` logger (it does not propagate). `set_logs` costs ≈ 15 ms, so
the logs are switched on once and left on; whoever resets torch's logs makes the next run switch
them on again.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import sys
import textwrap
from types import FrameType
from typing import Any, Iterator, Optional

import torch

from ...protocol import Frame
from ...torch_text.frames import frame_name, is_user_file, real, torch_dir
from ..dynamo import current_compile_id
from . import log_text
from .records import BreakFields, BreakSeen, RecompileEntry
from .spans import span

STRUCTURED = True  # read torch's data where it hands it over; False: every record from its text
LOOP_SKIP = "Skipping frame because there is a graph break in a for/while loop"  # torch < 2.11, INFO
_DYNAMO_LOGGER = "torch._dynamo"
_MAX_DEPTH = 40  # frames between the handler and torch's logging call (≈ 8 seen)


class CompileCollector(logging.Handler):
    """Keeps the records of a run as torch logs them. `variation` tags the recompiles."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.breaks: list[BreakSeen] = []
        self.recompiles: list[RecompileEntry] = []
        self.limits: list[tuple[int, str]] = []  # (recompiles seen before it, torch's headline)
        self.variation = ""
        self.formatted: dict[str, BreakFields] = {}  # torch's break messages by their text
        self.sources: dict[str, int] = {"data": 0, "text": 0}  # how each record was read
        # True (the trial): a break torch reports inside its own files (DDP's forward) is kept, at
        # torch's line, with torch's frames on its stack, for the reader to place at the program's line
        self.torch_breaks = False

    @property
    def messages(self) -> list[BreakSeen]:
        """The breaks (the name the benchmark's `distinct_breaks(log.messages, ...)` reads)."""
        return self.breaks

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._read(record)
        except Exception:  # noqa: BLE001 - a handler must never raise into torch
            pass

    def _read(self, record: logging.LogRecord) -> None:
        name = record.name
        if name.endswith("__graph_breaks"):
            found = self._breaks_from_data(record) if STRUCTURED else None
            self._count(found)
            if found is None:
                found = list(log_text.breaks(record.getMessage(), exc=record.exc_info[1] if record.exc_info else None))
            compile_id = current_compile_id()
            for seen in found:
                seen.compile_id = compile_id
            self.breaks.extend(found)
        elif name.endswith("__recompiles") or name.endswith("__recompiles_verbose"):
            entry = _recompile_from_data(record) if STRUCTURED else None
            self._count(entry)
            if entry is None:
                entry = log_text.recompile(record.getMessage())
            if entry is not None:
                entry.compile_id = current_compile_id()
                entry.variation = self.variation
                self.recompiles.append(entry)
        elif record.levelno == logging.INFO and record.getMessage().startswith(LOOP_SKIP):
            self._loop_skipped(record)
        elif record.levelno >= logging.WARNING:
            headline = _limit_from_data(record) if STRUCTURED else None
            if headline is None:  # not torch's limit call as this torch makes it: its text
                headline = log_text.limit_headline(record.getMessage())
            if headline is not None:
                self.limits.append((len(self.recompiles), headline))

    def _count(self, found: Any) -> None:
        self.sources["text" if found is None else "data"] += 1

    def sections_of(self, text: str) -> Optional[list[BreakFields]]:
        """The breaks torch formatted `text` from, in text order; None when none was seen."""
        found: list[tuple[int, BreakFields]] = []
        taken: list[tuple[int, int]] = []
        for message, fields in self.formatted.items():
            start = text.find(message)
            if start >= 0 and not any(s <= start < e for s, e in taken):
                taken.append((start, start + len(message)))
                found.append((start, fields))
        return [f for _, f in sorted(found, key=lambda item: item[0])] or None

    def _breaks_from_data(self, record: logging.LogRecord) -> Optional[list[BreakSeen]]:
        """The break of one `graph_breaks` record from torch's data; None when it is not there."""
        found = _breaks_from_data(record, self.torch_breaks)
        if not found:
            return found
        seen = found[0]
        seen.sections = self.sections_of(seen.reason)
        if seen.sections and seen.gb_type and seen.sections[-1].gb_type != seen.gb_type:
            seen.sections = None  # not the message this exception was made with: read the text
        return found

    def _loop_skipped(self, record: logging.LogRecord) -> None:
        """torch before 2.11: the frame with a break inside a loop is skipped whole. The break just
        logged in it (when there is one: a data-dependent branch logs none) is said as that."""
        translator = _logging_frame(record)
        translator = translator.f_locals.get("self") if translator is not None else None
        code, line = getattr(translator, "f_code", None), getattr(translator, "lineno", None)
        if hasattr(code, "co_filename") and isinstance(line, int):
            frame, path = Frame(real(code.co_filename), code.co_firstlineno, frame_name(code.co_name)), real(code.co_filename)
        else:  # its text: the FrameSummary of the line, no first line of the frame
            where = log_text.loop_skip(record.getMessage())
            if where is None:
                return
            path, line, name = where
            frame = Frame(path, 0, name)
        if not is_user_file(path, libraries=True):
            return
        compile_id = current_compile_id()
        last = self.breaks[-1] if self.breaks else None
        if last is None or last.compile_id != compile_id or last.path != path:
            last = BreakSeen(path=path, line=line, reason=record.getMessage().splitlines()[0],
                             stack=[Frame(path, line, frame.name)], compile_id=compile_id)
            self.breaks.append(last)
        last.skipped, last.in_loop = frame, True

    def formatting(self) -> contextlib.AbstractContextManager:
        """Inside: every break message torch formats is kept with its arguments."""
        return _formatted_into(self.formatted) if STRUCTURED else contextlib.nullcontext()


@contextlib.contextmanager
def collect(*, recompiles: bool = False) -> Iterator[CompileCollector]:
    """Collect the run inside the block: graph breaks always, recompiles when asked (the sweep).

    The recompiles log is switched off again on leaving (`set_logs()` resets torch's logs)."""
    collector = CompileCollector()
    logger = logging.getLogger(_DYNAMO_LOGGER)
    loop_skips = _loop_skip_logger()
    if recompiles:
        try:
            torch._logging.set_logs(graph_breaks=True, recompiles=True)
        except Exception:  # noqa: BLE001 - older torch: the records still come when TORCH_LOGS says
            logging.getLogger(__name__).info("set_logs(recompiles=True) failed", exc_info=True)
    elif not _break_logger().isEnabledFor(logging.DEBUG):
        torch._logging.set_logs(graph_breaks=True)
    logger.addHandler(collector)
    muted = _mute_console(logger)
    level = loop_skips.level if loop_skips is not None else None
    if loop_skips is not None:
        loop_skips.setLevel(logging.INFO)
        loop_skips.addFilter(_only_loop_skips)
    try:
        with collector.formatting():
            yield collector
    finally:
        logger.removeHandler(collector)
        for handler in muted:
            logger.addHandler(handler)
        if loop_skips is not None:
            loop_skips.removeFilter(_only_loop_skips)
            loop_skips.setLevel(level)
        if recompiles:
            with contextlib.suppress(Exception):
                torch._logging.set_logs()


def _mute_console(logger: logging.Logger) -> list[logging.Handler]:
    """Take torch's own console handlers off the logger while collecting: switching the break log
    on for the collector makes torch also print every break with its stack (≈ 8 KB of stderr per
    trace), which the server would read and log as the user's output. Left on when the user asked
    for torch's logs (TORCH_LOGS). Returns the handlers taken off, to put back."""
    if os.environ.get("TORCH_LOGS"):
        return []
    internal = getattr(getattr(torch, "_logging", None), "_internal", None)
    is_torch_handler = getattr(internal, "_is_torch_handler", None)
    if not callable(is_torch_handler):
        return []
    muted = [h for h in logger.handlers if is_torch_handler(h)]
    for handler in muted:
        logger.removeHandler(handler)
    return muted


def _loop_skip_logger() -> Optional[logging.Logger]:
    """The translator's logger, on a torch that says a loop's break only in an INFO record there."""
    import torch._dynamo.symbolic_convert as convert

    if hasattr(getattr(convert, "InstructionTranslatorBase", None), "raise_loop_graph_break"):
        return None  # torch ≥ 2.11: a "graph break in loop" break
    logger = getattr(convert, "log", None)
    return logger if isinstance(logger, logging.Logger) else None


def _only_loop_skips(record: logging.LogRecord) -> bool:
    """The translator's own INFO records other than the loop skip stay out (and off the console)."""
    return record.levelno >= logging.WARNING or str(record.msg).startswith(LOOP_SKIP)


def _break_logger() -> logging.Logger:
    import torch._dynamo.symbolic_convert as convert

    return getattr(convert, "graph_break_log", None) or logging.getLogger(
        "torch._dynamo.symbolic_convert.__graph_breaks")


# --- torch's data, read where torch logs it ----------------------------------------------------

@contextlib.contextmanager
def _formatted_into(kept: dict[str, BreakFields]) -> Iterator[None]:
    """Wrap torch's break formatter (looked up by name where `unimplemented` calls it) to keep
    each message's arguments; restored on leaving. Absent on a torch without it: nothing kept."""
    exc = getattr(torch._dynamo, "exc", None)
    original = getattr(exc, "format_graph_break_message", None)
    if original is None:
        yield
        return
    try:
        signature = inspect.signature(original)
    except (TypeError, ValueError):
        yield
        return

    def format_graph_break_message(*args: Any, **kwargs: Any) -> Any:
        message = original(*args, **kwargs)
        try:
            given = signature.bind(*args, **kwargs).arguments
            kept[message] = BreakFields(str(given["gb_type"]), str(given.get("context", "")),
                                        str(given.get("explanation", "")), [str(h) for h in given.get("hints") or []],
                                        message)
        except Exception:  # noqa: BLE001 - never break torch's own formatting
            pass
        return message

    exc.format_graph_break_message = format_graph_break_message
    try:
        yield
    finally:
        exc.format_graph_break_message = original


def _logging_frame(record: logging.LogRecord) -> Optional[FrameType]:
    """The frame of the torch function that made this log call (the record names it)."""
    frame: Optional[FrameType] = sys._getframe(1)
    for _ in range(_MAX_DEPTH):
        if frame is None:
            return None
        code = frame.f_code
        if code.co_name == record.funcName and code.co_filename == record.pathname:
            return frame
        frame = frame.f_back
    return None


def _breaks_from_data(record: logging.LogRecord, torch_breaks: bool = False) -> Optional[list[BreakSeen]]:
    """The break of one `graph_breaks` record from torch's data; None when it is not there.
    `torch_breaks`: torch's own files count as the user's (see `CompileCollector.torch_breaks`)."""

    def kept(path: str) -> bool:
        return is_user_file(path, libraries=True) or (torch_breaks and real(path).startswith(torch_dir()))

    args = record.args
    if isinstance(args, tuple) and len(args) == 3 and isinstance(args[2], str):
        # a repeat: torch logs (file, line, reason) and suppresses the stack
        path, line = real(str(args[0])), int(args[1])
        if not kept(path):
            return []
        return [BreakSeen(path=path, line=line, reason=args[2].strip(), stack=[Frame(path, line, "?")])]
    frame = _logging_frame(record)
    local = frame.f_locals if frame is not None else {}
    reason, where, stack = local.get("reason"), local.get("frame_loc"), local.get("user_stack")
    exc = local.get("exc") or local.get("excp")
    if reason is None and record.exc_info and isinstance(exc, BaseException):  # torch 2.4–2.5
        reason = str(exc)
    if not isinstance(reason, str) or not isinstance(where, tuple) or len(where) < 2 or stack is None:
        # another log call (torch's "skip" record for a frame it cannot resume, whose text the
        # reader does not take either) or another torch: the text
        return None
    path, line = real(str(where[0])), int(where[1])
    if not kept(path):
        return []
    user = [f for f in stack if kept(f.filename)]
    frames = [Frame(real(f.filename), f.lineno, frame_name(f.name)) for f in user]
    columns, end_line = None, None
    inner = user[-1] if user else None
    if inner is None or (real(inner.filename), inner.lineno) != (path, line):
        frames.append(Frame(path, line, "?"))
    elif getattr(inner, "colno", None) is not None and getattr(inner, "end_colno", None) is not None:
        columns, end_line = span(path, line, inner.colno, inner.end_colno)
    gb_type = getattr(exc, "gb_type", None)
    code = getattr(local.get("self"), "f_code", None)  # the translator that logs: the frame it traced
    skipped = (Frame(real(code.co_filename), code.co_firstlineno, frame_name(code.co_name))
               if getattr(exc, "skip_frame", False) and hasattr(code, "co_filename") else None)
    return [BreakSeen(path=path, line=line, reason=reason.strip(), stack=frames, columns=columns,
                      end_line=end_line, gb_type=gb_type if isinstance(gb_type, str) and gb_type else None,
                      skipped=skipped)]


def _recompile_from_data(record: logging.LogRecord) -> Optional[RecompileEntry]:
    """One recompile from the code object and the per-entry reasons torch logged it from."""
    frame = _logging_frame(record)
    local = frame.f_locals if frame is not None else {}
    code, reasons = local.get("code"), local.get("reasons")
    if not hasattr(code, "co_filename") or not isinstance(reasons, list):
        return None
    # each reason is one cache entry's failure; torch's own list form, so multi-line reasons
    # (a guard's "User stack trace:") split as in the log
    failures = log_text.failures(textwrap.indent("\n".join(str(r) for r in reasons), "- ").splitlines())
    if not failures:
        failures = [log_text.new_failure(None, f"Recompiling function {code.co_name}")]
    return RecompileEntry(code.co_name, code.co_filename, code.co_firstlineno, failures, None)


def _limit_from_data(record: logging.LogRecord) -> Optional[str]:
    """torch's recompile-limit warning from its arguments: (limit name, value, function, reason, url)."""
    args = record.args
    if (isinstance(record.msg, str) and record.msg.startswith("torch._dynamo hit config.%s (%s)")
            and isinstance(args, tuple) and len(args) >= 2):
        return f"torch._dynamo hit config.{args[0]} ({args[1]})"
    return None


__all__ = ["CompileCollector", "collect", "STRUCTURED"]
