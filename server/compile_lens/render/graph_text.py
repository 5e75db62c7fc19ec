"""The graphs TorchDynamo captured for a target, as a read-only document: each graph in order, each
node on its own row after the source line it came from, and the graph breaks between graphs. Pure:
the same text for `compile-lens show --graph`, the editor's `compile-lens:` document and the MCP
server. JSON: `graph_json`."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional

from ..protocol import CapturedGraph, GraphBreak, TargetResult


def _where(path: Optional[str], line: Optional[int], root: str) -> str:
    if not path or not line:
        return ""
    shown = os.path.relpath(path, root) if root and os.path.isabs(path) and path.startswith(root.rstrip("/") + "/") \
        else os.path.basename(path)
    return f"{shown}:{line}"


def _span(graph: CapturedGraph) -> tuple[Optional[int], Optional[int]]:
    lines = [n.line for n in graph.nodes if n.line]
    return (min(lines), max(lines)) if lines else (None, None)


def _break_row(br: GraphBreak, root: str) -> str:
    what = f"{br.gb_id} " if br.gb_id else ""
    return f"# ── graph break at {_where(br.path, br.line, root)}: {what}{br.gb_type or br.reason.splitlines()[0][:120]}"


def graph_text(result: TargetResult, root: str) -> str:
    """The document: a header, then per graph its rows `path:line  node`."""
    graphs = result.captured_graphs
    n, breaks = len(graphs), len(result.graph_breaks)
    head = [f"# The graphs TorchDynamo captured for `{result.name}`: what torch.compile hands to Inductor.",
            f"# {n} graph{'s' if n != 1 else ''}, {breaks} graph break{'s' if breaks != 1 else ''}. "
            "Each row: the line of your code a node came from, then the node. Read-only.", ""]
    if not graphs:
        why = ("the trace has not run yet" if result.graph_count is None else
               "the whole target runs eagerly (Dynamo captured no graph)")
        return "\n".join(head + [f"# no graph: {why}"]) + "\n"
    width = max((len(_where(nd.path, nd.line, root)) for g in graphs for nd in g.nodes), default=0) + 2
    rows = list(head)
    shown: set[int] = set()
    for i, graph in enumerate(graphs):
        first, last = _span(graph)
        span = f", lines {first}–{last}" if first and last and first != last else (f", line {first}" if first else "")
        rows.append(f"# ── graph {i + 1} of {n}: {graph.function or '?'}{span}")
        for node in graph.nodes:
            rows.append(_where(node.path, node.line, root).ljust(width) + node.text)
        if graph.left_out:
            rows.append(f"# … {graph.left_out} more nodes not kept")
        # the breaks after this graph's code and before the next one's
        nxt = _span(graphs[i + 1])[0] if i + 1 < n else None
        for j, br in enumerate(result.graph_breaks):
            if j not in shown and last is not None and br.line >= last and (nxt is None or br.line <= nxt):
                rows.append(_break_row(br, root))
                shown.add(j)
        rows.append("")
    rest = [_break_row(br, root) for j, br in enumerate(result.graph_breaks) if j not in shown]
    if rest:
        rows += ["# other graph breaks of this target:"] + rest + [""]
    return "\n".join(rows)


def graph_json(result: TargetResult) -> list[dict[str, Any]]:
    return [dataclasses.asdict(g) for g in result.captured_graphs]


def target_at(results: list[TargetResult], line: int) -> Optional[TargetResult]:
    """The target a 1-based `line` belongs to: the last one defined at or above it, else the first."""
    above = [r for r in sorted(results, key=lambda r: r.line) if r.line <= line]
    return above[-1] if above else (min(results, key=lambda r: r.line) if results else None)
