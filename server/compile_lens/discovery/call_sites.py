"""`torch.compile(X)` call sites and the literal options they pass."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ..lints.facts import (
    dotted_name,  # cheaper than `ast.unparse`, which a 5,000-line file pays ~7,000 times
)

_COMPILE_NAMES = frozenset({"torch.compile", "torch.compiler.compile"})


@dataclass
class CallSite:
    """`torch.compile(X)` (or `@torch.compile`) whose X is a target of this file."""

    target: str
    line: int  # 1-based
    column: int  # 1-based start of `torch.compile`
    end_line: int
    end_column: int  # just after the closing parenthesis (where an inlay hint goes)
    options: dict = field(default_factory=dict)  # literal keyword arguments (dynamic=True, ...)


def _literal_keywords(call: ast.Call) -> dict:
    options = {}
    for kw in call.keywords:
        try:
            options[kw.arg] = ast.literal_eval(kw.value)
        except ValueError:
            continue
    return options


def _is_torch_compile(func: ast.expr) -> bool:
    # `torch.compile` is an Attribute: skip the plain-name calls (most of a file) at once
    return isinstance(func, ast.Attribute) and func.attr == "compile" and dotted_name(func) in _COMPILE_NAMES


def compile_call_sites(tree: ast.Module, targets: set[str]) -> list[CallSite]:
    """One walk of the tree: what `model = Net(...)` built, then the compile calls and decorators."""
    calls: list[ast.Call] = []
    built: dict[str, str] = {}  # variable -> target it was constructed from (model = Net(...))
    sites: list[CallSite] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if node.args and _is_torch_compile(node.func):
                calls.append(node)
        elif isinstance(node, ast.Assign):
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in targets:
                for tgt in node.targets:
                    if isinstance(tgt, ast.Name):
                        built[tgt.id] = value.func.id
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in targets:
            for dec in node.decorator_list:
                if _is_torch_compile(dec.func if isinstance(dec, ast.Call) else dec):
                    sites.append(CallSite(node.name, dec.lineno, dec.col_offset + 1, dec.end_lineno or dec.lineno,
                                          (dec.end_col_offset or 0) + 1))
    for call in calls:  # after the walk: `built` may come from a line below, as before
        arg = call.args[0]
        name = None
        if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id in targets:
            name = arg.func.id
        elif isinstance(arg, ast.Name):
            name = arg.id if arg.id in targets else built.get(arg.id)
        if name:
            sites.append(CallSite(name, call.lineno, call.col_offset + 1, call.end_lineno or call.lineno,
                                  (call.end_col_offset or 0) + 1, _literal_keywords(call)))
    return sorted(sites, key=lambda s: (s.line, s.column))
