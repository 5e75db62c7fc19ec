#!/usr/bin/env python3
"""Which `torch._dynamo.config` lever clears a logging break on this torch, and whether the message
is still logged: a table for BENCHMARKS.md ("Logging breaks").

    .venv/bin/python -m benchmarks.breaks.logging_levers

Each case is a small module shaped like users' code (a module-level `logger = logging.getLogger(
__name__)` used in `forward`, `logging.warning`, `warnings.warn`, `print`, a call inside a library
function, a call inside a submodule the compiled module inlines). For each lever (nothing; the
function, bound method or `logging.Logger` method in `reorderable_logging_functions`; the same in
`ignore_logging_functions`, and its alias `ignore_logger_methods`) it compiles the module with
`backend="eager"` and prints: the graph-break records torch logs (`graph_breaks`, where torch puts
them), whether `fullgraph=True` passes, and whether the message reached its handler on the call.
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
import tempfile
import textwrap
import warnings
from pathlib import Path

import torch
import torch._dynamo
from torch import nn

LIBRARY = textwrap.dedent('''\
    import logging

    logger = logging.getLogger(__name__)


    def rms_norm(x):
        logger.warning("rms_norm: library logger")
        return x / x.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt()


    def rms_norm_logging(x):
        logging.warning("rms_norm: logging.warning in a library")
        return x / x.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt()
''')
folder = Path(tempfile.mkdtemp(prefix="logging-levers-"))
(folder / "tinylib.py").write_text(LIBRARY)
sys.path.insert(0, str(folder))
import tinylib  # noqa: E402 - written just above

logger = logging.getLogger("usermodel")
logger.setLevel(logging.INFO)  # so that `logger.info` reaches the handler when it runs


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)


class LoggerInfo(Base):
    def forward(self, x):
        B, T, C = x.size()
        logger.info("forward: %d tokens", T)
        return self.fc(x).relu()


class LoggerWarning(Base):
    def forward(self, x):
        logger.warning("forward: a logger warning")
        return self.fc(x).relu()


class LoggingWarning(Base):
    def forward(self, x):
        logging.warning("forward: logging.warning")
        return self.fc(x).relu()


class WarningsWarn(Base):
    def forward(self, x):
        warnings.warn("forward: warnings.warn")  # noqa: B028 - as users write it
        return self.fc(x).relu()


class Print(Base):
    def forward(self, x):
        print("forward: print")
        return self.fc(x).relu()


class Library(Base):
    def forward(self, x):
        return tinylib.rms_norm(self.fc(x)).relu()


class LibraryLogging(Base):
    def forward(self, x):
        return tinylib.rms_norm_logging(self.fc(x)).relu()


class Inlined(Base):
    """`LoggingWarning` and `Print` as submodules: their `forward`s are inlined into this one."""

    def __init__(self):
        super().__init__()
        self.a, self.b = LoggingWarning(), Print()

    def forward(self, x):
        return self.b(self.a(x))


CONFIG = torch._dynamo.config
LEVERS = {
    "nothing": None,
    "reorder logger.info (bound)": ("reorderable_logging_functions", lambda: logger.info),
    "reorder logging.Logger.info": ("reorderable_logging_functions", lambda: logging.Logger.info),
    "reorder logging.Logger.warning": ("reorderable_logging_functions", lambda: logging.Logger.warning),
    "reorder logging.warning": ("reorderable_logging_functions", lambda: logging.warning),
    "reorder warnings.warn": ("reorderable_logging_functions", lambda: warnings.warn),
    "reorder print": ("reorderable_logging_functions", lambda: print),
    "reorder logging.warning + print": ("reorderable_logging_functions", lambda: (logging.warning, print)),
    "ignore logger.info (bound)": ("ignore_logging_functions", lambda: logger.info),
    "ignore logging.Logger.info": ("ignore_logging_functions", lambda: logging.Logger.info),
    "ignore logging.Logger.warning": ("ignore_logging_functions", lambda: logging.Logger.warning),
    "ignore_logger_methods logging.Logger.warning": ("ignore_logger_methods", lambda: logging.Logger.warning),
    "ignore logging.warning": ("ignore_logging_functions", lambda: logging.warning),
    "ignore warnings.warn": ("ignore_logging_functions", lambda: warnings.warn),
}
CASES = {
    LoggerInfo: ["nothing", "reorder logger.info (bound)", "reorder logging.Logger.info",
                 "ignore logger.info (bound)", "ignore logging.Logger.info"],
    LoggerWarning: ["nothing", "reorder logging.Logger.warning", "ignore logging.Logger.warning",
                    "ignore_logger_methods logging.Logger.warning"],
    LoggingWarning: ["nothing", "reorder logging.warning", "ignore logging.warning"],
    WarningsWarn: ["nothing", "reorder warnings.warn", "ignore warnings.warn"],
    Print: ["nothing", "reorder print"],
    Library: ["nothing", "reorder logging.Logger.warning", "ignore logging.Logger.warning"],
    LibraryLogging: ["nothing", "reorder logging.warning", "ignore logging.warning"],
    Inlined: ["nothing", "reorder logging.warning + print"],
}


class Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def run(cls: type, lever: str) -> tuple[list[str], str, list[str]]:
    """(where each break is, fullgraph's verdict, what reached the user: logs, warnings, prints)."""
    torch._dynamo.reset()
    CONFIG.reorderable_logging_functions.clear()
    CONFIG.ignore_logging_functions.clear()
    if LEVERS[lever] is not None:
        name, made = LEVERS[lever]
        made = made()
        for fn in made if isinstance(made, tuple) else (made,):
            getattr(CONFIG, name).add(fn)
    breaks, user = Records(), Records()
    torch._logging.set_logs(graph_breaks=True)
    dynamo = logging.getLogger("torch._dynamo")
    dynamo.addHandler(breaks)
    for name in ("usermodel", "tinylib", ""):
        logging.getLogger(name).addHandler(user) if name else logging.getLogger().addHandler(user)
    printed = io.StringIO()
    model, x = cls(), torch.randn(2, 4, 8)
    try:
        with warnings.catch_warnings(record=True) as warned, contextlib.redirect_stdout(printed):
            warnings.simplefilter("always")
            torch.compile(model, backend="eager")(x)
    finally:
        dynamo.removeHandler(breaks)
        torch._logging.set_logs()
        for name in ("usermodel", "tinylib", ""):
            logging.getLogger(name).removeHandler(user)
    torch._dynamo.reset()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.compile(model, backend="eager", fullgraph=True)(x)
        full = "passes"
    except Exception as e:  # noqa: BLE001 - torch's Unsupported and friends: the first line says which
        full = "fails: " + str(e).splitlines()[0][:70]
    torch._dynamo.reset()
    where = [line.split(" at ")[-1].replace(str(Path(logging.__file__).parent.parent) + "/", "")
             .replace(str(folder) + "/", "").replace(str(Path(__file__).resolve()), Path(__file__).name)
             for m in breaks.messages for line in m.splitlines() if "Graph break in user code at" in line]
    reached = sorted(set(user.messages)) + [f"warn: {w.message}" for w in warned] + [f"print: {p}" for p in printed.getvalue().splitlines()]
    return where, full, reached


def main() -> None:
    from benchmarks.figures import Figure, Result, emit

    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}")
    print("| case | lever | breaks (where torch puts them) | fullgraph | reached the user |")
    print("|---|---|---|---|---|")
    rows, cleared = 0, 0
    for cls, levers in CASES.items():
        for lever in levers:
            where, full, reached = run(cls, lever)
            rows, cleared = rows + 1, cleared + (not where)
            print(f"| `{cls.__name__}` | {lever} | {len(where)} {', '.join(where)} | {full} | "
                  f"{'; '.join(reached) or '**nothing**'} |")
    # a table for people, no limit: the figures count what it holds
    emit(Result({"cases_x_levers": Figure(rows, "count"), "cleared": Figure(cleared, "count")},
                notes={"torch": torch.__version__}))


if __name__ == "__main__":
    main()
