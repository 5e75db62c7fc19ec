"""The rewrite "Wrap in torch.compile" at a module construction or a function definition."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from .disable import _DISABLES
from .header import header_edits
from .source import COMPILES, Edit, Source, decorator_names, dotted, is_compile

_CHAINABLE = {"to", "cuda", "cpu", "eval", "train", "half", "float", "double", "bfloat16", "requires_grad_"}


def _torch_nn_names(src: Source) -> tuple[set[str], set[str]]:
    """(prefixes that mean torch.nn, e.g. {"nn", "torch.nn"}; names imported from torch.nn)."""
    return src.memo("nn", lambda: _read_torch_nn_names(src))


def _read_torch_nn_names(src: Source) -> tuple[set[str], set[str]]:
    prefixes, names = {"torch.nn"}, set()
    for node in src.tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "torch" and not node.level:
            prefixes |= {a.asname or a.name for a in node.names if a.name == "nn"}
        elif isinstance(node, ast.Import):
            prefixes |= {a.asname for a in node.names if a.name == "torch.nn" and a.asname}
        elif isinstance(node, ast.ImportFrom) and node.module == "torch.nn" and not node.level:
            names |= {a.asname or a.name for a in node.names if a.name[:1].isupper()}
    return prefixes, names


def _constructed(call: ast.expr, modules: set[str], nn: tuple[set[str], set[str]], local_only: bool) -> Optional[str]:
    """The class a module construction builds ('' for torch.nn layers), or None when it is not one."""
    while isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in _CHAINABLE \
            and isinstance(call.func.value, ast.Call):
        call = call.func.value  # Net(...).to(device).eval()
    if not isinstance(call, ast.Call):
        return None
    func = call.func
    if isinstance(func, ast.Name) and func.id in modules:
        return func.id
    if local_only:
        return None
    prefixes, names = nn
    if isinstance(func, ast.Name) and func.id in names:
        return ""
    if isinstance(func, ast.Attribute) and func.attr[:1].isupper() and dotted(func.value) in prefixes:
        return ""
    return None


def _compiled_later(src: Source, target: str) -> bool:
    """`torch.compile(target)` or `target.compile()` anywhere in the file (a name compiled in one
    function counts for all: conservative)."""
    def compiled() -> set[str]:
        found = set()
        for node in src.calls():
            if is_compile(node.func) and node.args:
                found.add(ast.unparse(node.args[0]))
            elif isinstance(node.func, ast.Attribute) and node.func.attr == "compile":
                found.add(ast.unparse(node.func.value))
        return found

    return target in src.memo("compiled", compiled)


def _inside_compiled(src: Source, node: ast.AST) -> bool:
    parent = src.parent(node)
    while parent is not None and parent is not src.tree:
        if isinstance(parent, ast.Call) and is_compile(parent.func):
            return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                set(decorator_names(parent)) & (COMPILES | {"compile"}):
            return True
        parent = src.parent(parent)
    return False


def _wrap_candidates(src: Source, line: int, modules: set[str]) -> Iterator[tuple[str, ast.AST, Optional[str]]]:
    nn = _torch_nn_names(src)
    for node in src.walk_line(line):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.Return)) and node.value is not None \
                and node.lineno <= line <= (node.end_lineno or node.lineno):
            func = src.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            in_init = isinstance(func, ast.FunctionDef) and func.name == "__init__"
            name = _constructed(node.value, modules, nn, local_only=in_init)
            if name is None or _inside_compiled(src, node.value):
                continue
            if not isinstance(node, ast.Return):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if len(targets) != 1 or not isinstance(targets[0], (ast.Name, ast.Attribute)):
                    continue
                if _compiled_later(src, ast.unparse(targets[0])):
                    continue
            yield "value", node, name or None
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == line \
                and node in src.tree.body and _wrappable_def(src, node):
            yield "def", node, node.name


def _wrappable_def(src: Source, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    if isinstance(node, ast.AsyncFunctionDef) or node.name == "main" or node.name.startswith("test"):
        return False
    if not (node.args.args or node.args.posonlyargs or node.args.vararg):
        return False
    if set(decorator_names(node)) & (COMPILES | _DISABLES | {"compile", "property", "staticmethod",
                                                                 "classmethod", "contextmanager",
                                                                 "contextlib.contextmanager"}):
        return False
    if any(name.startswith(("torch.library.", "library.")) for name in decorator_names(node)):
        return False  # a custom op's definition, not code to compile
    if node.name in src.memo("attribute-bases", lambda: {n.value.id for n in ast.walk(src.tree)
                                                         if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}):
        return False  # `fn.register_fake`, `fn.cache_clear()`: the compiled wrapper has no such attribute
    params = {a.arg for a in node.args.posonlyargs + node.args.args}
    tensor_code = False
    for n in ast.walk(node):
        if isinstance(n, (ast.Yield, ast.YieldFrom, ast.With, ast.AsyncWith, ast.Try, ast.While, ast.Global)):
            return False  # a generator, a context, a loop that waits: not something to compile
        if isinstance(n, ast.For) and not (isinstance(n.iter, ast.Call) and dotted(n.iter.func) == "range"):
            return False  # iterating a loader or a list: a training loop, not tensor code
        if isinstance(n, ast.Name) and n.id in ("torch", "F", "nn"):
            tensor_code = True
        if isinstance(n, ast.BinOp) and any(isinstance(side, ast.Name) and side.id in params
                                            for side in (n.left, n.right)):
            tensor_code = True
    return tensor_code and not _compiled_later(src, node.name)


def _resolve_wrap(src: Source, data: dict) -> Optional[list[Edit]]:
    line = int(data["line"])
    found = src.discovery()
    modules = {t.name for t in found.targets if t.kind == "module"} if found else set()
    for kind, node, _name in _wrap_candidates(src, line, modules):
        if kind != data.get("what") or node.lineno != line:
            continue
        if kind == "def":
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])  # type: ignore[attr-defined]
            edits = [src.insert_lines(first - 1, [src.indent(first) + "@torch.compile"])]
        else:
            value = node.value  # type: ignore[attr-defined]
            (l1, c1), (l2, c2) = src.start(value), src.end(value)
            edits = [Edit(l1, c1, l1, c1, "torch.compile("), Edit(l2, c2, l2, c2, ")")]
        return header_edits(src, ["torch"], []) + edits
    return None
