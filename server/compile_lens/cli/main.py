"""`compile-lens`: the argparse root. Each subcommand adds its own parser and the function that runs it."""

from __future__ import annotations

import argparse
import sys
from typing import Optional

from .. import __version__
from .check import add_check_parser
from .record import add_record_parser
from .report import add_report_parser
from .trace_import import add_import_parser
from .trial import add_trial_parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="compile-lens", description="What torch.compile will do to your PyTorch code.")
    parser.add_argument("--version", action="version", version=f"compile-lens {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    add_check_parser(sub)
    add_import_parser(sub)
    add_record_parser(sub)
    add_report_parser(sub)
    add_trial_parser(sub)
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
