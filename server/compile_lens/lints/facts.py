"""What each chunk says, read syntactically: classes, functions, loops, compile sites, calls,
and the scalar kinds of bindings (for CL203). No resolution across chunks: that is `index`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import NamedTuple, Optional, Union

from .. import codes

# A binding's kind for the scalar analysis (CL203): None when it is not (known to be) a Python
# scalar, else the names whose scalar-ness it depends on (empty: a scalar for sure).
Kind = Optional[frozenset]
SCALAR: frozenset = frozenset()

_FuncNode = Union[ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda]


@dataclass(eq=False)
class _Loop:
    node: ast.AST  # For, While or a comprehension
    targets: set[str] = field(default_factory=set)  # names the loop itself binds
    assigned: set[str] = field(default_factory=set)  # names (re)bound in its body


@dataclass(eq=False)
class _Class:
    node: ast.ClassDef
    name: str
    qualname: str
    bases: list[str]  # dotted names as written ("nn.Module"); "" for other expressions
    methods: dict[str, Func] = field(default_factory=dict)


@dataclass(eq=False)
class Func:
    node: _FuncNode
    name: str
    qualname: str
    cls: Optional[_Class]  # the class it is a method of
    parent: Optional[Func]  # the function it is nested in
    facts: Facts  # of the chunk it is in (for its line offset)
    decorators: list[str] = field(default_factory=list)  # dotted (a call's callee for `@f(...)`)
    children: list[Func] = field(default_factory=list)  # nested defs and lambdas
    nested: dict[str, Func] = field(default_factory=dict)  # nested defs by name
    name_calls: list[tuple[str, ast.Call]] = field(default_factory=list)  # f(...)
    self_calls: list[tuple[str, ast.Call]] = field(default_factory=list)  # self.f(...)
    candidates: list[tuple] = field(default_factory=list)  # raw CL1xx material, see _on_call
    bindings: dict[str, list[Kind]] = field(default_factory=dict)


class Site(NamedTuple):
    """A call somewhere in the file, with where it sits."""

    call: ast.Call
    callee: Optional[str]  # the called name, dotted ("torch.compile"), when it is one
    func: Optional[Func]  # innermost enclosing function (None: module or class level)
    loops: tuple[_Loop, ...]  # enclosing loops inside that function, innermost last
    guarded: bool  # under an `if` inside that loop/function: likely a one-time or cached compile
    facts: Facts


class _Ctx(NamedTuple):
    func: Optional[Func]
    cls: Optional[_Class]  # set only directly in a class body
    loops: tuple[_Loop, ...]
    guarded: bool


_TOP = _Ctx(None, None, (), False)


@dataclass(eq=False)
class Facts:
    delta: int = 0  # add to the tree's line numbers: the chunk moved since it was parsed
    imports: list[tuple[str, str]] = field(default_factory=list)  # (local name, qualified name)
    module_calls: list[tuple[str, str]] = field(default_factory=list)  # `name = f(...)` at top level
    classes: list[_Class] = field(default_factory=list)
    functions: list[Func] = field(default_factory=list)  # module-level defs
    all_funcs: list[Func] = field(default_factory=list)  # every def, any depth
    compile_decorated: list[Func] = field(default_factory=list)  # `@<...>compile` defs
    lambdas: dict[ast.Lambda, Func] = field(default_factory=dict)
    compile_calls: list[Site] = field(default_factory=list)  # calls of a `*compile` callee
    loop_calls: list[Site] = field(default_factory=list)  # every call inside a loop
    compiled_assigns: list[tuple[str, ast.Call, Optional[Func]]] = field(default_factory=list)
    bindings: dict[str, list[Kind]] = field(default_factory=dict)  # module scope


def _extract(tree: ast.Module) -> Facts:
    """Everything the lints need from one chunk's tree; the tree itself is not kept."""
    return _Extractor(tree).facts


class _Extractor:
    """One iterative pass over a chunk: each node is handled with the context it sits in."""

    def __init__(self, tree: ast.Module):
        self.facts = Facts()
        self.stack: list[tuple[ast.AST, _Ctx]] = [(node, _TOP) for node in reversed(tree.body)]
        handlers = {
            ast.FunctionDef: self._on_def, ast.AsyncFunctionDef: self._on_def,
            ast.Lambda: self._on_lambda, ast.ClassDef: self._on_class,
            ast.For: self._on_for, ast.AsyncFor: self._on_for, ast.While: self._on_while,
            ast.If: self._on_if, ast.IfExp: self._on_ifexp, ast.Call: self._on_call,
            ast.Assign: self._on_assign, ast.AnnAssign: self._on_assign,
            ast.AugAssign: self._on_augassign, ast.NamedExpr: self._on_assign,
            ast.Import: self._on_import, ast.ImportFrom: self._on_import,
            ast.ListComp: self._on_comprehension, ast.SetComp: self._on_comprehension,
            ast.GeneratorExp: self._on_comprehension, ast.DictComp: self._on_comprehension,
        }
        while self.stack:
            node, ctx = self.stack.pop()
            handler = handlers.get(type(node))
            if handler is None:
                self._push(_children(node), ctx)
            else:
                handler(node, ctx)

    def _push(self, nodes, ctx: _Ctx) -> None:
        self.stack.extend((n, ctx) for n in nodes if n is not None)

    def _bind(self, ctx: _Ctx, name: str, kind: Kind) -> None:
        scope = ctx.func.bindings if ctx.func is not None else self.facts.bindings
        scope.setdefault(name, []).append(kind)
        for loop in ctx.loops:
            loop.assigned.add(name)

    # --- scopes ---

    def _on_def(self, node, ctx: _Ctx) -> None:
        owner = ctx.cls.qualname if ctx.cls else ctx.func.qualname if ctx.func else ""
        qualname = f"{owner}.{node.name}" if owner else node.name
        func = Func(node, node.name, qualname, ctx.cls, ctx.func, self.facts)
        for dec in node.decorator_list:
            callee = dec.func if isinstance(dec, ast.Call) else dec
            func.decorators.append(dotted_name(callee) or "")
        self.facts.all_funcs.append(func)
        if any(d.endswith("compile") for d in func.decorators):
            self.facts.compile_decorated.append(func)
        if ctx.cls is not None:
            ctx.cls.methods[node.name] = func
        elif ctx.func is not None:
            ctx.func.children.append(func)
            ctx.func.nested[node.name] = func
            self._bind(ctx, node.name, None)
        else:
            self.facts.functions.append(func)
            self._bind(ctx, node.name, None)
        self._bind_params(func, node.args)
        inner = _Ctx(func, None, (), False)
        self._push(node.decorator_list, ctx)
        self._push(node.args.defaults + [d for d in node.args.kw_defaults if d is not None], ctx)
        self._push(reversed(node.body), inner)

    def _on_lambda(self, node: ast.Lambda, ctx: _Ctx) -> None:
        owner = ctx.func.qualname if ctx.func else ctx.cls.qualname if ctx.cls else ""
        qualname = f"{owner}.<lambda>" if owner else "<lambda>"
        func = Func(node, "<lambda>", qualname, None, ctx.func, self.facts)
        self.facts.lambdas[node] = func
        if ctx.func is not None:
            ctx.func.children.append(func)
        self._bind_params(func, node.args)
        self._push(node.args.defaults + [d for d in node.args.kw_defaults if d is not None], ctx)
        self._push([node.body], _Ctx(func, None, (), False))

    def _bind_params(self, func: Func, args: ast.arguments) -> None:
        positional = args.posonlyargs + args.args
        defaults: list[Optional[ast.expr]] = [None] * (len(positional) - len(args.defaults))
        defaults += args.defaults
        pairs = list(zip(positional, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
        for arg, default in pairs:
            func.bindings.setdefault(arg.arg, []).append(_param_kind(arg, default))
        for arg in (args.vararg, args.kwarg):
            if arg is not None:
                func.bindings.setdefault(arg.arg, []).append(None)

    def _on_class(self, node: ast.ClassDef, ctx: _Ctx) -> None:
        owner = ctx.cls.qualname if ctx.cls else ctx.func.qualname if ctx.func else ""
        bases = [dotted_name(b) or "" for b in node.bases]
        cls = _Class(node, node.name, f"{owner}.{node.name}" if owner else node.name, bases)
        self.facts.classes.append(cls)
        self._bind(ctx, node.name, None)
        self._push(node.decorator_list + node.bases, ctx)
        self._push(reversed(node.body), ctx._replace(cls=cls))

    # --- loops and branches ---

    def _on_for(self, node, ctx: _Ctx) -> None:
        loop = _Loop(node)
        for name, kind in _loop_target_kinds(node.target, node.iter):
            self._bind(ctx, name, kind)
            loop.targets.add(name)
        self._push([node.iter] + node.orelse, ctx)
        self._push(reversed(node.body), ctx._replace(loops=ctx.loops + (loop,), guarded=False))

    def _on_while(self, node: ast.While, ctx: _Ctx) -> None:
        self._branch(node.test, "while", ctx)
        inner = ctx._replace(loops=ctx.loops + (_Loop(node),), guarded=False)
        self._push(node.orelse, ctx)
        self._push([node.test] + node.body[::-1], inner)

    def _on_comprehension(self, node, ctx: _Ctx) -> None:
        loop = _Loop(node)
        for gen in node.generators:
            for name, kind in _loop_target_kinds(gen.target, gen.iter):
                self._bind(ctx, name, kind)
                loop.targets.add(name)
        inner = ctx._replace(loops=ctx.loops + (loop,), guarded=False)
        first, *rest = node.generators
        self._push([first.iter], ctx)  # evaluated once
        parts = [p for g in rest for p in [g.iter, *g.ifs]] + first.ifs
        parts += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        self._push(parts, inner)

    def _on_if(self, node: ast.If, ctx: _Ctx) -> None:
        self._branch(node.test, "if", ctx)
        self._push([node.test], ctx)
        self._push(node.body + node.orelse, ctx._replace(guarded=True))

    def _on_ifexp(self, node: ast.IfExp, ctx: _Ctx) -> None:
        self._branch(node.test, "ifexp", ctx)
        self._push([node.test, node.body, node.orelse], ctx)

    def _branch(self, test: ast.expr, keyword: str, ctx: _Ctx) -> None:
        if ctx.func is None:
            return
        reducers, calls = _condition_calls(test)
        if reducers or calls:
            ctx.func.candidates.append(("branch", test, (keyword, reducers, calls)))

    # --- calls, bindings, imports ---

    def _on_call(self, node: ast.Call, ctx: _Ctx) -> None:
        callee = node.func
        dotted = dotted_name(callee)
        func = ctx.func
        if func is not None:
            if isinstance(callee, ast.Name):
                func.name_calls.append((callee.id, node))
                if callee.id == "print":
                    func.candidates.append(("print", node, None))
            elif isinstance(callee, ast.Attribute):
                value = callee.value
                if isinstance(value, ast.Name) and value.id == "self":
                    func.self_calls.append((callee.attr, node))
                elif dotted is not None:
                    head, _, rest = dotted.partition(".")
                    func.candidates.append(("call", node, (dotted, head, rest.rpartition(".")[2])))
                elif isinstance(value, ast.Call) and callee.attr in _LOG_METHODS:
                    func.candidates.append(("logcall", node, dotted_name(value.func)))
                if callee.attr in _TENSOR_TO_PYTHON:
                    func.candidates.append((callee.attr, node, None))
        if dotted is not None and dotted.endswith("compile"):
            self.facts.compile_calls.append(Site(node, dotted, func, ctx.loops, ctx.guarded, self.facts))
        if ctx.loops:
            self.facts.loop_calls.append(Site(node, dotted, func, ctx.loops, ctx.guarded, self.facts))
        self._push(_children(node), ctx)

    def _on_assign(self, node, ctx: _Ctx) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        for target in targets:
            for name, kind in _assigned_kinds(target, value):
                self._bind(ctx, name, kind)
            if isinstance(value, ast.Call):
                name = dotted_name(target)
                callee = dotted_name(value.func) or ""
                if name is not None and callee.endswith("compile"):  # `fast = torch.compile(...)`
                    self.facts.compiled_assigns.append((name, value, ctx.func))
                if name is not None and ctx.func is None and ctx.cls is None:
                    self.facts.module_calls.append((name, callee))
        self._push([value] if value is not None else [], ctx)

    def _on_augassign(self, node: ast.AugAssign, ctx: _Ctx) -> None:
        if isinstance(node.target, ast.Name):
            kind = _scalar_kind(node.value)
            self._bind(ctx, node.target.id, None if kind is None else kind | {node.target.id})
        self._push([node.target, node.value], ctx)

    def _on_import(self, node, ctx: _Ctx) -> None:
        for alias in node.names:
            if isinstance(node, ast.Import):
                local = alias.asname or alias.name.split(".")[0]
                qualified = alias.name if alias.asname else local
            elif node.module and not node.level and alias.name != "*":
                local = alias.asname or alias.name
                qualified = f"{node.module}.{alias.name}"
            else:
                continue
            self.facts.imports.append((local, qualified))
            self._bind(ctx, local, None)


# --- syntactic helpers for the extractor ---

_TENSOR_TO_PYTHON = {"item": codes.ITEM, "tolist": codes.TOLIST, "numpy": codes.TO_NUMPY}
_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical",
                          "fatal", "log"})
# Conditions: calls that reduce a tensor to one value (its truth depends on the data) ...
_REDUCERS = frozenset({"sum", "any", "all", "max", "min", "mean", "item", "prod", "norm", "std",
                       "var", "median", "amax", "amin", "argmax", "argmin", "count_nonzero",
                       "nonzero", "allclose", "equal", "isclose", "nansum", "nanmean"})
# ... and parts of a condition that are static to Dynamo (shapes, dtypes, modes): not looked into.
_STATIC_ATTRS = frozenset({"shape", "ndim", "dtype", "device", "training", "is_cuda", "layout",
                           "requires_grad", "is_leaf", "is_sparse", "is_quantized", "is_meta",
                           "grad_fn", "names"})
_STATIC_METHODS = frozenset({"size", "dim", "ndimension", "numel", "nelement", "stride",
                             "is_contiguous", "is_floating_point", "is_complex", "get_device",
                             "element_size", "storage_offset", "has_names", "is_signed",
                             "startswith", "endswith", "get", "keys", "values", "items"})
_STATIC_BUILTINS = frozenset({"len", "isinstance", "issubclass", "hasattr", "getattr", "callable",
                              "type", "id", "str", "repr"})


def dotted_name(node: ast.AST) -> Optional[str]:
    """"a.b.c" for a chain of names and attributes, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _condition_calls(test: ast.expr) -> tuple[list[ast.Call], list[tuple[str, ast.Call]]]:
    """The calls in a condition that may make it data-dependent: tensor reductions, and dotted
    calls (resolved later: a `torch.*` one counts) — skipping the static parts."""
    reducers: list[ast.Call] = []
    calls: list[tuple[str, ast.Call]] = []
    stack: list[ast.AST] = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Attribute) and node.attr in _STATIC_ATTRS:
            continue
        if isinstance(node, ast.Compare) and all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            continue  # identity (`x.grad is None`) never depends on values
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(node, ast.Call):
            callee = node.func
            if isinstance(callee, ast.Name) and callee.id in _STATIC_BUILTINS:
                continue
            if isinstance(callee, ast.Attribute):
                if callee.attr in _STATIC_METHODS:
                    continue
                if callee.attr in _REDUCERS:
                    reducers.append(node)
                dotted = dotted_name(callee)
                if dotted is not None:
                    calls.append((dotted, node))
        stack.extend(_children(node))
    return reducers, calls


def _scalar_kind(node: ast.AST, depth: int = 0) -> Kind:
    """Is this expression a Python scalar? SCALAR, None (not known to be), or the names it is one
    if they are."""
    if depth > 30:
        return None
    if isinstance(node, ast.Constant):
        value = node.value
        return SCALAR if isinstance(value, (int, float, complex, str)) else None
    if isinstance(node, ast.Name):
        return frozenset((node.id,))
    if isinstance(node, ast.UnaryOp):
        return _scalar_kind(node.operand, depth + 1)
    if isinstance(node, ast.BinOp):
        return _union(_scalar_kind(node.left, depth + 1), _scalar_kind(node.right, depth + 1))
    if isinstance(node, ast.IfExp):
        return _union(_scalar_kind(node.body, depth + 1), _scalar_kind(node.orelse, depth + 1))
    if isinstance(node, ast.Call):
        callee = node.func
        if isinstance(callee, ast.Name):
            if callee.id in ("int", "float", "round", "len", "bool", "abs"):
                return SCALAR
            if callee.id in ("min", "max") and node.args and not node.keywords:
                kinds = [_scalar_kind(a, depth + 1) for a in node.args]
                return _union(*kinds)
        if isinstance(callee, ast.Attribute):
            if callee.attr == "item" and not node.args:
                return SCALAR
            dotted = dotted_name(callee)
            if dotted is not None and dotted.startswith("math."):
                return SCALAR
    return None


def _union(*kinds: Kind) -> Kind:
    out: frozenset = SCALAR
    for kind in kinds:
        if kind is None:
            return None
        out |= kind
    return out


def _param_kind(arg: ast.arg, default: Optional[ast.expr]) -> Kind:
    annotation = arg.annotation
    if isinstance(annotation, ast.Name) and annotation.id in ("int", "float", "bool", "str"):
        return SCALAR
    if default is not None and _scalar_kind(default) == SCALAR:
        return SCALAR
    return None


def _names_in_target(target: ast.AST) -> list[str]:
    return [n.id for n in _walk(target) if isinstance(n, ast.Name)]


def _assigned_kinds(target: ast.AST, value: Optional[ast.expr]) -> list[tuple[str, Kind]]:
    if isinstance(target, ast.Name):
        return [(target.id, None if value is None else _scalar_kind(value))]
    if (isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))
            and len(target.elts) == len(value.elts)
            and not any(isinstance(e, ast.Starred) for e in target.elts + value.elts)):
        return [pair for t, v in zip(target.elts, value.elts) for pair in _assigned_kinds(t, v)]
    return [(name, None) for name in _names_in_target(target)]


_SCALAR_ITERATORS = frozenset({"range", "count"})  # not torch.arange: it yields 0-d tensors


def _loop_target_kinds(target: ast.AST, iterable: ast.expr) -> list[tuple[str, Kind]]:
    """The names a `for` binds, and whether each value is a Python scalar (`range`, `enumerate`'s
    index, a literal list of numbers)."""
    callee = dotted_name(iterable.func) if isinstance(iterable, ast.Call) else None
    last = callee.rsplit(".", 1)[-1] if callee else None
    if isinstance(target, ast.Name):
        literal = isinstance(iterable, (ast.List, ast.Tuple, ast.Set)) and iterable.elts and all(
            _scalar_kind(e) == SCALAR for e in iterable.elts)
        scalar = last in _SCALAR_ITERATORS or bool(literal)
        return [(target.id, SCALAR if scalar else None)]
    if last == "enumerate" and isinstance(target, ast.Tuple) and target.elts:
        first, *rest = target.elts
        kinds = [(first.id, SCALAR)] if isinstance(first, ast.Name) else []
        names = _names_in_target(first) if not isinstance(first, ast.Name) else []
        return kinds + [(n, None) for n in names + [n for r in rest for n in _names_in_target(r)]]
    return [(name, None) for name in _names_in_target(target)]


_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _children(node: ast.AST) -> list[ast.AST]:
    """Child nodes, without the Load/Store markers (a faster `ast.iter_child_nodes`)."""
    kind = type(node)
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        fields = _CHILD_FIELDS[kind] = tuple(f for f in kind._fields if f != "ctx")
    out: list[ast.AST] = []
    for name in fields:
        value = getattr(node, name, None)
        if isinstance(value, list):
            out.extend(v for v in value if isinstance(v, ast.AST))
        elif isinstance(value, ast.AST):
            out.append(value)
    return out


def _walk(node: ast.AST):
    """Every node under `node`, iteratively (deeply nested code must not hit the recursion limit)."""
    stack = [node]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(_children(node))
