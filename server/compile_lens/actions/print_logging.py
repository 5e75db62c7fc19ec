"""`print` (GB0059, GB0296, CL101) and logger calls (GB0291, CL107) in compiled code: reorder or
ignore them through `torch._dynamo.config`.

Measured on torch 2.13 (docs/editor.md "Code actions", BENCHMARKS.md "Logging breaks"): a reordered call
runs after the graph only where it is in the function torch compiles itself; in a module or helper
that function inlines, torch drops it (only the outermost frame's reordered calls are replayed).
So reordering is offered only for a break in the outermost traced frame (`depth` 0), and its title
says what happens where compiled code inlines the call. `logger.<method>()` on a `logging.Logger`
is never reordered by torch 2.13 (its methods go to `ignore_logging_functions` only);
`logging.<function>()` and `warnings.warn()` are.

The skip edit names the set the worker's torch has (its hello's `escape_hatches`):
`ignore_logging_functions`, else its older name `ignore_logger_methods`; with neither (or before the
worker said which it has) the skip is not offered, as its line would raise at import.
"""

from __future__ import annotations

import ast
import logging
from typing import Optional

from lsprotocol import types as lsp

from .. import codes
from .header import CONFIG, config_lines
from .source import QUICKFIX, Source, _action, calls_on_line, dotted

_NOT_REORDERABLE = {"shape", "dtype", "device", "size", "tolist", "item", "numpy", "names", "layout"}

_LOGGING_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log"}

# what a reordered call does where compiled code inlines the function it is in (torch 2.13)
_INLINED = "not run where a compiled caller inlines this code"

# the names of torch's "skip in compiled code" set, preferred first (an alias of the first on 2.13)
_SKIP_SETS = ("ignore_logging_functions", "ignore_logger_methods")


def _skip_set(hatches: frozenset[str]) -> Optional[str]:
    """The name the worker's torch has for the set of calls Dynamo skips, or None."""
    return next((name for name in _SKIP_SETS if name in hatches), None)


def _skipped_already(present: set[str], target: str) -> bool:
    return any(f"{CONFIG}.{name}.add({target})" in present for name in _SKIP_SETS)


def _outermost(d: lsp.Diagnostic) -> bool:
    """The call is in the function torch compiles, not in one it inlines: a traced break's `depth`
    (user frames above the line's own), or a lint's function being its compiled root."""
    data = d.data if isinstance(d.data, dict) else {}
    if data.get("kind") == "graph_break":
        return data.get("depth") == 0
    return bool(data.get("function")) and data.get("function") == data.get("root")


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


def _print_fix(src: Source, uri: str, d: lsp.Diagnostic, line: int, gb: Optional[str],
               hatches: frozenset[str]) -> list[lsp.CodeAction]:
    if not calls_on_line(src, line, _is_print):
        return []
    present = config_lines(src)
    reorder = f"{CONFIG}.reorderable_logging_functions.add(print)"
    said = f"{reorder}  # torch._dynamo.config: applies to the whole process, every compiled print"
    if reorder in present or _skipped_already(present, "print"):
        return []  # torch checks `reorderable` first: adding `ignore` now would change nothing
    reorderable = src.memo("prints-reorderable", lambda: all(
        _print_reorderable(src, p) for p in src.calls() if _is_print(p)))
    if "reorderable_logging_functions" in hatches and gb != codes.GB_PRINT_ARGS and reorderable and _outermost(d):
        return [_action(f"Print after the graph runs (torch._dynamo.config.reorderable_logging_functions; {_INLINED})",
                        QUICKFIX, {"fix": "config", "uri": uri, "config": [said], "modules": ["torch"]}, d,
                        preferred=True)]
    skip_set = _skip_set(hatches)
    if skip_set is None:
        return []
    return [_action(f"Skip print() in compiled code ({CONFIG}.{skip_set})", QUICKFIX,
                    {"fix": "config", "uri": uri, "config": [f"{CONFIG}.{skip_set}.add(print)"], "modules": ["torch"]},
                    d)]


def _logging_call(call: ast.Call) -> bool:
    """`logger.warning(...)`, `logging.info(...)`: a method the edit can name as it exists in the
    standard library (`logging.Logger.warning`), so the added line runs."""
    if not isinstance(call.func, ast.Attribute) or not isinstance(call.func.value, (ast.Name, ast.Attribute)):
        return False
    receiver, method = dotted(call.func.value), call.func.attr
    if not receiver or method not in _LOGGING_METHODS:
        return False
    return callable(getattr(logging, method, None)) if receiver == "logging" else hasattr(logging.Logger, method)


def _logging_fix(src: Source, uri: str, d: lsp.Diagnostic, line: int,
                 hatches: frozenset[str]) -> list[lsp.CodeAction]:
    data = d.data if isinstance(d.data, dict) else {}
    skip_set = _skip_set(hatches)
    if skip_set is None:
        return []
    calls = calls_on_line(src, line, _logging_call)  # not the first call on the line: the logging one
    if len(calls) != 1:
        return []
    call = calls[0]
    assert isinstance(call.func, ast.Attribute)
    receiver, method = dotted(call.func.value), call.func.attr
    if data.get("call_site") and not (receiver == "logging" and data.get("function") == method):
        return []  # the break is in another file (often a library's), not in this line's logging call
    if receiver == "logging":
        target, shown = f"logging.{method}", f"logging.{method}"
    else:
        target, shown = f"logging.Logger.{method}", f"{receiver}.{method}"
    if _skipped_already(config_lines(src), target):
        return []  # a diagnostic from before the line was added
    return [_action(f"Skip `{shown}()` in compiled code ({CONFIG}.{skip_set})",
                    QUICKFIX, {"fix": "config", "uri": uri, "modules": ["torch", "logging"],
                               "config": [f"{CONFIG}.{skip_set}.add({target})"]}, d,
                    preferred=receiver != "logging")]  # a `logging` function's preferred fix is its reorder


def _reorderable_call(call: ast.Call) -> bool:
    """`logging.warning(...)` (a `logging` module function) or `warnings.warn(...)`: plain functions
    torch's `reorderable_logging_functions` accepts (a `logging.Logger` method it does not)."""
    if not isinstance(call.func, ast.Attribute):
        return False
    receiver, name = dotted(call.func.value), call.func.attr
    if receiver == "warnings":
        return name == "warn"
    return receiver == "logging" and name in _LOGGING_METHODS and callable(getattr(logging, name, None))


def _log_reorder_fix(src: Source, uri: str, d: lsp.Diagnostic, line: int, gb: Optional[str],
                     hatches: frozenset[str]) -> list[lsp.CodeAction]:
    """Run `logging.warning(...)`/`warnings.warn(...)` after the graph instead of breaking it. The
    break is inside that function (its call-site copy: `logging.warning` breaks in the logging
    module) or torch skipped it (GB0007, the C `_warnings.warn`)."""
    data = d.data if isinstance(d.data, dict) else {}
    if "reorderable_logging_functions" not in hatches or data.get("kind") != "graph_break" or not _outermost(d):
        return []
    if data.get("call_site"):  # the break is inside the logging function the line calls
        wanted = f"logging.{data.get('function')}"
    elif gb == codes.GB_SKIPPED:  # torch skipped the C `_warnings.warn` the line calls
        wanted = "warnings.warn"
    else:
        return []  # another kind of break: reordering a logging call on the line would not clear it
    calls = [c for c in calls_on_line(src, line, _reorderable_call) if dotted(c.func) == wanted]
    if len(calls) != 1:
        return []
    call, target = calls[0], wanted
    if not _print_reorderable(src, call):
        return []  # torch reorders only tensors, constants and format strings: it would break again
    present = config_lines(src)
    reorder = f"{CONFIG}.reorderable_logging_functions.add({target})"
    if reorder in present or _skipped_already(present, target):
        return []
    said = f"{reorder}  # torch._dynamo.config: applies to the whole process, every compiled {target}"
    verb = "Warn" if target == "warnings.warn" else "Log"
    return [_action(f"{verb} after the graph runs: `{target}()` (torch._dynamo.config.reorderable_logging_functions, "
                    f"whole process; {_INLINED})", QUICKFIX,
                    {"fix": "config", "uri": uri, "config": [said], "modules": ["torch", target.split(".")[0]]}, d,
                    preferred=True)]
