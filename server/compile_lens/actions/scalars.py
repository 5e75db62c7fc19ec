"""`.item()` (GB0124, CL102): `torch._dynamo.config.capture_scalar_outputs = True`, unless the value
is then branched on or used as a size (the break would move, not go).
"""

from __future__ import annotations

import ast

from lsprotocol import types as lsp

from .header import CAPTURE, config_lines
from .source import QUICKFIX, Source, _action, calls_on_line, dotted


def _is_item(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr == "item" and not call.args


def _item_branched(src: Source, call: ast.Call) -> bool:
    """The scalar is branched on or used as a size/count: capturing it moves the break, not removes it."""
    func = src.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) or src.tree
    names: set[str] = set()
    stmt = src.enclosing(call, (ast.stmt,))
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]):
            names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    # the call itself inside a test
    parent = src.parent(call)
    while parent is not None and not isinstance(parent, (ast.stmt, ast.Module)):
        if isinstance(parent, (ast.IfExp, ast.Compare, ast.BoolOp)):
            return True
        parent = src.parent(parent)
    if isinstance(parent, (ast.If, ast.While, ast.Assert)) and call in set(ast.walk(parent.test)):
        return True
    if not names:
        return False
    for node in ast.walk(func):
        tests = []
        if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            tests.append(node.test)
        elif isinstance(node, ast.Compare):
            tests.append(node)
        elif isinstance(node, ast.Call) and (dotted(node.func) in ("range", "int", "bool", "len")
                                             or isinstance(node.func, ast.Attribute)
                                             and node.func.attr in ("view", "reshape", "expand", "repeat",
                                                                    "zeros", "ones", "empty", "randn", "rand",
                                                                    "arange", "full", "narrow")):
            tests += node.args
        for test in tests:
            if any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(test)):
                return True
    return False


def _capture_scalar(src: Source, uri: str, d: lsp.Diagnostic, line: int) -> list[lsp.CodeAction]:
    if CAPTURE in config_lines(src):
        return []
    here = calls_on_line(src, line, _is_item)
    if not here:
        return []
    # the setting is global: every `.item()` in the file must stay break-free with it
    if src.memo("item-branched", lambda: any(_item_branched(src, c) for c in src.calls() if _is_item(c))):
        return []
    return [_action("Capture .item() in the graph (torch._dynamo.config.capture_scalar_outputs = True)",
                    QUICKFIX, {"fix": "config", "uri": uri, "config": [CAPTURE], "modules": ["torch"]}, d,
                    preferred=True)]
