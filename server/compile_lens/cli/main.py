"""`compile-lens`: the argparse root. Each subcommand adds its own parser and the function that runs it.

One rule for the exit code, which CI reads: 0 clean, 1 findings (or ranks that part), 2 a usage
error, an input that cannot be read or written, or an internal error. `record` and `trial` pass
their program's own exit status through instead (their own failures are still 2). The arguments
that name files (`preflight`) are checked before a subcommand starts any work; an internal error
is one line on stderr, with the file its traceback was written to — never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from typing import Optional

from .. import __version__
from ..jobs.cache import cache_dir
from .check import add_check_parser
from .common import say
from .mcp import add_mcp_parser
from .preflight import preflight
from .record import add_record_parser
from .report import add_report_parser
from .show import add_show_parser
from .trace_import import add_import_parser
from .trial import add_trial_parser

USAGE, INTERNAL = 2, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="compile-lens", description="What torch.compile will do to your PyTorch code.")
    parser.add_argument("--version", action="version", version=f"compile-lens {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    add_check_parser(sub)
    add_import_parser(sub)
    add_mcp_parser(sub)
    add_record_parser(sub)
    add_report_parser(sub)
    add_show_parser(sub)
    add_trial_parser(sub)
    return parser


def write_traceback(command: str, text: str) -> Optional[str]:
    """The full traceback of an internal error, in the cache folder's `errors/` (else the temp
    folder): the path, or None when neither can be written."""
    import tempfile

    name = f"{command}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
    for folder in (os.path.join(cache_dir(), "errors"), os.path.join(tempfile.gettempdir(), "compile-lens-errors")):
        try:
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, name)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(f"compile-lens {__version__} {command}: {' '.join(sys.argv)}\n\n{text}")
            return path
        except OSError:
            continue
    return None


def main(argv: Optional[list[str]] = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else USAGE
    problem = preflight(args)
    if problem:
        say(problem)
        return USAGE
    try:
        return args.run(args)
    except KeyboardInterrupt:
        return USAGE
    except BrokenPipeError:  # `compile-lens check … | head`: the reader left; not a bug of ours
        # stdout onto /dev/null, or the interpreter's last flush prints its own traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        say("the output was closed before it was all written (broken pipe)")
        return USAGE
    except Exception as exc:  # noqa: BLE001 — the rule: one line and exit 2, never a traceback
        where = write_traceback(args.command, traceback.format_exc())
        frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        at = f" at {os.path.basename(frame.filename)}:{frame.lineno}" if frame else ""
        said = " ".join(str(exc).split())[:300]
        say(f"internal error in `{args.command}`: {type(exc).__name__}{at}: {said}"
            + (f" (full traceback: {where})" if where else ""))
        return INTERNAL


if __name__ == "__main__":
    sys.exit(main())
