"""`compile-lens show FILE:LINE`: what was compiled behind a line, read-only.

- `--graph`: the FX graphs TorchDynamo captured for the target the line belongs to (each node after
  the line of your code it came from, the graph breaks between graphs) — the trace, from the result
  cache when the file is unchanged.
- without it: the kernels the line became, from the measurement's line costs (its provenance):
  each kernel's name and kind (generated, an extern library call, a fallback op), its time, the
  lines fused with it — measured when the cache has no measurement of this code.

Exit code: 0, or 2 for a usage error (no such file, no line, no target at it) or an internal error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any, Optional

from ..config import find_root
from ..engine.project import open_cache
from ..engine.show import ShowProblem, show_document
from .common import say, settings_for, write_output


def add_show_parser(subparsers: Any) -> argparse.ArgumentParser:
    show = subparsers.add_parser("show", help="what was compiled behind a line: its kernels, or (--graph) "
                                              "the graphs Dynamo captured")
    show.add_argument("where", metavar="FILE:LINE", help="a line of a Python file (a target's class/def line, or any line in it)")
    show.add_argument("--graph", action="store_true", help="the FX graphs TorchDynamo captured for the target at LINE")
    show.add_argument("--format", choices=("text", "json"), default="text")
    show.add_argument("--no-cache", action="store_true", help="neither read nor write the result cache")
    show.add_argument("--device", default=None, help="default: pyproject's, else auto")
    show.add_argument("-o", "--output", help="write the document here instead of stdout")
    show.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    show.set_defaults(run=run_show)
    return show


def _where(text: str) -> Optional[tuple[str, int]]:
    path, sep, line = text.rpartition(":")
    if not sep or not line.isdigit() or int(line) < 1:
        return None
    return path, int(line)


def run_show(args: argparse.Namespace) -> int:
    where = _where(args.where)
    if where is None:
        say(f"{args.where}: give FILE:LINE, e.g. models/net.py:42")
        return 2
    path, line = where
    cache = open_cache(args.no_cache)
    try:
        settings = settings_for(args, [os.path.abspath(path)], find_root(os.path.abspath(path)))
        doc, text = asyncio.run(show_document(path, line, graph=args.graph, settings=settings, cache=cache,
                                              on_progress=None if args.quiet else say))
    except ShowProblem as problem:
        say(str(problem))
        return 2
    finally:
        if cache is not None:
            cache.close()
    return 0 if write_output(args.output, text if args.format == "text" else json.dumps(doc, indent=2)) else 2
