"""A break inside a helper: `@torch.compiler.disable` on it (the graph still breaks once where it
is called: the title says so).
"""

from __future__ import annotations

import ast
from typing import Optional

from lsprotocol import types as lsp

from .. import codes
from .header import header_edits
from .source import _INSTALLED, COMPILES, QUICKFIX, Edit, Source, _action, decorator_names

_DISABLES = {"torch.compiler.disable", "torch._dynamo.disable", "compiler.disable", "disable"}


def _find_def(src: Source, name: str) -> Optional[ast.AST]:
    """The def of `name` ("helper", or "Net.helper" for a method): module level, else a method."""
    parts = name.split(".")
    defs = (ast.FunctionDef, ast.AsyncFunctionDef)
    if len(parts) == 2:
        for node in src.tree.body:
            if isinstance(node, ast.ClassDef) and node.name == parts[0]:
                for item in node.body:
                    if isinstance(item, defs) and item.name == parts[1]:
                        return item
        return None
    for node in src.tree.body:
        if isinstance(node, defs) and node.name == name:
            return node
    methods = [item for node in src.tree.body if isinstance(node, ast.ClassDef)
               for item in node.body if isinstance(item, defs) and item.name == name]
    return methods[0] if len(methods) == 1 else None


def _disable_helper(src: Source, uri: str, d: lsp.Diagnostic, data: dict, code: str) -> list[lsp.CodeAction]:
    function, where = None, uri
    if data.get("kind") == "graph_break":
        function = data.get("function")
        target = str(data.get("target") or "")
        if not function or "<" in function or function in ("forward", "?", target, target.split(".")[-1]):
            return []
        if data.get("call_site"):
            related = d.related_information or []
            if not related:
                return []
            where = related[-1].location.uri
            if any(part in where for part in _INSTALLED):
                return []  # the helper is an installed library's: not the user's code to edit
    elif code in codes.PREDICTED_BREAKS and data.get("function") and data.get("root"):
        if data["function"] == data["root"] or "<" in data["function"]:
            return []
        function = data["function"]
    if not function:
        return []
    if where == uri:
        node = _find_def(src, function)
        if node is None or set(decorator_names(node)) & (_DISABLES | COMPILES):
            return []
    short = function.split(".")[-1]
    return [_action(f"Run `{short}` outside the graph (@torch.compiler.disable; the graph still breaks where it is called)",
                    QUICKFIX, {"fix": "disable", "uri": where, "function": function}, d)]


def _resolve_disable(src: Source, data: dict) -> Optional[list[Edit]]:
    node = _find_def(src, str(data["function"]))
    if node is None or set(decorator_names(node)) & (_DISABLES | COMPILES):
        return None
    # right above the `def`, under its other decorators: `@property`, `@staticmethod` then wrap the
    # disabled function (disable on a property object would fail when the module is imported)
    edits = [src.insert_lines(node.lineno - 1, [src.indent(node.lineno) + "@torch.compiler.disable"])]
    return header_edits(src, ["torch"], []) + edits
