"""torch's newest ways out of a graph break, offered only where the worker's torch has them
(`hatches`: the names its hello lists; the server never imports torch):

- `@torch._dynamo.nonstrict_trace` on a helper whose body Dynamo cannot trace but whose inputs it
  can (a `torch._dynamo.graph_break()`, an unsupported Python call): Dynamo calls it opaquely and
  AOTAutograd traces its torch ops, so the graph does not break;
- `@torch._dynamo.decorators.leaf_function` on a helper that returns None or its input unchanged
  (a check, a log line): it runs eagerly at run time, opaque to the graph. torch 2.13 refuses a
  leaf function without a fake implementation, even then, so the edit writes the one such a helper
  needs (returning None, or that input) right after it;
- `reorderable_logging_functions` for `print`, `logging.<function>()` and `warnings.warn()` lives
  in `print_logging` (one line after the imports, saying it applies to the whole process). Measured
  on torch 2.13 (`benchmarks/breaks/logging_levers.py`, BENCHMARKS.md "Logging breaks"): a `logging.Logger`
  method is never reordered (the bound method, `logging.Logger.warning`: the break stays; only
  `ignore_logging_functions`, alias `ignore_logger_methods`, clears it); a reordered call runs after
  the graph in the compiled frame itself, and is dropped where that frame inlines it.
"""

from __future__ import annotations

import ast
from typing import Optional

from lsprotocol import types as lsp

from .disable import _DISABLES, _find_def
from .header import header_edits
from .source import (
    COMPILES,
    QUICKFIX,
    Edit,
    Source,
    _action,
    decorator_names,
)

NONSTRICT = "torch._dynamo.nonstrict_trace"
LEAF = "torch._dynamo.decorators.leaf_function"

# breaks of code Dynamo cannot trace but AOTAutograd can (no data-dependent value, no side effect
# that would run only once, at trace time): graph_break(), skipped or unsupported Python calls
_NONSTRICT_BREAKS = {"GB0025", "GB0008", "GB0009", "GB0147", "GB0148", "GB0156"}
_OURS = {NONSTRICT, LEAF, "nonstrict_trace", "leaf_function"} | _DISABLES | COMPILES


def _helper(src: Source, d: lsp.Diagnostic, data: dict) -> Optional[ast.FunctionDef]:
    """The module-level function of this file the traced break is in (not the target itself)."""
    if data.get("kind") != "graph_break" or data.get("call_site"):
        return None
    function, target = str(data.get("function") or ""), str(data.get("target") or "")
    if not function or "<" in function or "." in function or function in ("forward", "?", target, target.split(".")[-1]):
        return None
    node = _find_def(src, function)
    if not isinstance(node, ast.FunctionDef) or node not in src.tree.body or set(decorator_names(node)) & _OURS:
        return None
    return node if node.lineno <= d.range.start.line + 1 <= (node.end_lineno or node.lineno) else None


def _hatch_fixes(src: Source, uri: str, d: lsp.Diagnostic, data: dict, gb: Optional[str],
                 hatches: frozenset[str]) -> list[lsp.CodeAction]:
    found = []
    node = _helper(src, d, data) if hatches & {"nonstrict_trace", "leaf_function"} else None
    if node is not None and "nonstrict_trace" in hatches and gb in _NONSTRICT_BREAKS:
        found.append(_action(f"Trace `{node.name}` without Dynamo (@torch._dynamo.nonstrict_trace: "
                             "its torch ops still compile)", QUICKFIX,
                             {"fix": "nonstrict", "uri": uri, "function": node.name}, d))
    if node is not None and "leaf_function" in hatches and _returns(node) is not None:
        found.append(_action(f"Run `{node.name}` eagerly as a leaf of the graph "
                             "(@torch._dynamo.decorators.leaf_function, with its fake implementation)",
                             QUICKFIX, {"fix": "leaf", "uri": uri, "function": node.name}, d))
    return found


def _returns(node: ast.FunctionDef) -> Optional[str]:
    """What a fake implementation of `node` returns: "None" when it returns nothing, the name of
    the parameter it returns unchanged; None when neither (or it changes its inputs in place)."""
    params = {a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs}
    returned: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and sub is not node:
            return None  # a nested function's returns are not the helper's: not read here
        if isinstance(sub, (ast.Yield, ast.YieldFrom)):
            return None
        if isinstance(sub, ast.Return):
            value = sub.value
            if value is None or (isinstance(value, ast.Constant) and value.value is None):
                returned.add("None")
            elif isinstance(value, ast.Name) and value.id in params:
                returned.add(value.id)
            else:
                return None
        if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.With)):
            targets = sub.targets if isinstance(sub, ast.Assign) else \
                [getattr(sub, "target", None)] if not isinstance(sub, ast.With) else [i.optional_vars for i in sub.items]
            for t in targets:
                for name in ast.walk(t) if t is not None else []:
                    if isinstance(name, ast.Name) and name.id in params:
                        return None  # the parameter is rebound or written into
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr.endswith("_") \
                and not sub.func.attr.startswith("_") and isinstance(sub.func.value, ast.Name) and sub.func.value.id in params:
            return None  # `x.add_(1)`: an in-place change leaf_function must be told of
    if not returned:
        returned.add("None")  # falls off the end
    return returned.pop() if len(returned) == 1 else None


def _resolve_decorator(src: Source, data: dict, decorator: str) -> Optional[tuple[ast.FunctionDef, list[Edit]]]:
    node = _find_def(src, str(data["function"]))
    if not isinstance(node, ast.FunctionDef) or node not in src.tree.body or set(decorator_names(node)) & _OURS:
        return None
    edits = [src.insert_lines(node.lineno - 1, [src.indent(node.lineno) + f"@{decorator}"])]
    return node, header_edits(src, ["torch"], []) + edits


def _resolve_nonstrict(src: Source, data: dict) -> Optional[list[Edit]]:
    made = _resolve_decorator(src, data, NONSTRICT)
    return made[1] if made else None


def _resolve_leaf(src: Source, data: dict) -> Optional[list[Edit]]:
    made = _resolve_decorator(src, data, LEAF)
    if made is None:
        return None
    node, edits = made
    returned = _returns(node)
    if returned is None:
        return None
    what = "returns None" if returned == "None" else f"returns `{returned}` unchanged"
    end = node.end_lineno or node.lineno
    fake = ["", "", f"@{node.name}.register_fake",
            f"def _{node.name}_fake({ast.unparse(node.args)}):  # what torch compiles against: `{node.name}` {what}",
            f"    return {returned}"]
    return edits + [src.insert_lines(end, fake)]

