"""`compile-lens mcp [--trust DIR]...`: the MCP server for coding agents, over stdio.

The parser needs no MCP SDK (so `--help` and the docs' flag check work without it); the server is
imported only when it starts. Without the `mcp` package (Python 3.10+; `pip install mcp`, or the
extra `compile-lens[mcp]`) it says so in one line and exits 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .common import say


def add_mcp_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "mcp", help="serve check, explain, fixes, apply_fix, trial and import to coding agents (MCP over stdio)",
        description="An MCP server over stdio: the tools `check`, `explain`, `fixes`, `apply_fix`, `trial` and "
                    "`import`, each returning what the CLI's --format json returns. Tools that run the user's code "
                    "(a trace, a measurement, a trial) run it only in a folder given with --trust; elsewhere "
                    "`check` and `fixes` answer from the static lints and nothing runs.")
    parser.add_argument("--trust", action="append", default=[], metavar="DIR",
                        help="a folder whose code the tools may run (trace, measure, trial, apply_fix); repeatable. "
                             "Without it nothing runs (static lints only)")
    parser.set_defaults(run=run_mcp)
    return parser


def run_mcp(args: argparse.Namespace) -> int:
    missing = [d for d in args.trust if not os.path.isdir(d)]
    if missing:
        say(f"--trust {', '.join(missing)}: not a folder")
        return 2
    if sys.version_info < (3, 10) or not _sdk_installed():
        say("the MCP server needs the `mcp` package (Python 3.10 or newer) beside torch: pip install mcp "
            "(or pip install 'compile-lens[mcp]')")
        return 2
    from ..mcp_server.server import serve

    serve([os.path.realpath(d) for d in args.trust])
    return 0


def _sdk_installed() -> bool:
    try:
        import mcp  # noqa: F401  (the SDK: imported again by the server, this only asks)
    except ImportError:
        return False
    return True
