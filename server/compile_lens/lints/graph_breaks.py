"""CL1xx: graph breaks predicted inside code `torch.compile` will trace (the `forward` of
`nn.Module` subclasses, `@torch.compile` functions, functions passed to `torch.compile(...)`,
and the helpers of this file they call).
"""

from __future__ import annotations

import ast

from .. import codes
from ..protocol import Frame
from .facts import _LOG_METHODS, _TENSOR_TO_PYTHON, Func, dotted_name
from .index import Index, _frame, _method_class, with_nested
from .output import Output

PREDICTED = " (predicted; a trace will confirm)"


def _compiled_roots(index: Index) -> list[Func]:
    """Where tracing starts: forward of modules, @torch.compile defs, torch.compile(f) arguments."""
    roots: list[Func] = []
    for cls in index.module_classes:
        forward = cls.methods.get("forward")
        if forward is not None:
            roots.append(forward)
    roots += [f for f in index.compile_decorated if index.compile_decorator(f) is not None]
    for site in index.compile_calls:
        func = index.compiled_function(site)
        if func is not None:
            roots.append(func)
    roots.sort(key=lambda f: (f.node.lineno + f.facts.delta, f.node.col_offset))
    return roots


def _traced_functions(index: Index) -> list[tuple[Func, Func, tuple[Frame, ...]]]:
    """(function, the root it is traced from, the call chain to it) for the roots and every helper
    in this file they call, directly or through other helpers; each once, by its shortest chain."""
    out = []
    seen: set[Func] = set()
    queue = [(root, root, ()) for root in _compiled_roots(index)]
    while queue:
        func, root, chain = queue.pop(0)
        if func in seen or index.is_dynamo_disabled(func):
            continue
        seen.add(func)
        out.append((func, root, chain))
        for inner in with_nested(func):
            for name, call in inner.name_calls:
                target = index.callee(name, inner)
                if target is not None and target not in seen:
                    queue.append((target, root, chain + (_frame(call, inner, inner.facts),)))
            for name, call in inner.self_calls:
                target = index.method(_method_class(inner), name)
                if target is not None and target not in seen:
                    queue.append((target, root, chain + (_frame(call, inner, inner.facts),)))
    return out


# A traced function's findings, by what they depend on: kept from one lint of a file to the next.
Memo = dict[tuple, list]


def _predicted_breaks(index: Index, out: Output, memo: Memo) -> None:
    """The CL1xx findings. `memo` (the last lint's) is replaced by this lint's entries only.

    A function's findings depend on its chunk (its `Func` objects are new when the chunk's text
    changed), the chunk's line offset, how it is traced (its root, the call chain's lines) and the
    file's imports, loggers and NumPy names: with all of those the same, a keystroke elsewhere
    replays them instead of reading the function again. Lines added above move the chunk: a miss."""
    used: Memo = {}
    names = (tuple(index.aliases.items()), frozenset(index.numpy_names), frozenset(index.loggers))
    for func, root, chain in _traced_functions(index):
        key = (func, func.facts.delta, root.qualname, func is root,
               tuple((frame.line, frame.name) for frame in chain), names)
        recorded = used[key] if key in used else memo.get(key)
        if recorded is None:
            recorded = []
            out.record(recorded)
            _lint_function(index, out, func, root, chain)
            out.record(None)
        used[key] = recorded
        out.replay(recorded)
    memo.clear()
    memo.update(used)


def _lint_function(index: Index, out: Output, func: Func, root: Func, chain: tuple) -> None:
    lint = _Lint(index, out, func, root, chain)
    for inner in with_nested(func):
        lint.facts = inner.facts
        for kind, node, info in inner.candidates:
            lint.candidate(kind, node, info)
        for name, call in inner.name_calls:
            if name in index.numpy_names:  # `from numpy import mean`
                lint.numpy_call(call, name)


class _Lint:
    """The CL1xx findings of one traced function (and the defs nested in it)."""

    def __init__(self, index: Index, out: Output, func: Func, root: Func, chain: tuple):
        self.index, self.out, self.chain = index, out, chain
        self.facts = func.facts
        self.context = {"function": func.qualname, "root": root.qualname}
        if func is root:
            self.where = "inside compiled code"
        else:
            self.where = f"in `{func.qualname}` (called from compiled `{root.qualname}`)"

    def add(self, node: ast.AST, code: str, message: str, **data) -> None:
        self.out.add(node, self.facts, code, message + PREDICTED, dict(self.context, **data),
                     self.chain, predicted=True)

    def candidate(self, kind: str, node: ast.AST, info) -> None:
        if kind == "print":
            self.add(node, codes.PRINT, f"print() {self.where} will likely break the graph", kind="print",
                     statement=self.out.statement_of(node, self.facts))
        elif kind in _TENSOR_TO_PYTHON:
            why = {"item": "it copies a tensor value into Python",
                   "tolist": "it copies tensor values into a Python list",
                   "numpy": "it turns the tensor into a NumPy array"}[kind]
            self.add(node, _TENSOR_TO_PYTHON[kind],
                     f"`.{kind}()` {self.where} will likely break the graph: {why}", kind=kind)
        elif kind == "branch":
            self.branch(node, *info)
        elif kind == "call":
            self.dotted_call(node, *info)
        elif kind == "logcall" and self.index.resolve(info) == "logging.getLogger":
            self.logging_call(node, "logging.getLogger(...)." + node.func.attr)

    def branch(self, test: ast.expr, keyword: str, reducers: list, calls: list) -> None:
        index = self.index
        reduces = any(index.resolve(dotted_name(r.func.value)).split(".")[0] not in ("numpy", "math")
                      for r in reducers)
        torch_call = any(index.resolve(d).startswith("torch.")
                         and not index.is_static_torch_call(index.resolve(d)) for d, _ in calls)
        if not (reduces or torch_call):
            return
        what = {"if": "`if` on a tensor value", "while": "`while` on a tensor value",
                "ifexp": "a conditional expression on a tensor value"}[keyword]
        self.add(test, codes.TENSOR_BRANCH, f"{what} {self.where} will likely break the graph: the branch depends "
                 "on the data", kind="branch", condition=self.out.text_of(test, self.facts))

    def dotted_call(self, call: ast.Call, dotted: str, head: str, method: str) -> None:
        if head in self.index.numpy_names:
            self.numpy_call(call, dotted)
        elif method in _LOG_METHODS:
            receiver = dotted.rpartition(".")[0]
            if self.index.resolve(receiver) == "logging" or receiver in self.index.loggers:
                self.logging_call(call, dotted)

    def numpy_call(self, call: ast.Call, dotted: str) -> None:
        self.add(call, codes.NUMPY_CALL, f"NumPy call `{dotted}()` {self.where} may break the graph (Dynamo "
                 "traces many NumPy functions, not all)", kind="numpy-call", call=dotted)

    def logging_call(self, call: ast.Call, dotted: str) -> None:
        self.add(call, codes.LOGGING, f"logging call `{dotted}()` {self.where} will likely break the graph",
                 kind="logging", call=dotted, statement=self.out.statement_of(call, self.facts))
