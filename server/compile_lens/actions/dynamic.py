"""Recompiles on a dimension (CL210): `dynamic=True` on the compile, or `torch._dynamo.mark_dynamic`
before each call of the compiled target.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any, Optional

from lsprotocol import types as lsp

from ..discovery import compile_call_sites
from .header import header_edits
from .source import QUICKFIX, Edit, Source, _action, dotted, is_compile

_SIZE_INDEX = re.compile(r"size mismatch at index (?P<dim>\d+)")


@dataclass
class _Site:
    node: ast.AST  # the torch.compile Call, or the decorator expression
    decorator: bool


def _compile_sites(src: Source, target: str) -> list[_Site]:
    """The `torch.compile(...)` calls and `@torch.compile` decorators that compile `target`."""
    def find() -> list[_Site]:
        sites = []
        for site in compile_call_sites(src.tree, {target}):
            for node in src.walk_line(site.line):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == target:
                    sites += [_Site(dec, True) for dec in node.decorator_list
                              if dec.lineno == site.line and dec.col_offset + 1 == site.column]
                elif isinstance(node, ast.Call) and node.lineno == site.line and \
                        node.col_offset + 1 == site.column and is_compile(node.func):
                    sites.append(_Site(node, False))
        return sites

    return src.memo(("sites", target), find)


def _dynamic_value(node: ast.AST) -> Any:
    if isinstance(node, ast.Call):
        for kw in node.keywords:
            if kw.arg == "dynamic":
                return kw.value.value if isinstance(kw.value, ast.Constant) else "?"
    return None


def _recompile_fixes(src: Source, uri: str, d: lsp.Diagnostic, data: dict) -> list[lsp.CodeAction]:
    target, changed = data.get("target"), data.get("changed")
    dim_match = _SIZE_INDEX.search(d.message or "")
    if data.get("recompile_kind") != "automatic-dynamic" or not target or not changed or not dim_match:
        return []  # dynamic=True does not stop specializations (ints in range(), strings, dtypes)
    dim = int(dim_match["dim"])
    found = []
    sites = _compile_sites(src, target)
    if sites and not any(_dynamic_value(s.node) is True for s in sites):
        found.append(_action(f"Compile `{target}` with dynamic=True", QUICKFIX,
                             {"fix": "dynamic", "uri": uri, "target": target}, d, preferred=True))
    for call, arg in _compiled_calls(src, target, changed)[:1]:
        found.append(_action(f"Mark dimension {dim} of `{arg}` dynamic before the call (torch._dynamo.mark_dynamic)",
                             QUICKFIX, {"fix": "mark_dynamic", "uri": uri, "target": target, "changed": changed,
                                        "dim": dim, "line": call.lineno}, d))
    return found


def _resolve_dynamic(src: Source, data: dict) -> Optional[list[Edit]]:
    edits: list[Edit] = []
    for site in _compile_sites(src, str(data["target"])):
        node = site.node
        if _dynamic_value(node) is True:
            continue
        if isinstance(node, ast.Call):
            kw = next((k for k in node.keywords if k.arg == "dynamic"), None)
            if kw is not None:  # dynamic=False / None: make it True
                (l1, c1), (l2, c2) = src.start(kw.value), src.end(kw.value)
                edits.append(Edit(l1, c1, l2, c2, "True"))
            else:
                edits.append(_add_keyword(src, node, "dynamic=True"))
        else:  # a bare `@torch.compile`
            line, col = src.end(node)
            edits.append(Edit(line, col, line, col, "(dynamic=True)"))
    return edits or None


def _add_keyword(src: Source, call: ast.Call, text: str) -> Edit:
    """`f(a)` → `f(a, text)`; `f()` → `f(text)`; a call laid out one argument a line gets a new line."""
    last = ([*call.args, *call.keywords] or [None])[-1]
    close_line, close_col = src.end(call)
    close_col -= 1  # the `)`
    if last is None:
        return Edit(close_line, close_col, close_line, close_col, text)
    end_line, end_col = src.end(last.value if isinstance(last, ast.keyword) and last.arg is None else last)
    between = src.rows[end_line][end_col:] if end_line != close_line else src.rows[end_line][end_col:close_col]
    trailing_comma = between.strip().startswith(",")
    if end_line != close_line and trailing_comma:
        indent = src.indent(end_line + 1)
        return src.insert_lines(close_line, [indent + text + ","]) if src.rows[close_line][:close_col].strip() == "" \
            else Edit(close_line, close_col, close_line, close_col, f"{text},")
    if trailing_comma:
        comma = src.rows[end_line].index(",", end_col)
        return Edit(end_line, comma + 1, end_line, comma + 1, f" {text}")
    return Edit(end_line, end_col, end_line, end_col, f", {text}")


def _params(src: Source, target: str) -> list[str]:
    for node in src.tree.body:
        if isinstance(node, ast.ClassDef) and node.name == target:
            forward = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
            return [a.arg for a in (forward.args.posonlyargs + forward.args.args)[1:]] if forward else []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == target:
            return [a.arg for a in node.args.posonlyargs + node.args.args]
    return []


def _compiled_calls(src: Source, target: str, changed: str) -> list[tuple[ast.Call, str]]:
    """Calls of the compiled `target` in this file whose `changed` argument is a plain name, each
    a statement of its own (so a line can go above it)."""
    compiled: set[str] = set()
    for site in _compile_sites(src, target):
        if site.decorator:
            compiled.add(target)
            continue
        stmt = src.enclosing(site.node, (ast.stmt,))
        if isinstance(stmt, ast.Assign) and stmt.value is site.node:
            compiled |= {dotted(t) for t in stmt.targets if dotted(t)}
    params = _params(src, target)
    index = params.index(changed) if changed in params else None
    found = []
    for node in src.calls():
        if dotted(node.func) not in compiled:
            continue
        arg = next((k.value for k in node.keywords if k.arg == changed), None)
        if arg is None and index is not None and index < len(node.args):
            arg = node.args[index]
        if not isinstance(arg, ast.Name):
            continue
        stmt = src.enclosing(node, (ast.stmt,))
        simple = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)
        if isinstance(stmt, simple) and not src.row(stmt.lineno)[:src.col(stmt.lineno, stmt.col_offset)].strip():
            found.append((node, arg.id))
    return sorted(found, key=lambda f: f[0].lineno)


def _resolve_mark_dynamic(src: Source, data: dict) -> Optional[list[Edit]]:
    calls = [c for c in _compiled_calls(src, str(data["target"]), str(data["changed"])) if c[0].lineno == data["line"]]
    if not calls:
        return None
    call, arg = calls[0]
    stmt = src.enclosing(call, (ast.stmt,))
    assert stmt is not None
    line = f"{src.indent(stmt.lineno)}torch._dynamo.mark_dynamic({arg}, {int(data['dim'])})"
    if src.row(stmt.lineno - 1).strip() == line.strip():
        return None
    return header_edits(src, ["torch"], []) + [src.insert_lines(stmt.lineno - 1, [line])]
