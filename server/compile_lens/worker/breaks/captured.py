"""The FX graphs TorchDynamo captured for a target, kept with the trace: each node as `name =
target(args)` with the source line its stack trace names (the innermost workspace frame), for
`compile-lens show --graph` and the editor's read-only graph document — what depyf and tlparse show,
on the user's lines. Read from `torch._dynamo.explain`'s `graphs`, which the trace makes anyway."""

from __future__ import annotations

import re
from typing import Any, Optional

from ...protocol import CapturedGraph, GraphNode
from ...torch_text.frames import is_user_file

MAX_NODES = 2000  # per graph: a large model's graph stays readable and its cached result small
_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<name>\S+)')


def captured(graphs: list[Any], root: str) -> list[CapturedGraph]:
    return [_graph(g, root) for g in graphs or []]


def _graph(gm: Any, root: str) -> CapturedGraph:
    nodes, function = [], ""
    all_nodes = list(gm.graph.nodes)
    for node in all_nodes[:MAX_NODES]:
        where = _where(node.meta.get("stack_trace") or "", root)
        if where is not None and not function:
            function = where[2]
        nodes.append(GraphNode(_text(node), where[0] if where else None, where[1] if where else None))
    return CapturedGraph(function, nodes, max(0, len(all_nodes) - MAX_NODES))


def _where(stack: str, root: str) -> Optional[tuple[str, int, str]]:
    """(path, line, function) of the innermost workspace frame of a node's stack trace, else its innermost frame."""
    frames = [(m["path"], int(m["line"]), m["name"]) for m in _FRAME.finditer(stack)]
    mine = [f for f in frames if is_user_file(f[0], root)]
    return (mine or frames or [None])[-1]


def _arg(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_arg(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_arg(v)}" for k, v in value.items()) + "}"
    if hasattr(value, "op") and hasattr(value, "name"):  # an fx Node
        return value.name
    return repr(value) if not callable(value) else _qualified(value)


def _qualified(target: Any) -> str:
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
    if module in ("_operator", "operator"):
        return f"operator.{name}"
    return f"{module}.{name}" if module and not module.startswith("builtins") else name


def _call(args: tuple, kwargs: dict) -> str:
    return ", ".join([_arg(a) for a in args] + [f"{k}={_arg(v)}" for k, v in kwargs.items()])


def _text(node: Any) -> str:
    if node.op == "placeholder":
        return f"{node.name} = input"
    if node.op == "output":
        return f"return {_arg(node.args[0] if len(node.args) == 1 else node.args)}"
    if node.op == "get_attr":
        return f"{node.name} = self.{node.target}"
    if node.op == "call_method":
        first, rest = (node.args[0], node.args[1:]) if node.args else ("?", ())
        return f"{node.name} = {_arg(first)}.{node.target}({_call(rest, node.kwargs)})"
    if node.op == "call_module":
        return f"{node.name} = self.{node.target}({_call(node.args, node.kwargs)})"
    return f"{node.name} = {_qualified(node.target)}({_call(node.args, node.kwargs)})"
