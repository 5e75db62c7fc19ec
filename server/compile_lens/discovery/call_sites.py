"""`torch.compile(X)` call sites and the literal options they pass."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field


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
    return ast.unparse(func) in ("torch.compile", "torch.compiler.compile")


def compile_call_sites(tree: ast.Module, targets: set[str]) -> list[CallSite]:
    sites: list[CallSite] = []
    built: dict[str, str] = {}  # variable -> target it was constructed from (model = Net(...))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name):
            if node.value.func.id in targets:
                for tgt in node.targets:
                    if isinstance(tgt, ast.Name):
                        built[tgt.id] = node.value.func.id
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_torch_compile(node.func) and node.args:
            arg = node.args[0]
            name = None
            if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id in targets:
                name = arg.func.id
            elif isinstance(arg, ast.Name):
                name = arg.id if arg.id in targets else built.get(arg.id)
            if name:
                sites.append(CallSite(name, node.lineno, node.col_offset + 1, node.end_lineno or node.lineno,
                                      (node.end_col_offset or 0) + 1, _literal_keywords(node)))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in targets:
            for dec in node.decorator_list:
                func = dec.func if isinstance(dec, ast.Call) else dec
                if _is_torch_compile(func):
                    sites.append(CallSite(node.name, dec.lineno, dec.col_offset + 1, dec.end_lineno or dec.lineno,
                                          (dec.end_col_offset or 0) + 1))
    return sorted(sites, key=lambda s: (s.line, s.column))
