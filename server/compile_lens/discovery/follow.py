"""From a `forward` parameter to the first layer it reaches: through helper methods, loops over
`nn.ModuleList`, `nn.Sequential` and modules of this file.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Optional

from .layers import (
    _MAX_DEPTH,
    _SHAPELESS,
    SIZE_ARG,
    Class,
    Ref,
    _calls_in_execution_order,
    layer_kind,
    self_attr,
)
from .values import _value, inherited


@dataclass
class _Use:
    """A forward parameter reaches layer `ref`, as its argument `position` at call `site`."""

    ref: Ref
    position: object  # int, or the keyword
    site: ast.Call
    owner: Class
    rank: Optional[int] = None  # dimensions, when `forward` unpacks them (`B, T, C = x.size()`)


_META_ATTRS = {"shape", "device", "dtype", "ndim", "is_cuda", "requires_grad"}
_META_CALLS = {"size", "dim", "numel", "type", "stride"}


def _names(node: ast.AST) -> set[str]:
    """Names whose data flows into `node`: not those only asked for their shape, device or dtype."""
    if isinstance(node, ast.Attribute) and node.attr in _META_ATTRS:
        return set()
    if isinstance(node, ast.Call):
        f = node.func
        if (isinstance(f, ast.Attribute) and f.attr in _META_CALLS) or (isinstance(f, ast.Name) and f.id in ("len", "isinstance")):
            return set()
    if isinstance(node, ast.Name):
        return {node.id}
    found: set[str] = set()
    for child in ast.iter_child_nodes(node):
        found |= _names(child)
    return found


class _Follow:
    """Walks a function's statements in order, tracking the names derived from one parameter."""

    def __init__(self, owner: Class, tainted: set[str], depth: int):
        self.owner, self.tainted, self.depth = owner, set(tainted), depth
        self.loops: dict[str, object] = {}
        self.blocked: Optional[str] = None  # the parameter reached something whose input we cannot tell
        self.blocker: Optional[Ref] = None  # ... and that something
        self.rank: Optional[int] = None  # of the parameter, as the function unpacks its size

    def body(self, stmts: list[ast.stmt]) -> Optional[_Use]:  # noqa: C901
        if self.rank is None:
            self.rank = _unpacked_rank(stmts, self.tainted)
        for stmt in stmts:
            found: Optional[_Use] = None
            if isinstance(stmt, ast.For):
                found = self.exprs([stmt.iter])
                container = self.owner.resolve(_enumerated(stmt.iter), self.loops)
                if found is None and isinstance(container, list) and container:
                    name = stmt.target.elts[-1] if isinstance(stmt.target, ast.Tuple) else stmt.target
                    if isinstance(name, ast.Name):
                        self.loops[name.id] = container[0]
                found = found or self.body(stmt.body + stmt.orelse)
            elif isinstance(stmt, (ast.If, ast.While)):
                found = self.exprs([stmt.test]) or self.body(stmt.body) or self.body(stmt.orelse)
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                found = self.exprs([i.context_expr for i in stmt.items]) or self.body(stmt.body)
            elif isinstance(stmt, ast.Try):
                found = self.body(stmt.body + stmt.orelse + stmt.finalbody)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Return)):
                value = getattr(stmt, "value", None)
                found = self.exprs([value]) if value is not None else None
                if value is not None and _names(value) & self.tainted:
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
                    for target in targets:
                        if target is not None:
                            self.tainted |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name) and n.id != "self"}
                elif isinstance(stmt, ast.Assign):  # `x = something else` ends x's link to the parameter
                    for target in stmt.targets:
                        if isinstance(target, ast.Name):
                            self.tainted.discard(target.id)
            if found is not None or self.blocked:
                return found
        return None

    def exprs(self, nodes: list) -> Optional[_Use]:
        for node in nodes:
            for call in _calls_in_execution_order(node):
                found = self.call(call)
                if found is not None or self.blocked:
                    return found
        return None

    def call(self, call: ast.Call) -> Optional[_Use]:
        position = _tainted_position(call, self.tainted)
        if position is None:
            return None
        f = call.func
        owner = self.owner
        if self_attr(f) and f.attr in owner.methods and f.attr not in owner.layers:  # a helper method
            if self.depth >= _MAX_DEPTH:
                return None
            return self.into(owner.methods[f.attr], position)
        if isinstance(f, ast.Attribute) and f.attr == "forward" and _is_super(f.value):
            return self.inherited_forward(call, position)
        target = owner.resolve(f, self.loops)
        return self.reach(target, position, call, owner)

    def inherited_forward(self, call: ast.Call, position: object) -> Optional[_Use]:
        """`super().forward(x)`: the base's `forward` (a workspace class's, followed with this
        module's layers, which its `__init__` built too), or the torch.nn layer this module is."""
        owner = self.owner
        if owner.itself is not None:
            return self.reach(owner.expand(owner.itself), position, call, owner)
        bases = [owner.classes[b.id] for b in owner.cls.bases if isinstance(b, ast.Name) and b.id in owner.classes]
        method = next((m for m in (inherited(b, "forward", owner.classes) for b in bases) if m is not None), None)
        if method is None or method is owner.forward or self.depth >= _MAX_DEPTH:
            return None
        return self.into(method, position)

    def into(self, method: ast.FunctionDef, position: object) -> Optional[_Use]:
        """The parameter, passed at `position` (an index or a keyword), followed into `method`'s body."""
        params = [a.arg for a in method.args.posonlyargs + method.args.args][1:]
        name = params[position] if isinstance(position, int) and position < len(params) else position
        if not isinstance(name, str):
            return None
        inner = _Follow(self.owner, {name}, self.depth + 1)
        inner.rank = self.rank
        found = inner.body(method.body)
        self.blocked, self.blocker = inner.blocked, inner.blocker
        return found

    def reach(self, target: object, position: object, site: ast.Call, owner: Class) -> Optional[_Use]:
        """The parameter is passed to `target` (a layer, a container, a module of this file)."""
        if isinstance(target, list):  # calling a Sequential: its first layer that cares
            for item in target:
                found = self.reach(item, position, site, owner)
                if found is not None or self.blocked:
                    return found
            return None
        if not isinstance(target, Ref) or not isinstance(target.node, ast.Call):
            return None
        kind = layer_kind(target.node)
        if kind in _SHAPELESS:
            return None
        sub = owner.sub(target) if kind in owner.classes and owner.depth < _MAX_DEPTH else None
        if sub is not None and sub.forward is None:  # a subclass of a torch.nn layer: reached as that layer
            return self.reach(sub.expand(sub.itself), position, site, sub) if sub.itself is not None else None
        if sub is not None:
            assert sub.forward is not None
            params = [a.arg for a in sub.forward.args.posonlyargs + sub.forward.args.args][1:]
            name = params[position] if isinstance(position, int) and position < len(params) else position
            if not isinstance(name, str):
                self.blocked = f"`{kind}.forward` parameters"
                return None
            inner = _Follow(sub, {name}, self.depth + 1)
            inner.rank = self.rank
            found = inner.body(sub.forward.body)
            if found is None and not inner.blocked and sub.itself is not None:
                # a torch.nn layer subclass whose own forward tells nothing (`F.linear(x, ...)`): its layer's input
                return self.reach(sub.expand(sub.itself), position, site, sub)
            if found is None and not inner.blocked:
                found = norm_use(sub, position, site, inner.rank)
            if found is None and not inner.blocked:
                inner.blocked = f"`{kind}`, whose input no layer of it sizes"
            self.blocked, self.blocker = inner.blocked, inner.blocker
            return found
        if kind in SIZE_ARG or kind.rstrip("123d").endswith(("Conv", "ConvTranspose", "BatchNorm", "InstanceNorm")) \
                or kind.startswith("Lazy") or kind in ("TransformerEncoder", "TransformerDecoder"):
            return _Use(target, position, site, owner, self.rank)
        self.blocked = f"`{ast.unparse(target.node.func)}(...)`, whose input Compile Lens cannot size"
        self.blocker = target
        return None


def _is_super(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def _enumerated(node: ast.expr) -> ast.expr:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "enumerate" and node.args:
        return node.args[0]
    return node


def _tainted_position(call: ast.Call, tainted: set[str]) -> object:
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            return None
        if _names(arg) & tainted:
            return i
    for kw in call.keywords:
        if kw.arg and _names(kw.value) & tainted:
            return kw.arg
    return None


def _unpacked_rank(stmts: list[ast.stmt], names: set[str]) -> Optional[int]:
    """How many dimensions the function says one of `names` has: `B, T, C = x.size()` (or
    `x.shape`) tells 3 exactly; `x.shape[2]` or `x.size(2)` at least 3. None when it says nothing."""
    exact, least = None, 0
    for node in (n for stmt in stmts for n in ast.walk(stmt)):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], (ast.Tuple, ast.List)) \
                and _size_of(node.value, names) and not any(isinstance(e, ast.Starred) for e in node.targets[0].elts):
            exact = exact or len(node.targets[0].elts)
        elif isinstance(node, ast.Subscript) and _size_of(node.value, names):
            index = node.slice.value if isinstance(node.slice, ast.Constant) else None
            least = max(least, index + 1) if isinstance(index, int) and not isinstance(index, bool) and index >= 0 else least
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in names and len(node.args) == 1 \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, int) and node.args[0].value >= 0:
            least = max(least, node.args[0].value + 1)
    return exact if exact else (least or None)


def _size_of(node: ast.expr, names: set[str]) -> bool:
    """`x.size()` or `x.shape` for a name in `names`."""
    if isinstance(node, ast.Call) and not node.args and isinstance(node.func, ast.Attribute) and node.func.attr == "size":
        node = node.func.value
        return isinstance(node, ast.Name) and node.id in names
    return isinstance(node, ast.Attribute) and node.attr == "shape" and isinstance(node.value, ast.Name) and node.value.id in names


def norm_use(module: Class, position: object, site: Optional[ast.Call], rank: Optional[int]) -> Optional[_Use]:
    """A module of this file with no layer that sizes its input, whose only weights are 1-d
    `nn.Parameter(torch.ones(n))` / `torch.zeros(n)` (a hand-written LayerNorm or RMSNorm): its
    input ends in `n`, as an `nn.LayerNorm(n)`'s does."""
    widths = set()
    for ref in module.layers.values():
        node = ref.node
        if not (isinstance(node, ast.Call) and layer_kind(node) == "Parameter" and node.args):
            continue
        init = node.args[0]
        if not (isinstance(init, ast.Call) and layer_kind(init) in ("ones", "zeros") and len(init.args) == 1):
            return None  # a weight of another shape: not a norm
        width = _value(init.args[0], ref.env)
        if not isinstance(width, int) or isinstance(width, bool) or width <= 0:
            return None
        widths.add(width)
    if len(widths) != 1:
        return None
    like = ast.Call(func=ast.Name(id="LayerNorm", ctx=ast.Load()), args=[ast.Constant(widths.pop())], keywords=[])
    site = site or ast.Call(func=ast.Name(id="self", ctx=ast.Load()), args=[], keywords=[])
    return _Use(Ref(like, {}, module), position, site, module, rank)
