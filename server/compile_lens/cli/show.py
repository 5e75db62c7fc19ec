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
from typing import Any, Callable, Optional

from ..config import find_root
from ..jobs.cache import ResultCache
from ..render.graph_text import graph_json, graph_text, target_at
from ..render.kernels_text import kernels_json, kernels_text, line_costs_at
from ..settings import Settings
from .check import check
from .common import open_cache, say, settings_for, write_output


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


class ShowProblem(Exception):
    """No such file, no target at the line, a file that cannot be analysed: one line, exit 2."""


async def show_document(path: str, line: int, *, graph: bool, settings: Settings, cache: Optional[ResultCache],
                        quiet: bool = True, on_progress: Optional[Callable[[str], None]] = None
                        ) -> tuple[dict[str, Any], str]:
    """The JSON document and the text of what was compiled behind `path`:`line` (`--graph`: the captured
    graphs); the CLI prints one, the MCP server returns both."""
    if not os.path.isfile(path) or not path.endswith(".py"):
        raise ShowProblem(f"no such Python file: {path}")
    path = os.path.abspath(path)
    reports, _ = await check([path], settings, benchmark=not graph, quiet=quiet, recompiles=False, cache=cache,
                             on_progress=on_progress)
    report = reports[0] if reports else None
    if report is not None and report.error is not None:
        raise ShowProblem(f"{os.path.relpath(path)}: {report.error.message}")
    target = target_at(report.targets if report else [], line)
    if target is None:
        raise ShowProblem(f"{os.path.relpath(path)}: no model or compiled function to show (no target in the file)")
    if graph:
        return ({"target": target.name, "line": target.line, "graph": graph_json(target)},
                graph_text(target, find_root(path)))
    found = line_costs_at(target, path, line)
    return ({"target": target.name, "line": line, "kernels": kernels_json(target, found), "graph": None},
            kernels_text(target, path, line, found))


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
                                              quiet=args.quiet))
    except ShowProblem as problem:
        say(str(problem))
        return 2
    finally:
        if cache is not None:
            cache.close()
    return 0 if write_output(args.output, text if args.format == "text" else json.dumps(doc, indent=2)) else 2
