"""What was compiled behind one line (`compile-lens show`, the MCP server's `show`): the FX graphs
Dynamo captured for the target the line belongs to, or the kernels the line became, from `check`'s
result for that one file (the cache's when the file is unchanged)."""

from __future__ import annotations

import os
from typing import Any, Callable, Optional

from ..config import find_root
from ..jobs.cache import ResultCache
from ..render.graph_text import graph_json, graph_text, target_at
from ..render.kernels_text import kernels_json, kernels_text, line_costs_at
from ..settings import Settings
from .check import check


class ShowProblem(Exception):
    """No such file, no target at the line, a file that cannot be analysed: one line, exit 2."""


async def show_document(path: str, line: int, *, graph: bool, settings: Settings, cache: Optional[ResultCache],
                        on_progress: Optional[Callable[[str], None]] = None
                        ) -> tuple[dict[str, Any], str]:
    """The JSON document and the text of what was compiled behind `path`:`line` (`--graph`: the captured
    graphs); the CLI prints one, the MCP server returns both."""
    if not os.path.isfile(path) or not path.endswith(".py"):
        raise ShowProblem(f"no such Python file: {path}")
    path = os.path.abspath(path)
    reports, _ = await check([path], settings, benchmark=not graph, recompiles=False, cache=cache,
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
