"""`print` (GB0059, GB0296, CL101) and logger calls (GB0291, CL107) in compiled code: reorder or
ignore them through `torch._dynamo.config`.
"""

from __future__ import annotations

import ast
import logging
from typing import Optional

from lsprotocol import types as lsp

from .. import codes
from .header import CONFIG, is_config_stmt
from .source import QUICKFIX, Source, _action, calls_on_line, dotted

_NOT_REORDERABLE = {"shape", "dtype", "device", "size", "tolist", "item", "numpy", "names", "layout"}

_LOGGING_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log"}


def _is_print(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id == "print"


def _reorderable(node: ast.expr, assigned: dict[str, list[ast.expr]], depth: int = 0) -> bool:
    """Arguments torch can reorder a print with: tensors, constants, format strings (a static guess)."""
    if depth > 5:
        return False
    if isinstance(node, (ast.Constant, ast.JoinedStr)):
        return True
    if isinstance(node, ast.Name):
        return all(_reorderable(v, assigned, depth + 1) for v in assigned.get(node.id, []))
    if isinstance(node, ast.Attribute):
        return False  # .shape, .dtype, self.something: not a tensor for sure
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute):
            if node.func.attr in _NOT_REORDERABLE:
                return False
            head = dotted(node.func.value)
            return head in ("torch", "F", "torch.nn.functional") or _reorderable(node.func.value, assigned, depth + 1)
        return False
    if isinstance(node, ast.BinOp):
        return _reorderable(node.left, assigned, depth + 1) and _reorderable(node.right, assigned, depth + 1)
    if isinstance(node, ast.UnaryOp):
        return _reorderable(node.operand, assigned, depth + 1)
    if isinstance(node, ast.Subscript):
        return isinstance(node.value, ast.Name) and _reorderable(node.value, assigned, depth + 1)
    return False


def _assignments(func: ast.AST) -> dict[str, list[ast.expr]]:
    found: dict[str, list[ast.expr]] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, []).append(node.value)
                elif isinstance(target, (ast.Tuple, ast.List)):
                    for elt in target.elts:
                        if isinstance(elt, ast.Name):
                            found.setdefault(elt.id, []).append(ast.Attribute(ast.Name("?"), "?"))
        elif isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name):
            found.setdefault(node.target.id, []).append(ast.Attribute(ast.Name("?"), "?"))
    return found


def _print_reorderable(src: Source, call: ast.Call) -> bool:
    func = src.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef)) or src.tree
    assigned = _assignments(func)
    if any(not isinstance(k.value, ast.Constant) for k in call.keywords):
        return False
    return all(not isinstance(a, ast.Starred) and _reorderable(a, assigned) for a in call.args)


def _print_fix(src: Source, uri: str, d: lsp.Diagnostic, line: int, gb: Optional[str]) -> list[lsp.CodeAction]:
    if not calls_on_line(src, line, _is_print):
        return []
    present = {ast.unparse(s) for s in src.tree.body if is_config_stmt(s)}
    reorder = f"{CONFIG}.reorderable_logging_functions.add(print)"
    said = f"{reorder}  # torch._dynamo.config: applies to the whole process, every compiled print"
    skip = f"{CONFIG}.ignore_logging_functions.add(print)"
    if reorder in present or skip in present:
        return []  # torch checks `reorderable` first: adding `ignore` now would change nothing
    reorderable = src.memo("prints-reorderable", lambda: all(
        _print_reorderable(src, p) for p in src.calls() if _is_print(p)))
    if gb != codes.GB_PRINT_ARGS and reorderable:
        return [_action("Print after the graph runs (torch._dynamo.config.reorderable_logging_functions)",
                        QUICKFIX, {"fix": "config", "uri": uri, "config": [said], "modules": ["torch"]}, d,
                        preferred=True)]
    return [_action("Skip print() in compiled code (torch._dynamo.config.ignore_logging_functions)", QUICKFIX,
                    {"fix": "config", "uri": uri, "config": [skip], "modules": ["torch"]}, d)]


def _logging_call(call: ast.Call) -> bool:
    """`logger.warning(...)`, `logging.info(...)`: a method the edit can name as it exists in the
    standard library (`logging.Logger.warning`), so the added line runs."""
    if not isinstance(call.func, ast.Attribute) or not isinstance(call.func.value, (ast.Name, ast.Attribute)):
        return False
    receiver, method = dotted(call.func.value), call.func.attr
    if not receiver or method not in _LOGGING_METHODS:
        return False
    return callable(getattr(logging, method, None)) if receiver == "logging" else hasattr(logging.Logger, method)


def _logging_fix(src: Source, uri: str, d: lsp.Diagnostic, line: int) -> list[lsp.CodeAction]:
    data = d.data if isinstance(d.data, dict) else {}
    if data.get("call_site"):
        return []  # the logging call is in another file (often a library's): this line has none
    calls = calls_on_line(src, line, _logging_call)  # not the first call on the line: the logging one
    if len(calls) != 1:
        return []
    call = calls[0]
    assert isinstance(call.func, ast.Attribute)
    receiver, method = dotted(call.func.value), call.func.attr
    if receiver == "logging":
        target, shown = f"logging.{method}", f"logging.{method}"
    else:
        target, shown = f"logging.Logger.{method}", f"{receiver}.{method}"
    return [_action(f"Skip `{shown}()` in compiled code (torch._dynamo.config.ignore_logging_functions)",
                    QUICKFIX, {"fix": "config", "uri": uri, "modules": ["torch", "logging"],
                               "config": [f"{CONFIG}.ignore_logging_functions.add({target})"]}, d,
                    preferred=True)]
